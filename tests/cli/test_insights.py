"""`agentboard stats --by profile|model|board [--since] [--json]`: the insights of a board."""

from __future__ import annotations

from .conftest import assert_one_line_error, task_id


def _history(cli) -> None:  # type: ignore[no-untyped-def]
    cli("profiles", "add", "alpha", "--command", "true", "--model", "m-a")
    cli("profiles", "add", "beta", "--command", "true")
    one = task_id(cli("create", "one", "--assignee", "alpha", "--json"))
    cli("claim", one)
    cli("complete", one, "--usage", '{"input_tokens": 100, "output_tokens": 20, "cost_usd": 0.5}')
    two = task_id(cli("create", "two", "--assignee", "beta", "--json"))
    cli("claim", two)
    cli("reclaim", two)
    cli("claim", two)
    cli("complete", two, "--usage", '{"cost_usd": 0.2}')


def test_stats_by_profile_shows_each_profiles_runs_done_tasks_and_cost_per_done_task(cli) -> None:
    _history(cli)
    data = cli("stats", "--by", "profile", "--json").json()
    groups = {g["key"]: g for g in data["groups"]}
    assert (groups["alpha"]["runs"], groups["alpha"]["tasks_done"]) == (1, 1)
    assert groups["alpha"]["first_attempt_success_rate"] == 1.0
    assert groups["alpha"]["cost_per_done_task"] == 0.5
    assert (groups["beta"]["runs"], groups["beta"]["tasks_done"]) == (2, 1)
    assert groups["beta"]["first_attempt_success_rate"] == 0.0
    assert groups["beta"]["failures"] == {"reclaimed": 1}
    human = cli("stats", "--by", "profile").out
    rows = {line.split()[0]: line for line in human.splitlines() if line.split() and line.split()[0] in ("alpha", "beta")}
    assert "$0.5000" in rows["alpha"] and "100%" in rows["alpha"]
    assert "reclaimed 1" in rows["beta"]


def test_stats_by_model_and_by_board_with_a_window(cli) -> None:
    _history(cli)
    models = {g["key"]: g["tasks_done"] for g in cli("stats", "--by", "model", "--json").json()["groups"]}
    assert models == {"m-a": 1, "": 1}
    board = cli("stats", "--by", "board", "--since", "3d", "--json").json()
    assert board["since_days"] == 3 and len(board["timeline"]["days"]) == 3
    assert board["timeline"]["days"][-1]["tasks_done"] == 2
    human = cli("stats", "--by", "board", "--since", "3d").out
    assert "Per day" in human and "cycle time" in human


def test_plain_stats_still_counts_tasks(cli) -> None:
    _history(cli)
    assert cli("stats", "--json").json()["by_status"]["done"] == 2


def test_an_empty_board_says_no_runs_yet(cli) -> None:
    assert "no runs yet" in cli("stats", "--by", "profile").out


def test_stats_rebuild_recomputes_insights_lost_from_the_rollups(cli, cli_home) -> None:  # type: ignore[no-untyped-def]
    import agentboard

    _history(cli)
    before = cli("stats", "--by", "profile", "--json").json()["groups"]
    with agentboard.connect(str(cli_home)) as ab:  # a restore that brought the runs back, not their rollups
        ab.db.write(lambda tx: tx.execute("DELETE FROM run_rollups"))
    assert "no runs yet" in cli("stats", "--by", "profile").out
    done = cli("stats", "--rebuild")
    assert done.code == 0 and "rebuilt the insights of board" in done.out
    assert cli("stats", "--by", "profile", "--json").json()["groups"] == before
    assert cli("stats", "--rebuild", "--json").json()["rebuilt"] is True
    # with --by: rebuilt, then shown
    assert cli("stats", "--rebuild", "--by", "profile", "--json").json()["groups"] == before


def test_a_bad_window_is_a_one_line_error(cli) -> None:
    assert_one_line_error(cli("stats", "--by", "profile", "--since", "soon"), 2, "since", "7d")
    assert_one_line_error(cli("stats", "--since", "7d"), 2, "--by")
