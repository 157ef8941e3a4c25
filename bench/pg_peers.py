"""agentboard on PostgreSQL next to the job queues a Python user would pick instead, side by
side on the same server, in the same run.

Systems (``--systems``, default all four), each in a fresh database of its own on the server
(created, then dropped; ``synchronous_commit = on`` for the database):

- ``agentboard``: the kernel verbs through the Python API — ``kernel.tasks.create`` (a ready task
  for ``worker``, a profile of the board, as a fleet's tasks are for its agents),
  ``kernel.runs.claim_next`` (the claim-next verb of ``Board.claim_next``), ``kernel.runs.complete``;
- ``procrastinate`` (3.10+): ``Task.defer_async``, ``JobManager.fetch_job``,
  ``JobManager.finish_job`` through its psycopg connector (a pool of one connection);
- ``pgqueuer`` (1.6+): ``Queries.enqueue``, ``Queries.dequeue`` (one job at a time),
  ``Queries.log_jobs`` on one psycopg connection;
- ``raw``: a bare jobs table through psycopg, one statement per transaction: ``INSERT``;
  ``UPDATE … WHERE id = (SELECT … FOR UPDATE SKIP LOCKED LIMIT 1) RETURNING id``;
  ``UPDATE … SET status = 'done'``. What a queue costs with nothing on top.

What each part of agentboard's completion costs: ``agentboard-without-<part>`` is agentboard
with that part of the completion taken away in its own database (``bench/_completion_parts.py``:
``count-trigger``, ``checks``, ``rollup``, ``run-update``, ``timer-indexes``; several joined
with ``+``; ``all`` leaves the floor, the task's update and its event). Such a completion no
longer does all of its job: these systems measure, they are not a way to run.

Verbs: ``create`` (enqueue), ``claim`` (claim the next job), ``complete`` (the claimed jobs),
``drain`` (claim next + complete, on jobs created beforehand, not timed). For each N in
``--procs`` (1, 2, 4): N worker processes, each with its own connection, share ``--ops``
operations per phase (1,200) and start each phase together at a barrier, after a
``VACUUM ANALYZE`` of the system's database. Rounds (``--rounds``, 3) interleave everything:
each round runs every N, and at each N every system one after another (the order rotating
from round to round), so the systems see the same machine; the median of the rounds is
reported.

Per operation of a phase:

- ops/s: all processes' operations / (last end − first start);
- CPU: the client's (``getrusage`` of the worker processes, user + system) and the server's
  (user + system time of the backends serving the workers — their ``pg_backend_pid()`` and
  every other client backend of the system's database — read from ``/proc/<pid>/schedstat``
  in nanoseconds, or ``/proc/<pid>/stat`` in clock ticks where the kernel has no schedstat).
  The WAL writer, checkpointer and background writer serve the whole server (other databases
  too), so their share is reported apart, as ``background_cpu_ms_per_op``, not in the
  server's CPU;
- WAL: the advance of ``pg_current_wal_lsn()`` over the phase / operations, in bytes. The LSN
  is the server's: on a shared server, other databases' writes during the phase count too.

With ``--waits``, what the backends of the system's database were doing during each timed
phase, from ``pg_stat_activity`` read every 2 ms by a thread of the main process (which takes
some of the machine: compare systems within one such run, not with a run without it): the
share of samples working (``cpu``), waiting for their client's next statement (``client``),
flushing WAL at a commit (``wal_sync``: ``IO:WALSync``), waiting for another backend's WAL
write or flush (``wal_write``: ``LWLock:WALWrite``, ``IO:WALWrite``), for a row or transaction
lock (``lock``), for another lightweight lock (``lwlock``), or anything else (``other``).
A backend of the system's database that stayed idle through the phase is left out (a
connection kept for something else, as agentboard's notification sender). Summed over the
rounds.

agentboard's ratio against each peer: throughput (above 1 = agentboard faster), CPU per
operation (client + server; below 1 = agentboard cheaper) and WAL per operation (below 1 =
agentboard writes less).

    pip install -e '.[bench]'            # procrastinate and pgqueuer
    python bench/pg_peers.py             # N = 1, 2, 4; 1,200 ops per phase; 3 rounds
    python bench/pg_peers.py --quick     # a smoke run
    python bench/pg_peers.py --systems agentboard,raw --procs 1 --ops 400
    python bench/pg_peers.py --systems agentboard,agentboard-without-count-trigger,pgqueuer --procs 1,2
    python bench/pg_peers.py --systems agentboard,pgqueuer --procs 1,2 --waits

Prints one JSON line on stdout and a table on stderr. Exits 2 when a chosen peer is not
installed.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import importlib.util
import json
import multiprocessing as mp
import os
import resource
import secrets
import shutil
import statistics
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _completion_parts import ALL, PARTS, strip  # noqa: E402
from _shared import DEFAULT_PG, drop_pg, fresh_pg, load_average  # noqa: E402

FORK = mp.get_context("fork")
SYSTEMS = ("agentboard", "procrastinate", "pgqueuer", "raw")
#: ``agentboard-without-<part>``: agentboard with parts of its completion taken away
#: (``_completion_parts``; ``+`` joins several, ``all`` is the floor), to measure what each costs
WITHOUT = "agentboard-without-"
PEER_PACKAGES = {"procrastinate": "procrastinate", "pgqueuer": "pgqueuer"}
VERBS = ("create", "claim", "complete", "drain")
BOARD = "default"
QUEUE = "bench"
WARM = 5  # jobs each worker creates, claims and completes before the clock starts
BACKGROUND = ("walwriter", "checkpointer", "background writer")
METRICS = ("ops_per_s", "client_cpu_ms_per_op", "server_cpu_ms_per_op", "wal_bytes_per_op",
           "own_wal_bytes_per_op", "background_cpu_ms_per_op")


# -- the systems --------------------------------------------------------------------------------
#
# Each worker process opens one system, then runs the phases: ``create(i)`` enqueues a job,
# ``claim()`` claims the next one (None when none was free), ``complete(handle)`` finishes a
# claimed one. The asynchronous libraries run a whole phase in one ``run_until_complete``.


class System:
    def open(self, url: str, tag: str) -> list[int]:
        """Connect; the backend pids of the connections opened."""
        raise NotImplementedError

    def run(self, verb: str, k: int, tag: str) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class SyncSystem(System):
    held: list[Any]

    def create(self, name: str) -> None:
        raise NotImplementedError

    def claim(self) -> Any:
        raise NotImplementedError

    def complete(self, handle: Any) -> None:
        raise NotImplementedError

    def claim_one(self) -> Any:
        for _ in range(10_000):
            handle = self.claim()
            if handle is not None:
                return handle
        raise RuntimeError("no job to claim although every worker created as many as it claims")

    def run(self, verb: str, k: int, tag: str) -> None:
        if verb == "create":
            for i in range(k):
                self.create(f"job {tag} {i}")
        elif verb == "claim":
            self.held = [self.claim_one() for _ in range(k)]
        elif verb == "complete":
            for handle in self.held:
                self.complete(handle)
            self.held = []
        else:
            for _ in range(k):
                self.complete(self.claim_one())


class AsyncSystem(System):
    held: list[Any]
    loop: asyncio.AbstractEventLoop

    async def aopen(self, url: str, tag: str) -> list[int]:
        raise NotImplementedError

    async def create(self, name: str) -> None:
        raise NotImplementedError

    async def claim(self) -> Any:
        raise NotImplementedError

    async def complete(self, handle: Any) -> None:
        raise NotImplementedError

    async def aclose(self) -> None:
        raise NotImplementedError

    def open(self, url: str, tag: str) -> list[int]:
        self.loop = asyncio.new_event_loop()
        return self.loop.run_until_complete(self.aopen(url, tag))

    async def claim_one(self) -> Any:
        for _ in range(10_000):
            handle = await self.claim()
            if handle is not None:
                return handle
        raise RuntimeError("no job to claim although every worker created as many as it claims")

    async def arun(self, verb: str, k: int, tag: str) -> None:
        if verb == "create":
            for i in range(k):
                await self.create(f"job {tag} {i}")
        elif verb == "claim":
            self.held = [await self.claim_one() for _ in range(k)]
        elif verb == "complete":
            for handle in self.held:
                await self.complete(handle)
            self.held = []
        else:
            for _ in range(k):
                await self.complete(await self.claim_one())

    def run(self, verb: str, k: int, tag: str) -> None:
        self.loop.run_until_complete(self.arun(verb, k, tag))

    def close(self) -> None:
        self.loop.run_until_complete(self.aclose())
        self.loop.close()


class Agentboard(SyncSystem):
    """The kernel verbs, as the Python API and the CLI call them."""

    def open(self, url: str, tag: str) -> list[int]:
        from agentboard.config import Settings
        from agentboard.kernel import runs, tasks
        from agentboard.store import open_database

        self.runs, self.tasks = runs, tasks
        self.home = Path(tempfile.mkdtemp(prefix="ab-pgpeers-"))
        self.db = open_database(url, settings=Settings(home=self.home), migrate=False)
        return [int(self.db.read(lambda tx: tx.scalar("SELECT pg_backend_pid()")))]

    def create(self, name: str) -> None:
        self.tasks.create(self.db, BOARD, name, assignee="worker")

    def claim(self) -> Any:
        got = self.runs.claim_next(self.db, BOARD, limit=1)
        return (got[0]["id"], got[0]["run_id"]) if got else None

    def complete(self, handle: Any) -> None:
        self.runs.complete(self.db, BOARD, handle[0], run_id=handle[1], summary="done")

    def close(self) -> None:
        self.db.close()
        shutil.rmtree(self.home, ignore_errors=True)


class Raw(SyncSystem):
    """A bare jobs table; each statement its own transaction (autocommit)."""

    SCHEMA = ("CREATE TABLE jobs (id BIGSERIAL PRIMARY KEY, payload TEXT NOT NULL, "
              "status TEXT NOT NULL DEFAULT 'todo', created_at TIMESTAMPTZ NOT NULL DEFAULT now(), "
              "started_at TIMESTAMPTZ, finished_at TIMESTAMPTZ)",
              "CREATE INDEX jobs_todo ON jobs (id) WHERE status = 'todo'")

    def open(self, url: str, tag: str) -> list[int]:
        import psycopg

        self.conn = psycopg.connect(url, autocommit=True)
        row = self.conn.execute("SELECT pg_backend_pid()").fetchone()
        assert row is not None
        return [int(row[0])]

    def create(self, name: str) -> None:
        self.conn.execute("INSERT INTO jobs (payload) VALUES (%s)", (name,))

    def claim(self) -> Any:
        row = self.conn.execute(
            "UPDATE jobs SET status = 'doing', started_at = now() WHERE id = ("
            "SELECT id FROM jobs WHERE status = 'todo' ORDER BY id FOR UPDATE SKIP LOCKED LIMIT 1"
            ") RETURNING id").fetchone()
        return row[0] if row else None

    def complete(self, handle: Any) -> None:
        self.conn.execute("UPDATE jobs SET status = 'done', finished_at = now() WHERE id = %s", (handle,))

    def close(self) -> None:
        self.conn.close()


class Procrastinate(AsyncSystem):
    """procrastinate's own verbs: a task's ``defer_async``, the job manager's ``fetch_job`` (as
    its worker calls it, with a registered worker id) and ``finish_job`` (jobs kept, its default)."""

    async def aopen(self, url: str, tag: str) -> list[int]:
        import procrastinate
        from procrastinate.jobs import Status

        _quiet_procrastinate()
        self.succeeded = Status.SUCCEEDED
        self.app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=url, min_size=1, max_size=1))

        @self.app.task(name="bench_job", queue=QUEUE)
        def bench_job(name: str) -> None:  # never run: the benchmark finishes the jobs itself
            pass

        self.task = bench_job
        await self.app.open_async()
        self.worker_id = await self.app.job_manager.register_worker()
        async with self.app.connector.pool.connection() as conn:  # type: ignore[attr-defined]
            row = await (await conn.execute("SELECT pg_backend_pid()")).fetchone()
        return [int(row[0])]

    async def create(self, name: str) -> None:
        await self.task.defer_async(name=name)

    async def claim(self) -> Any:
        return await self.app.job_manager.fetch_job(queues=[QUEUE], worker_id=self.worker_id)

    async def complete(self, handle: Any) -> None:
        await self.app.job_manager.finish_job(handle, status=self.succeeded, delete_job=False)

    async def aclose(self) -> None:
        await self.app.job_manager.unregister_worker(self.worker_id)
        await self.app.close_async()


class Pgqueuer(AsyncSystem):
    """pgqueuer's ``Queries``: ``enqueue``, ``dequeue`` of one job (its queue manager's call,
    with batch size 1) and ``log_jobs`` of one finished job (what its job buffer flushes)."""

    async def aopen(self, url: str, tag: str) -> list[int]:
        import uuid
        from datetime import timedelta

        import psycopg
        from pgqueuer import Queries
        from pgqueuer.queries import EntrypointExecutionParameter

        self.conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
        self.q = Queries.from_psycopg_connection(self.conn)
        self.entrypoints = {QUEUE: EntrypointExecutionParameter(concurrency_limit=0)}
        self.qm_id = uuid.uuid4()
        self.heartbeat_timeout = timedelta(seconds=30)  # its queue manager's default
        row = await (await self.conn.execute("SELECT pg_backend_pid()")).fetchone()
        assert row is not None
        return [int(row[0])]

    async def create(self, name: str) -> None:
        await self.q.enqueue(QUEUE, name.encode())

    async def claim(self) -> Any:
        jobs = await self.q.dequeue(batch_size=1, entrypoints=self.entrypoints,  # type: ignore[arg-type]
                                    queue_manager_id=self.qm_id,  # type: ignore[arg-type]
                                    global_concurrency_limit=None, heartbeat_timeout=self.heartbeat_timeout)
        return jobs[0] if jobs else None

    async def complete(self, handle: Any) -> None:
        await self.q.log_jobs([(handle, "successful", None)])

    async def aclose(self) -> None:
        await self.conn.close()


def _quiet_procrastinate() -> None:
    """Its advice about where an App is defined (a script here) is not this benchmark's output."""
    import logging

    logging.getLogger("procrastinate").setLevel(logging.ERROR)


KINDS: dict[str, type[System]] = {"agentboard": Agentboard, "procrastinate": Procrastinate,
                                  "pgqueuer": Pgqueuer, "raw": Raw}


def _parts(system: str) -> set[str] | None:
    """The parts an ``agentboard-without-…`` system takes away (None: not such a system)."""
    return set(system[len(WITHOUT):].split("+")) if system.startswith(WITHOUT) else None


def _known(system: str) -> bool:
    parts = _parts(system)
    return system in SYSTEMS if parts is None else bool(parts) and parts <= {*PARTS, ALL}


def install(system: str, url: str) -> None:
    """The system's schema in its fresh database (each library's own installer)."""
    import psycopg

    if system == "agentboard" or _parts(system) is not None:
        import agentboard

        # migrates; the default board, and the agent its tasks are assigned to: a board's tasks go
        # to profiles it has (a task for no profile is the rare case that warns, at one more read)
        client = agentboard.connect(url)
        client.add_profile("worker", command="true")
        client.close()
        if (parts := _parts(system)) is not None:
            with psycopg.connect(url, autocommit=True) as conn:
                strip(conn, parts)
    elif system == "raw":
        with psycopg.connect(url, autocommit=True) as conn:
            for sql in Raw.SCHEMA:
                conn.execute(sql)
    elif system == "procrastinate":
        import procrastinate

        _quiet_procrastinate()
        app = procrastinate.App(connector=procrastinate.SyncPsycopgConnector(conninfo=url))
        app.open()
        app.schema_manager.apply_schema()  # what `procrastinate schema --apply` runs
        app.close()
    else:
        from pgqueuer import Queries

        async def _install() -> None:
            conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
            await Queries.from_psycopg_connection(conn).install()  # what `pgqueuer install` runs
            await conn.close()

        asyncio.run(_install())


# -- measuring ------------------------------------------------------------------------------------


def _worker(system: str, url: str, k: int, tag: str, barrier: Any, out: Any) -> None:
    try:
        sysm = KINDS["agentboard" if _parts(system) is not None else system]()
        pids = sysm.open(url, tag)
        for verb in ("create", "claim", "complete"):  # statements prepared, caches warm
            sysm.run(verb, WARM, f"{tag} warm")
        out.put(("pids", pids))
        spans: dict[str, tuple[float, float, float]] = {}
        for verb in VERBS:
            if verb == "drain":
                sysm.run("create", k, f"{tag} drain")  # the jobs to drain, not timed
            barrier.wait()  # ready: the main process vacuums and reads the counters
            barrier.wait()  # go
            r0 = resource.getrusage(resource.RUSAGE_SELF)
            t0 = time.perf_counter()
            sysm.run(verb, k, tag)
            t1 = time.perf_counter()
            r1 = resource.getrusage(resource.RUSAGE_SELF)
            spans[verb] = (t0, t1, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime))
            barrier.wait()  # done: the main process reads the counters again
        barrier.wait()  # read: only now may the connections (and their backends) go
        sysm.close()
        out.put(("spans", spans))
    except BaseException:
        out.put(("error", traceback.format_exc()))
        barrier.abort()
        raise


def _cpu_ns(pid: int) -> int:
    """User + system time of a process, in nanoseconds (0 once it is gone)."""
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])
    except (OSError, IndexError, ValueError):
        pass
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0
    return (int(fields[11]) + int(fields[12])) * 1_000_000_000 // os.sysconf("SC_CLK_TCK")


class Server:
    """The main process's view of one system's database: vacuum, WAL position, backend CPU.

    With ``monitor`` (a database holding the ``pg_walinspect`` extension) it also sums the WAL
    records of this database alone over a phase: those touching its relations, and the other
    records (commits) of the transactions that did — what the workers wrote, whatever else the
    server was doing."""

    def __init__(self, url: str, monitor: str | None) -> None:
        import psycopg

        self.conn = psycopg.connect(url, autocommit=True)
        row = self.conn.execute("SELECT oid FROM pg_database WHERE datname = current_database()").fetchone()
        assert row is not None
        self.oid = int(row[0])
        self.background = [int(r[0]) for r in self.conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE backend_type = ANY(%s)", (list(BACKGROUND),)).fetchall()]
        self.inspect = psycopg.connect(monitor, autocommit=True) if monitor else None
        self.slot = "ab_bench_" + secrets.token_hex(4)
        if self.inspect is not None:
            # a temporary slot keeps a phase's WAL on disk until it is read, through checkpoints
            self.inspect.execute("SELECT pg_create_physical_replication_slot(%s, true, true)", (self.slot,))

    def backends(self, reported: set[int]) -> list[int]:
        rows = self.conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND backend_type = 'client backend' AND pid != pg_backend_pid()").fetchall()
        return sorted(reported | {int(r[0]) for r in rows})

    def vacuum(self) -> None:
        self.conn.execute("VACUUM ANALYZE")

    def snapshot(self, backends: list[int]) -> tuple[int, str, int, int]:
        """The WAL insert position (bytes), the flush position, the backends' and the
        background processes' CPU (ns)."""
        if self.inspect is not None:  # the WAL before this point may go
            self.inspect.execute("SELECT pg_replication_slot_advance(%s, pg_current_wal_flush_lsn())", (self.slot,))
        row = self.conn.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn, pg_current_wal_flush_lsn()::text").fetchone()
        assert row is not None
        return (int(row[0]), str(row[1]), sum(_cpu_ns(p) for p in backends),
                sum(_cpu_ns(p) for p in self.background))

    def own_wal(self, start: str, end: str) -> int | None:
        """Bytes of WAL this database's transactions wrote between two flush positions."""
        import psycopg

        if self.inspect is None:
            return None
        try:
            row = self.inspect.execute(
                "WITH r AS (SELECT xid, record_length, block_ref FROM pg_get_wal_records_info(%(s)s::pg_lsn, %(e)s::pg_lsn)), "
                "x AS (SELECT DISTINCT xid FROM r WHERE block_ref LIKE %(p)s AND xid::text != '0') "
                "SELECT COALESCE(SUM(record_length), 0) FROM r "
                "WHERE block_ref LIKE %(p)s OR (xid::text != '0' AND xid IN (SELECT xid FROM x))",
                {"s": start, "e": end, "p": f"%/{self.oid}/%"}).fetchone()
        except psycopg.Error as exc:  # the slot keeps the WAL: not expected; the phase goes unmeasured
            print(f"own WAL not measured: {str(exc).strip()}", file=sys.stderr)
            return None
        assert row is not None
        return int(row[0])

    def close(self) -> None:
        self.conn.close()
        if self.inspect is not None:
            self.inspect.close()


#: what a backend's ``pg_stat_activity`` row says it is doing -> the ``--waits`` class it counts in
WAIT_CLASSES = ("cpu", "client", "wal_sync", "wal_write", "lock", "lwlock", "other")


def wait_class(state: str | None, kind: str | None, event: str | None) -> str:
    """The ``--waits`` class of one sample of a backend (see the module's docstring)."""
    if kind is None:
        return "cpu" if state == "active" else "client"
    if kind == "Client" and event == "ClientRead":
        return "client"
    if kind == "IO" and event == "WALSync":
        return "wal_sync"
    if event == "WALWrite":
        return "wal_write"
    return {"Lock": "lock", "LWLock": "lwlock"}.get(kind, "other")


class Waits:
    """Samples, every ``every`` seconds, what the given backends are doing (``--waits``)."""

    def __init__(self, url: str, every: float = 0.002) -> None:
        import psycopg

        self.conn = psycopg.connect(url, autocommit=True)
        self.every = every
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.counts: dict[str, int] = {}

    def start(self, backends: list[int]) -> None:
        self.by_pid: dict[int, dict[str, int]] = {}
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, args=(backends,), daemon=True)
        self._thread.start()

    def _run(self, backends: list[int]) -> None:
        sql = "SELECT pid, state, wait_event_type, wait_event FROM pg_stat_activity WHERE pid = ANY(%s)"
        while not self._stop.wait(self.every):
            for pid, state, kind, event in self.conn.execute(sql, (backends,)).fetchall():
                counts = self.by_pid.setdefault(pid, dict.fromkeys(WAIT_CLASSES, 0))
                counts[wait_class(state, kind, event)] += 1

    def stop(self) -> dict[str, int]:
        """The samples of the phase by class, over the backends that did anything in it (a
        connection of the system's that stayed idle, as agentboard's notification sender
        does, would count as time waited for a client)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        total = dict.fromkeys(WAIT_CLASSES, 0)
        for counts in self.by_pid.values():
            if sum(counts.values()) > counts["client"]:
                for c, v in counts.items():
                    total[c] += v
        return total

    def close(self) -> None:
        self.conn.close()


def monitor_database(pg: str) -> tuple[str | None, str | None, str]:
    """A database of its own holding ``pg_walinspect`` (None where the server lacks it)."""
    import psycopg

    url, name = fresh_pg(pg)
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION pg_walinspect")
    except psycopg.Error as exc:
        drop_pg(pg, name)
        return None, None, str(exc).strip().splitlines()[0]
    return url, name, ""


def measure(system: str, url: str, monitor: str | None, n: int, k: int, tag: str,
            waits: bool = False) -> dict[str, dict[str, Any]]:
    """One phase of each verb with ``n`` processes of ``k`` operations each (``waits``: what
    the backends were doing, :class:`Waits`)."""
    server = Server(url, monitor)
    sampler = Waits(url) if waits else None
    barrier = FORK.Barrier(n + 1)
    out = FORK.Queue()
    procs = [FORK.Process(target=_worker, args=(system, url, k, f"{tag}.{i}", barrier, out)) for i in range(n)]
    for p in procs:
        p.start()

    def _next() -> tuple[str, Any]:
        msg: tuple[str, Any] = out.get(timeout=900)
        if msg[0] == "error":
            raise RuntimeError(f"a {system} worker failed:\n{msg[1]}")
        return msg

    result: dict[str, dict[str, Any]] = {}
    try:
        reported: set[int] = set()
        for _ in procs:
            reported.update(_next()[1])
        for verb in VERBS:
            try:
                barrier.wait(timeout=900)
                server.vacuum()
                backends = server.backends(reported)
                wal0, flush0, cpu0, bg0 = server.snapshot(backends)
                barrier.wait(timeout=900)
                if sampler is not None:
                    sampler.start(backends)
                barrier.wait(timeout=900)
                wal1, flush1, cpu1, bg1 = server.snapshot(backends)
                seen = sampler.stop() if sampler is not None else None
            except threading.BrokenBarrierError:
                _next()  # the worker's error
                raise
            own = server.own_wal(flush0, flush1)
            result[verb] = {"wal": wal1 - wal0, "server_ns": cpu1 - cpu0, "bg_ns": bg1 - bg0,
                            "own_wal": float("nan") if own is None else own, "waits": seen}
        try:
            barrier.wait(timeout=900)  # the backends were read: the workers may disconnect
        except threading.BrokenBarrierError:
            _next()
            raise
        spans = [_next()[1] for _ in procs]
        for p in procs:
            p.join(60)
            if p.exitcode != 0:
                raise RuntimeError(f"a {system} worker exited with {p.exitcode}")
    finally:
        for p in procs:
            if p.is_alive():
                p.terminate()
        server.close()
        if sampler is not None:
            sampler.close()
    ops = n * k
    rows: dict[str, dict[str, Any]] = {}
    for verb in VERBS:
        first = min(s[verb][0] for s in spans)
        last = max(s[verb][1] for s in spans)
        client = sum(s[verb][2] for s in spans)
        rows[verb] = {
            "ops_per_s": ops / (last - first),
            "client_cpu_ms_per_op": client / ops * 1000,
            "server_cpu_ms_per_op": result[verb]["server_ns"] / ops / 1e6,
            "wal_bytes_per_op": result[verb]["wal"] / ops,
            "own_wal_bytes_per_op": result[verb]["own_wal"] / ops,
            "background_cpu_ms_per_op": result[verb]["bg_ns"] / ops / 1e6,
        }
        if result[verb]["waits"] is not None:
            rows[verb]["waits"] = result[verb]["waits"]
    return rows


def run(urls: dict[str, str], monitor: str | None, systems: list[str], procs: list[int], ops: int,
        rounds: int, waits: bool = False) -> list[dict[str, Any]]:
    samples: dict[tuple[str, int, str], list[dict[str, Any]]] = {}
    for r in range(rounds):
        order = systems[r % len(systems):] + systems[:r % len(systems)]
        for n in procs:
            k = max(1, ops // n)
            for system in order:
                rows = measure(system, urls[system], monitor, n, k, f"r{r}.n{n}", waits)
                for verb, row in rows.items():
                    samples.setdefault((verb, n, system), []).append(row)
                print(f"round {r + 1}/{rounds} N={n} {system:<13} " + " | ".join(
                    f"{verb} {rows[verb]['ops_per_s']:.0f}/s "
                    f"{rows[verb]['client_cpu_ms_per_op'] + rows[verb]['server_cpu_ms_per_op']:.2f} ms "
                    f"{rows[verb]['own_wal_bytes_per_op'] / 1024:.2f} KB" for verb in VERBS), file=sys.stderr, flush=True)
    out = []
    for verb in VERBS:
        for n in procs:
            for system in systems:
                got = samples[(verb, n, system)]
                row: dict[str, Any] = {"verb": verb, "procs": n, "system": system}
                for m in METRICS:
                    values = [s[m] for s in got if s[m] == s[m]]  # NaN: not measured
                    row[m] = round(statistics.median(values), 4 if "cpu" in m else 1) if values else None
                if waits:  # the shares of all rounds' samples together (None: no sample was taken)
                    seen = [s["waits"] for s in got]
                    total = sum(sum(w.values()) for w in seen)
                    row["waits"] = {c: round(sum(w[c] for w in seen) / total, 3) for c in WAIT_CLASSES} if total else None
                out.append(row)
    return out


def ratios(rows: list[dict[str, Any]], systems: list[str]) -> list[dict[str, Any]]:
    """agentboard against each peer at the same verb and N."""
    if "agentboard" not in systems:
        return []
    at = {(r["verb"], r["procs"], r["system"]): r for r in rows}
    out = []
    for (verb, n, system), r in at.items():
        ab = at.get((verb, n, "agentboard"))
        if system == "agentboard" or ab is None:
            continue
        cpu_ab = ab["client_cpu_ms_per_op"] + ab["server_cpu_ms_per_op"]
        cpu_peer = r["client_cpu_ms_per_op"] + r["server_cpu_ms_per_op"]
        ratio: dict[str, Any] = {"verb": verb, "procs": n, "peer": system,
                                 "throughput": round(ab["ops_per_s"] / r["ops_per_s"], 2),
                                 "cpu": round(cpu_ab / cpu_peer, 2),
                                 "wal": round(ab["wal_bytes_per_op"] / r["wal_bytes_per_op"], 2)}
        if ab["own_wal_bytes_per_op"] and r["own_wal_bytes_per_op"]:
            ratio["own_wal"] = round(ab["own_wal_bytes_per_op"] / r["own_wal_bytes_per_op"], 2)
        out.append(ratio)
    return out


def _kb(v: float | None) -> str:
    return "-" if v is None else f"{v / 1024:.2f}"


def table(rows: list[dict[str, Any]], rats: list[dict[str, Any]]) -> str:
    w = max([14, *(len(r["system"]) for r in rows)])
    lines = [f"verb      N  {'system':<{w}}    ops/s   CPU ms/op = client + server   WAL KB/op (own)   "
             "background CPU ms/op"]
    for r in rows:
        cpu = r["client_cpu_ms_per_op"] + r["server_cpu_ms_per_op"]
        wal = f"{_kb(r['wal_bytes_per_op'])} ({_kb(r['own_wal_bytes_per_op'])})"
        lines.append(f"{r['verb']:<8} {r['procs']:>2}  {r['system']:<{w}} {r['ops_per_s']:>7.0f}   "
                     f"{cpu:>6.3f} = {r['client_cpu_ms_per_op']:>6.3f} + {r['server_cpu_ms_per_op']:>6.3f}"
                     f"      {wal:<17} {r['background_cpu_ms_per_op']:.3f}")
    if any("waits" in r for r in rows):
        lines.append("")
        lines.append(f"verb      N  {'system':<{w}}  backends' samples (--waits), %: "
                     + " ".join(f"{c:>9}" for c in WAIT_CLASSES))
        for r in rows:
            lines.append(f"{r['verb']:<8} {r['procs']:>2}  {r['system']:<{w}}  {'':<30}"
                         + " ".join("        -" if r["waits"] is None else f"{r['waits'][c] * 100:>9.1f}"
                                    for c in WAIT_CLASSES))
    if rats:
        lines.append("")
        lines.append(f"agentboard / {'peer':<{w - 2}} verb      N   throughput   CPU/op   WAL/op (own)")
        for q in rats:
            own = f" ({q['own_wal']:.2f})" if "own_wal" in q else ""
            lines.append(f"  / {q['peer']:<{w + 1}} {q['verb']:<8} {q['procs']:>2}   {q['throughput']:>10.2f}   "
                         f"{q['cpu']:>6.2f}   {q['wal']:>6.2f}{own}")
    return "\n".join(lines)


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--systems", default=",".join(SYSTEMS), help=f"comma-separated, of {', '.join(SYSTEMS)} (default all)")
    ap.add_argument("--procs", default=None, help="comma-separated writer process counts (default 1,2,4)")
    ap.add_argument("--ops", type=int, default=None, help="operations per phase, split across the processes (default 1200)")
    ap.add_argument("--rounds", type=int, default=None, help="interleaved rounds; the median is reported (default 3)")
    ap.add_argument("--quick", action="store_true", help="a smoke run: N = 1, 2; 100 ops; 1 round")
    ap.add_argument("--waits", action="store_true",
                    help="also sample what the backends wait on during each phase (pg_stat_activity every 2 ms)")
    ap.add_argument("--pg", default=DEFAULT_PG, help="the server (a database of its own per system is created and dropped)")
    args = ap.parse_args(argv)
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = [s for s in systems if not _known(s)]
    if unknown or not systems:
        print(f"pg_peers: unknown system {', '.join(unknown) or '(none)'}; choose among {', '.join(SYSTEMS)}, "
              f"or {WITHOUT}<part> with part one of {', '.join(PARTS)}, {ALL} (join several with +)",
              file=sys.stderr)
        return 2
    missing = [s for s in systems if s in PEER_PACKAGES and importlib.util.find_spec(PEER_PACKAGES[s]) is None]
    if missing:
        print(f"pg_peers: {', '.join(missing)} not installed: pip install -e '.[bench]' "
              f"(or leave {', '.join(missing)} out with --systems)", file=sys.stderr)
        return 2
    procs = [int(x) for x in (args.procs or ("1,2" if args.quick else "1,2,4")).split(",") if x.strip()]
    ops = args.ops if args.ops is not None else (100 if args.quick else 1200)
    rounds = args.rounds if args.rounds is not None else (1 if args.quick else 3)
    if ops < 1 or rounds < 1 or not procs or min(procs) < 1:
        print("pg_peers: --ops, --rounds and --procs must be positive", file=sys.stderr)
        return 2
    import psycopg

    import agentboard  # noqa: F401  imported once, before the workers fork

    load_start = load_average()
    made: dict[str, str] = {}
    urls: dict[str, str] = {}
    server_version = "?"
    monitor, monitor_name, no_inspect = monitor_database(args.pg)
    if monitor_name:
        made["monitor"] = monitor_name
    try:
        for system in systems:
            urls[system], made[system] = fresh_pg(args.pg)
            with psycopg.connect(urls[system], autocommit=True) as conn:
                conn.execute(f'ALTER DATABASE "{made[system]}" SET synchronous_commit = on')
                server_version = str(conn.execute("SHOW server_version").fetchone()[0])  # type: ignore[index]
            install(system, urls[system])
        rows = run(urls, monitor, systems, procs, ops, rounds, args.waits)
    finally:
        for name in made.values():
            drop_pg(args.pg, name)
    rats = ratios(rows, systems)
    load_end = load_average()
    print(table(rows, rats), file=sys.stderr)
    print(f"{ops} ops per phase split over N processes, median of {rounds} interleaved rounds; "
          f"PostgreSQL {server_version}, synchronous_commit = on; CPU: client = the worker processes, "
          "server = their backends (WAL writer, checkpointer, background writer apart, in brackets: "
          "they serve the whole server); WAL = pg_current_wal_lsn() advance per op (the server's), "
          "own = the WAL records of the system's database and its transactions (pg_walinspect"
          + (f"; not measured: {no_inspect})" if no_inspect else ")"), file=sys.stderr)
    print(f"load average (1/5/15 min): {load_start} at the start, {load_end} at the end; "
          f"{os.cpu_count()} cores", file=sys.stderr)
    print(json.dumps({
        "bench": "pg_peers", "systems": systems, "procs": procs, "ops": ops, "rounds": rounds,
        "versions": {"postgresql": server_version, "agentboard": _version("agentboard"),
                     **{s: _version(PEER_PACKAGES[s]) for s in systems if s in PEER_PACKAGES}},
        "synchronous_commit": "on", "cores": os.cpu_count(),
        "rows": rows, "ratios": rats, "load_average": {"start": load_start, "end": load_end},
    }))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
