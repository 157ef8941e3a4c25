"""The LLM helpers on triage tasks: ``agentboard specify ID... | --all [--tenant T]`` and
``agentboard decompose ID... | --all [--tenant T]``.

With no LLM configured each says ``unavailable: <reason>`` (exit 6) and asks nothing. An answer
that cannot be used leaves the task in triage with a comment quoting it (exit 1).
"""

from __future__ import annotations

from typing import Any

import click

from . import common
from .common import board_option, handle_errors, json_option

#: the most triage tasks one ``--all`` handles
ALL_MAX = 200


def _line(out: dict[str, Any], kind: str) -> str:
    tid = out["task_id"]
    if not out["ok"]:
        return f"{tid}: {out.get('reason')}"
    task = out.get("task") or {}
    if out.get("children"):
        made = ", ".join(f"{c['id']} ({c.get('assignee') or 'unassigned'}, {c['status']})" for c in out["children"])
        return f"{tid}: decomposed into {len(out['children'])} tasks: {made}; {tid} is {task.get('status')}"
    return f"{tid}: specified as {task.get('title')!r}, now {task.get('status')}"


def _run(kind: str, task_ids: tuple[str, ...], all_: bool, tenant: str | None, board: str | None,
         as_json: bool) -> None:
    from agentboard.agents import specify as spec
    from agentboard.domain.errors import AgentboardError, InvalidInput, Unavailable

    settings = common.settings()
    spec.require(settings, spec.USE if kind == "specify" else "decomposer")  # exit 6, nothing asked
    db = common.db()
    ids = common.split_ids(task_ids)
    if all_ == bool(ids):
        raise InvalidInput(f"give task ids or --all: agentboard {kind} ID... | --all [--tenant T]")
    if all_:
        from agentboard.kernel import queries

        slug = common.resolve_board(board)
        ids = [r["id"] for r in queries.list_tasks(db, slug, status="triage", tenant=tenant, limit=ALL_MAX)]
        pairs = [(slug, i) for i in ids]
    else:
        pairs = [(common.task_board(i, board), i) for i in ids]
    if kind == "specify":
        from agentboard.agents.specify import specify as run
    else:
        from agentboard.agents.decompose import decompose as run
    results: list[dict[str, Any]] = []
    for slug, task_id in pairs:
        try:
            results.append(run(db, slug, task_id, settings=settings, actor=common.actor()).to_dict())
        except Unavailable:
            raise
        except AgentboardError as exc:
            if len(pairs) == 1:
                raise
            results.append({"ok": False, "task_id": task_id, "reason": exc.message})
    if as_json:
        common.emit_json(results[0] if len(pairs) == 1 and not all_ else results)
    else:
        for out in results:
            click.echo(_line(out, kind), err=not out["ok"])
        if all_ and not results:
            click.echo("no triage tasks")
    if any(not r["ok"] for r in results):
        raise SystemExit(1)


def _command(kind: str, doc: str) -> click.Command:
    @click.command(kind, help=doc, short_help=doc.split("\n")[0])
    @click.argument("task_ids", nargs=-1, metavar="[ID...]")
    @click.option("--all", "all_", is_flag=True, help="every triage task of the board")
    @click.option("--tenant", default=None, help="with --all: only this tenant's triage tasks")
    @board_option
    @json_option
    @handle_errors
    def command(task_ids: tuple[str, ...], all_: bool, tenant: str | None, board: str | None, as_json: bool) -> None:
        _run(kind, task_ids, all_, tenant, board, as_json)

    return command


specify = _command("specify", "Rewrite triage task(s) with the LLM (Goal, Approach, Acceptance criteria, "
                              "Out of scope) and release them.")
decompose = _command("decompose", "Split triage task(s) with the LLM into 2-6 linked tasks for the roster's "
                                  "profiles (or specify one that is a single piece of work).")
