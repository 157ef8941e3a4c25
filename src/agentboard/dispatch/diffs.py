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
_GIT_HEADER = "diff --git "
_UNCOMMITTED = "# not committed yet in "
#: git's one-character escapes in a quoted path (``quote.c``)
_C_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}
_JSON = json.JSONDecoder()


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
    """``detail`` with ``git`` (see :func:`git_facts`) added; with ``db``, a task that has not
    started shows the workspace it will get (:func:`planned`)."""
    shown = cast(Row, detail)
    if db is not None:
        planned(shown, db)
    shown["git"] = git_facts(shown, db)
    return shown


#: the statuses of a task that may not have started yet (its workspace not made)
_NOT_STARTED = ("triage", "todo", "ready", "blocked")


def planned(detail: Row, db: Database) -> Row:
    """A task not started yet, with the workspace the dispatcher will give it in place of the
    stored default (``scratch``, or a ``worktree`` named by its repository): on a board whose
    target is a git repository, ``worktree`` at ``<repo>/.worktrees/<id>`` on its branch
    (``ab/<id>`` unless it has one of its own); on another target, ``dir`` at the target
    (``workspaces.plan``, what a start does first). A task that ran keeps what it ran in."""
    kind, path = detail.get("workspace_kind") or "scratch", detail.get("workspace_path")
    if detail.get("status") not in _NOT_STARTED or kind not in ("scratch", "worktree"):
        return detail
    if path and (kind == "scratch" or Path(str(path)).parent.name == ".worktrees"):
        return detail
    from ..domain.errors import AgentboardError
    from ..kernel import boards as kboards
    from . import workspaces

    try:
        ws = workspaces.plan(db.settings.home, dict(kboards.get(db, str(detail["board"]))), detail)
    except (AgentboardError, workspaces.WorkspaceError):  # a target that is gone: the stored facts
        return detail
    if ws.kind != "scratch":
        detail.update(workspace_kind=ws.kind, workspace_path=str(ws.path),
                      branch_name=detail.get("branch_name") or ws.branch)
    return detail


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


def unquote(text: str, start: int = 0) -> tuple[str, int] | None:
    """The C-quoted string git writes for a path with unusual characters (``"a/donn\\303\\251es.py"``:
    ``\\n``, ``\\t``, ``\\"``, ``\\\\``… and octal bytes, UTF-8 once decoded) that starts at
    ``text[start]`` (a ``"``): its value and where it ends (after its closing quote); None when
    it is not one."""
    if text[start:start + 1] != '"':
        return None
    out = bytearray()
    i = start + 1
    while i < len(text):
        c = text[i]
        if c == '"':
            return out.decode("utf-8", "replace"), i + 1
        if c != "\\":
            out += c.encode("utf-8", "surrogateescape")
            i += 1
            continue
        nxt = text[i + 1:i + 2]
        if nxt in _C_ESCAPES:
            out.append(_C_ESCAPES[nxt])
            i += 2
        elif len(text) >= i + 4 and all(d in "01234567" for d in text[i + 1:i + 4]):
            out.append(int(text[i + 1:i + 4], 8) & 0xFF)
            i += 4
        else:
            return None
    return None


def _side(text: str, start: int, prefix: str) -> tuple[str, int] | None:
    """One quoted side of a ``diff --git`` line at ``text[start]``: git's ``"a/…"`` (C-quoted)
    or ``a/"…"`` (JSON, ``gitsizes.note``); its path without ``prefix`` and where it ends."""
    if text.startswith('"', start):
        got = unquote(text, start)
        if got is None or not got[0].startswith(prefix):
            return None
        return got[0][len(prefix):], got[1]
    if text.startswith(prefix + '"', start):
        try:
            value, end = _JSON.raw_decode(text, start + len(prefix))
        except ValueError:
            return None
        return (value, end) if isinstance(value, str) else None
    return None


def header_paths(line: str) -> tuple[str, str] | None:
    """The old and new path of a ``diff --git a/OLD b/NEW`` line, quoted (``unquote``) or not;
    None when ``line`` is not one. Unquoted names holding `` b/`` are read as the same name on
    both sides (git's header for a change that is not a rename); a rename's ``rename from`` /
    ``rename to`` lines name its paths exactly (:func:`split`)."""
    if not line.startswith(_GIT_HEADER):
        return None
    rest = line[len(_GIT_HEADER):]
    old = _side(rest, 0, "a/")
    if old is not None:
        name, end = old
        if rest[end:end + 1] != " ":
            return None
        new = _side(rest, end + 1, "b/")
        if new is not None:
            return (name, new[0]) if new[1] == len(rest) else None
        return (name, rest[end + 3:]) if rest.startswith("b/", end + 1) else None
    if not rest.startswith("a/"):
        return None
    for at in (i for i in range(len(rest)) if rest.startswith(' "b/', i) or rest.startswith(' b/"', i)):
        new = _side(rest, at + 1, "b/")
        if new is not None and new[1] == len(rest):
            return rest[2:at], new[0]
    n, odd = divmod(len(rest) - 5, 2)
    if not odd and n > 0 and rest[2 + n:5 + n] == " b/" and rest[2:2 + n] == rest[5 + n:]:
        return rest[2:2 + n], rest[2:2 + n]
    cut = rest.find(" b/")
    return (rest[2:cut], rest[cut + 3:]) if cut > 2 else None


def _named(line: str, word: str) -> str | None:
    """The path of an extended header line ``rename from PATH`` (``word``: ``rename from``…),
    quoted or not."""
    if not line.startswith(word + " "):
        return None
    value = line[len(word) + 1:]
    got = unquote(value) if value.startswith('"') else (value, len(value))
    return got[0] if got is not None and got[1] == len(value) else None


def split(text: str) -> list[dict[str, Any]]:
    """A unified diff split per file: path, +/− counts, binary, uncommitted, and its text.

    Lines are split on ``\\n`` only (a file's text may hold ``\\r``, ``\\f``, U+2028… that
    ``str.splitlines`` would break on). A file starts at a ``diff --git`` line (its paths quoted
    or not: :func:`header_paths`); in its hunks every line starts with `` ``, ``+``, ``-`` or
    ``\\``, so nothing a file holds can start another file, and its extended header lines
    (``new file mode``, ``rename from``, ``Binary files``, a ``# … not shown`` note) are read
    only before its first hunk."""
    files: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    lines: list[str] = []
    uncommitted = False
    in_hunks = False
    prev: str | None = None

    def close() -> None:
        if current is not None:
            current["diff"] = "\n".join(lines) + "\n"
            files.append(current)

    all_lines = text.split("\n")
    if all_lines and all_lines[-1] == "":
        all_lines.pop()
    for ln in all_lines:
        before, prev = prev, ln
        if ln.startswith(_GIT_HEADER):
            close()
            old, new = header_paths(ln) or (ln[len(_GIT_HEADER):],) * 2
            current = {"path": new, "old_path": old, "additions": 0, "deletions": 0,
                       "binary": False, "uncommitted": uncommitted, "status": "modified"}
            lines, in_hunks = [ln], False
            continue
        if not uncommitted and before == "" and ln.startswith(_UNCOMMITTED):  # review_context.work_diff's line
            close()
            current, lines, uncommitted = None, [], True
            continue
        if current is None:
            continue
        lines.append(ln)
        if ln.startswith("@@ "):
            in_hunks = True
        elif in_hunks:
            if ln.startswith("+"):
                current["additions"] += 1
            elif ln.startswith("-"):
                current["deletions"] += 1
        elif ln.startswith("new file mode"):
            current["status"] = "added"
        elif ln.startswith("deleted file mode"):
            current["status"] = "deleted"
        elif ln.startswith(("rename from ", "copy from ")):
            kind = "rename" if ln.startswith("rename") else "copy"
            current["status"] = "renamed" if kind == "rename" else "copied"
            current["old_path"] = _named(ln, f"{kind} from") or current["old_path"]
        elif ln.startswith(("rename to ", "copy to ")):
            current["path"] = _named(ln, "rename to" if ln.startswith("rename") else "copy to") or current["path"]
        elif ln.startswith("Binary files") or (ln.startswith("# ") and ln.endswith("not shown")):
            current["binary"] = True  # or too big to show (``gitsizes``, ``gitsafe.new_file_diff``)
    close()
    return files


#: integration outcomes that put the branch's work on the base (its diff is then what landed)
_LANDED = ("merged", "squashed", "rebased")


def landed_range(db: Database, task: Mapping[str, Any]) -> tuple[str, str, str, str | None] | None:
    """How a task's branch landed on its base and what it put there: ``(integration, the base
    before it, the commit it made, the branch it landed on)``, from its ``integrated`` event
    (None: it has not landed)."""
    if task.get("integration") not in _LANDED:
        return None
    event = kd.last_event_of(db, task["id"], "integrated")
    detail = (event or {}).get("payload") or {}
    if isinstance(detail, str):
        detail = json.loads(detail)
    commit = str(detail.get("commit") or "")
    # a merge's or a squash's first parent is the base before it; a rebase records it
    before = str(detail.get("before") or (commit + "^1" if task.get("integration") != "rebased" else ""))
    onto = str(detail["base"]) if detail.get("base") else None
    return (str(task["integration"]), before, commit, onto) if commit and before else None


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


__all__ = ["FILE_MAX", "PER_PAGE", "facts_of", "git_facts", "header_paths", "planned", "raw_diff", "split", "task_diff",
           "unquote", "with_git", "with_new_branch"]
