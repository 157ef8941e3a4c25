"""Boards: isolated queues with a slug, a display name, settings and an optional target directory."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any, cast

from ..domain import model, settings_schema
from ..domain.errors import Conflict, InvalidInput, NotFound
from ..store.engine import Database, Row, Tx, dump_json
from . import host_access
from .common import board_settings
from .host_access import check_settings
from .rows import BoardRow

_SCOPED_TABLES = (
    "task_events", "task_comments", "task_runs", "task_links", "attachments", "reviews",
    "notify_subscriptions", "wiki_pages", "supervisor_wakes", "goals", "tasks",
    "schedules", "schedule_fires",
)


def board_out(row: Row) -> Row:
    out = dict(row)
    try:
        out["settings"] = json.loads(out.get("settings") or "{}")
    except ValueError:
        out["settings"] = {}
    out["archived"] = bool(out.get("archived"))
    return out


def board_dir(home: Path, slug: str) -> Path:
    return home / "boards" / slug


def _get(tx: Tx, slug: str) -> Row:
    row = tx.one("SELECT * FROM boards WHERE slug = :s", {"s": slug})
    if row is None:
        raise NotFound(f"no board {slug!r}; list boards with `agentboard boards list`")
    return row


def get(db: Database, slug: str) -> BoardRow:
    slug = model.board_slug(slug)
    return cast(BoardRow, board_out(db.read(_get, slug)))


def list_boards(db: Database, *, include_archived: bool = False) -> list[BoardRow]:
    def _r(tx: Tx) -> list[Row]:
        sql = (
            "SELECT b.*, (SELECT COUNT(*) FROM tasks t WHERE t.board = b.slug AND t.status != 'archived') AS task_count "
            "FROM boards b"
        )
        if not include_archived:
            sql += " WHERE b.archived = 0"
        return tx.all(sql + " ORDER BY b.slug")
    return [cast(BoardRow, board_out(r)) for r in db.read(_r)]


def _create(tx: Tx, slug: str, fields: dict[str, Any], actor: str | None) -> Row:
    existing = tx.one("SELECT archived FROM boards WHERE slug = :s", {"s": slug})
    if existing is not None:
        if existing["archived"]:
            raise Conflict(f"board {slug!r} exists but is archived; restore it or delete it for good first")
        raise Conflict(f"board {slug!r} already exists")
    if fields.get("default_workdir"):
        other = tx.one(
            "SELECT slug FROM boards WHERE default_workdir = :w AND archived = 0", {"w": fields["default_workdir"]}
        )
        if other:
            raise Conflict(f"{fields['default_workdir']} is already the target directory of board {other['slug']!r}")
    now = time.time()
    tx.execute(
        "INSERT INTO boards (slug, name, description, icon, color, default_workdir, workdir_mode, settings, "
        "archived, created_at) VALUES (:slug, :name, :description, :icon, :color, :default_workdir, "
        ":workdir_mode, :settings, 0, :now)",
        {"slug": slug, "now": now, **fields},
    )
    tx.event(slug, None, "board_created", {"slug": slug, "name": fields["name"]}, actor=actor, at=now)
    return _get(tx, slug)


def check_workdir(path: str, *, create: bool = False) -> None:
    """A board's target directory must exist: a missing one is refused (a typo in the path would
    otherwise give the agents an empty folder to work in), unless ``create`` says to make it."""
    if not create and not os.path.lexists(path):
        raise InvalidInput(f"target directory {path} does not exist: check the path, or add --create to create "
                           "it (REST: \"create\": true)")


def create(
    db: Database, slug: str, *, name: str | None = None, description: str = "", icon: str | None = None,
    color: str | None = None, workdir: str | None = None, workdir_mode: str | None = None,
    settings: dict[str, Any] | None = None, actor: str | None = None, create_dir: bool = False,
) -> Row:
    """Create a board. ``workdir``: its target directory (absolute), which must exist unless
    ``create_dir`` (then it is made, with its parents)."""
    slug = model.board_slug(slug)
    if workdir is not None:
        if not os.path.isabs(workdir):
            raise InvalidInput(f"target directory {workdir!r} is relative: give an absolute path")
        workdir = os.path.normpath(workdir)
        if workdir_mode not in (None, "linked-new", "linked-existing"):
            raise InvalidInput("workdir mode must be linked-new or linked-existing")
        check_workdir(workdir, create=create_dir)
    fields = {
        "name": (name or slug).strip() or slug,
        "description": description or "",
        "icon": icon,
        "color": color,
        "default_workdir": workdir,
        "workdir_mode": workdir_mode if workdir else None,
        "settings": dump_json(check_settings(settings_schema.board_settings(settings or {}))),
    }
    if workdir is not None and create_dir and not os.path.lexists(workdir):
        try:
            os.makedirs(workdir)
        except OSError as exc:
            raise InvalidInput(f"cannot create target directory {workdir}: {exc.strerror or exc}") from None
    return board_out(db.write(_create, slug, fields, actor))


def board_changes(**fields: Any) -> dict[str, Any]:
    """Checked, stored values of a board's display fields or settings (for :func:`update_in`)."""
    allowed = {"name", "description", "icon", "color", "settings"}
    bad = set(fields) - allowed
    if bad:
        raise InvalidInput(f"cannot change board field(s) {', '.join(sorted(bad))}; the slug is immutable")
    changes = {k: v for k, v in fields.items() if v is not None}
    if "name" in changes:
        changes["name"] = str(changes["name"]).strip()
        if not changes["name"]:
            raise InvalidInput("board name is empty")
    if "settings" in changes:
        changes["settings"] = dump_json(check_settings(settings_schema.board_settings(changes["settings"])))
    return changes


def update_in(tx: Tx, slug: str, changes: dict[str, Any], actor: str | None) -> Row:
    """Store ``changes`` (from :func:`board_changes`) inside ``tx``; the board's row as stored."""
    before = _get(tx, slug)
    if changes:
        sets = ", ".join(f"{k} = :{k}" for k in changes)
        tx.execute(f"UPDATE boards SET {sets} WHERE slug = :slug", {**changes, "slug": slug})
        kind = "board_renamed" if "name" in changes else "edited"
        tx.event(slug, None, kind, {"fields": sorted(changes)}, actor=actor)
        if "settings" in changes and _own_supervision(before.get("settings")) != _own_supervision(changes["settings"]):
            from . import budgets

            budgets.rebuild_board_in(tx, slug)  # supervision runs moved between the two budgets
    return _get(tx, slug)


def _own_supervision(settings: object) -> bool:
    """``settings``: a board's settings (a JSON text or a mapping; None for none)."""
    try:
        value: object = json.loads(settings) if isinstance(settings, str) else settings or {}
    except ValueError:
        return True
    return not (isinstance(value, dict) and value.get("supervision_budget") is False)


def update(db: Database, slug: str, *, actor: str | None = None, **fields: Any) -> Row:
    """Change a board's display fields or settings (the slug is immutable)."""
    return board_out(db.write(update_in, model.board_slug(slug), board_changes(**fields), actor))


def rename(db: Database, slug: str, name: str, *, actor: str | None = None) -> Row:
    return update(db, slug, name=name, actor=actor)


def archive_dir(home: Path | None, slug: str) -> Path | None:
    """Where :func:`archive_in` records that a board's folders go: ``boards/_archived/<slug>-<ts>/``."""
    if home is None:
        return None
    return home / "boards" / "_archived" / f"{slug}-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}"


def archive_in(tx: Tx, slug: str, dest: Path | None, actor: str | None) -> Row:
    """Archive a board inside ``tx`` (its folders are moved by :func:`move_archived` once committed)."""
    row = _get(tx, slug)
    if row["archived"]:
        raise Conflict(f"board {slug!r} is already archived")
    running = tx.scalar("SELECT COUNT(*) FROM tasks WHERE board = :b AND status = 'running'", {"b": slug})
    if running:
        raise Conflict(f"board {slug!r} has {running} running task(s); reclaim or finish them first")
    now = time.time()
    tx.execute(
        "UPDATE boards SET archived = 1, archived_at = :now, archived_path = :p WHERE slug = :s",
        {"now": now, "p": str(dest) if dest else None, "s": slug},
    )
    tx.event(slug, None, "board_archived", {"path": str(dest) if dest else None}, actor=actor, at=now)
    return _get(tx, slug)


def move_archived(home: Path | None, slug: str, dest: Path | None) -> None:
    """After an archive committed: move the board's folders to ``dest``."""
    if home is not None and dest is not None:
        src = board_dir(home, slug)
        if src.exists():
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(src), dest)


def archive(db: Database, slug: str, *, home: Path | None = None, actor: str | None = None) -> Row:
    """Hide a board (recoverable); its folders move under ``boards/_archived/<slug>-<ts>/``."""
    slug = model.board_slug(slug)
    dest = archive_dir(home, slug)
    out = db.write(archive_in, slug, dest, actor)
    move_archived(home, slug, dest)
    return board_out(out)


def restore_in(tx: Tx, slug: str, actor: str | None) -> Row:
    """Restore an archived board inside ``tx``; the row as it was (with its ``archived_path``)."""
    row = _get(tx, slug)
    if not row["archived"]:
        raise Conflict(f"board {slug!r} is not archived")
    tx.execute("UPDATE boards SET archived = 0, archived_at = NULL, archived_path = NULL WHERE slug = :s", {"s": slug})
    tx.event(slug, None, "board_restored", {}, actor=actor)
    return row


def move_restored(home: Path | None, slug: str, archived: Row) -> None:
    """After a restore committed: move the board's folders back from where they were archived."""
    if home is not None and archived.get("archived_path"):
        src = Path(archived["archived_path"])
        if src.exists() and not board_dir(home, slug).exists():
            board_dir(home, slug).parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(src), board_dir(home, slug))


def restore(db: Database, slug: str, *, home: Path | None = None, actor: str | None = None) -> BoardRow:
    slug = model.board_slug(slug)
    move_restored(home, slug, db.write(restore_in, slug, actor))
    return get(db, slug)


def delete(db: Database, slug: str, *, home: Path | None = None, actor: str | None = None) -> Row:
    """Remove a board and everything on it, for good. The answer's ``worktrees`` (``id``, ``path``,
    ``branch``) are where its worktree tasks worked in its target, for ``dispatch.gc.after_board_delete``."""
    slug = model.board_slug(slug)

    def _w(tx: Tx) -> Row:
        row = _get(tx, slug)
        running = tx.scalar("SELECT COUNT(*) FROM tasks WHERE board = :b AND status = 'running'", {"b": slug})
        if running:
            raise Conflict(f"board {slug!r} has {running} running task(s); reclaim or finish them first")
        # where its tasks worked outside the home (a worktree and branch in the board's target):
        # the surfaces hand this to dispatch.gc.after_board_delete
        row = {**row, "worktrees": [
            {"id": t["id"], "path": t["workspace_path"], "branch": t["branch_name"]}
            for t in tx.all("SELECT id, workspace_path, branch_name FROM tasks WHERE board = :b "
                            "AND workspace_kind = 'worktree' ORDER BY id", {"b": slug})]}
        for table in _SCOPED_TABLES:
            if table == "task_events":
                # the newest event row (of any board) is never deleted: SQLite hands out
                # max(id) + 1, and reusing an id a reader has seen would hide the next event
                tx.execute(
                    "DELETE FROM task_events WHERE board = :b AND id < (SELECT MAX(id) FROM task_events)",
                    {"b": slug},
                )
                continue
            tx.execute(f"DELETE FROM {table} WHERE board = :b", {"b": slug})
        tx.execute("DELETE FROM boards WHERE slug = :s", {"s": slug})
        # the log keeps one record of the board: its deletion (the kept newest row becomes it)
        now = time.time()
        payload = dump_json({"slug": slug, "name": row["name"]})
        tx.execute(
            "UPDATE task_events SET task_id = NULL, run_id = NULL, kind = 'board_deleted', payload = :p, "
            "actor = :a, created_at = :now WHERE board = :b",
            {"p": payload, "a": actor, "now": now, "b": slug},
        )
        if tx.rowcount == 0:
            tx.event(slug, None, "board_deleted", {"slug": slug, "name": row["name"]}, actor=actor, at=now)
        return row

    row = db.write(_w)
    if home is not None:
        for folder in (board_dir(home, slug), Path(row["archived_path"]) if row.get("archived_path") else None):
            if folder is not None and folder.exists():
                shutil.rmtree(folder, ignore_errors=True)
    return {**board_out(row), "worktrees": row["worktrees"]}


def set_named(db: Database, board: str, key: str, name: str, value: str | None, *,
              actor: str | None = None) -> dict[str, str]:
    """Add or replace (``value``) or remove (None) one named check (``key="checks"``) or named
    path (``key="paths"``) in the board's settings, in one transaction. Returns the new set."""
    if key not in host_access.HOST_SETTINGS:
        raise InvalidInput(f"unknown host setting {key!r}: use {' or '.join(host_access.HOST_SETTINGS)}")
    slug = model.board_slug(board)
    name = host_access.entry_name(name, key.rstrip("s"))
    if value is not None:
        value = host_access.check_command(value) if key == "checks" else host_access.path_spec(value)
        if key == "paths":
            host_access.refuse_sensitive(value.partition(":")[2], db.settings.home)

    def _w(tx: Tx) -> dict[str, str]:
        settings = board_settings(tx, slug)
        named = host_access.named(settings, key)
        if value is None:
            if name not in named:
                raise InvalidInput(f"board {slug!r} has no named {key.rstrip('s')} {name!r}")
            named.pop(name)
        else:
            named[name] = value
        settings[key] = named
        update_in(tx, slug, board_changes(settings=settings), actor)
        return named

    return db.write(_w)
