"""`agentboard supervisor ...`: enable a board's supervisor, see its wakes and log, and the
tools the supervisor acts with.

Inside the supervisor's own run (``AGENTBOARD_API_URL`` and its run token set by the
dispatcher) the tools call ``/api/supervisor/...`` with that token; elsewhere they call the
kernel on the home's database as the person running them.
"""

from __future__ import annotations

from typing import Any

import click

from . import common
from .common import board_option, handle_errors, json_option


@common.group("supervisor")
def supervisor() -> None:
    """The supervisor: an agent that wakes on trouble, replans and escalates to people."""


def _api() -> Any:
    return common.remote()


def _board(board: str | None) -> str:
    return common.existing_board(board)


# -- enable, status, wakes, log --------------------------------------------------------------------


@supervisor.command("enable")
@click.argument("profile")
@board_option
@json_option
@handle_errors
def enable(profile: str, board: str | None, as_json: bool) -> None:
    """Make PROFILE the board's supervisor (board setting `supervisor`)."""
    from agentboard.kernel import supervision

    out = supervision.set_supervisor(common.db(), _board(board), profile, actor=common.actor())
    common.emit(out, as_json, f"board {out['board']}: supervised by {out['supervisor']}")


@supervisor.command("disable")
@board_option
@json_option
@handle_errors
def disable(board: str | None, as_json: bool) -> None:
    """Stop supervising the board (its pending wakes close as moot)."""
    from agentboard.kernel import supervision

    out = supervision.set_supervisor(common.db(), _board(board), None, actor=common.actor())
    common.emit(out, as_json, f"board {out['board']}: no supervisor")


@supervisor.command("budget")
@click.argument("scope", type=click.Choice(["own", "shared"]))
@board_option
@json_option
@handle_errors
def budget_scope(scope: str, board: str | None, as_json: bool) -> None:
    """Which budget the board's supervision runs spend: `own` (the default: its supervision
    budget, `budget set --supervision SLUG`) or `shared` (the board's budget, like its work)."""
    from agentboard.kernel import supervision

    out = supervision.set_budget_scope(common.db(), _board(board), scope == "own", actor=common.actor())
    where = (f"its own supervision budget (`agentboard budget set --supervision {out['board']} ...`)"
             if out["supervision_budget"] else "the board's budget, with its work")
    common.emit(out, as_json, f"board {out['board']}: supervision runs count against {where}")


@supervisor.command("status")
@board_option
@json_option
@handle_errors
def status(board: str | None, as_json: bool) -> None:
    """The board's supervisor: its profile, wakes by status, what it is working on."""
    from agentboard.kernel import supervision

    st = supervision.status(common.db(), _board(board))
    if as_json:
        common.emit_json(st)
        return
    click.echo(f"board {st['board']}: " + (f"supervised by {st['profile']}" if st["enabled"] else
                                           "no supervisor (agentboard supervisor enable PROFILE)"))
    if st["problem"]:
        click.echo(f"problem: {st['problem']}")
    click.echo("wakes: " + ", ".join(f"{k} {v}" for k, v in st["wakes"].items()))
    for t in st["working"]:
        click.echo(f"working: {t['id']} {t['status']} {t['title']}")


@supervisor.command("wakes")
@click.option("--status", "wake_status", default=None,
              type=click.Choice(["pending", "running", "handled", "moot", "expired", "escalated"]))
@click.option("--limit", default=200, type=click.IntRange(1), show_default=True)
@board_option
@json_option
@handle_errors
def wakes(wake_status: str | None, limit: int, board: str | None, as_json: bool) -> None:
    """The board's wakes, newest first: why, about what, and how each ended."""
    from agentboard.kernel import supervision

    rows = supervision.wakes(common.db(), _board(board), status=wake_status, limit=limit)
    if as_json:
        common.emit_json(rows)
        return
    from .output import clip, table

    table(["id", "status", "reason", "subject", "task", "note"],
          [(w["id"], w["status"], w["reason"], w["subject"], w["task_id"] or "-", clip(w["note"] or "", 60))
           for w in rows], status_column=None, empty="no wakes")


@supervisor.command("log")
@click.option("--limit", default=100, type=click.IntRange(1), show_default=True)
@board_option
@json_option
@handle_errors
def log_(limit: int, board: str | None, as_json: bool) -> None:
    """What the supervisor did and why (its actions and the wakes), newest first."""
    from agentboard.kernel import supervision

    rows = supervision.log(common.db(), _board(board), limit=limit)
    if as_json:
        common.emit_json(rows)
        return
    from .output import clip, when

    if not rows:
        click.echo("nothing yet")
    for e in rows:
        p = e["payload"]
        what = p.get("note") or p.get("excerpt") or p.get("reason") or p.get("why") or ""
        click.echo(f"{when(e['created_at'])}  {e['actor'] or '-':<22} {e['kind']:<18} {e['task_id'] or p.get('subject') or '-'}"
                   f"  {clip(str(what), 80)}")


# -- the supervisor's tools: reads -------------------------------------------------------------------


@supervisor.command("board")
@board_option
@json_option
@handle_errors
def overview(board: str | None, as_json: bool) -> None:
    """Tool: the board's blocked tasks, triage and open goals."""
    api = _api()
    if api is not None:
        out = api.call("GET", "/api/supervisor/board", params={"board": board})
    else:
        from agentboard.kernel import supervision

        out = supervision.overview(common.db(), _board(board))
    if as_json:
        common.emit_json(out)
        return
    click.echo(f"board {out['board']}: " + ", ".join(f"{k} {v}" for k, v in sorted(out["counts"].items())))
    for t in out["blocked"]:
        click.echo(f"blocked  {t['id']}  [{t['block_kind']}] {t['title']}: {t['block_reason']}")
    for t in out["triage"]:
        click.echo(f"triage   {t['id']}  {t['title']} (by {t['created_by'] or '-'})")
    for g in out["goals"]:
        click.echo(f"goal     {g['id']}  {g['status']} {g['title']}")


@supervisor.command("task")
@click.argument("task_id", metavar="ID")
@json_option
@handle_errors
def task(task_id: str, as_json: bool) -> None:
    """Tool: a task with its surroundings."""
    api = _api()
    if api is not None:
        out = api.call("GET", f"/api/supervisor/tasks/{task_id}")
    else:
        from agentboard.kernel import queries

        out = queries.task_detail(common.db(), common.task_board(task_id), task_id)
    common.emit(out, as_json, f"{out['id']}  {out['status']}  {out['title']}\n{out.get('body') or ''}".rstrip())


@supervisor.command("runs")
@click.argument("task_id", metavar="ID")
@json_option
@handle_errors
def task_runs(task_id: str, as_json: bool) -> None:
    """Tool: a task's attempts, oldest first."""
    api = _api()
    if api is not None:
        rows = api.call("GET", f"/api/supervisor/tasks/{task_id}/runs")
    else:
        from agentboard.kernel import queries

        rows = queries.runs(common.db(), common.task_board(task_id), task_id)
    if as_json:
        common.emit_json(rows)
        return
    for r in rows:
        click.echo(f"run {r['id']}  {r['outcome'] or r['status']}  {r.get('error') or r.get('summary') or ''}")


@supervisor.command("goal")
@click.argument("goal_id", metavar="G")
@board_option
@json_option
@handle_errors
def goal(goal_id: str, board: str | None, as_json: bool) -> None:
    """Tool: a goal with its acceptance criteria and tasks."""
    api = _api()
    if api is not None:
        out = api.call("GET", f"/api/supervisor/goals/{goal_id}", params={"board": board})
    else:
        from agentboard.kernel import goals

        out = goals.show(common.db(), common.goal_board(goal_id, board), goal_id)
    common.emit(out, as_json, f"{out['id']}  {out['status']}  {out['title']}  ({out['done']}/{out['total']} done)")


# -- the supervisor's tools: writes ------------------------------------------------------------------


def _task_tool(task_id: str, path: str, body: dict[str, Any] | None, direct: Any) -> dict[str, Any]:
    api = _api()
    if api is not None:
        return api.call("POST", f"/api/supervisor/tasks/{task_id}/{path}", json=body or {})  # type: ignore[no-any-return]
    return direct(common.db(), common.task_board(task_id), common.actor())  # type: ignore[no-any-return]


@supervisor.command("comment")
@click.argument("task_id", metavar="ID")
@click.argument("text")
@json_option
@handle_errors
def comment(task_id: str, text: str, as_json: bool) -> None:
    """Tool: comment on a task (leave the reasoning summary here)."""
    from agentboard.kernel import comments

    out = _task_tool(task_id, "comment", {"body": text},
                     lambda db, b, who: comments.comment(db, b, task_id, text, author=who, mentions=False))
    common.emit(out, as_json, f"{task_id}: commented")


@supervisor.command("priority")
@click.argument("task_id", metavar="ID")
@click.argument("priority", type=int)
@json_option
@handle_errors
def priority(task_id: str, priority: int, as_json: bool) -> None:
    """Tool: change a task's priority."""
    from agentboard.kernel import tasks

    out = _task_tool(task_id, "priority", {"priority": priority},
                     lambda db, b, who: tasks.edit(db, b, task_id, priority=priority, actor=who))
    common.emit(out, as_json, f"{task_id}: priority {out['priority']}")


@supervisor.command("propose")
@click.argument("title")
@click.option("--body", default=None)
@click.option("--goal", default=None, metavar="G")
@click.option("--assignee", default=None, metavar="PROFILE")
@click.option("--priority", default=0, type=int)
@board_option
@json_option
@handle_errors
def propose(title: str, body: str | None, goal: str | None, assignee: str | None, priority: int,
            board: str | None, as_json: bool) -> None:
    """Tool: propose a task (in triage; the supervisor may release its own)."""
    api = _api()
    fields = {"title": title, "body": body, "goal": goal, "assignee": assignee, "priority": priority}
    if api is not None:
        out = api.call("POST", "/api/supervisor/proposals", params={"board": board},
                       json={k: v for k, v in fields.items() if v is not None})
    else:
        from agentboard.kernel import tasks

        out = tasks.create(common.db(), _board(board), title, body=body, goal=goal, assignee=assignee,
                           priority=priority, triage=True, actor=common.actor())
    common.emit(out, as_json, f"{out['id']}  proposed (triage): {out['title']}")


@supervisor.command("release")
@click.argument("task_id", metavar="ID")
@json_option
@handle_errors
def release(task_id: str, as_json: bool) -> None:
    """Tool: release a proposal from triage (its own or a replan proposal)."""
    from agentboard.kernel import supervision

    out = _task_tool(task_id, "release", None,
                     lambda db, b, who: supervision.release_proposal(db, b, task_id, actor=who))
    common.emit(out, as_json, f"{task_id}: released ({out['status']})")


@supervisor.command("discard")
@click.argument("task_id", metavar="ID")
@json_option
@handle_errors
def discard(task_id: str, as_json: bool) -> None:
    """Tool: archive a proposal (its own or a replan proposal)."""
    from agentboard.kernel import supervision

    out = _task_tool(task_id, "discard", None,
                     lambda db, b, who: supervision.discard_proposal(db, b, task_id, actor=who))
    common.emit(out, as_json, f"{task_id}: discarded")


@supervisor.command("unblock")
@click.argument("task_id", metavar="ID")
@json_option
@handle_errors
def unblock(task_id: str, as_json: bool) -> None:
    """Tool: unblock a task."""
    from agentboard.kernel import tasks

    out = _task_tool(task_id, "unblock", None, lambda db, b, who: tasks.unblock(db, b, task_id, actor=who))
    common.emit(out, as_json, f"{task_id}: unblocked ({out['status']})")


@supervisor.command("assign")
@click.argument("task_id", metavar="ID")
@click.argument("profile")
@json_option
@handle_errors
def assign(task_id: str, profile: str, as_json: bool) -> None:
    """Tool: give a task to another profile ('none' unassigns)."""
    from agentboard.kernel import tasks

    name = None if profile.strip().lower() in ("none", "-", "") else profile
    out = _task_tool(task_id, "assign", {"assignee": name},
                     lambda db, b, who: tasks.assign(db, b, task_id, name, actor=who))
    common.emit(out, as_json, f"{task_id}: assigned to {out['assignee'] or 'nobody'}")


@supervisor.command("reclaim")
@click.argument("task_id", metavar="ID")
@click.option("--reason", default=None)
@json_option
@handle_errors
def reclaim(task_id: str, reason: str | None, as_json: bool) -> None:
    """Tool: reclaim a stuck run (the task returns to the queue)."""
    from agentboard.kernel import runs

    out = _task_tool(task_id, "reclaim", {"reason": reason},
                     lambda db, b, who: runs.reclaim(db, b, task_id, reason=reason, actor=who))
    common.emit(out, as_json, f"{task_id}: reclaimed ({out['status']})")


@supervisor.command("escalate")
@click.argument("task_id", metavar="ID")
@click.argument("reason")
@click.option("--to", default=None, metavar="PERSON", help="who decides (default: the board's escalate_to)")
@json_option
@handle_errors
def escalate(task_id: str, reason: str, to: str | None, as_json: bool) -> None:
    """Tool: hand a task to a person (blocked, needs_input)."""
    from agentboard.kernel import supervision

    out = _task_tool(task_id, "escalate", {"reason": reason, "to": to},
                     lambda db, b, who: supervision.escalate(db, b, task_id, reason, to=to, actor=who))
    common.emit(out, as_json, f"{task_id}: escalated to {out.get('block_to') or 'a person'}")


@supervisor.command("handled")
@click.argument("wake_ids", nargs=-1, required=True, metavar="WAKE...")
@click.option("--note", default=None, help="what was done and why")
@board_option
@json_option
@handle_errors
def handled(wake_ids: tuple[str, ...], note: str | None, board: str | None, as_json: bool) -> None:
    """Tool: mark wakes handled, with the reasoning summary."""
    from agentboard.domain.errors import InvalidInput

    ids = []
    for w in common.split_ids(list(wake_ids)):
        if not w.isdigit():
            raise InvalidInput(f"invalid wake id {w!r}: wake ids are numbers (see agentboard supervisor wakes)")
        ids.append(int(w))
    api = _api()
    if api is not None:
        out = api.call("POST", "/api/supervisor/wakes/handled", params={"board": board},
                       json={"wakes": ids, "note": note})
    else:
        from agentboard.kernel import supervision

        out = supervision.handle(common.db(), _board(board), ids, note=note, actor=common.actor())
    common.emit(out, as_json, f"handled: {' '.join(str(w['id']) for w in out)}")


@supervisor.command("verdict")
@click.argument("goal_id", metavar="G")
@click.argument("evidence")
@click.option("--pass/--fail", "passed", required=True, help="the acceptance criteria are met, or not")
@click.option("--no-propose", is_flag=True, help="on --fail, do not propose the missing work")
@board_option
@json_option
@handle_errors
def verdict(goal_id: str, evidence: str, passed: bool, no_propose: bool, board: str | None, as_json: bool) -> None:
    """Tool: a verifying goal's verdict: done with its evidence, or open again with a proposal."""
    api = _api()
    if api is not None:
        out = api.call("POST", f"/api/supervisor/goals/{goal_id}/verdict", params={"board": board},
                       json={"passed": passed, "evidence": evidence, "propose": not no_propose})
    else:
        from agentboard.kernel import supervision

        out = supervision.goal_verdict(common.db(), common.goal_board(goal_id, board), goal_id, passed=passed,
                                       evidence=evidence, propose=not no_propose, actor=common.actor())
    common.emit(out, as_json, f"goal {goal_id}: {out['status']}"
                + (f" (proposal {out['proposal']})" if out.get("proposal") else ""))
