"""The worker context: the markdown a worker reads first.

One function renders it for every surface — ``agentboard context ID``, the ``worker_context``
field of the ``kanban_show`` MCP tool and ``.board/context.md`` — from the one read model of a
task with its surroundings (``kernel.queries.task_detail``), so they can never differ.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from typing import Any

from ..domain import model
from ..kernel import queries
from ..kernel.rows import TaskDetail
from ..store.engine import Database

BODY_CAP = 16_000
FIELD_CAP = 1_500
COMMENT_CAP = 2_000
RUNS_SHOWN = 10
COMMENTS_SHOWN = 30
REVIEWS_SHOWN = 10


def _cap(text: str | None, limit: int) -> str:
    text = (text or "").strip()
    if len(text) <= limit:
        return text
    return text[:limit].rstrip() + f"\n… [cut: {len(text) - limit} more characters]"


def _age(ts: float | None, now: float) -> str:
    ago = model.elapsed(ts, now)
    return f"{ago} ago" if ago else "unknown time"


def _meta(value: Any, limit: int = FIELD_CAP) -> str:
    if value in (None, "", {}, []):
        return ""
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return _cap(text, limit)


def _quote(text: str) -> str:
    return "\n".join("> " + line if line else ">" for line in text.splitlines())


def render(detail: Mapping[str, Any], *, now: float | None = None) -> str:
    """The worker context of a task read by :func:`load_context` (or ``queries.task_detail``),
    as markdown. Pure: ages are relative to ``now``."""
    now = time.time() if now is None else now
    t = detail
    goal = detail.get("goal")
    out: list[str] = [f"# Task {t['id']}: {t['title']}", ""]
    ws = t.get("workspace_kind") or "scratch"
    if t.get("workspace_path"):
        ws += f" at {t['workspace_path']}"
    rows = [
        ("Board", t.get("board")),
        ("Assignee", t.get("assignee") or "(unassigned)"),
        ("Status", t.get("status")),
        ("Priority", t.get("priority")),
        ("Tenant", t.get("tenant")),
        ("Goal", f"{goal['title']} ({goal['id']})" if goal else t.get("goal_id")),
        ("Workspace", ws),
        ("Branch", t.get("branch_name")),
        ("Base", t.get("base_branch")),
        ("Git", (t.get("git") or {}).get("summary")),
        ("Pull request", t.get("pr_url")),
        ("Max runtime", f"{t['max_runtime_seconds']} s" if t.get("max_runtime_seconds") else None),
        ("Review required", "yes" if t.get("review_required") else None),
        ("Skills", ", ".join(t.get("skills") or []) or None),
    ]
    out += [f"- **{k}:** {v}" for k, v in rows if v not in (None, "")]
    git = t.get("git") or {}
    closed = [r for r in detail.get("runs") or [] if r.get("status") == "closed"]
    if git.get("exists") and closed:
        out += ["", f"This is a retry: the branch {git.get('branch')} keeps the commits of the earlier attempts "
                f"({git.get('ahead')} commit(s) ahead of {git.get('base')}"
                + (f", {git.get('uncommitted')} uncommitted change(s) in the worktree" if git.get("uncommitted") else "")
                + "). Continue from them; `git log` and `git diff " + f"{git.get('base')}...HEAD` show them."]
    verify = t.get("verify") or []
    if verify:
        out += ["", "## Verification", "",
                "After you report success these commands run in the workspace; every one must pass:", ""]
        out += [f"- `{c}`" for c in verify]

    out += ["", "## Description", ""]
    body = (t.get("body") or "").strip()
    if not body:
        out.append("(no description)")
    elif len(body) > BODY_CAP:
        out += [body[:BODY_CAP].rstrip(), "",
                f"_(description cut: showing {BODY_CAP} of {len(body)} characters)_"]
    else:
        out.append(body)

    atts = detail.get("attachments") or []
    if atts:
        out += ["", "## Attachments", ""]
        out += [f"- {a['name']} ({a['size']} bytes): {a['path']}" for a in atts]

    runs = [r for r in reversed(detail.get("runs") or []) if r.get("status") == "closed"]
    if runs:
        out += ["", "## Prior attempts on this task", "",
                "Earlier runs of this task, newest first. Do not repeat a path that already failed.", ""]
        for r in runs[:RUNS_SHOWN]:
            who = r.get("profile") or "(unknown)"
            kind = " (closed by hand)" if r.get("synthetic") else ""
            out.append(
                f"### Attempt {r['attempt']} — {r.get('outcome') or 'closed'}{kind}, "
                f"{who}, {_age(r.get('ended_at') or r.get('started_at'), now)}"
            )
            for label, value in (("Summary", r.get("summary")), ("Error", r.get("error"))):
                if value:
                    out += ["", f"{label}:", "", _quote(_cap(value, FIELD_CAP))]
            meta = _meta(r.get("metadata"))
            if meta:
                out += ["", f"Metadata: `{meta}`" if "\n" not in meta else "Metadata:\n\n" + _quote(meta)]
            out.append("")
        if len(runs) > RUNS_SHOWN:
            out.append(f"_({len(runs) - RUNS_SHOWN} older attempts not shown)_")
            out.append("")
        while out and out[-1] == "":
            out.pop()

    parents = detail.get("parents") or []
    if parents:
        out += ["", "## Parent results", ""]
        for p in parents:
            out.append(f"### {p['id']}: {p['title']} ({p['status']})")
            h = p.get("handoff")
            if p["status"] != "done":
                out += ["", "Not done yet."]
            elif h is None:
                out += ["", "Done, with no recorded hand-off."]
            else:
                if h.get("summary"):
                    out += ["", _quote(_cap(h["summary"], FIELD_CAP * 2))]
                meta = _meta(h.get("metadata"))
                if meta:
                    out += ["", f"Metadata: `{meta}`" if "\n" not in meta else "Metadata:\n\n" + _quote(meta)]
            out.append("")
        while out and out[-1] == "":
            out.pop()

    reviews = list(reversed(detail.get("reviews") or []))[:REVIEWS_SHOWN]
    if reviews:
        out += ["", "## Review feedback", "",
                "Verdicts on earlier attempts, newest first. Address every point before finishing.", ""]
        for rv in reviews:
            score = f", score {rv['score']}" if rv.get("score") is not None else ""
            out.append(f"### {rv['verdict'].replace('_', ' ')} by {rv['reviewer']}{score}, "
                       f"{_age(rv.get('created_at'), now)}")
            if rv.get("summary"):
                out += ["", _quote(_cap(rv["summary"], FIELD_CAP * 2))]
            for f in rv.get("findings") or []:
                if isinstance(f, dict):
                    where = f" ({f['file']})" if f.get("file") else ""
                    out.append(f"- [{f.get('severity', 'info')}]{where} {_cap(str(f.get('message', '')), 500)}")
            out.append("")
        while out and out[-1] == "":
            out.pop()

    every_comment = detail.get("comments") or []
    comments = every_comment[-COMMENTS_SHOWN:]
    out += ["", "## Comments", ""]
    if not comments:
        out.append("(no comments)")
    else:
        older = len(every_comment) - len(comments)
        if older > 0:
            out += [f"_({older} older comments not shown)_", ""]
        for c in comments:
            kind = f" [{c['kind']}]" if c.get("kind") and c["kind"] != "comment" else ""
            out.append(f"**{c['author']}**{kind}, {_age(c.get('created_at'), now)}:")
            out += [_quote(_cap(c["body"], COMMENT_CAP)), ""]
        out.pop()

    if goal:
        out += ["", f"## Goal: {goal['title']}", ""]
        if goal.get("body"):
            out += [_cap(goal["body"], FIELD_CAP * 2), ""]
        acc = goal.get("acceptance") or []
        if acc:
            out.append("Acceptance criteria:")
            out += [f"- {a}" for a in acc]
        else:
            out.append("(no acceptance criteria)")
    return "\n".join(out).rstrip() + "\n"


def load_context(db: Database, board: str, task_id: str) -> TaskDetail:
    """The data behind the worker context: ``queries.task_detail`` without events."""
    return queries.task_detail(db, board, task_id, events=0)


def build_worker_context(db: Database, board: str, task_id: str, *,
                         enrich: Callable[[TaskDetail], Mapping[str, Any]] | None = None) -> str:
    """The worker context of ``task_id`` as markdown; ``enrich`` adds what the task's read does
    not hold (the surfaces pass ``dispatch.diffs.with_git``: the branch facts)."""
    detail = load_context(db, board, task_id)
    return render(enrich(detail) if enrich is not None else detail)


__all__ = ["BODY_CAP", "COMMENTS_SHOWN", "REVIEWS_SHOWN", "RUNS_SHOWN", "build_worker_context", "load_context",
           "render"]
