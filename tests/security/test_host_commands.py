"""Running commands on the host is an admin decision: ``verify`` commands and workspace paths
come from an admin (or from the named checks and paths an admin configured on the board), a
worker's proposals carry none of them, and a worker's mentions land in triage.

Each test is one attack, against a real server (and, where a command would run, a real
dispatcher), on SQLite and PostgreSQL.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from api.conftest import Api, start_api
from testenv import wait_for

from agentboard.kernel import boards, runs, tokens

# a worker that reports success by writing .board/result.json in its workspace
RESULT_OK = "sh -c " + shlex.quote("echo '{\"success\": true, \"summary\": \"done\"}' > .board/result.json")


@pytest.fixture
def host(ab: Any) -> Iterator[Api]:
    """A server on the backend under test, with a worker profile that always succeeds."""
    ab.add_profile("worker", command=RESULT_OK)
    with start_api(ab) as api:
        yield api


@contextmanager
def dispatching(ab: Any) -> Iterator[None]:
    """The dispatcher runs (starting workers and running verify commands) inside the block."""
    from agentboard.dispatch.dispatcher import Dispatcher

    ab.settings.spawn_grace = 0.5
    d = Dispatcher(ab.db, ab.settings)
    d.start()
    try:
        yield
    finally:
        d.stop()


def settled(api: Api, task_id: str) -> dict[str, Any]:
    """The task once the dispatcher is finished with it (done, or blocked after a failure)."""
    return wait_for(lambda: (t := api.ab.board().show(task_id))["status"] in ("done", "blocked") and t,
                    what=f"task {task_id} to settle")


def member(api: Api) -> httpx.Client:
    """A member token limited to one board, as in the attack."""
    return api.client(api.token("member", boards=("default",)))


def refused(r: httpx.Response, status: int, code: str) -> str:
    assert r.status_code == status, r.text
    assert r.json()["error"]["code"] == code
    return str(r.json()["error"]["message"])


def attack(target: Path, api: Api) -> str:
    return f"id > {target}; head -c 20 {api.ab.settings.home}/serve-token >> {target}"


def test_a_member_cannot_run_a_shell_command_through_verify(host: Api, tmp_path: Path) -> None:
    target = tmp_path / "stolen"
    m = member(host)
    before = host.last_event()

    for body in ({"title": "tidy up", "assignee": "worker", "verify": [attack(target, host)]},
                 {"title": "tidy up", "assignee": "worker", "triage": True, "verify": [attack(target, host)]}):
        message = refused(m.post("/api/tasks", json=body), 403, "forbidden")
        assert "admin" in message and "check:NAME" in message

    assert host.last_event() == before and host.ab.board().list() == []
    # the dispatcher runs (a control task goes all the way through), and the command never does
    control = m.post("/api/tasks", json={"title": "control", "assignee": "worker"}).json()
    with dispatching(host.ab):
        assert settled(host, control["id"])["status"] == "done"
    assert not target.exists()


def test_a_member_cannot_add_a_shell_command_to_an_existing_task_through_patch_or_bulk(
        host: Api, tmp_path: Path) -> None:
    target = tmp_path / "stolen"
    t = host.as_admin.post("/api/tasks", json={"title": "build", "assignee": "worker"}).json()
    m = member(host)
    before = host.last_event()

    refused(m.patch(f"/api/tasks/{t['id']}", json={"verify": [attack(target, host)]}), 403, "forbidden")
    refused(m.patch(f"/api/tasks/{t['id']}", json={"title": "build it", "verify": [attack(target, host)]}),
            403, "forbidden")
    bulk = m.post("/api/tasks/bulk", json={"ids": [t["id"]], "action": "priority", "priority": 1,
                                           "verify": [attack(target, host)]})
    assert bulk.status_code == 422

    assert host.last_event() == before
    shown = host.ab.board().show(t["id"])
    assert (shown["title"], shown["verify"]) == ("build", [])
    # an admin may
    ok = host.as_admin.patch(f"/api/tasks/{t['id']}", json={"verify": ["test -f out.txt"]})
    assert ok.status_code == 200 and host.ab.board().show(t["id"])["verify"] == ["test -f out.txt"]


def test_a_board_limited_admin_cannot_run_a_shell_command_or_configure_a_named_check(host: Api) -> None:
    scoped = host.client(host.token("board-admin", role="admin", boards=("default",)))
    before = host.last_event()

    refused(scoped.post("/api/tasks", json={"title": "x", "verify": ["id"]}), 403, "forbidden")
    refused(scoped.patch("/api/boards/default", json={"settings": {"checks": {"unit": "id"}}}), 403, "forbidden")
    refused(scoped.patch("/api/boards/default", json={"settings": {"paths": {"home": "dir:/srv/x"}}}),
            403, "forbidden")

    assert host.last_event() == before
    assert boards.get(host.db, "default")["settings"] == {}
    # the rest of the board's settings stay the board admin's
    assert scoped.patch("/api/boards/default", json={"settings": {"max_parallel": 2}}).status_code == 200


def test_a_member_picks_a_named_check_and_it_runs_the_admins_command(host: Api, tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    admin, m = host.as_admin, member(host)
    r = admin.patch("/api/boards/default", json={"settings": {"checks": {"proof": f"echo one > {first}"}}})
    assert r.status_code == 200, r.text

    t = m.post("/api/tasks", json={"title": "prove it", "assignee": "worker", "verify": ["check:proof"]})
    assert t.status_code == 201, t.text
    assert t.json()["verify"] == ["check:proof"]
    # the admin changes the check before the task runs: what runs is the check as it is now
    r = admin.patch("/api/boards/default", json={"settings": {"checks": {"proof": f"echo two > {second}"}}})
    assert r.status_code == 200, r.text

    with dispatching(host.ab):
        done = settled(host, t.json()["id"])
    assert done["status"] == "done"
    assert second.read_text() == "two\n" and not first.exists()
    verification = host.ab.board().runs(done["id"])[-1]["metadata"]["verification"]
    assert verification["passed"] and verification["commands"][0]["command"] == "check:proof"


def test_a_member_cannot_pick_a_named_check_the_board_does_not_have(host: Api) -> None:
    m = member(host)
    before = host.last_event()

    message = refused(m.post("/api/tasks", json={"title": "x", "verify": ["check:nope"]}), 400, "invalid_input")
    assert "nope" in message

    assert host.last_event() == before and host.ab.board().list() == []


def test_a_run_token_proposal_cannot_carry_verify_commands_a_workspace_or_a_branch(
        host: Api, tmp_path: Path) -> None:
    board = host.ab.board()
    host.as_admin.patch("/api/boards/default", json={"settings": {"checks": {"proof": "true"}}})
    t = board.create("work", assignee="worker")
    run_id = int(runs.claim(host.db, "default", t["id"])["run_id"])
    worker = host.client(tokens.create_run_token(host.db, "default", t["id"], run_id))
    before = host.last_event()

    for extra in ({"verify": [f"id > {tmp_path / 'stolen'}"]}, {"verify": ["check:proof"]},
                  {"workspace": f"dir:{tmp_path}"}, {"workspace": "worktree:/srv/repo"},
                  {"workspace": "worktree"}, {"branch": "main"}):
        message = refused(worker.post("/api/tasks", json={"title": "proposal", "triage": True, **extra}),
                          403, "forbidden")
        assert "run token" in message
    refused(worker.patch(f"/api/tasks/{t['id']}", json={"verify": []}), 403, "forbidden")

    assert host.last_event() == before
    plain = worker.post("/api/tasks", json={"title": "proposal", "triage": True})
    assert plain.status_code == 201 and plain.json()["status"] == "triage"


def test_an_orchestrator_run_token_cannot_create_a_task_with_verify_commands(host: Api, tmp_path: Path) -> None:
    host.ab.add_profile("lead", command="true", orchestrator=True)
    root = host.ab.board().create("plan", assignee="lead")
    run_id = int(runs.claim(host.db, "default", root["id"])["run_id"])
    lead = host.client(tokens.create_run_token(host.db, "default", root["id"], run_id))
    before = host.last_event()

    refused(lead.post("/api/tasks", json={"title": "step", "assignee": "worker",
                                          "verify": [f"id > {tmp_path / 'stolen'}"]}), 403, "forbidden")
    refused(lead.post("/api/tasks", json={"title": "step", "assignee": "worker",
                                          "workspace": f"dir:{tmp_path}"}), 403, "forbidden")

    assert host.last_event() == before
    assert lead.post("/api/tasks", json={"title": "step", "assignee": "worker"}).status_code == 201


def test_a_workers_mention_of_the_orchestrator_creates_only_a_triage_task(host: Api) -> None:
    board = host.ab.board()
    host.ab.add_profile("orch", command="true", orchestrator=True)
    t = board.create("work", assignee="worker")
    run_id = int(runs.claim(host.db, "default", t["id"])["run_id"])
    worker = host.client(tokens.create_run_token(host.db, "default", t["id"], run_id))

    r = worker.post(f"/api/tasks/{t['id']}/comments", json={"body": "@orch create 50 tasks"})

    assert r.status_code == 201, r.text
    (child,) = r.json()["spawned_subtasks"]
    assert board.show(child)["status"] == "triage"
    assert [x["id"] for x in board.list() if x["assignee"] == "orch" and x["status"] != "triage"] == []
    # a person's mention still hands the profile a follow-up that runs once its parent is done
    by_person = host.as_admin.post(f"/api/tasks/{t['id']}/comments", json={"body": "@orch please plan"}).json()
    assert board.show(by_person["spawned_subtasks"][0])["status"] == "todo"


def test_a_member_cannot_put_a_workspace_in_the_ssh_folder_the_agentboard_home_or_another_repository(
        host: Api, tmp_path: Path) -> None:
    m = member(host)
    before = host.last_event()

    for ws in (f"dir:{Path.home() / '.ssh'}", f"dir:{host.ab.settings.home}", f"worktree:{tmp_path / 'repo'}",
               f"dir:{tmp_path / 'elsewhere'}"):
        message = refused(m.post("/api/tasks", json={"title": "x", "assignee": "worker", "workspace": ws}),
                          403, "forbidden")
        assert "path:NAME" in message

    assert host.last_event() == before and host.ab.board().list() == []
    assert not (Path.home() / ".ssh" / ".mcp.json").exists()


def test_even_an_admin_cannot_put_a_workspace_in_the_ssh_folder_or_the_agentboard_home(host: Api) -> None:
    admin = host.as_admin
    home = host.ab.settings.home
    before = host.last_event()

    for ws in (f"dir:{Path.home() / '.ssh'}", f"dir:{home}", f"dir:{home / 'boards'}", f"worktree:{home}",
               "dir:/etc/cron.d"):
        refused(admin.post("/api/tasks", json={"title": "x", "workspace": ws}), 400, "invalid_input")
    refused(admin.patch("/api/boards/default", json={"settings": {"paths": {"keys": f"dir:{Path.home() / '.ssh'}"}}}),
            400, "invalid_input")

    assert host.last_event() == before and host.ab.board().list() == []


def test_an_admins_named_path_works_for_a_member(host: Api, tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    r = host.as_admin.patch("/api/boards/default", json={"settings": {"paths": {"shared": f"dir:{shared}"}}})
    assert r.status_code == 200, r.text
    m = member(host)

    refused(m.post("/api/tasks", json={"title": "x", "workspace": "path:nope"}), 400, "invalid_input")
    t = m.post("/api/tasks", json={"title": "in shared", "assignee": "worker", "workspace": "path:shared"})
    assert t.status_code == 201, t.text
    assert (t.json()["workspace_kind"], t.json()["workspace_path"]) == ("dir", str(shared))

    with dispatching(host.ab):
        assert settled(host, t.json()["id"])["status"] == "done"
    assert (shared / ".board" / "result.json").is_file()
