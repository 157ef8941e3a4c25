"""API tokens: created once, stored only as SHA-256 hashes, checked on every request.

Three roles for people (``admin``, ``member``, ``viewer``), optionally scoped to some boards,
and run tokens for workers: issued by the dispatcher for one run, valid only for that run's
board and only while the run is open.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import time
from typing import Any

from ..domain import model
from ..domain.errors import Conflict, InvalidInput, NotFound, Unauthorized
from ..store.engine import Database, Row, Tx, dump_json, in_list

ROLES = ("admin", "member", "viewer")
RUN_ROLE = "run"
PREFIX = "abt_"
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,63}$")

#: how often (seconds) ``last_used_at`` is refreshed for one token by one process
TOUCH_EVERY = 60.0
_touched: dict[int, float] = {}


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_token() -> str:
    return PREFIX + secrets.token_urlsafe(32)


def token_out(row: Row) -> Row:
    """A token row as shown to administrators: never the hash."""
    out = {k: v for k, v in row.items() if k != "token_hash"}
    try:
        out["boards"] = json.loads(row.get("boards") or "[]")
    except ValueError:
        out["boards"] = []
    out["revoked"] = row.get("revoked_at") is not None
    return out


def _name(value: str) -> str:
    name = (value or "").strip()
    if not NAME_RE.match(name):
        raise InvalidInput(
            f"invalid token name {value!r}: use 1-64 letters, digits, '.', '-', '_', ':' or '@'"
        )
    return name


def _insert(tx: Tx, name: str, token: str, role: str, boards: list[str], run_id: int | None,
            task_id: str | None, expires_at: float | None) -> Row:
    now = time.time()
    tid = tx.scalar(
        "INSERT INTO tokens (name, token_hash, role, boards, run_id, task_id, created_at, expires_at) "
        "VALUES (:n, :h, :r, :b, :run, :task, :now, :exp) RETURNING id",
        {"n": name, "h": hash_token(token), "r": role, "b": dump_json(boards), "run": run_id,
         "task": task_id, "now": now, "exp": expires_at},
    )
    row = tx.one("SELECT * FROM tokens WHERE id = :id", {"id": tid})
    assert row is not None
    return row


def create(
    db: Database, name: str, *, role: str = "member", boards: list[str] | tuple[str, ...] = (),
    expires_at: float | None = None,
) -> Row:
    """Create a token for a person or a script. The plain token is in the result, once."""
    name = _name(name)
    if role not in ROLES:
        raise InvalidInput(f"unknown role {role!r}: use one of {', '.join(ROLES)}")
    slugs = list(dict.fromkeys(model.board_slug(b) for b in boards))
    token = new_token()

    def _w(tx: Tx) -> Row:
        for slug in slugs:
            if tx.one("SELECT slug FROM boards WHERE slug = :s", {"s": slug}) is None:
                raise NotFound(f"no board {slug!r}; list boards with `agentboard boards list`")
        clash = tx.one(
            "SELECT id FROM tokens WHERE name = :n AND revoked_at IS NULL AND run_id IS NULL", {"n": name}
        )
        if clash is not None:
            raise Conflict(f"a token named {name!r} already exists; revoke it first or pick another name")
        return _insert(tx, name, token, role, slugs, None, None, expires_at)

    out = token_out(db.write(_w))
    out["token"] = token
    return out


def create_run_token(db: Database, board: str, task_id: str, run_id: int) -> str:
    """A token for one worker run: its board only, valid while the run is open."""
    token = new_token()

    def _w(tx: Tx) -> None:
        run = tx.one("SELECT board, task_id, status FROM task_runs WHERE id = :r", {"r": int(run_id)})
        if run is None or run["board"] != board or run["task_id"] != task_id:
            raise NotFound(f"no run {run_id} of task {task_id} on board {board!r}")
        if run["status"] != "open":
            raise Conflict(f"run {run_id} is closed; a run token is only issued for an open run")
        _insert(tx, f"run:{int(run_id)}", token, RUN_ROLE, [board], int(run_id), task_id, None)

    db.write(_w)
    return token


_INSERT_RUN_TOKEN = (
    "INSERT INTO tokens (name, token_hash, role, boards, run_id, task_id, created_at, expires_at) "
    "VALUES (:n, :h, :r, :b, :run, :task, :now, NULL)"
)


def create_run_tokens(db: Database, board: str, runs: list[tuple[str, int]]) -> dict[int, str]:
    """Tokens for several worker runs of ``board`` (``(task_id, run_id)`` pairs) in one
    transaction — what a dispatcher starting a batch of workers asks for. A run that is not an
    open run of that task on that board gets none (it is left out of the answer)."""
    if not runs:
        return {}
    return db.write(create_run_tokens_in, board, runs)


def create_run_tokens_in(tx: Tx, board: str, runs: list[tuple[str, int]]) -> dict[int, str]:
    """:func:`create_run_tokens` inside the caller's transaction (a dispatcher's claim)."""
    if not runs:
        return {}
    issued = {int(run_id): (task_id, new_token()) for task_id, run_id in runs}
    params: dict[str, Any] = {}
    found = tx.all("SELECT id, board, task_id, status FROM task_runs WHERE id IN "
                   + in_list("r", list(issued), params), params)
    ok = {int(r["id"]) for r in found
          if r["board"] == board and r["status"] == "open" and r["task_id"] == issued[int(r["id"])][0]}
    now = time.time()
    boards = dump_json([board])
    tx.executemany(_INSERT_RUN_TOKEN, [
        {"n": f"run:{rid}", "h": hash_token(issued[rid][1]), "r": RUN_ROLE, "b": boards, "run": rid,
         "task": issued[rid][0], "now": now} for rid in sorted(ok)])
    return {rid: issued[rid][1] for rid in ok}


def list_tokens(db: Database, *, include_revoked: bool = False, include_runs: bool = False) -> list[Row]:
    where = []
    if not include_revoked:
        where.append("revoked_at IS NULL")
    if not include_runs:
        where.append("run_id IS NULL")
    sql = "SELECT * FROM tokens" + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY id"
    return [token_out(r) for r in db.read(lambda tx: tx.all(sql))]


def revoke(db: Database, name_or_id: str | int) -> list[Row]:
    """Revoke the active token(s) with this name (or this id)."""
    key = str(name_or_id).strip()

    def _w(tx: Tx) -> list[Row]:
        if re.fullmatch(r"[0-9]{1,15}", key):
            rows = tx.all("SELECT * FROM tokens WHERE id = :i AND revoked_at IS NULL", {"i": int(key)})
        else:
            rows = tx.all("SELECT * FROM tokens WHERE name = :n AND revoked_at IS NULL", {"n": key})
        if not rows:
            raise NotFound(f"no active token {key!r}; see `agentboard tokens list`")
        now = time.time()
        for r in rows:
            tx.execute("UPDATE tokens SET revoked_at = :now WHERE id = :i", {"now": now, "i": r["id"]})
            r["revoked_at"] = now
        return rows

    return [token_out(r) for r in db.write(_w)]


def _lookup(tx: Tx, digest: str) -> Row | None:
    return tx.one(
        "SELECT k.id, k.name, k.role, k.boards, k.run_id, k.task_id, k.expires_at, k.revoked_at, "
        "k.last_used_at, r.status AS run_status, r.board AS run_board, r.profile AS run_profile, "
        "p.orchestrator AS orchestrator, t.purpose AS task_purpose "
        "FROM tokens k LEFT JOIN task_runs r ON r.id = k.run_id "
        "LEFT JOIN profiles p ON p.name = r.profile "
        "LEFT JOIN tasks t ON t.id = k.task_id "
        "WHERE k.token_hash = :h",
        {"h": digest},
    )


def verify(db: Database, token: str | None) -> Row:
    """The identity behind ``token``; :class:`Unauthorized` when it is unknown, revoked or expired.

    The result has ``id, name, role, boards, run_id, task_id, orchestrator, supervisor`` (the
    profile, for the run token of a supervision task: its board-wide tools).
    """
    if not token:
        raise Unauthorized("no token: send 'Authorization: Bearer <token>' or log in with the URL `agentboard serve` prints")
    if not token.startswith(PREFIX) or len(token) > 200:
        raise Unauthorized("invalid token")
    row = db.read(_lookup, hash_token(token))
    if row is None:
        raise Unauthorized("invalid token")
    now = time.time()
    if row["revoked_at"] is not None:
        raise Unauthorized(f"token {row['name']!r} was revoked")
    if row["expires_at"] is not None and row["expires_at"] <= now:
        raise Unauthorized(f"token {row['name']!r} has expired")
    if row["role"] == RUN_ROLE and row["run_status"] != "open":
        raise Unauthorized(f"run {row['run_id']} is closed; its token is no longer valid")
    try:
        boards = json.loads(row["boards"] or "[]")
    except ValueError:
        boards = []
    if row["role"] == RUN_ROLE:
        boards = [row["run_board"]]
    last = _touched.get(row["id"], row["last_used_at"] or 0.0)
    if now - last >= TOUCH_EVERY:
        _touched[row["id"]] = now
        try:
            db.write(lambda tx: tx.execute(
                "UPDATE tokens SET last_used_at = :now WHERE id = :i", {"now": now, "i": row["id"]}))
        except Exception:  # pragma: no cover - bookkeeping must never refuse a valid token
            pass
    return {
        "id": row["id"], "name": row["name"], "role": row["role"], "boards": boards,
        "run_id": row["run_id"], "task_id": row["task_id"],
        "profile": row["run_profile"], "orchestrator": bool(row["orchestrator"]),
        "supervisor": row["run_profile"] if row["role"] == RUN_ROLE and row["task_purpose"] == "supervision" else None,
    }


def still_valid(db: Database, token_ids: list[int]) -> set[int]:
    """Which of ``token_ids`` are still valid (not revoked, not expired, a run token's run still
    open), in one read: how a live connection notices a revocation or the end of a run."""
    if not token_ids:
        return set()
    params: dict[str, Any] = {"now": time.time()}
    sql = (
        "SELECT k.id FROM tokens k LEFT JOIN task_runs r ON r.id = k.run_id "
        f"WHERE k.id IN {in_list('k', token_ids, params)} AND k.revoked_at IS NULL "
        "AND (k.expires_at IS NULL OR k.expires_at > :now) "
        f"AND (k.role != '{RUN_ROLE}' OR r.status = 'open')"
    )
    return {int(r["id"]) for r in db.read(lambda tx: tx.all(sql, params))}


def ensure_local_admin(db: Database, name: str, saved: str | None) -> tuple[str, bool]:
    """Reuse the saved admin token if it still works, else revoke ``name`` and issue a new one.

    Returns ``(token, created)``.
    """
    if saved:
        try:
            who = verify(db, saved)
            if who["role"] == "admin" and not who["boards"]:
                return saved, False
        except Unauthorized:
            pass
    try:
        revoke(db, name)
    except NotFound:
        pass
    return str(create(db, name, role="admin")["token"]), True


def describe(who: dict[str, Any]) -> str:
    scope = ", ".join(who.get("boards") or []) or "every board"
    return f"{who['name']} ({who['role']}, {scope})"


__all__ = [
    "ROLES", "RUN_ROLE", "create", "create_run_token", "ensure_local_admin", "hash_token",
    "list_tokens", "revoke", "verify",
]
