"""Worker verbs (defaults from AGENTBOARD_TASK / AGENTBOARD_RUN_ID), the lifecycle, bulk forms.

The worker verbs run twice: as a person reporting for a run on the home's database, and as a
worker the dispatcher started, which has no home and reaches the board through the API with its
run token — with the same output and exit codes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from .conftest import assert_one_line_error, task_id

WorkerEnv = Callable[[str, int], dict[str, str | None]]


@pytest.fixture(params=["home", "api"])
def worker_env(request: pytest.FixtureRequest, cli_home: Path) -> Iterator[WorkerEnv]:
    """``worker_env(task_id, run_id)``: the environment of a worker reporting for that run —
    with the home (a person), or as the dispatcher starts one: the API's URL and a run token,
    no home."""
    if request.param == "home":
        yield lambda tid, run_id: {"AGENTBOARD_TASK": tid, "AGENTBOARD_RUN_ID": str(run_id),
                                   "AGENTBOARD_BOARD": "default", "AGENTBOARD_PROFILE": "w"}
        return
    import agentboard
    from agentboard.api.serve import WorkerAPI, run_tokens

    client = agentboard.connect(str(cli_home))
    api = WorkerAPI(client.settings, client.db).start()
    tokens = run_tokens(client.db)
    try:
        yield lambda tid, run_id: {"AGENTBOARD_TASK": tid, "AGENTBOARD_RUN_ID": str(run_id),
                                   "AGENTBOARD_BOARD": "default", "AGENTBOARD_HOME": None,
                                   "AGENTBOARD_API_URL": api.url,
                                   "AGENTBOARD_TOKEN": tokens("default", tid, run_id)}
    finally:
        api.stop()
        client.close()


@pytest.fixture
def running(cli, worker_env: WorkerEnv) -> dict[str, str | None]:
    """A claimed task and the worker environment the dispatcher would set for it."""
    cli("profiles", "add", "w", "--command", "true")
    tid = task_id(cli("create", "port limiter.py", "--assignee", "w", "--json"))
    claimed = cli("claim", tid, "--json").json()
    return worker_env(tid, claimed["run_id"])


def test_worker_verbs_default_to_own_task(cli, running) -> None:
    tid = running["AGENTBOARD_TASK"]
    shown = cli("show", "--json", env=running).json()
    assert shown["id"] == tid and shown["status"] == "running"
    assert "port limiter.py" in cli("context", env=running).out
    r = cli("heartbeat", "--note", "4 of 8 files done", env=running)
    assert r.code == 0, r.err
    r = cli("comment", "halfway there", env=running)
    assert r.code == 0, r.err
    r = cli("complete", "--summary", "migrated limiter.py", "--metadata", '{"changed_files": ["limiter.py"]}',
            "--result", "limiter ported", env=running)
    assert r.code == 0, r.err
    detail = cli("show", tid, "--json").json()
    assert detail["status"] == "done" and detail["result"] == "limiter ported"
    (run,) = detail["runs"]
    assert run["id"] == int(running["AGENTBOARD_RUN_ID"])
    assert (run["outcome"], run["summary"], run["metadata"]) == (
        "completed", "migrated limiter.py", {"changed_files": ["limiter.py"]})
    notes = [e["payload"].get("note") for e in detail["events"] if e["kind"] == "heartbeat"]
    assert notes == ["4 of 8 files done"]
    assert (detail["comments"][0]["body"], detail["comments"][0]["author"]) == ("halfway there", "w")


def test_worker_block_asks_for_input(cli, running) -> None:
    r = cli("block", "which API version?", env=running)
    assert r.code == 0, r.err
    t = cli("show", running["AGENTBOARD_TASK"], "--json").json()
    assert (t["status"], t["block_kind"], t["block_reason"]) == ("blocked", "needs_input", "which API version?")
    assert t["runs"][0]["outcome"] == "blocked"


def test_late_worker_is_refused_after_reclaim(cli, counts, running) -> None:
    tid = running["AGENTBOARD_TASK"]
    r = cli("reclaim", tid, "--reason", "taking too long")
    assert r.code == 0 and "ready" in r.out
    before = counts()
    for args in (["complete", "--summary", "late"], ["heartbeat"], ["block", "stuck"]):
        r = cli(*args, env=running)
        assert_one_line_error(r, 4, "no longer current", tid)
    assert counts() == before
    assert cli("show", tid, "--json").json()["status"] == "ready"


def test_stale_run_refused_even_after_a_new_claim(cli, running, worker_env) -> None:
    tid = running["AGENTBOARD_TASK"]
    cli("reclaim", tid)
    new_run = cli("claim", tid, "--json").json()["run_id"]
    r = cli("complete", "--summary", "old attempt", env=running)
    assert_one_line_error(r, 4, "no longer current")
    fresh = worker_env(tid, new_run)
    assert cli("complete", "--summary", "new attempt", env=fresh).code == 0
    runs = cli("runs", tid, "--json").json()
    assert [(r["outcome"], r["summary"]) for r in runs] == [("reclaimed", None), ("completed", "new attempt")]


def test_a_worker_task_is_found_whatever_board_the_environment_names(cli, running) -> None:
    cli("boards", "create", "other")
    r = cli("show", "--json", env={**running, "AGENTBOARD_BOARD": "other"})
    assert r.code == 0 and r.json()["id"] == running["AGENTBOARD_TASK"] and r.json()["board"] == "default"
    r = cli("show", "--board", "other", env=running)
    assert_one_line_error(r, 2, running["AGENTBOARD_TASK"], "on board 'default'", "not 'other'")


def test_person_closes_a_ready_task_with_a_synthetic_run(cli) -> None:
    cli("profiles", "add", "w", "--command", "true")
    tid = task_id(cli("create", "x", "--assignee", "w", "--json"))
    r = cli("complete", tid, "--summary", "done by hand", "--json")
    assert r.code == 0 and r.json()["status"] == "done" and r.json()["id"] == tid
    (run,) = cli("runs", tid, "--json").json()
    assert run["synthetic"] is True and run["summary"] == "done by hand"


def test_complete_promotes_children(cli) -> None:
    cli("profiles", "add", "w", "--command", "true")
    p = task_id(cli("create", "p", "--assignee", "w", "--json"))
    c = task_id(cli("create", "c", "--assignee", "w", "--parent", p, "--json"))
    r = cli("complete", p)
    assert r.code == 0 and c in r.out
    assert cli("show", c, "--json").json()["status"] == "ready"


def test_bulk_complete_without_summary_and_per_id_failures(cli, counts) -> None:
    cli("profiles", "add", "w", "--command", "true")
    ids = [task_id(cli("create", f"t{i}", "--assignee", "w", "--json")) for i in range(3)]
    r = cli("complete", *ids)
    assert r.code == 0, r.err
    assert [line.split(":")[0] for line in r.lines()] == ids
    assert {t["status"] for t in cli("list", "--status", "done", "--json").json()} == {"done"}

    more = [task_id(cli("create", f"u{i}", "--json")) for i in range(2)]
    r = cli("archive", more[0], "t_00000000", more[1])
    assert r.code == 3
    assert "t_00000000" in r.err and "1 of 3 failed" in r.err
    assert "Traceback" not in r.err
    for tid in more:
        assert cli("show", tid, "--json").json()["status"] == "archived"
    js = cli("restore", more[0], "t_00000000", "--json")
    assert js.code == 3
    assert [x["ok"] for x in js.json()] == [True, False]


def test_block_several_with_ids_and_unblock(cli) -> None:
    ids = [task_id(cli("create", f"t{i}", "--json")) for i in range(3)]
    r = cli("block", ids[0], "waiting for legal", "--ids", f"{ids[1]},{ids[2]}", "--kind", "dependency")
    assert r.code == 0, r.err
    for tid in ids:
        t = cli("show", tid, "--json").json()
        assert (t["status"], t["block_kind"], t["block_reason"]) == ("blocked", "dependency", "waiting for legal")
    assert cli("block", ids[0], "again").code == 4
    r = cli("unblock", *ids)
    assert r.code == 0
    assert {cli("show", t, "--json").json()["status"] for t in ids} == {"todo"}


def test_review_verdicts(cli) -> None:
    cli("profiles", "add", "w", "--command", "true")

    def in_review() -> str:
        tid = task_id(cli("create", "needs eyes", "--assignee", "w", "--review", "--json"))
        run = cli("claim", tid, "--json").json()["run_id"]
        env = {"AGENTBOARD_TASK": tid, "AGENTBOARD_RUN_ID": str(run)}
        assert cli("complete", "--summary", "ready for review", env=env).code == 0
        assert cli("show", tid, "--json").json()["status"] == "review"
        return tid

    a = in_review()
    assert cli("review", a, "--approve", "--note", "lgtm", "--score", "90").code == 0
    assert cli("show", a, "--json").json()["status"] == "done"

    b = in_review()
    assert cli("review", b, "--request-changes", "add tests").code == 0
    t = cli("show", b, "--json").json()
    assert t["status"] == "ready" and any("add tests" in c["body"] for c in t["comments"])

    c = in_review()
    assert cli("review", c, "--reject", "wrong approach").code == 0
    t = cli("show", c, "--json").json()
    assert (t["status"], t["block_kind"], t["block_reason"]) == ("blocked", "rejected", "wrong approach")
    assert [r["verdict"] for r in t["reviews"]] == ["rejected"]
    human = cli("show", c).out
    assert "Reviews" in human and "wrong approach" in human


def test_release_reopen_restore(cli) -> None:
    cli("profiles", "add", "w", "--command", "true")
    tid = task_id(cli("create", "idea", "--triage", "--assignee", "w", "--json"))
    assert "ready" in cli("release", tid).out
    cli("complete", tid)
    r = cli("reopen", tid, "--reason", "regression")
    assert r.code == 0 and "ready" in r.out
    cli("archive", tid)
    assert "ready" in cli("restore", tid).out
    assert cli("reopen", tid).code == 4


def test_assign_running_task_needs_reclaim(cli, running) -> None:
    tid = running["AGENTBOARD_TASK"]
    cli("profiles", "add", "other", "--command", "true")
    r = cli("assign", tid, "other")
    assert_one_line_error(r, 4, "--reclaim")
    r = cli("assign", tid, "other", "--reclaim", "--json")
    assert r.code == 0 and r.json()["assignee"] == "other" and r.json()["status"] == "ready"


@pytest.fixture
def api_worker(cli, cli_home: Path) -> Iterator[dict[str, str | None]]:
    """A running task's worker environment as the dispatcher sets it: the API and a run token."""
    import agentboard
    from agentboard.api.serve import WorkerAPI, run_tokens

    cli("profiles", "add", "w", "--command", "true")
    tid = task_id(cli("create", "port limiter.py", "--assignee", "w", "--json"))
    run_id = cli("claim", tid, "--json").json()["run_id"]
    client = agentboard.connect(str(cli_home))
    api = WorkerAPI(client.settings, client.db).start()
    try:
        yield {"AGENTBOARD_TASK": tid, "AGENTBOARD_RUN_ID": str(run_id), "AGENTBOARD_BOARD": "default",
               "AGENTBOARD_HOME": None, "AGENTBOARD_API_URL": api.url,
               "AGENTBOARD_TOKEN": run_tokens(client.db)("default", tid, run_id)}
    finally:
        api.stop()
        client.close()


def test_a_worker_reads_and_reports_through_the_api(cli, api_worker, tmp_path: Path) -> None:
    tid = str(api_worker["AGENTBOARD_TASK"])
    (tmp_path / "notes.txt").write_text("evidence")
    r = cli("attach", tid, str(tmp_path / "notes.txt"), "--json", env=api_worker)
    assert r.code == 0 and r.json()["name"] == "notes.txt", r.err
    assert [a["name"] for a in cli("attachments", "--json", env=api_worker).json()] == ["notes.txt"]
    assert [r["status"] for r in cli("runs", "--json", env=api_worker).json()] == ["open"]
    r = cli("create", "rate-limit the login endpoint", "--triage", "--json", env=api_worker)
    assert r.code == 0 and r.json()["status"] == "triage", r.err
    assert_one_line_error(cli("create", "not a proposal", env=api_worker), 5, "run token")
    r = cli("tail", "--once", "--json", env=api_worker)
    assert r.code == 0 and "\"attached\"" in r.out, r.err
    ctx = cli("context", "--json", env=api_worker).json()
    assert ctx["task_id"] == tid and ctx["markdown"].startswith(f"# Task {tid}")


def test_inside_a_worker_only_the_worker_verbs_work(cli, counts, api_worker) -> None:
    before = counts()
    for args in (["tokens", "create", "pwn", "--role", "admin"], ["profiles", "set", "w", "--command", "sh"],
                 ["boards", "create", "mine"], ["claim", str(api_worker["AGENTBOARD_TASK"])]):
        assert_one_line_error(cli(*args, env=api_worker), 5, "run token", "inside a worker")
    assert counts() == before
    assert cli("tokens", "list").code == 0  # the person's CLI still works


def test_a_worker_without_the_api_is_told_so(cli, running) -> None:
    no_home = {**running, "AGENTBOARD_HOME": None, "AGENTBOARD_API_URL": None, "AGENTBOARD_TOKEN": None}
    assert_one_line_error(cli("heartbeat", env=no_home), 6, "AGENTBOARD_API_URL", "result.json")
