"""A task's work as a reviewer sees it: its branch facts and its diff, split per file and paged.

The diff is the one the reviewer agent reads (``protocol.review_context.work_diff``: for a
worktree, ``git diff <base>...<branch>`` plus what is not committed yet; a file too big to show,
``gitsizes.SHOWN_MAX``, listed as binary with a line saying its size); ``agentboard diff``,
``GET /api/tasks/{id}/diff`` and the dashboard drawer show it through :func:`task_diff`.
:func:`with_git` adds the branch facts (``git``: branch, base, ahead, behind, diff stat) to a
task read by ``kernel.queries.task_detail`` for ``show``, ``context``, the REST task and the drawer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast, overload

from ..kernel import dispatching as kd
from ..kernel.rows import GitFacts, TaskDetail, TaskDetailWithGit
from ..protocol import review_context
from ..store.engine import Database, Row
from . import branches

#: files per page of a diff
PER_PAGE = 20
#: characters of one file's diff shown; the rest is cut with a note
FILE_MAX = 100_000
_HEADER = re.compile(r"^diff --git a/(.+?) b/(.+)$")
_UNCOMMITTED = "# not committed yet in "


def git_facts(task: Mapping[str, Any], db: Database | None = None) -> GitFacts | None:
    """The branch facts of a worktree task (None for other workspaces); with ``db``, a branch
    that has landed is described by what landed (as its diff is)."""
    if task.get("workspace_kind") != "worktree":
        return None
    f = branches.facts(task, landed=landed_range(db, task) if db is not None else None)
    out = f.as_dict()
    out["summary"] = f.line()
    out["integration"] = task.get("integration")
    out["pr_url"] = task.get("pr_url")
    return cast(GitFacts, out)


@overload
def with_git(detail: TaskDetail, db: Database | None = None) -> TaskDetailWithGit: ...
@overload
def with_git(detail: Row, db: Database | None = None) -> Row: ...
def with_git(detail: TaskDetail | Row, db: Database | None = None) -> TaskDetailWithGit | Row:
    """``detail`` with ``git`` (see :func:`git_facts`) added."""
    shown = cast(Row, detail)
    shown["git"] = git_facts(shown, db)
    return shown


def with_new_branch(detail: Row) -> Row:
    """:func:`with_git` for a worktree whose branch was made just now at its base's tip: nothing
    ahead, behind or changed, known without asking git (a worker starts sooner)."""
    f = branches.Facts(branch=detail.get("branch_name"), base=detail.get("base_branch"), ahead=0, behind=0,
                       exists=True)
    detail["git"] = {**f.as_dict(), "summary": f.line(), "integration": detail.get("integration"),
                     "pr_url": detail.get("pr_url")}
    return detail


def facts_of(task: Row) -> review_context.WorkspaceFacts:
    """Where a task's work is, for ``review_context.work_diff``."""
    kind = task.get("workspace_kind") or "scratch"
    path = Path(task["workspace_path"]) if task.get("workspace_path") else None
    if kind == "worktree":
        return review_context.WorkspaceFacts("worktree", path, branches.repo_of(task), task.get("branch_name"),
                                             task.get("base_branch"))
    return review_context.WorkspaceFacts(kind, path)


def split(text: str) -> list[dict[str, Any]]:
    """A unified diff split per file: path, +/− counts, binary, uncommitted, and its text."""
    files: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    lines: list[str] = []
    uncommitted = False

    def close() -> None:
        if current is not None:
            current["diff"] = "\n".join(lines) + "\n"
            files.append(current)

    for ln in text.splitlines():
        m = _HEADER.match(ln)
        if m:
            close()
            current = {"path": m.group(2), "old_path": m.group(1), "additions": 0, "deletions": 0,
                       "binary": False, "uncommitted": uncommitted, "status": "modified"}
            lines = [ln]
            continue
        if ln.startswith(_UNCOMMITTED):
            close()
            current, lines, uncommitted = None, [], True
            continue
        if current is None:
            continue
        lines.append(ln)
        if ln.startswith("+") and not ln.startswith("+++ "):
            current["additions"] += 1
        elif ln.startswith("-") and not ln.startswith("--- "):
            current["deletions"] += 1
        elif ln.startswith("new file mode"):
            current["status"] = "added"
        elif ln.startswith("deleted file mode"):
            current["status"] = "deleted"
        elif ln.startswith("rename from"):
            current["status"] = "renamed"
        elif ln.startswith("Binary files") or (ln.startswith("# ") and ln.endswith("not shown")):
            current["binary"] = True  # or too big to show (``gitsizes``, ``gitsafe.new_file_diff``)
    close()
    return files


#: integration outcomes that put the branch's work on the base (its diff is then what landed)
_LANDED = ("merged", "squashed", "rebased")


def landed_range(db: Database, task: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """How a task's branch landed on its base and what it put there: ``(integration, the base
    before it, the commit it made)``, from its ``integrated`` event (None: it has not landed)."""
    if task.get("integration") not in _LANDED:
        return None
    event = kd.last_event_of(db, task["id"], "integrated")
    detail = (event or {}).get("payload") or {}
    if isinstance(detail, str):
        detail = json.loads(detail)
    commit = str(detail.get("commit") or "")
    # a merge's or a squash's first parent is the base before it; a rebase records it
    before = str(detail.get("before") or (commit + "^1" if task.get("integration") != "rebased" else ""))
    return (str(task["integration"]), before, commit) if commit and before else None


def _work(db: Database, task: Row) -> review_context.Diff:
    """The task's work: once its branch has landed on the base, what landed (the base before it
    to the commit it made), else the reviewer's diff (:func:`review_context.work_diff`)."""
    facts = facts_of(task)
    span = landed_range(db, task)
    if span is not None and facts.repo is not None:
        landed = review_context.landed_diff(facts.repo, span[1], span[2])
        if landed is not None:
            return landed
    return review_context.work_diff(facts)


def task_diff(db: Database, board: str, task_id: str, *, page: int = 1, per_page: int = PER_PAGE,
              file_max: int = FILE_MAX, path: str | None = None) -> dict[str, Any]:
    """A task's diff, ``per_page`` files a page (every file's +/− counts are listed on every
    page, its text only on its own page); ``path``: only that file."""
    task = kd.task(db, board, task_id)
    diff = _work(db, task)
    files = split(diff.text)
    listing = [{k: f[k] for k in ("path", "old_path", "status", "additions", "deletions", "binary", "uncommitted")}
               for f in files]
    chosen = [f for f in files if f["path"] == path] if path else files
    per_page = max(1, min(int(per_page), 200))
    pages = max(1, -(-len(chosen) // per_page))
    page = max(1, min(int(page), pages))
    shown = []
    for f in chosen[(page - 1) * per_page: page * per_page]:
        text = f["diff"]
        cut = len(text) > file_max
        shown.append({**{k: f[k] for k in listing[0]}, "diff": text[:file_max], "truncated": cut,
                      "size": len(text)})
    return {
        "task": task_id, "how": diff.how, "git": git_facts(task, db), "files": listing, "shown": shown,
        "page": page, "pages": pages, "per_page": per_page, "total_files": len(files),
        "additions": sum(f["additions"] for f in files), "deletions": sum(f["deletions"] for f in files),
    }


def raw_diff(db: Database, board: str, task_id: str) -> tuple[str, str]:
    """The task's whole diff as text, and how it was made."""
    task = kd.task(db, board, task_id)
    diff = _work(db, task)
    return diff.text, diff.how


__all__ = ["FILE_MAX", "PER_PAGE", "facts_of", "git_facts", "raw_diff", "split", "task_diff", "with_git", "with_new_branch"]
