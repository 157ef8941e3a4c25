"""The ``.board/`` folder: the files written for a worker before it starts, and their paths.

| file | content |
|---|---|
| ``task.json`` | the task, its verification rules, parents' hand-offs, the result JSON Schema |
| ``context.md`` | the worker context (``protocol.context``) |
| ``wiki/INDEX.md`` + ``wiki/<slug>.md`` | up to 5 relevant published wiki pages |
| ``history.md`` | rework notes, verification failures and ``## Repair Attempt N`` sections |
| ``prompt.md`` | the worker prompt: the context plus the protocol instructions |

The worker writes ``result.json`` (and a reviewer agent ``review-verdict.json``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from .. import gitsafe
from ..store.engine import Row
from . import safefs
from .result import RESULT_EXAMPLE, RESULT_SCHEMA, SCHEMA_VERSION

BOARD_DIR = ".board"
MCP_FILE = ".mcp.json"
EXCLUDES = [".board/", ".mcp.json"]
NO_WIKI = "No wiki pages available"

log = logging.getLogger("agentboard.protocol")


def board_dir(workspace: Path) -> Path:
    return (workspace if isinstance(workspace, Path) else Path(workspace)) / BOARD_DIR


def result_path(workspace: Path) -> Path:
    return board_dir(workspace) / "result.json"


def verdict_path(workspace: Path) -> Path:
    return board_dir(workspace) / "review-verdict.json"


def history_path(workspace: Path) -> Path:
    return board_dir(workspace) / "history.md"


def write_text(path: Path, text: str) -> None:
    """Write the workspace file ``path`` atomically (a reader sees the old file or the new one,
    never a half-written one), creating its folders.

    ``path`` is a file under a workspace's ``.board/`` or directly in a workspace
    (``safefs.locate``). Every folder beneath the workspace is opened without following links
    (a link a worker planted where a folder belongs is removed), and the file is a fresh one
    renamed over the name: a link or a hard link left at the name is replaced, never written
    through, so a dispatcher writing into a workspace cannot be steered into writing elsewhere.
    """
    safefs.write_file(path, text)


_JSON_OPTIONS = orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS


def json_text(data: Any) -> str:
    """JSON as the workspace files hold it: indented by two spaces, text as UTF-8, anything JSON
    has no type for (a path, a timestamp object) as its ``str``, and a final newline. Written by
    orjson (a twentieth of the standard encoder's time on a ``task.json``); a whole number over
    64 bits, which orjson refuses, falls back to the standard encoder."""
    try:
        return orjson.dumps(data, default=str, option=_JSON_OPTIONS).decode() + "\n"
    except TypeError:  # orjson.JSONEncodeError: an integer over 64 bits
        return json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n"


def write_json(path: Path, data: Any) -> None:
    write_text(path, json_text(data))


def task_json_text(doc: dict[str, Any]) -> str:
    """``task.json`` as :func:`write_json` writes it."""
    return json_text(doc)


def _sections(body: str) -> dict[str, list[str]]:
    """Bullet items under ``## Acceptance…`` / ``## Non-goals`` headings of a task body."""
    out: dict[str, list[str]] = {"acceptance": [], "non_goals": []}
    current: str | None = None
    for line in (body or "").splitlines():
        head = re.match(r"^#{1,6}\s+(.*)$", line.strip())
        if head:
            name = head.group(1).strip().lower()
            current = ("acceptance" if name.startswith("acceptance")
                       else "non_goals" if name.replace("-", " ").startswith("non goal") else None)
            continue
        item = re.match(r"^\s*(?:[-*+]|\d+[.)])\s+(.*\S)", line)
        if current and item:
            out[current].append(item.group(1))
    return out


def task_document(detail: Row, run_id: int, *, verify_enabled: bool) -> dict[str, Any]:
    """The content of ``task.json`` from the task read by ``protocol.context.load_context``."""
    t = detail
    goal = detail.get("goal") or None
    sec = _sections(t.get("body") or "")
    acceptance = sec["acceptance"] or list((goal or {}).get("acceptance") or [])
    parents = []
    for p in detail.get("parents") or []:
        h = p.get("handoff") or {}
        parents.append({"id": p["id"], "title": p["title"], "status": p["status"],
                        "summary": h.get("summary"), "metadata": h.get("metadata")})
    return {
        "schema_version": SCHEMA_VERSION,
        "id": t["id"],
        "run_id": run_id,
        "board": t.get("board"),
        "title": t["title"],
        "description": t.get("body") or "",
        "assignee": t.get("assignee"),
        "tenant": t.get("tenant"),
        "priority": t.get("priority"),
        "review_required": bool(t.get("review_required")),
        "goal": {"id": goal["id"], "title": goal["title"], "acceptance": goal.get("acceptance") or []} if goal else None,
        "acceptance_criteria": acceptance,
        "non_goals": sec["non_goals"],
        "verification": {
            "commands": list(t.get("verify") or []),
            "enabled": verify_enabled,
            "rule": "after you report success these commands run in the workspace; any failure sends the task back",
        },
        "parents": parents,
        "attachments": [{"name": a["name"], "path": a["path"], "size": a["size"]}
                        for a in detail.get("attachments") or []],
        "files": {
            "context": f"{BOARD_DIR}/context.md",
            "history": f"{BOARD_DIR}/history.md",
            "wiki_index": f"{BOARD_DIR}/wiki/INDEX.md",
            "result": f"{BOARD_DIR}/result.json",
        },
        "result_schema": RESULT_SCHEMA,
        "result_example": RESULT_EXAMPLE,
    }


# -- history.md --------------------------------------------------------------------------------------


def repair_section(attempt: int, errors: list[str], run_id: int | None = None) -> str:
    from .repair import MAX_ATTEMPTS

    where = f" (run {run_id})" if run_id is not None else ""
    # never more attempts than the limit: the result that failed the last repair is said so
    title = (f"## Repair Attempt {attempt} of {MAX_ATTEMPTS}{where}" if attempt <= MAX_ATTEMPTS
             else f"## Still invalid after {MAX_ATTEMPTS} repair attempts{where}")
    lines = [title, "",
             "`.board/result.json` did not validate against the result schema (see `.board/task.json`, "
             "`result_schema`). The exact errors:", ""]
    lines += [f"- {e}" for e in errors] or ["- (no details)"]
    return "\n".join(lines) + "\n"


def verify_section(command: str, exit_code: int | None, tail: str, run_id: int | None, timed_out: bool = False) -> str:
    how = "timed out" if timed_out else f"exited with {exit_code}"
    return (f"## Verification failed (run {run_id})\n\nThe reported success was not accepted: "
            f"`{command}` {how}. Output tail:\n\n```\n{tail.rstrip() or '(no output)'}\n```\n")


def history_text(events: list[Row]) -> str:
    """``history.md`` from the task's history events (``kernel.worker_protocol.history_events``)."""
    out = ["# History of this task", "",
           "Rework notes from people and reviewers, verification failures and result repairs, oldest first.", ""]
    if not events:
        out.append("(nothing yet)")
        return "\n".join(out) + "\n"
    for e in events:
        p = e["payload"]
        kind, run = e["kind"], e.get("run_id")
        if kind == "changes_requested":
            out += [f"## Changes requested by {p.get('reviewer') or e.get('actor') or 'a reviewer'} (run {run})", "",
                    str(p.get("feedback") or "").strip(), ""]
        elif kind == "rejected":
            out += [f"## Rejected by {p.get('reviewer') or e.get('actor') or 'a reviewer'} (run {run})", "",
                    str(p.get("reason") or "").strip(), ""]
        elif kind == "verify_failed":
            out.append(verify_section(str(p.get("command") or "?"), p.get("exit_code"),
                                      str(p.get("output_tail") or ""), run, bool(p.get("timed_out"))))
        elif kind == "result_invalid":
            out.append(repair_section(int(p.get("attempt") or 1), list(p.get("errors") or []), run))
        elif kind == "result_degraded":
            out += [f"## Result degraded (run {run})", "",
                    "The result never validated; the task went to review with a summary extracted from the "
                    "worker's output.", ""]
    return "\n".join(out).rstrip() + "\n"


def append_history(workspace: Path, section: str) -> Path:
    path = history_path(workspace)
    with safefs.open_board(workspace) as bdir:
        try:
            existing = bdir.read_text("history.md")
        except safefs.Unsafe as exc:  # a link or hard link a worker left: replaced, never read through
            log.warning("%s; it is rewritten", exc)
            existing = None
        if existing is None:
            existing = history_text([])
        if existing.rstrip().endswith("(nothing yet)"):
            existing = existing.rstrip()[: -len("(nothing yet)")].rstrip() + "\n"
        bdir.write_text("history.md", existing.rstrip() + "\n\n" + section.rstrip() + "\n")
    return path


@contextlib.contextmanager
def _board(workspace: Path, board: safefs.Dir | None) -> Iterator[safefs.Dir]:
    """``board`` as it is (the caller closes it), else the workspace's ``.board/`` opened here."""
    if board is not None:
        yield board
        return
    with safefs.open_board(workspace) as bdir:
        yield bdir


# -- wiki/ ------------------------------------------------------------------------------------------


def write_wiki(workspace: Path, pages: list[dict[str, Any]], note: str | None = None, *,
               board: safefs.Dir | None = None) -> Path:
    """Replace ``.board/wiki/`` with ``pages`` and an INDEX.md (``No wiki pages available`` when none).

    The old folder is removed without crossing any link in it (a link is unlinked, its target
    untouched); a link standing in the folder's place is removed, not followed. ``board``: the
    workspace's ``.board/`` opened already."""
    lines = ["# Wiki pages relevant to this task", ""]
    with _board(workspace, board) as bdir:
        bdir.remove("wiki")
        with bdir.sub("wiki", create=True) as wdir:
            if not pages:
                lines.append(NO_WIKI + (f" ({note})" if note else ""))
            else:
                lines.append("The board's published pages that best match this task, most relevant first:")
                lines.append("")
                for p in pages:
                    wdir.write_text(f"{p['slug']}.md", f"# {p['title']}\n\n{p['body'].rstrip()}\n")
                    lines.append(f"- [{p['title']}]({p['slug']}.md)")
            wdir.write_text("INDEX.md", "\n".join(lines) + "\n")
    return board_dir(workspace) / "wiki"


# -- previous outputs --------------------------------------------------------------------------------


def archive_outputs(workspace: Path, *, board: safefs.Dir | None = None) -> list[Path]:
    """Move a previous run's ``result.json`` / ``review-verdict.json`` aside (into
    ``.board/archive/``) so they are never re-read. What is moved is the name itself: a link
    moves as a link, never followed. ``board``: the workspace's ``.board/`` opened already."""
    moved = []
    with _board(workspace, board) as bdir:
        for name in ("result.json", "review-verdict.json"):
            if not bdir.exists(name):
                continue
            stem = name.rsplit(".", 1)[0]
            dest = f"{stem}-{time.strftime('%Y%m%dT%H%M%S')}-{time.time_ns() % 10**6}.json"
            with bdir.sub("archive", create=True) as archive:
                bdir.rename(name, archive, dest)
            moved.append(board_dir(workspace) / "archive" / dest)
    return moved


# -- .mcp.json and git ------------------------------------------------------------------------------


def mcp_server_entry(env: dict[str, str]) -> dict[str, Any]:
    return {"command": sys.executable, "args": ["-m", "agentboard", "mcp"], "env": env}


def _git(top: Path, *args: str) -> str | None:
    """``git args`` on the checkout whose top folder is ``top``, through ``gitsafe`` (protected)."""
    try:
        out = gitsafe.run(top, *args, check=False, timeout=20)
    except (OSError, gitsafe.GitError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


#: how long what lies above a workspace folder (its parents' ``.git``) is remembered
_ABOVE_TTL = 5.0
_above: dict[str, tuple[float, bool]] = {}


def _git_at_or_above(folder: str) -> bool:
    """Whether ``folder`` or one of its parents holds a ``.git``; remembered for a few seconds
    per folder (a burst of workers shares its workspaces' parent: one walk, not one per worker)."""
    now = time.monotonic()
    hit = _above.get(folder)
    if hit is not None and hit[0] > now:
        return hit[1]
    found, d = False, folder
    while True:
        if os.path.lexists(os.path.join(d, ".git")):
            found = True
            break
        up = os.path.dirname(d)
        if up == d:
            break
        d = up
    if len(_above) > 4096:
        _above.clear()
    _above[folder] = (now + _ABOVE_TTL, found)
    return found


def _maybe_in_git(workspace: Path) -> bool:
    """False only when ``workspace`` cannot be inside a git work tree: no ``.git`` in it or any
    parent (by its path as given and as resolved) and no ``GIT_DIR``/``GIT_WORK_TREE`` in the
    environment (saves starting git). The workspace's own ``.git`` is looked for every time; its
    parents' answer is remembered for a few seconds."""
    if os.environ.get("GIT_DIR") or os.environ.get("GIT_WORK_TREE"):
        return True
    for start in {os.path.abspath(workspace), os.path.realpath(workspace)}:
        if os.path.lexists(os.path.join(start, ".git")) or _git_at_or_above(os.path.dirname(start)):
            return True
    return False


def is_tracked(workspace: Path, name: str) -> bool:
    if not _maybe_in_git(workspace):
        return False
    top = gitsafe.toplevel(workspace)
    if top is None:
        return False
    rel = os.path.relpath(os.path.join(os.path.abspath(workspace), name), top)
    return bool(_git(top, "ls-files", "--", f":(top,literal){rel}"))


def write_mcp_json(workspace: Path, env: dict[str, str], *, keep_others: bool = True) -> Path | None:
    """Point MCP-capable agents at ``agentboard mcp``, keeping any other servers already listed
    (``keep_others``; a review run's file holds the board's server alone: a reviewer never starts
    a server the worker listed).

    A ``.mcp.json`` tracked by the repository is left alone (it would show in the diff). An
    existing file is merged only when it is a regular file with one name: a link or a hard link
    (it could name a file the worker may not read) is replaced, its content never read.
    """
    path = Path(workspace) / MCP_FILE
    with safefs.open_root(workspace) as root:
        present = root.exists(MCP_FILE)
        if present and is_tracked(workspace, MCP_FILE):
            return None
        data: dict[str, Any] = {}
        raw = None
        try:
            if present and keep_others:  # (a new workspace has none: nothing to merge, nothing to read)
                raw = root.read_bytes(MCP_FILE, limit=MCP_READ_LIMIT)
        except safefs.Unsafe as exc:
            log.warning("%s; it is replaced", exc)
        except OSError:
            pass
        if raw is not None:
            try:
                loaded = safefs.loads(raw.decode("utf-8"))
                data = loaded if isinstance(loaded, dict) else {}
            except ValueError:
                data = {}
        found = data.get("mcpServers")
        servers: dict[str, Any] = found if isinstance(found, dict) else {}
        servers["agentboard"] = mcp_server_entry(env)
        data["mcpServers"] = servers
        root.write_text(MCP_FILE, json_text(data), mode=0o600)  # it holds the run's token
    return path


def git_exclude(workspace: Path, patterns: list[str] = EXCLUDES) -> Path | None:
    """Add ``patterns`` to the repository's ``info/exclude`` when ``workspace`` is in a git work tree."""
    if not _maybe_in_git(workspace):
        return None
    top = gitsafe.toplevel(workspace)
    if top is None:
        return None
    try:
        exclude = gitsafe.common_dir(gitsafe.locate(top)[0]) / "info" / "exclude"
    except gitsafe.GitError:
        return None
    add_lines(exclude, patterns)
    return exclude


def add_lines(path: Path, lines: list[str]) -> None:
    """Append to a git exclude file (``<git dir>/info/exclude``) the lines it does not hold yet.

    The git folder must exist; ``info/`` is opened (or made) beneath it without following a link,
    and the file is read only when it is a regular file with one name, then replaced atomically:
    a link or hard link left there is replaced, never written through. Nothing is written when
    the git folder is missing or not a folder.
    """
    path = Path(path)
    try:
        root = safefs.open_root(path.parent.parent)
    except OSError:
        return
    try:
        with root, root.sub(path.parent.name, create=True) as info:
            try:
                current_text = info.read_text(path.name, limit=MCP_READ_LIMIT) or ""
            except safefs.Unsafe:
                current_text = ""
            current = current_text.splitlines()
            missing = [line for line in lines if line not in current]
            if missing:
                sep = "\n" if current_text and not current_text.endswith("\n") else ""
                info.write_text(path.name, current_text + sep + "\n".join(missing) + "\n")
    except OSError as exc:
        log.info("cannot add to %s: %s", path, exc)


MCP_READ_LIMIT = 1024 * 1024


__all__ = [
    "BOARD_DIR", "EXCLUDES", "MCP_FILE", "NO_WIKI", "append_history", "archive_outputs", "board_dir",
    "git_exclude", "history_path", "history_text", "repair_section", "result_path", "task_document",
    "verdict_path", "verify_section", "write_json", "write_mcp_json", "write_text", "write_wiki",
]
