"""The board from chat: which chat users may act, and the thread a task came from.

A chat user (``platform``, ``user_id``) is linked to a role (``admin``, ``member``, ``viewer``,
the roles of API tokens) and optionally one board; the chat routes check their commands with
the same rules as a token of that role and scope. A task created from a chat thread remembers
the thread, and a task subscription to it (created in the same transaction) brings its
notifications back there through the notifier.
"""

from __future__ import annotations

import re
import time

from ..domain import model
from ..domain.errors import InvalidInput, NotFound
from ..store.engine import Database, Row, Tx
from .notifications import subscribe_in
from .tasks import NewTask, create_in
from .tokens import ROLES

PLATFORMS = ("slack", "discord", "telegram")
USER_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@:-]{0,63}$")


def platform_name(value: str) -> str:
    name = (value or "").strip().lower()
    if name not in PLATFORMS:
        raise InvalidInput(f"unknown chat platform {value!r}: use one of {', '.join(PLATFORMS)}")
    return name


def user_name(value: str) -> str:
    user = (value or "").strip()
    if not USER_RE.match(user):
        raise InvalidInput(f"invalid chat user id {value!r}: the platform's user id (1-64 letters, digits, "
                           "'.', '_', '-', ':' or '@'), such as U024BE7LH on Slack")
    return user


def _out(row: Row) -> Row:
    return {"platform": row["platform"], "user_id": row["user_id"], "role": row["role"],
            "board": row.get("board"), "created_by": row.get("created_by"), "created_at": row["created_at"]}


def link(db: Database, platform: str, user_id: str, *, role: str, board: str | None = None,
         actor: str | None = None) -> Row:
    """Let a chat user act with ``role`` on ``board`` (``None``: every board); linking the same
    user again replaces their role and board."""
    name, user = platform_name(platform), user_name(user_id)
    if role not in ROLES:
        raise InvalidInput(f"unknown role {role!r}: use one of {', '.join(ROLES)}")
    slug = model.board_slug(board) if board else None

    def _w(tx: Tx) -> Row:
        if slug is not None and tx.one("SELECT slug FROM boards WHERE slug = :s", {"s": slug}) is None:
            raise NotFound(f"no board {slug!r}; list boards with `agentboard boards list`")
        params = {"p": name, "u": user, "r": role, "b": slug, "a": actor, "now": time.time()}
        if tx.one("SELECT role FROM chat_links WHERE platform = :p AND user_id = :u", params) is None:
            tx.execute("INSERT INTO chat_links (platform, user_id, role, board, created_by, created_at) "
                       "VALUES (:p, :u, :r, :b, :a, :now)", params)
        else:
            tx.execute("UPDATE chat_links SET role = :r, board = :b, created_by = :a, created_at = :now "
                       "WHERE platform = :p AND user_id = :u", params)
        row = tx.one("SELECT * FROM chat_links WHERE platform = :p AND user_id = :u", params)
        assert row is not None
        return _out(row)

    return db.write(_w)


def unlink(db: Database, platform: str, user_id: str) -> Row:
    """The chat user may no longer act (their link, as it was)."""
    name, user = platform_name(platform), user_name(user_id)

    def _w(tx: Tx) -> Row:
        params = {"p": name, "u": user}
        row = tx.one("SELECT * FROM chat_links WHERE platform = :p AND user_id = :u", params)
        if row is None:
            raise NotFound(f"no {name} user {user!r} is linked; see `agentboard chat links`")
        tx.execute("DELETE FROM chat_links WHERE platform = :p AND user_id = :u", params)
        return _out(row)

    return db.write(_w)


def links(db: Database, platform: str | None = None) -> list[Row]:
    """The linked chat users (of one platform), by platform and user id."""
    if platform is None:
        rows = db.read(lambda tx: tx.all("SELECT * FROM chat_links ORDER BY platform, user_id"))
    else:
        name = platform_name(platform)
        rows = db.read(lambda tx: tx.all(
            "SELECT * FROM chat_links WHERE platform = :p ORDER BY user_id", {"p": name}))
    return [_out(r) for r in rows]


def find(db: Database, platform: str, user_id: str) -> Row | None:
    """The link of a chat user, or ``None`` when they are not linked."""
    if platform not in PLATFORMS or not USER_RE.match(user_id or ""):
        return None
    def _r(tx: Tx) -> Row | None:
        return tx.one("SELECT * FROM chat_links WHERE platform = :p AND user_id = :u", {"p": platform, "u": user_id})

    row = db.read(_r)
    return None if row is None else _out(row)


def thread_of(db: Database, task_id: str) -> Row | None:
    """The chat thread ``task_id`` was created from, or ``None``."""
    def _r(tx: Tx) -> Row | None:
        return tx.one("SELECT * FROM chat_threads WHERE task_id = :t", {"t": task_id})

    return db.read(_r)


def create_in_thread(db: Database, new: NewTask, *, platform: str, channel: str, thread: str,
                     target: str, display: str) -> Row:
    """Create ``new`` from a chat thread in one transaction: the task, the thread it came from,
    and a task subscription to ``target`` (the thread as a notification target, ``display`` as
    shown) so its notifications are posted back there."""
    name = platform_name(platform)
    if not channel or len(channel) > 128 or len(thread) > 256:
        raise InvalidInput("a chat thread needs a channel (at most 128 characters) and a thread id "
                           "(at most 256; empty: the channel itself)")

    def _w(tx: Tx) -> Row:
        task = create_in(tx, new)
        if task.get("existing"):
            return task
        tx.execute("INSERT INTO chat_threads (task_id, board, platform, channel, thread, created_at) "
                   "VALUES (:t, :b, :p, :c, :th, :now)",
                   {"t": task["id"], "b": new.board, "p": name, "c": channel, "th": thread, "now": time.time()})
        subscribe_in(tx, new.board, "task", task["id"], target, display, actor=new.actor, trusted=True)
        return task

    return db.write(_w)
