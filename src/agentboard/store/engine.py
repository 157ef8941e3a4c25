"""Connections and transactions for SQLite and PostgreSQL.

One module on purpose: the transaction, the database that runs it, and the retry and error rules
they share are one thing; apart, each would reach into the other's internals.

The hot kernel verbs run prepared SQL text on the DB-API connection (``:name`` parameters,
rewritten once per statement for psycopg). SQLAlchemy provides the engine, the pool, the
dialects and the migrations.

SQLite: WAL, ``synchronous=FULL``, a busy timeout and ``BEGIN IMMEDIATE`` for writes, with a
bounded retry so callers never see "database is locked".

PostgreSQL: writers never wait for each other unless they touch the same rows. Each event row
carries the id of the transaction that wrote it (``xid``, filled by the column's default with
``pg_current_xact_id()``); readers of the log only read events whose transaction is older than
every transaction of the database still running (:func:`pg_event_horizon`) and order them by
``(xid, id)`` (``kernel.queries.event_order``), so a follower never skips an event that commits
late. A write transaction runs on libpq's pipeline (``pgwire``): statements whose results are
not needed (event rows, ``BEGIN``, ``COMMIT``) travel with the next statement that needs an
answer, so a verb costs one round trip per answer it waits for plus the commit; listeners hear
of commits from the process's notifier thread (``pgnotify``). Reads run in autocommit (one round
trip per statement), or on the pipeline when the statements are sent before any is read
(:meth:`Database.read_pipelined`: one round trip for all). Serialization failures, deadlocks,
lock timeouts and a unique violation from a race are retried.
"""

from __future__ import annotations

import errno
import itertools
import json
import os
import random
import re
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import orjson

from ..config import DATABASE_URL_EXPECTED, Settings, database_url_ok, default_home, shown_url
from ..domain.errors import AgentboardError, InvalidInput, Unavailable, one_line

if TYPE_CHECKING:  # SQLAlchemy loads only when an engine is needed: a worker verb on SQLite
    import sqlalchemy as sa  # never imports it (about 120 ms of start-up)

    from .pgnotify import Notifier
    from .pgpool import PgPool
    from .pgwire import Wire

T = TypeVar("T")
Row = dict[str, Any]

_PARAM_RE = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")
_WRITE_DEADLINE = 60.0
#: how often a unique violation is retried: a check-then-insert that lost a race sees the winner's
#: row on the next attempt and answers with the kernel's own error
_UNIQUE_RETRIES = 3

#: PostgreSQL: the transaction id below which the event log of this database is final. Every
#: transaction of this database with a smaller id has ended (``task_events.xid`` holds the writing
#: transaction's ``pg_current_xact_id()``), so no event can still appear below it. It is the
#: oldest transaction id still running in this database (or prepared), capped by the snapshot's
#: ``xmax`` (transactions that get an id later get a larger one); running ids are 32-bit in
#: ``pg_stat_activity`` and are widened against ``xmax``. Transactions of other databases on the
#: same server do not hold it back, nor do the notifiers' (``pgnotify``: they write no events, and
#: one sending a notification for an earlier commit must not hide a later one). It must be read in
#: a statement *before* the one that reads the events: a transaction that ends between the two is
#: then visible to the second.
PG_EVENT_HORIZON_SQL = (
    "SELECT LEAST(s.x8, MIN(s.x8 - mod(mod(s.x8, 4294967296) - r.xid::text::bigint + 4294967296, 4294967296))) AS h "
    "FROM (SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint AS x8) AS s "
    "LEFT JOIN (SELECT backend_xid AS xid FROM pg_stat_activity WHERE backend_xid IS NOT NULL "
    "AND datname = current_database() AND application_name IS DISTINCT FROM 'agentboard-notify' "
    "UNION ALL SELECT transaction FROM pg_prepared_xacts WHERE database = current_database()) AS r ON TRUE "
    "GROUP BY s.x8"
)


def pg_event_horizon(tx: Tx) -> int:
    """:data:`PG_EVENT_HORIZON_SQL`, read now (call it before the statement that reads events)."""
    return int(tx.scalar(PG_EVENT_HORIZON_SQL))

_open: weakref.WeakSet[Database] = weakref.WeakSet()
_ENCODER = json.JSONEncoder(separators=(",", ":"), default=str)


#: what orjson leaves to :data:`_ENCODER`: a timestamp, a dataclass or a subclass of a JSON type
#: raises rather than being written its own way (the encoder writes its ``str``)
_ORJSON_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_SUBCLASS


_Wire: type[Wire] | None = None


def _wire() -> type[Wire]:
    """``pgwire.Wire``, imported on first use (SQLite never loads psycopg) and kept: an import
    statement in a function runs the import machinery at every call of a one-statement verb."""
    global _Wire
    if _Wire is None:
        from .pgwire import Wire

        _Wire = Wire
    return _Wire


def dump_json(value: Any) -> str:
    """The JSON text the kernel stores (event payloads, JSON columns): compact, and anything
    JSON has no type for (a path, a timestamp object) written as its ``str``.

    orjson writes it (every event pays for this) where its text holds the same JSON as the
    encoder's (a small float may be spelled out: ``0.00001`` for ``1e-05``): plain ASCII with no
    ``null``. Otherwise the encoder does: it escapes other characters as ``\\uXXXX`` and writes
    a float that is not finite as ``NaN``/``Infinity``, where orjson writes ``null``."""
    try:
        text: str = orjson.dumps(value, option=_ORJSON_OPTIONS).decode()
    except TypeError:
        return _ENCODER.encode(value)
    if text.isascii() and "null" not in text:
        return text
    return _ENCODER.encode(value)


#: PostgreSQL: every session of agentboard's own carries ``application_name`` ``agentboard <pid>@<host
#: name>`` (the notifiers' :data:`.pgnotify.APPLICATION`), so ``pg_stat_activity`` tells which
#: process holds a session, and ``migrate-to`` which other processes use the database it copies
APPLICATION_PREFIX = "agentboard "


def application_name() -> str:
    """This process's ``application_name`` (:data:`APPLICATION_PREFIX`; at most 63 bytes)."""
    import socket

    return f"{APPLICATION_PREFIX}{os.getpid()}@{socket.gethostname()}"[:63]


def unescaped_at(url: str) -> bool:
    """Whether a server URL's user name or password holds an ``@`` that is not percent-encoded
    (``postgresql://u:se@cret@host/db``): the host would be read from inside the password, and a
    driver's error would show that part of it."""
    scheme, sep, rest = url.partition("://")
    return bool(sep) and scheme != "sqlite" and rest.split("?", 1)[0].count("@") > 1


def _after_fork() -> None:
    for db in list(_open):
        db._forked()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


#: the columns a verb's own statement fills when it inserts an event (``INSERT INTO task_events
#: EVENT_COLUMNS SELECT ...``, then :meth:`Tx.events_written`); the rest take their defaults
EVENT_COLUMNS = "(board, task_id, run_id, kind, payload, actor, created_at)"
#: the condition of the partial index ``ix_tasks_board_assignee`` (``store.schema``): the tasks
#: ready to be claimed. A query meant to read that index has this term word for word: SQLite's
#: planner uses a partial index only for a query whose condition contains the index's own
CLAIMABLE = "status = 'ready'"
#: the tasks a dispatcher's pass acts on without a worker of their own (``ix_tasks_waiting``'s
#: predicate, word for word in the queries meant to read it)
WAITING = "status IN ('review', 'triage') OR (status = 'running' AND race_until IS NOT NULL)"
_EVENT_INSERT = (
    f"INSERT INTO task_events {EVENT_COLUMNS} "
    "VALUES (:board, :task_id, :run_id, :kind, :payload, :actor, :at)"
)
def _sqlite_dict(row: sqlite3.Row) -> Row:
    """``dict(row)`` without its cost: ``dict`` looks every column up by name, a scan of the
    row's names each (a task's 51 columns: ~1,300 name comparisons); zipping the names with the
    values reads each once. A name that appears twice (``SELECT t.*, r.*``) keeps its first
    column's value, as ``dict(row)`` does."""
    keys = row.keys()
    out = dict(zip(keys, row, strict=False))
    return out if len(out) == len(keys) else dict(row)


class Tx:
    """One transaction on one DB-API connection."""

    __slots__ = ("db", "conn", "cur", "wrote_events", "boards_touched", "wakes_hosts", "_pg", "wire")

    def __init__(self, db: Database, conn: Any, wire: Wire | None = None) -> None:
        self.db = db
        self.conn = conn
        self._pg = db.dialect == "postgresql"
        #: the pipeline of a PostgreSQL write transaction (None otherwise: reads, SQLite)
        self.wire = wire
        self.cur: Any
        if wire is not None:
            self.cur = None
        elif self._pg:
            from psycopg.rows import dict_row

            self.cur = conn.cursor(row_factory=dict_row)
        else:
            self.cur = conn.cursor()
        self.wrote_events = False
        self.boards_touched: set[str] = set()
        #: whether its commit may give another host's dispatcher something to do (PostgreSQL's
        #: notification); False for a dispatcher's own claims and records of its workers, which
        #: only this process's listeners hear of (other hosts' passes have nothing new to do)
        self.wakes_hosts = True

    def execute(self, sql: str, params: dict[str, Any] | None = None) -> Any:
        if self.wire is not None:
            return self.wire.send(sql, params)
        if self._pg:
            sql = self.db.pg_sql(sql)
        if params is None:
            return self.cur.execute(sql)
        return self.cur.execute(sql, params)

    def executemany(self, sql: str, seq: list[dict[str, Any]]) -> None:
        if self.wire is not None:
            self.wire.send_many(sql, seq)
            return
        if self._pg:
            sql = self.db.pg_sql(sql)
        self.cur.executemany(sql, seq)

    def one(self, sql: str, params: dict[str, Any] | None = None) -> Row | None:
        if self.wire is not None:
            rows = self.wire.rows(self.wire.send(sql, params))
            return rows[0] if rows else None
        self.execute(sql, params)
        row = self.cur.fetchone()
        if row is None:
            return None
        return row if self._pg else _sqlite_dict(row)

    def all(self, sql: str, params: dict[str, Any] | None = None) -> list[Row]:
        if self.wire is not None:
            return self.wire.rows(self.wire.send(sql, params))
        self.execute(sql, params)
        rows = self.cur.fetchall()
        return rows if self._pg else [_sqlite_dict(r) for r in rows]

    def scalar(self, sql: str, params: dict[str, Any] | None = None) -> Any:
        if self.wire is not None:
            rows = self.wire.rows(self.wire.send(sql, params))
            return next(iter(rows[0].values())) if rows else None
        self.execute(sql, params)
        row = self.cur.fetchone()
        if row is None:
            return None
        if self._pg:
            return next(iter(row.values()))
        return row[0]

    def later(self, sql: str, params: dict[str, Any] | None = None) -> Callable[[], list[Row]]:
        """Send a statement whose rows are read later (call the answer): on a PostgreSQL
        pipeline (:meth:`Database.read_pipelined`, a write) every statement sent before the first
        is read travels in one round trip; elsewhere it runs now."""
        wire = self.wire
        if wire is not None:
            sent = wire.send(sql, params)
            return lambda: wire.rows(sent)
        rows = self.all(sql, params)
        return lambda: rows

    def rows_of(self, sent: Any) -> list[Row]:
        """PostgreSQL: the rows of a statement :meth:`execute` sent earlier in this transaction
        (read with whatever statement was read after it: no round trip of its own)."""
        assert self.wire is not None, "rows_of: a PostgreSQL write transaction only"
        return self.wire.rows(sent)

    @property
    def rowcount(self) -> int:
        """Rows the last statement changed (on PostgreSQL a write waits for its answer here)."""
        if self.wire is not None:
            return self.wire.last_rowcount()
        return int(self.cur.rowcount)

    def events_written(self, board: str) -> None:
        """A statement of the verb's own inserted its events (see :data:`EVENT_COLUMNS`): the
        commit is signalled like one of :meth:`event`'s."""
        self.wrote_events = True
        self.boards_touched.add(board)

    def events(self, board: str, items: Sequence[tuple[str | None, str, dict[str, Any] | None, int | None,
                                                     str | None, float]]) -> None:
        """Append several event rows in one statement: ``(task_id, kind, payload, run_id, actor,
        at)`` each, in their order (what :meth:`event` writes for each)."""
        if not items:
            return
        self.wrote_events = True
        self.boards_touched.add(board)
        params: dict[str, Any] = {}
        rows = values_list("e", [(board, task_id, run_id, kind, dump_json(payload or {}), actor, at)
                                 for task_id, kind, payload, run_id, actor, at in items], params)
        # a plain multi-row VALUES: each value takes its column's type (a NULL run id too)
        self.execute(f"INSERT INTO task_events {EVENT_COLUMNS} VALUES {rows}", params)

    def event(
        self,
        board: str,
        task_id: str | None,
        kind: str,
        payload: dict[str, Any] | None = None,
        *,
        run_id: int | None = None,
        actor: str | None = None,
        at: float | None = None,
    ) -> None:
        """Append one event row in this transaction."""
        self.wrote_events = True
        self.boards_touched.add(board)
        self.execute(
            _EVENT_INSERT,
            {
                "board": board,
                "task_id": task_id,
                "run_id": run_id,
                "kind": kind,
                "payload": dump_json(payload or {}),
                "actor": actor,
                "at": at if at is not None else time.time(),
            },
        )


class _PgToken:
    """What :meth:`Database._release` needs to give a PostgreSQL connection back."""

    __slots__ = ("pool", "conn")

    def __init__(self, pool: PgPool, conn: Any) -> None:
        self.pool = pool
        self.conn = conn


class Database:
    """A board database: SQLite file or PostgreSQL server, and the settings its verbs follow.

    ``settings`` (claim TTL, failure limit, default assignee, ...) is what the kernel reads;
    without it the defaults of :class:`agentboard.config.Settings` apply, with the home being
    the SQLite file's folder (or the default home for a server URL).
    """

    def __init__(self, url: str, *, settings: Settings | None = None) -> None:
        if not database_url_ok(url, sqlite_path=False):  # never another database read as a SQLite path
            raise InvalidInput(f"invalid database URL {shown_url(url)!r}: must be {DATABASE_URL_EXPECTED}")
        self.settings: Settings = settings if settings is not None else Settings(home=_home_for(url))
        for name, value in (("database URL", url), ("pg_listen_url", self.settings.pg_listen_url)):
            if value and unescaped_at(value):
                raise InvalidInput(f"the {name} {shown_url(value)} has an '@' in its user name or password: "
                                   "write each such '@' as %40 (postgresql://USER:PASS%40WORD@HOST/NAME)")
        self.url = url
        self.dialect = "postgresql" if url.startswith(("postgresql", "postgres")) else "sqlite"
        self._pg_cache: dict[str, str] = {}
        self._listeners: list[Callable[[set[str]], None]] = []
        self._cond = threading.Condition()
        self._commit_seq = 0
        #: write transactions this process committed (a request that fails with nothing
        #: committed meanwhile may be sent again: the API's ``Retry-After``)
        self.writes = 0
        self._writes = itertools.count(1)
        self._local = threading.local()
        self._conns: dict[int, Any] = {}
        self._conns_lock = threading.Lock()
        self._generation = 0
        self._engine: sa.Engine | None = None
        self._engine_lock = threading.Lock()
        self._notifier: Notifier | None = None
        #: PostgreSQL pool: checkouts that found every connection busy, seconds they waited,
        #: checkouts that timed out (read by the metrics)
        self.pool_timeouts = 0
        #: PostgreSQL: the verbs' connections (:mod:`.pgpool`), made with the engine
        self._pool: PgPool | None = None
        if self.dialect == "postgresql":
            self._engine = self._make_engine()
        _open.add(self)

    # -- engine -----------------------------------------------------------------------------

    @property
    def engine(self) -> sa.Engine:
        """The SQLAlchemy engine (migrations, the PostgreSQL pool); created on first use."""
        if self._engine is None:
            with self._engine_lock:
                if self._engine is None:
                    self._engine = self._make_engine()
        return self._engine

    def _make_engine(self) -> sa.Engine:
        import sqlalchemy as sa
        from sqlalchemy import event as sa_event
        from sqlalchemy.pool import NullPool, QueuePool

        from .pgpool import PgPool

        if self.dialect == "sqlite":
            engine = sa.create_engine(
                self.url,
                poolclass=QueuePool,
                pool_size=4,
                max_overflow=64,
                pool_reset_on_return=None,
                connect_args={"isolation_level": None, "check_same_thread": False, "timeout": 10},
            )

            @sa_event.listens_for(engine, "connect")
            def _pragmas(dbapi_conn: Any, _rec: Any) -> None:
                _sqlite_setup(dbapi_conn)

            return engine
        url = self.url
        if url.startswith("postgres://"):
            url = "postgresql://" + url[len("postgres://") :]
        if url.startswith("postgresql://"):
            url = "postgresql+psycopg://" + url[len("postgresql://") :]
        self.url = url
        # connections are only opened when needed (an idle process holds the few it has used);
        # docs/deploy.md gives the sizes per process kind. Each session bounds how long one
        # statement may run, how long it waits for a row lock and how long it may sit idle in
        # a transaction, so one stuck session cannot stall every host.
        st = self.settings
        options = (
            f"-c statement_timeout={int(st.pg_statement_timeout * 1000)} "
            f"-c lock_timeout={int(st.pg_lock_timeout * 1000)} "
            f"-c idle_in_transaction_session_timeout={int(st.pg_idle_timeout * 1000)}"
        )
        connect_args: dict[str, Any] = {"connect_timeout": max(1, int(st.pg_connect_timeout)), "options": options,
                                        "application_name": application_name()}
        if st.pg_transaction_pooler:  # each transaction may get another server session
            connect_args = {"connect_timeout": connect_args["connect_timeout"], "prepare_threshold": None,
                            "application_name": connect_args["application_name"]}
        # the engine serves the migrations and their lock, on connections of their own (closed
        # after use: a session setting of theirs never reaches a verb); the verbs' transactions
        # take theirs from :attr:`_pool`
        engine = sa.create_engine(url, poolclass=NullPool, connect_args=connect_args)
        conninfo = engine.url.set(drivername="postgresql").render_as_string(hide_password=False)

        def _connect() -> Any:
            import psycopg

            return psycopg.connect(conninfo, **{**connect_args, "application_name": application_name()})

        self._pool = PgPool(_connect, size=st.pg_pool_size, overflow=st.pg_max_overflow, timeout=st.pg_pool_timeout)
        return engine

    def _forked(self) -> None:
        if self._engine is not None:
            self._engine.dispose(close=False)
        if self._pool is not None:
            self._pool.forget()
        if self._notifier is not None:
            self._notifier.forked()
        self._cond = threading.Condition()
        # the parent's SQLite connections must not be used (nor closed) in the child
        self._local = threading.local()
        self._conns = {}
        self._conns_lock = threading.Lock()

    def close(self) -> None:
        with self._conns_lock:
            conns, self._conns = self._conns, {}
            self._generation += 1
        for conn in conns.values():
            try:
                conn.close()
            except Exception:  # pragma: no cover - closing a connection another thread holds
                pass
        if self._notifier is not None:
            self._notifier.close()
            self._notifier = None
        if self._pool is not None:
            self._pool.close()
        if self._engine is not None:
            self._engine.dispose()

    def pool_state(self) -> tuple[int | None, int | None]:
        """PostgreSQL: this process's pooled connections ``(in use, idle)``; SQLite: ``(None, None)``."""
        if self.dialect != "postgresql" or self._pool is None:
            return None, None
        return self._pool.state()

    @property
    def pool_waits(self) -> int:
        """PostgreSQL: checkouts that found every connection busy (read by the metrics)."""
        return self._pool.waits if self._pool is not None else 0

    @property
    def pool_wait_seconds(self) -> float:
        """PostgreSQL: seconds checkouts waited for a busy pool."""
        return self._pool.wait_seconds if self._pool is not None else 0.0

    @property
    def pool_dead(self) -> int:
        """PostgreSQL: idle connections the server had ended, closed at a checkout (never used)."""
        return self._pool.dead if self._pool is not None else 0

    def pg_sql(self, sql: str) -> str:
        out = self._pg_cache.get(sql)
        if out is None:
            out = _PARAM_RE.sub(r"%(\1)s", sql.replace("%", "%%"))
            self._pg_cache[sql] = out
        return out

    # -- connections --------------------------------------------------------------------------
    #
    # SQLite: each thread keeps one DB-API connection for its transactions (a pool checkout
    # per transaction costs as much as two statements). A nested call on the same thread, a
    # thread after ``close()`` and a child after ``fork()`` get their own connection.
    # PostgreSQL: this process's pool (:mod:`.pgpool`: a checkout and a checkin send nothing
    # and cost a few microseconds; the SQLAlchemy pool's cost 30-100 of the client's CPU).

    def _sqlite_path(self) -> str:
        return sqlite_file(self.url)

    def _acquire(self) -> tuple[Any, Any]:
        """A DB-API connection and the token :meth:`_release` needs to give it back."""
        if self.dialect == "sqlite":
            local = self._local
            conn = getattr(local, "conn", None)
            if conn is not None and not local.busy and local.generation == self._generation:
                local.busy = True
                return conn, local
            if conn is None or local.generation != self._generation:
                conn = self._new_sqlite()
                local.conn = conn
                local.generation = self._generation
                local.busy = True
                return conn, local
        if self.dialect == "postgresql":
            return self._pg_acquire()
        proxy = self.engine.raw_connection()  # SQLite, the thread's own connection busy (nested)
        return proxy.driver_connection, proxy

    def _pg_acquire(self) -> tuple[Any, Any]:
        from .pgpool import PoolTimeout

        if self._pool is None:
            self.engine  # noqa: B018 - makes the engine and the pool
        pool = self._pool
        assert pool is not None
        st = self.settings
        try:
            conn = pool.get()
        except Exception as exc:
            if isinstance(exc, PoolTimeout):
                self.pool_timeouts += 1
                raise Unavailable(
                    f"all {st.pg_pool_size + st.pg_max_overflow} database connections of this process "
                    f"stayed busy for {st.pg_pool_timeout:g}s; try again, or raise "
                    "AGENTBOARD_PG_POOL_SIZE / AGENTBOARD_PG_MAX_OVERFLOW (docs/deploy.md)", retry_after=1.0,
                ) from None
            if not any(c.__name__ == "OperationalError" for c in type(exc).__mro__):
                raise  # (psycopg's ConnectionTimeout is one)
            raise Unavailable(f"cannot open the database: {one_line(getattr(exc, 'orig', exc))}",
                              retry_after=1.0) from None
        return conn, _PgToken(pool, conn)

    def _release(self, token: Any, *, broken: bool = False) -> None:
        if isinstance(token, threading.local):
            token.busy = False
            if broken:
                conn = token.conn
                token.conn = None
                with self._conns_lock:
                    self._conns.pop(threading.get_ident(), None)
                try:
                    conn.close()
                except Exception:
                    pass
            return
        if isinstance(token, _PgToken):
            token.pool.put(token.conn, broken=broken)
            return
        if broken:
            token.invalidate()
        token.close()

    def _new_sqlite(self) -> Any:
        try:
            conn = sqlite3.connect(
                self._sqlite_path(), isolation_level=None, check_same_thread=False, timeout=10,
                cached_statements=512,  # every verb's statements stay prepared
            )
        except sqlite3.OperationalError as exc:
            raise Unavailable(f"cannot open the database: {exc}") from None
        try:
            _sqlite_setup(conn)
        except sqlite3.OperationalError as exc:
            conn.close()
            if disk_full(exc):
                raise Unavailable(DISK_FULL) from exc
            raise
        me = threading.get_ident()
        with self._conns_lock:
            alive = {t.ident for t in threading.enumerate()}
            for ident in [i for i in self._conns if i not in alive or i == me]:
                old = self._conns.pop(ident)
                try:
                    old.close()
                except Exception:  # pragma: no cover
                    pass
            self._conns[me] = conn
        return conn

    @contextmanager
    def _raw(self) -> Iterator[Any]:
        conn, token = self._acquire()
        try:
            yield conn
        finally:
            self._release(token)

    # -- transactions -----------------------------------------------------------------------

    def write(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run ``fn(tx, *args, **kwargs)`` in one write transaction, retrying lock contention."""
        deadline = time.monotonic() + _WRITE_DEADLINE
        attempt = 0
        while True:
            attempt += 1
            conn, token = self._acquire()
            broken = False
            if self.dialect == "postgresql":
                from .pgwire import Wire

                conn.autocommit = True  # the pipeline sends its own BEGIN and COMMIT
                tx = Tx(self, conn, Wire(conn, prepare=not self.settings.pg_transaction_pooler))
            else:
                tx = Tx(self, conn)
            try:
                if self.dialect == "sqlite":
                    tx.cur.execute("BEGIN IMMEDIATE")
                    result = fn(tx, *args, **kwargs)
                    conn.commit()
                else:
                    result = _pg_pipelined(conn, tx, fn, args, kwargs)
            except BaseException as exc:
                broken = not _rollback(conn)
                retry = _retryable(exc) or (attempt <= _UNIQUE_RETRIES and _unique_violation(exc))
                if retry and time.monotonic() < deadline:
                    _backoff(attempt)
                    continue
                if disk_full(exc):
                    raise Unavailable(DISK_FULL) from exc
                if isinstance(exc, AgentboardError) or not _retryable(exc):
                    _raise_unavailable(exc)
                    _raise_bad_value(exc)
                    raise
                raise Unavailable(
                    "the database stayed busy for a minute; try again"
                ) from exc
            finally:
                if tx.cur is not None:
                    tx.cur.close()
                self._release(token, broken=broken)
            self.writes = next(self._writes)
            if tx.wrote_events:
                self._signal(tx.boards_touched, hosts=tx.wakes_hosts)
            return result

    def write_one(self, sql: str, params: dict[str, Any], *, verb: Callable[..., Any],
                  declined: str | None = None,
                  on_declined: Callable[[BaseException], None] | None = None) -> list[Row] | None:
        """PostgreSQL: one statement as a transaction of its own (autocommit on the pipeline: one
        round trip, no ``BEGIN`` or ``COMMIT``), with the retries of :meth:`write`; its rows.
        ``verb``: the kernel function whose transaction it is (what :meth:`write` would have run:
        it names the transaction's trace span). ``declined``: a SQLSTATE the statement raises to
        say the caller must take another path (its writes rolled back with it): None is returned
        then, after ``on_declined(error)`` (the error says why, its diagnostics). The caller
        signals the commit (:meth:`signal`) when the statement wrote events."""
        assert self.dialect == "postgresql", "write_one: PostgreSQL only"
        Wire = _wire()

        deadline = time.monotonic() + _WRITE_DEADLINE
        attempt = 0
        while True:
            attempt += 1
            conn, token = self._acquire()
            broken = False
            # no BEGIN is sent, so the server runs the statement as a transaction of its own
            # whatever psycopg's autocommit flag says (the pipeline bypasses psycopg's cursor)
            wire = Wire(conn, prepare=not self.settings.pg_transaction_pooler)
            try:
                rows = wire.run_one(sql, params)
                self.writes = next(self._writes)
                return rows
            except BaseException as exc:
                if declined is not None and getattr(exc, "sqlstate", None) == declined:
                    if on_declined is not None:
                        on_declined(exc)
                    return None
                broken = conn.info.transaction_status != _PG_IDLE and not _rollback(conn)
                if _retryable(exc) and time.monotonic() < deadline:
                    _backoff(attempt)
                    continue
                if disk_full(exc):
                    raise Unavailable(DISK_FULL) from exc
                _raise_unavailable(exc)
                _raise_bad_value(exc)
                raise
            finally:
                self._release(token, broken=broken)

    def signal(self, boards: set[str]) -> None:
        """Tell this process's listeners and the other hosts (PostgreSQL's notifier) that a
        commit wrote events on ``boards`` (:meth:`write` does it for its own transactions)."""
        self._signal(boards)

    def read(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run ``fn(tx, ...)`` on a consistent snapshot."""
        deadline = time.monotonic() + _WRITE_DEADLINE
        while True:
            conn, token = self._acquire()
            broken = False
            tx = Tx(self, conn)
            try:
                if self.dialect == "sqlite":
                    tx.cur.execute("BEGIN")
                    result = fn(tx, *args, **kwargs)
                    conn.commit()
                    return result
                # PostgreSQL reads in READ COMMITTED take a new snapshot per statement anyway:
                # autocommit spares the BEGIN and COMMIT round trips
                conn.autocommit = True
                try:
                    return fn(tx, *args, **kwargs)
                finally:
                    if conn.info.transaction_status == _PG_IDLE:
                        conn.autocommit = False
            except BaseException as exc:
                broken = not _rollback(conn)
                if _retryable(exc) and time.monotonic() < deadline:
                    time.sleep(0.01 * random.random())
                    continue
                if disk_full(exc):
                    raise Unavailable(DISK_FULL) from exc
                _raise_unavailable(exc)
                _raise_bad_value(exc)
                raise
            finally:
                tx.cur.close()
                self._release(token, broken=broken)

    def read_pipelined(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """:meth:`read` for a ``fn`` that sends its statements with :meth:`Tx.later` before it
        reads any: on PostgreSQL they go on the connection's pipeline (``pgwire``: prepared once
        per connection) and their answers come back in one round trip, where :meth:`read` takes
        one per statement (each statement still sees what was committed when it starts, as in
        :meth:`read`). On SQLite it is :meth:`read`."""
        if self.dialect != "postgresql":
            return self.read(fn, *args, **kwargs)
        from .pgwire import Wire

        deadline = time.monotonic() + _WRITE_DEADLINE
        while True:
            conn, token = self._acquire()
            broken = False
            conn.autocommit = True  # no BEGIN: the statements up to the sync are one implicit transaction
            wire = Wire(conn, prepare=not self.settings.pg_transaction_pooler)
            tx = Tx(self, conn, wire)
            wire.start()
            try:
                try:
                    result = fn(tx, *args, **kwargs)
                    wire.sync()
                    return result
                finally:
                    wire.finish()
                    if conn.info.transaction_status == _PG_IDLE:
                        conn.autocommit = False
            except BaseException as exc:
                broken = conn.info.transaction_status != _PG_IDLE and not _rollback(conn)
                if _retryable(exc) and time.monotonic() < deadline:
                    time.sleep(0.01 * random.random())
                    continue
                _raise_unavailable(exc)
                _raise_bad_value(exc)
                raise
            finally:
                self._release(token, broken=broken)

    # -- change signal ----------------------------------------------------------------------

    def _signal(self, boards: set[str], *, hosts: bool = True) -> None:
        if self.dialect == "postgresql" and hosts:  # other processes: the notifier's next pg_notify
            notifier = self._notifier
            if notifier is None:
                from .pgnotify import Notifier

                with self._engine_lock:
                    if self._notifier is None:
                        conninfo = self.engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
                        self._notifier = Notifier(conninfo, "", pooled=self.settings.pg_transaction_pooler)
                    notifier = self._notifier
            notifier.changed(boards)
        with self._cond:
            self._commit_seq += 1
            self._cond.notify_all()
        for listener in list(self._listeners):
            try:
                listener(boards)
            except Exception:  # pragma: no cover - a listener must never break a commit
                pass

    def add_listener(self, fn: Callable[[set[str]], None]) -> None:
        self._listeners.append(fn)

    def remove_listener(self, fn: Callable[[set[str]], None]) -> None:
        if fn in self._listeners:
            self._listeners.remove(fn)

    @property
    def commit_seq(self) -> int:
        return self._commit_seq

    def wait_for_commit(self, seen: int, timeout: float) -> int:
        """Block until a commit in this process made events after ``seen`` (or timeout)."""
        with self._cond:
            if self._commit_seq == seen:
                self._cond.wait(timeout)
            return self._commit_seq


_PG_IDLE = 0  # psycopg.pq.TransactionStatus.IDLE


def _pg_pipelined(conn: Any, tx: Tx, fn: Callable[..., T], args: Any, kwargs: Any) -> T:
    """Run ``fn(tx)`` in one PostgreSQL transaction on the connection's pipeline (``pgwire``):
    ``BEGIN``, every statement whose answer is not read, ``COMMIT`` and the notification are sent
    with the next statement that is read (or with the final sync). The first error of any
    statement is raised by the read or the commit that follows it, and the caller rolls back.
    Listeners hear of the commit from the process's notifier (``pgnotify``), not from here."""
    wire = tx.wire
    assert wire is not None
    wire.start()
    failed = True
    try:
        wire.send(b"BEGIN")
        result = fn(tx, *args, **kwargs)
        wire.send(b"COMMIT")
        wire.sync()
        failed = False
        return result
    finally:
        try:
            wire.finish()
        except Exception:
            if not failed:
                raise
            # the error being raised says more; the caller's rollback finds the connection broken
        if conn.info.transaction_status == _PG_IDLE:
            conn.autocommit = False


def _backoff(attempt: int) -> None:
    """Wait before a retried write's next attempt: random, growing with the attempts, at most 0.5 s."""
    time.sleep(min(0.5, 0.002 * (2 ** min(attempt, 8))) * random.random())


def _rollback(conn: Any) -> bool:
    """Roll back; False when the connection is unusable and must be discarded."""
    try:
        conn.rollback()
        if type(conn).__module__.startswith("psycopg") and conn.autocommit:
            conn.autocommit = False
        return True
    except Exception:
        return False


def _unique_violation(exc: BaseException) -> bool:
    return type(exc).__module__.startswith("psycopg") and getattr(exc, "sqlstate", None) == "23505"


#: what a connection pooler (PgBouncer) answers, as a protocol violation, when it has no server
#: session to give a transaction: nothing of it ran, so it is tried again like a refused connection
POOLER_NOT_SENT = ("server login has been failing", "server_login_retry", "query_wait_timeout",
                   "pgbouncer cannot connect to server", "no more connections allowed")


def _raise_unavailable(exc: BaseException) -> None:
    """A PostgreSQL server that went away or a statement cut by ``statement_timeout`` becomes
    :class:`Unavailable` with a message saying so (never a driver traceback, never a hang)."""
    if not type(exc).__module__.startswith("psycopg"):
        return
    state = getattr(exc, "sqlstate", None)
    if state == "08P01" and any(m in str(exc) for m in POOLER_NOT_SENT):
        raise Unavailable(f"cannot open the database: the connection pooler has no server session for it "
                          f"({one_line(exc)})", retry_after=1.0) from exc
    if state == "57014":  # query_canceled: statement_timeout
        raise Unavailable(
            "a database statement ran longer than the statement timeout (AGENTBOARD_PG_STATEMENT_TIMEOUT); "
            "try again"
        ) from exc
    if any(c.__name__ == "OperationalError" for c in type(exc).__mro__) or (state or "").startswith("08"):
        raise Unavailable(f"lost the connection to the database server: {one_line(exc)}".strip()) from exc


def bad_value(exc: BaseException) -> str | None:
    """The message for a value the database cannot store, None for any other error: a number
    out of range (sqlite3's ``OverflowError`` for an integer beyond 64 bits; PostgreSQL's
    ``DataError``, such as ``NumericValueOutOfRange``) or a text it refuses (a NUL character on
    PostgreSQL). Checked by type only; psycopg is not imported for a SQLite home."""
    if isinstance(exc, OverflowError):
        return "a number is out of range: give a smaller one"
    if type(exc).__module__.startswith("psycopg") and any(c.__name__ == "DataError" for c in type(exc).__mro__):
        return f"the database refused a value: {one_line(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)}"
    return None


def _raise_bad_value(exc: BaseException) -> None:
    """A value the database cannot store (:func:`bad_value`) becomes :class:`InvalidInput`, so
    every surface refuses it as bad input (exit 2, HTTP 400, ``invalid_input``); the transaction
    was rolled back."""
    message = bad_value(exc)
    if message is not None:
        raise InvalidInput(message) from exc


def _sqlite_setup(dbapi_conn: Any) -> None:
    """Pragmas every SQLite connection gets: WAL, synchronous=FULL, a busy timeout."""
    dbapi_conn.isolation_level = None
    dbapi_conn.row_factory = sqlite3.Row
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA busy_timeout = 10000")
    mode = cur.execute("PRAGMA journal_mode").fetchone()[0]
    if str(mode).lower() != "wal":
        for _ in range(50):
            try:
                cur.execute("PRAGMA journal_mode = WAL")
                break
            except sqlite3.OperationalError:
                time.sleep(0.05)
    cur.execute("PRAGMA synchronous = FULL")
    cur.execute("PRAGMA foreign_keys = OFF")
    cur.close()


DISK_FULL = "the disk is full: the database cannot grow; free some space and try again"


def disk_full(exc: BaseException) -> bool:
    """True for the database's "disk full": SQLite's ``database or disk is full`` (SQLITE_FULL),
    PostgreSQL's ``DiskFull`` (SQLSTATE 53100), or ENOSPC from the file system."""
    orig = getattr(exc, "orig", None)  # SQLAlchemy's wrapper (migrations) around the driver's error
    if isinstance(orig, BaseException) and orig is not exc:
        return disk_full(orig)
    if isinstance(exc, sqlite3.OperationalError):
        return "disk is full" in str(exc).lower()
    if isinstance(exc, OSError):
        return exc.errno in (errno.ENOSPC, errno.EDQUOT)
    return type(exc).__module__.startswith("psycopg") and getattr(exc, "sqlstate", None) == "53100"


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, sqlite3.OperationalError):
        msg = str(exc).lower()
        return "locked" in msg or "busy" in msg
    mod = type(exc).__module__
    if mod.startswith("psycopg"):
        name = type(exc).__name__
        # FeatureNotSupported: "cached plan must not change result type" — a migration changed a
        # table under a statement prepared earlier; InvalidSqlStatementName: the session lost its
        # prepared statements. The pipeline forgets its statements and the verb runs again.
        return name in ("SerializationFailure", "DeadlockDetected", "LockNotAvailable") or (
            name == "FeatureNotSupported" and "cached plan" in str(exc)) or (
            name == "InvalidSqlStatementName" and "prepared statement" in str(exc))
    return False


def _home_for(url: str) -> Path:
    """The home a database without explicit settings belongs to."""
    if url.startswith("sqlite"):
        return Path(sqlite_file(url)).absolute().parent
    return default_home()


def create_sqlite_file(path: Path) -> None:
    """Create a new SQLite database file readable by its owner only (0600); SQLite gives its
    ``-wal`` and ``-shm`` files the same mode. An existing file is left as it is."""
    if str(path) in ("", ":memory:"):
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    except OSError as exc:
        if disk_full(exc):
            raise Unavailable(DISK_FULL) from None
        raise
    os.close(fd)


def in_list(prefix: str, values: Iterable[Any], params: dict[str, Any]) -> str:
    """``(:p0, :p1, ...)`` for an SQL ``IN``: binds each value in ``params`` under ``prefix``+n.

    The one way the kernel builds an ``IN`` list; an empty ``values`` gives ``(NULL)``, which
    matches nothing.
    """
    names = {f"{prefix}{n}": v for n, v in enumerate(values)}
    if not names:
        return "(NULL)"
    params.update(names)
    return "(" + ", ".join(":" + k for k in names) + ")"


def values_list(prefix: str, rows: Iterable[Sequence[Any]], params: dict[str, Any]) -> str:
    """``(:p0_0, :p0_1), (:p1_0, :p1_1), ...`` for an SQL ``VALUES`` list (read as ``column1``,
    ``column2``, ... on both backends): binds each row's values in ``params`` under
    ``prefix``+row+``_``+column. A set-based statement over a group's rows (``UPDATE ... FROM
    (VALUES ...) v``) opens its table and indexes once where one statement per row opens them
    per row."""
    out = []
    for n, row in enumerate(rows):
        names = [f"{prefix}{n}_{k}" for k in range(len(row))]
        params.update(zip(names, row, strict=True))
        out.append("(" + ", ".join(":" + k for k in names) + ")")
    if not out:
        raise ValueError("values_list: no rows")
    return ", ".join(out)


def sqlite_file(url: str) -> str:
    """The file of a ``sqlite:///relative`` or ``sqlite:////absolute`` URL (``:memory:`` if none)."""
    rest = url.split("://", 1)[1] if "://" in url else url
    rest = rest.split("?", 1)[0]
    if rest.startswith("/"):
        rest = rest[1:]
    return rest or ":memory:"


__all__ = ["DISK_FULL", "PG_EVENT_HORIZON_SQL", "Database", "Tx", "pg_event_horizon", "disk_full", "dump_json", "in_list", "sqlite_file"]
