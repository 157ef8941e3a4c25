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
import functools
import json
import os
import re
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from .. import gitsafe
from ..store.engine import Row
from .result import RESULT_EXAMPLE, RESULT_SCHEMA, SCHEMA_VERSION

BOARD_DIR = ".board"
MCP_FILE = ".mcp.json"
EXCLUDES = [".board/", ".mcp.json"]
NO_WIKI = "No wiki pages available"


def board_dir(workspace: Path) -> Path:
    return Path(workspace) / BOARD_DIR


def result_path(workspace: Path) -> Path:
    return board_dir(workspace) / "result.json"


def verdict_path(workspace: Path) -> Path:
    return board_dir(workspace) / "review-verdict.json"


def history_path(workspace: Path) -> Path:
    return board_dir(workspace) / "history.md"


def write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (a reader sees the old file or the new one, never a
    half-written one), creating the folder.

    The temporary file is created exclusively (never through a link) and then renamed over ``path``:
    a symbolic link a worker left at either name is replaced, never followed, so a dispatcher
    writing into a workspace cannot be steered into writing elsewhere.
    """
    tmp = path.with_name("." + path.name + ".tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    data = text.encode("utf-8")
    try:
        fd = os.open(tmp, flags, 0o644)
    except FileNotFoundError:  # the folder is not there yet (usually it is: no mkdir then)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = _open_fresh(tmp, flags)
    except FileExistsError:
        fd = _open_fresh(tmp, flags)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def _open_fresh(tmp: Path, flags: int) -> int:
    try:
        return os.open(tmp, flags, 0o644)
    except FileExistsError:  # a leftover, or a link a worker planted: removed, never followed
        tmp.unlink()
        return os.open(tmp, flags, 0o644)


def write_json(path: Path, data: Any) -> None:
    write_text(path, json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")


_CONSTANT_KEYS = ("result_schema", "result_example")


@functools.lru_cache(maxsize=1)
def _constant_tail() -> str:
    return json.dumps({"result_schema": RESULT_SCHEMA, "result_example": RESULT_EXAMPLE}, indent=2,
                      ensure_ascii=False, default=str)


def task_json_text(doc: dict[str, Any]) -> str:
    """``task.json`` as :func:`write_json` writes it; the schema and example it ends with are
    serialized once per process (the same text: same nesting level, same options)."""
    if (tuple(doc)[-2:] == _CONSTANT_KEYS and doc["result_schema"] is RESULT_SCHEMA
            and doc["result_example"] is RESULT_EXAMPLE and len(doc) > 2):
        head = json.dumps({k: v for k, v in doc.items() if k not in _CONSTANT_KEYS}, indent=2,
                          ensure_ascii=False, default=str)
        return head[:-2] + ",\n" + _constant_tail()[2:] + "\n"
    return json.dumps(doc, indent=2, ensure_ascii=False, default=str) + "\n"


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
    path.parent.mkdir(parents=True, exist_ok=True)
    # a symbolic link left by a worker is replaced, never read through (it could point anywhere)
    mine = path.exists() and not path.is_symlink()
    existing = path.read_text(encoding="utf-8") if mine else history_text([])
    if existing.rstrip().endswith("(nothing yet)"):
        existing = existing.rstrip()[: -len("(nothing yet)")].rstrip() + "\n"
    write_text(path, existing.rstrip() + "\n\n" + section.rstrip() + "\n")
    return path


# -- wiki/ ------------------------------------------------------------------------------------------


def write_wiki(workspace: Path, pages: list[dict[str, Any]], note: str | None = None) -> Path:
    """Replace ``.board/wiki/`` with ``pages`` and an INDEX.md (``No wiki pages available`` when none)."""
    wdir = board_dir(workspace) / "wiki"
    if wdir.exists():
        shutil.rmtree(wdir)
    wdir.mkdir(parents=True)
    lines = ["# Wiki pages relevant to this task", ""]
    if not pages:
        lines.append(NO_WIKI + (f" ({note})" if note else ""))
    else:
        lines.append("The board's published pages that best match this task, most relevant first:")
        lines.append("")
        for p in pages:
            write_text(wdir / f"{p['slug']}.md", f"# {p['title']}\n\n{p['body'].rstrip()}\n")
            lines.append(f"- [{p['title']}]({p['slug']}.md)")
    write_text(wdir / "INDEX.md", "\n".join(lines) + "\n")
    return wdir


# -- previous outputs --------------------------------------------------------------------------------


def archive_outputs(workspace: Path) -> list[Path]:
    """Move a previous run's ``result.json`` / ``review-verdict.json`` aside so they are never re-read."""
    moved = []
    bdir = board_dir(workspace)
    for name in ("result.json", "review-verdict.json"):
        src = bdir / name
        if src.exists():
            dest = bdir / "archive" / f"{src.stem}-{time.strftime('%Y%m%dT%H%M%S')}-{time.time_ns() % 10**6}.json"
            dest.parent.mkdir(parents=True, exist_ok=True)
            src.replace(dest)
            moved.append(dest)
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


def _maybe_in_git(workspace: Path) -> bool:
    """False only when ``workspace`` cannot be inside a git work tree: no ``.git`` in it or any
    parent and no ``GIT_DIR``/``GIT_WORK_TREE`` in the environment (saves starting git)."""
    if os.environ.get("GIT_DIR") or os.environ.get("GIT_WORK_TREE"):
        return True
    for start in {os.path.abspath(workspace), os.path.realpath(workspace)}:
        d = start
        while True:
            if os.path.lexists(os.path.join(d, ".git")):
                return True
            up = os.path.dirname(d)
            if up == d:
                break
            d = up
    return False


def is_tracked(workspace: Path, name: str) -> bool:
    if not _maybe_in_git(workspace):
        return False
    top = gitsafe.toplevel(workspace)
    if top is None:
        return False
    rel = os.path.relpath(os.path.join(os.path.abspath(workspace), name), top)
    return bool(_git(top, "ls-files", "--", f":(top,literal){rel}"))


def write_mcp_json(workspace: Path, env: dict[str, str]) -> Path | None:
    """Point MCP-capable agents at ``agentboard mcp``, keeping any other servers already listed.

    A ``.mcp.json`` tracked by the repository is left alone (it would show in the diff).
    """
    path = Path(workspace) / MCP_FILE
    if path.exists() and is_tracked(workspace, MCP_FILE):
        return None
    data: dict[str, Any] = {}
    if path.exists():
        try:
            loaded = json.loads(path.read_text(encoding="utf-8"))
            data = loaded if isinstance(loaded, dict) else {}
        except (OSError, ValueError):
            data = {}
    found = data.get("mcpServers")
    servers: dict[str, Any] = found if isinstance(found, dict) else {}
    servers["agentboard"] = mcp_server_entry(env)
    data["mcpServers"] = servers
    write_json(path, data)
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
    """Append to a line-based file (a git exclude file) the lines it does not hold yet.

    A symbolic link at ``path`` is left alone: appending through it could write anywhere.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_symlink():
        return
    current = path.read_text().splitlines() if path.exists() else []
    missing = [line for line in lines if line not in current]
    if missing:
        with path.open("a") as fh:
            if current and current[-1] != "":
                fh.write("\n")
            fh.write("\n".join(missing) + "\n")


__all__ = [
    "BOARD_DIR", "EXCLUDES", "MCP_FILE", "NO_WIKI", "append_history", "archive_outputs", "board_dir",
    "git_exclude", "history_path", "history_text", "repair_section", "result_path", "task_document",
    "verdict_path", "verify_section", "write_json", "write_mcp_json", "write_text", "write_wiki",
]
