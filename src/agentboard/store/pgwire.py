"""PostgreSQL write transactions on libpq's pipeline, through psycopg's ``pq`` layer.

A kernel verb is a handful of short statements; psycopg's cursor and pipeline objects spend
several times the cost of the database's own work on each of them in Python. A write
transaction here talks to libpq directly (``psycopg.pq``) and keeps psycopg's C adaptation
(``psycopg.adapt.Transformer``) for parameters and rows, so values travel exactly as through a
psycopg cursor:

- every statement is sent at once and only the ones whose answer the verb reads wait for the
  server (a flush request makes it answer what was sent so far): ``BEGIN``, writes whose result
  nobody reads, ``COMMIT`` and the listeners' notification travel with the next read or the final
  sync, so a verb costs one round trip per answer it needs plus the commit;
- statements are prepared once per connection (named ``ab_<n>``, keyed by their text and the
  parameters' types), so the server parses and plans each only once; not through a
  transaction-mode pooler (``pg_transaction_pooler``), where the next transaction may run on a
  server session on which another process gave the same name to another statement;
- a transaction of one statement already prepared on the connection (``run_one``: the kernel's
  one-statement verbs) goes without the pipeline: the same messages, at once, and its answers
  read until the server is ready again;
- waiting is a ``poll`` on the connection's socket (the GIL is free meanwhile) with the
  connection in non-blocking mode, reading whatever arrives while a long pipeline is being sent,
  so neither side can fill its buffers and wait for the other.

The first error of any statement is raised (as the psycopg exception its SQLSTATE names) by the
read or the commit that follows it; the caller rolls the transaction back.
"""

from __future__ import annotations

import itertools
import re
import select
from collections import deque
from typing import Any

from psycopg import errors as pg_errors
from psycopg import pq
from psycopg.adapt import PyFormat, Transformer

_PARAM_RE = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")
_TEXT = PyFormat.TEXT
_ST = pq.ExecStatus
_OK = frozenset({_ST.COMMAND_OK, _ST.TUPLES_OK, _ST.EMPTY_QUERY})
#: statements prepared per connection at most; past it, new ones run unnamed (parsed each time)
_MAX_PREPARED = 400
#: statements sent and not read after which the pipeline reads what has arrived
_MAX_IN_FLIGHT = 64
#: a prepared statement whose result columns changed under it (a migration ran), or one the
#: session no longer has (psycopg deallocates every prepared statement of a connection when it
#: rolls back a transaction in which it had prepared its own): the verb runs again, re-preparing
STALE_PLAN = "0A000"
NO_SUCH_STATEMENT = "26000"

_converted: dict[str, tuple[bytes, tuple[str, ...]]] = {}


def convert(sql: str) -> tuple[bytes, tuple[str, ...]]:
    """``:name`` parameters as ``$n`` (a name used twice is one parameter) and the names in order."""
    out = _converted.get(sql)
    if out is None:
        names: list[str] = []

        def number(m: re.Match[str]) -> str:
            name = m.group(1)
            if name not in names:
                names.append(name)
            return f"${names.index(name) + 1}"

        out = (_PARAM_RE.sub(number, sql).encode(), tuple(names))
        _converted[sql] = out
    return out


class _Prepared:
    """The statements prepared on one connection, and its adaptation context (kept: a
    connection serves one transaction at a time)."""

    __slots__ = ("names", "columns", "tr", "poll")

    def __init__(self, conn: Any) -> None:
        #: the poll object on the connection's socket (registered by the first wait)
        self.poll: Any = None
        self.names: dict[tuple[bytes, tuple[int, ...]], bytes] = {}
        #: the column names of a prepared statement's rows, by its name (a prepared statement's
        #: columns never change: the server refuses it, ``STALE_PLAN``, and it is prepared anew)
        self.columns: dict[bytes, list[str]] = {}
        self.tr = Transformer(conn)

    def forget(self) -> None:
        """Every statement is prepared anew (its columns read anew)."""
        self.names.clear()
        self.columns.clear()


#: statement names are never reused in a process (a forgotten name may still exist in a session)
_names = itertools.count(1)


#: the attribute of a psycopg connection that holds its :class:`_Prepared` (it lives and dies
#: with the connection)
_ATTR = "_agentboard_prepared"


class Sent:
    """One statement in the pipeline: its result once read, or the error it raised."""

    __slots__ = ("result", "error", "done", "key", "sync", "name")

    def __init__(self, key: tuple[bytes, tuple[int, ...]] | None = None, *, sync: bool = False,
                 name: bytes | None = None) -> None:
        self.result: Any = None
        self.error: BaseException | None = None
        self.done = False
        #: the statement this entry prepares (its name is forgotten if the prepare fails)
        self.key = key
        self.sync = sync
        #: the prepared statement this entry runs (None: an unnamed one)
        self.name = name


class Wire:
    """One write transaction's pipeline on a psycopg connection (in autocommit, idle)."""

    __slots__ = ("conn", "pg", "tr", "queue", "prepared", "prepare", "error", "fd", "last", "last_many", "_poll", "_unsynced")

    def __init__(self, conn: Any, *, prepare: bool = True) -> None:
        self.conn = conn
        self.pg = conn.pgconn
        #: whether statements are prepared on the session (not through a transaction-mode
        #: pooler: the next transaction may run on another server session, where a name of this
        #: process may be another process's statement)
        self.prepare = prepare
        self.queue: deque[Sent] = deque()
        prepared = getattr(conn, _ATTR, None)
        if prepared is None:
            prepared = _Prepared(conn)
            setattr(conn, _ATTR, prepared)
        self.prepared = prepared
        self.tr = prepared.tr
        self.error: BaseException | None = None
        self.fd = self.pg.socket
        self.last: Sent | None = None
        #: the statements of the last :meth:`send_many` (its row count is theirs together)
        self.last_many: list[Sent] | None = None
        self._poll: Any = None
        #: statements were sent since the last sync (a transaction is open until one is sent)
        self._unsynced = False

    # -- sending ------------------------------------------------------------------------------

    def start(self) -> None:
        self.pg.enter_pipeline_mode()

    def _dumped(self, names: tuple[str, ...], params: dict[str, Any] | None) -> tuple[Any, tuple[int, ...]]:
        """The values of ``names`` from ``params`` as the server reads them, and their types."""
        if not names:
            return None, ()
        if params is None:
            raise TypeError(f"statement needs parameters {names}")
        data = self.tr.dump_sequence([params[n] for n in names], [_TEXT] * len(names))
        return data, tuple(self.tr.types or ())

    def send(self, sql: str | bytes, params: dict[str, Any] | None = None) -> Sent:
        """Queue ``sql`` (``:name`` parameters taken from ``params``); nothing waits."""
        names: tuple[str, ...]
        if isinstance(sql, bytes):
            text, names = sql, ()
        else:
            text, names = convert(sql)
        data, types = self._dumped(names, params)
        key = (text, types)
        name = self.prepared.names.get(key)
        prep: Sent | None = None
        if name is None and self.prepare and len(self.prepared.names) < _MAX_PREPARED:
            name = f"ab_{next(_names)}".encode()
            self.prepared.names[key] = name
            self.pg.send_prepare(name, text, param_types=types or None)
            prep = Sent(key)
            self.queue.append(prep)
        if name is None:
            self.pg.send_query_params(text, data, param_types=types or None)
        else:
            self.pg.send_query_prepared(name, data)
        sent = Sent(name=name)
        self.queue.append(sent)
        self.last = sent
        self.last_many = None
        self._unsynced = True
        if len(self.queue) >= _MAX_IN_FLIGHT:
            self._read_available()
        return sent

    def run_one(self, sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        """``sql`` as a transaction of its own (no ``BEGIN``: the server commits it after the
        statement), its rows; the connection is idle again after it, as before. Raises the
        statement's error, after its last answer is read.

        A statement prepared on this connection before goes without the pipeline: the same
        messages (bind, describe, execute, sync) sent at once and the answers read until the
        server is ready again, which spares the pipeline's bookkeeping (about half the client's
        time of a completion). A statement not prepared yet takes the pipeline, which prepares
        it in the same round trip."""
        text, names = convert(sql)
        data, types = self._dumped(names, params)
        name = self.prepared.names.get((text, types)) if self.prepare else None
        if name is None:
            self.start()
            try:
                sent = self.send(sql, params)
                self.sync()
                return self.rows(sent)
            finally:
                self.finish()
        self.pg.send_query_prepared(name, data)
        self._flush()
        last = None
        while (res := self._get()) is not None:
            last = res
        if last is not None and last.status == _ST.FATAL_ERROR:
            error = pg_errors.error_from_result(last, encoding=self.conn.info.encoding)
            if getattr(error, "sqlstate", None) in (STALE_PLAN, NO_SUCH_STATEMENT):  # re-prepared next time
                self.prepared.forget()
            raise error
        sent = Sent(name=name)
        sent.done, sent.result = True, last
        return self.rows(sent)

    def send_many(self, sql: str, seq: list[dict[str, Any]]) -> None:
        """``sql`` once per parameter set; :meth:`last_rowcount` adds up their counts."""
        many = [self.send(sql, params) for params in seq]
        self.last_many = many

    def last_rowcount(self) -> int:
        """Rows changed by the last statement (by all of the last :meth:`send_many`)."""
        if self.last_many is not None:
            return sum(max(self.rowcount(s), 0) for s in self.last_many)
        return -1 if self.last is None else self.rowcount(self.last)

    def sync(self) -> None:
        """End the pipeline's batch: every statement's result is read (raises the first error).
        Nothing sent since the last sync (every answer read already): no sync of its own."""
        self._sync_and_read()
        if self.error is not None:
            error, self.error = self.error, None
            raise error

    def finish(self) -> None:
        """Read whatever is left, roll back a transaction still open (a verb that raised) and
        leave pipeline mode: the connection is idle again.

        The rollback is sent here, not by psycopg: psycopg's own ``rollback()`` deallocates
        every prepared statement of the session when it had prepared some of its own."""
        self._sync_and_read()
        if self.pg.transaction_status != pq.TransactionStatus.IDLE:
            self.pg.send_query_params(b"ROLLBACK", None)
            self.queue.append(Sent())
            self._unsynced = True
            self._sync_and_read()
        self.error = None
        self.pg.exit_pipeline_mode()

    def _sync_and_read(self) -> None:
        self._sync_sent()
        if self.queue:
            self._read_through(self.queue[-1])

    def _sync_sent(self) -> None:
        """A sync after the statements sent since the last one, if any."""
        if self._unsynced:
            self.pg.pipeline_sync()
            self._unsynced = False
            self.queue.append(Sent(sync=True))

    # -- reading ------------------------------------------------------------------------------

    def result(self, sent: Sent) -> Any:
        """The result of ``sent`` (read now if needed); raises the first error so far."""
        if not sent.done:
            # a sync, not a flush request: the server then reports "idle in transaction" while
            # the verb works on the answer, so the session's idle timeout still applies to a
            # client that stops dead in the middle of a transaction (BEGIN keeps it open). None
            # when nothing was sent since the last: the answers of statements sent together
            # arrive with the first one read, and a sync each would cost a turn each
            self._sync_sent()
            self._read_through(sent)
        if sent.error is not None:
            raise sent.error
        if self.error is not None:  # an earlier statement failed; this one was skipped
            raise self.error
        return sent.result

    def rows(self, sent: Sent) -> list[dict[str, Any]]:
        res = self.result(sent)
        if res is None or res.status != _ST.TUPLES_OK or res.ntuples == 0:
            return []
        names = self.prepared.columns.get(sent.name) if sent.name is not None else None
        if names is None or len(names) != res.nfields:
            names = [res.fname(i).decode() for i in range(res.nfields)]
            if sent.name is not None:
                self.prepared.columns[sent.name] = names
        self.tr.set_pgresult(res)
        return self.tr.load_rows(0, res.ntuples, lambda values: dict(zip(names, values, strict=True)))

    def rowcount(self, sent: Sent) -> int:
        res = self.result(sent)
        n = res.command_tuples if res is not None else None
        return -1 if n is None else int(n)

    def _read_through(self, target: Sent) -> None:
        self._flush()
        while not target.done:
            self._read_next()

    def _read_available(self) -> None:
        """Read the results that have arrived, without waiting (a long pipeline being sent)."""
        self.pg.send_flush_request()
        self._flush()
        self.pg.consume_input()
        while self.queue and not self.pg.is_busy():
            self._read_next()

    def _read_next(self) -> None:
        sent = self.queue.popleft()
        if sent.sync:
            res = self._get()
            while res is not None and res.status != _ST.PIPELINE_SYNC:  # pragma: no cover
                res = self._get()
            sent.done = True
            return
        last = None
        while True:
            res = self._get()
            if res is None:
                break
            last = res
        sent.done = True
        sent.result = last
        status = last.status if last is not None else None
        if status in _OK:
            return
        if sent.key is not None:  # the prepare failed or was skipped: the name does not exist
            self.prepared.names.pop(sent.key, None)
        if status == _ST.FATAL_ERROR and last is not None:
            error = pg_errors.error_from_result(last, encoding=self.conn.info.encoding)
            sent.error = error
            if getattr(error, "sqlstate", None) in (STALE_PLAN, NO_SUCH_STATEMENT):  # re-prepared next time
                self.prepared.forget()
            if self.error is None:
                self.error = error

    def _get(self) -> Any:
        pg = self.pg
        while pg.is_busy():
            self._wait(select.POLLIN)
            pg.consume_input()
        return pg.get_result()

    def _flush(self) -> None:
        while self.pg.flush() == 1:  # the socket is full: read what the server sends meanwhile
            if self._wait(select.POLLIN | select.POLLOUT) & select.POLLIN:
                self.pg.consume_input()

    def _wait(self, events: int) -> int:
        poll = self._poll
        if poll is None:
            poll = self.prepared.poll
            if poll is None:
                poll = self.prepared.poll = select.poll()
                poll.register(self.fd, events)
            else:
                poll.modify(self.fd, events)
            self._poll = poll
        else:
            poll.modify(self.fd, events)
        while True:
            ready = poll.poll()
            if ready:
                return int(ready[0][1])


__all__ = ["NO_SUCH_STATEMENT", "STALE_PLAN", "Sent", "Wire", "convert"]
