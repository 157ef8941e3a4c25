"""tail, watch, attach, attachments, runs, stats, assignees."""

from __future__ import annotations

import json
from pathlib import Path

from .conftest import assert_one_line_error, task_id


def test_tail_prints_one_tasks_history(cli) -> None:
    cli("profiles", "add", "w", "--command", "true")
    tid = task_id(cli("create", "watched", "--assignee", "w", "--json"))
    other = task_id(cli("create", "noise", "--json"))
    cli("comment", other, "unrelated")
    cli("claim", tid)
    cli("complete", tid, "--summary", "all good")
    r = cli("tail", tid, "--once")
    assert r.code == 0, r.err
    kinds = [line.split()[3] for line in r.lines()]
    assert kinds == ["created", "claimed", "completed"]
    assert "summary=all good" in r.out
    events = [json.loads(line) for line in cli("tail", tid, "--once", "--json").lines()]
    assert [e["kind"] for e in events] == ["created", "claimed", "completed"]
    assert {e["task_id"] for e in events} == {tid}
    after = cli("tail", tid, "--once", "--json", "--since", str(events[1]["id"])).lines()
    assert [json.loads(line)["kind"] for line in after] == ["completed"]


def test_watch_filters(cli) -> None:
    cli("profiles", "add", "a", "--command", "true")
    cli("profiles", "add", "b", "--command", "true")
    ta = task_id(cli("create", "for a", "--assignee", "a", "--tenant", "acme", "--json"))
    tb = task_id(cli("create", "for b", "--assignee", "b", "--json"))
    cli("block", tb, "waiting")
    cli("complete", ta)

    def watch(*extra: str) -> list[dict]:  # type: ignore[type-arg]
        r = cli("watch", "--since", "0", "--once", "--json", *extra)
        assert r.code == 0, r.err
        return [json.loads(line) for line in r.lines()]

    assert {e["kind"] for e in watch()} >= {"created", "blocked", "completed"}
    assert [(e["task_id"], e["kind"]) for e in watch("--kinds", "completed,blocked")] == [
        (tb, "blocked"), (ta, "completed")]
    assert {e["task_id"] for e in watch("--assignee", "b")} == {tb}
    assert {e["task_id"] for e in watch("--tenant", "acme")} == {ta}
    # without --since, watch starts at the end of the log: old events are not repeated
    assert cli("watch", "--once").out == ""
    assert_one_line_error(cli("watch", "--once", "--board", "nosuch"), 3, "no board")
    # a misspelt kind is refused instead of silently matching nothing
    r = cli("watch", "--once", "--kinds", "completed,complete")
    assert_one_line_error(r, 2, "unknown event kind 'complete'")
    assert "completed" in r.err
    assert "one JSON object per line" in cli("watch", "--help").out


def test_attach_and_list(cli, cli_home: Path, tmp_path: Path, counts) -> None:
    tid = task_id(cli("create", "with files", "--json"))
    f = tmp_path / "report.csv"
    f.write_text("a,b\n1,2\n")
    r = cli("attach", tid, str(f), "--json")
    assert r.code == 0, r.err
    stored = Path(r.json()["path"])
    assert stored.read_text() == "a,b\n1,2\n"
    assert cli_home in stored.parents
    rows = cli("attachments", tid, "--json").json()
    assert [(a["name"], a["size"]) for a in rows] == [("report.csv", 8)]
    assert "report.csv" in cli("attachments", tid).out
    before = counts()
    assert_one_line_error(cli("attach", tid, str(f)), 4, "already has an attachment")
    assert counts() == before


def test_runs_stats_assignees(cli) -> None:
    cli("profiles", "add", "w", "--command", "true")
    tid = task_id(cli("create", "x", "--assignee", "w", "--json"))
    cli("claim", tid)
    cli("reclaim", tid)
    cli("claim", tid)
    cli("complete", tid, "--summary", "second try worked", "--usage", '{"input_tokens": 100, "output_tokens": 20, "cost_usd": 0.5}')
    runs = cli("runs", tid, "--json").json()
    assert [(r["attempt"], r["outcome"]) for r in runs] == [(1, "reclaimed"), (2, "completed")]
    human = cli("runs", tid).out
    assert "reclaimed" in human and "second try worked" in human
    # each run's spend, where it was reported
    first, second = (line for line in human.splitlines() if "reclaimed" in line or "completed" in line)
    assert "100 / 20" in second and "$0.5000" in second and "$" not in first
    stats = cli("stats", "--json").json()
    assert stats["by_status"]["done"] == 1 and stats["runs"] == 2
    assert (stats["input_tokens"], stats["output_tokens"], stats["cost_usd"]) == (100, 20, 0.5)
    assert "$0.5000" in cli("stats").out
    who = cli("assignees", "--json").json()
    assert [(a["name"], a["counts"]) for a in who] == [("w", {"done": 1})]
    assert cli("assignees").out.splitlines()[1].split()[0] == "w"


def test_empty_board_human_output(cli) -> None:
    assert "no tasks" in cli("list").out
    assert "no goals" in cli("goals", "list").out
    assert "no profiles" in cli("profiles", "list").out
