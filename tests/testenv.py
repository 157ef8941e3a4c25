"""Test environments shared by the project's and the kernel suite's fixtures: a home folder
the environment points at, and scratch PostgreSQL databases.

PostgreSQL tests use AGENTBOARD_TEST_DATABASE_URL (default postgresql://postgres@127.0.0.1:5432/test).
Locally an unreachable server skips them with a reason; under CI=true it fails them.
"""

from __future__ import annotations

import os
import pty
import queue
import secrets
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest


def wait_for(fn: Callable[[], Any], timeout: float = 120.0, what: str = "condition") -> Any:
    """Poll ``fn`` until it returns something truthy and return that; fail after ``timeout``.

    The one polling helper of the suite. The timeout is a generous bound against a hang, never a
    speed assertion. The first polls come 5 ms apart and the gaps double up to 50 ms: a quick
    condition is seen within milliseconds, a long one as before (20 polls a second).
    """
    deadline = time.monotonic() + timeout
    pause = 0.005
    while True:
        value = fn()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(pause)
        pause = min(pause * 2, 0.05)


def copy_template(template: Path, home: Path) -> Path:
    """Put a copy of the migrated SQLite ``template`` in ``home`` (created if missing)."""
    import shutil

    home.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(template, home / "agentboard.db")
    return home


class CliEntry:
    """The real ``agentboard`` entry point (``agentboard.cli.main.main``) as a command for
    ``click.testing.CliRunner``: usage errors, kernel errors and exit codes are what a user gets,
    without the cost of a new interpreter (and its imports) per command."""

    name = "agentboard"

    def main(self, args: list[str], prog_name: str | None = None, **_: Any) -> None:
        from agentboard.cli import common, main

        common.reset()
        try:
            main.main(list(args))
        finally:
            common.reset()


def cli_in_process(args: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    """Run ``agentboard ARGS`` in this process with exactly the ``AGENTBOARD_*`` variables of
    ``env`` (the others of this process are unset for the call). Returns (exit code, stdout, stderr)."""
    from click.testing import CliRunner

    call_env: dict[str, str | None] = {k: None for k in os.environ if k.startswith("AGENTBOARD_")}
    call_env.update(env)
    r = CliRunner().invoke(CliEntry(), args, env=call_env, catch_exceptions=False)  # type: ignore[arg-type]
    return r.exit_code, r.stdout, r.stderr


#: the real agent CLIs from npm (``scripts/test`` installs them into ``.cache/agentclis``)
CLIS = Path(__file__).resolve().parents[1] / ".cache" / "agentclis" / "node_modules" / ".bin"


def real_cli(name: str) -> str:
    """The path of the real ``name`` CLI; skipped with the reason when it is missing (failed under
    ``CI=true``, where it must be there)."""
    path = CLIS / name
    if not path.exists():
        reason = f"the real {name} CLI is not installed in {CLIS.parent.parent} (scripts/test installs it)"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return str(path)


#: ``scripts/test --fast``: the edit-test loop; property tests take fewer examples
FAST = os.environ.get("AGENTBOARD_TEST_FAST") == "1"

PG_URL = os.environ.get("AGENTBOARD_TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test")


def pg_admin_url() -> str:
    """The server's maintenance database, from which test databases are created and dropped."""
    return PG_URL.rpartition("/")[0] + "/postgres"


def pg_available() -> str | None:
    """None when the server answers, else the reason it does not."""
    try:
        import psycopg

        with psycopg.connect(PG_URL, connect_timeout=3):
            return None
    except Exception as exc:  # pragma: no cover - depends on the machine
        return f"PostgreSQL at {PG_URL} is unreachable: {exc}"


def require_pg() -> None:
    reason = pg_available()
    if reason is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(reason + " (CI=true: PostgreSQL tests must run)")
    pytest.skip(reason)


@contextmanager
def scratch_database(*, template: str | None = None, prefix: str = "ab_") -> Iterator[str]:
    """A new database (empty, or a copy of ``template``), dropped on exit. Yields its name."""
    import psycopg

    name = prefix + secrets.token_hex(6)
    copy = f' TEMPLATE "{template}"' if template else ""
    with psycopg.connect(pg_admin_url(), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"{copy}')
    try:
        yield name
    finally:
        with psycopg.connect(pg_admin_url(), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


#: what makes a database's schema: its tables' columns, indexes, triggers and functions
_SCHEMA_PRINT = (
    "SELECT md5(string_agg(x, '|' ORDER BY x)) FROM ("
    "SELECT table_name || '.' || column_name || ':' || data_type || ':' || coalesce(column_default, '') AS x "
    "FROM information_schema.columns WHERE table_schema = 'public' "
    "UNION ALL SELECT indexname || ':' || indexdef FROM pg_indexes WHERE schemaname = 'public' "
    "UNION ALL SELECT c.relname || ':' || t.tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
    "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND NOT t.tgisinternal "
    "UNION ALL SELECT p.proname || ':' || md5(p.prosrc) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
    "WHERE n.nspname = 'public') s"
)


class TemplateCopies:
    """Databases with the migrated template's schema and rows, one per test.

    Two databases are copies of the template (``CREATE DATABASE … TEMPLATE``); after each test
    its database is emptied back to the template's rows (every row deleted, the template's rows
    put back, its sequences where the template's are) and renamed, on a thread of its own, so no test waits
    for the server's ``DROP DATABASE`` (a checkpoint of the whole server) and ``CREATE DATABASE``.
    A database whose schema a test changed is dropped instead. No test sees another's rows, and
    a process a test left behind cannot reach the next test's database (its name is new).
    """

    def __init__(self, template: str) -> None:
        import psycopg

        self.template = template
        with psycopg.connect(database_url(template), autocommit=True) as conn:
            self._print = conn.execute(_SCHEMA_PRINT).fetchone()[0]  # type: ignore[index]
            tables = [r[0] for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename")]
            self._seed = {t: conn.execute(f'SELECT * FROM "{t}"').fetchall() for t in tables}
            self._columns = {t: [d.name for d in conn.execute(f'SELECT * FROM "{t}" LIMIT 0').description or []]
                             for t in tables}
            self._sequences = [(r[0], r[1], r[2]) for r in conn.execute(
                "SELECT sequencename, start_value, last_value FROM pg_sequences WHERE schemaname = 'public'")]
        self._free: queue.Queue[str] = queue.Queue()
        self._jobs: queue.Queue[str | None] = queue.Queue()
        self._pending = 0
        self._lock = threading.Lock()
        self._names: set[str] = set()
        self._thread = threading.Thread(target=self._work, name="pg-template-copies", daemon=True)
        self._thread.start()

    def take(self) -> str:
        """The name of a database like the template that no test uses."""
        with self._lock:
            wait = self._pending > 0 and len(self._names) >= 2
        try:
            return self._free.get(timeout=120 if wait else 0.001)
        except queue.Empty:
            pass
        import psycopg

        name = "ab_" + secrets.token_hex(6)
        with psycopg.connect(pg_admin_url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{self.template}"')
        with self._lock:
            self._names.add(name)
        return name

    def give_back(self, name: str) -> None:
        """``name``'s test is over: empty it for the next one (in the background)."""
        with self._lock:
            self._pending += 1
        self._jobs.put(name)

    def close(self) -> None:
        """Drop every database made."""
        self._jobs.put(None)
        self._thread.join(timeout=300)
        for name in sorted(self._names):
            self._drop(name)

    def _work(self) -> None:
        while (name := self._jobs.get()) is not None:
            try:
                fresh = self._reset(name)
            except Exception:
                fresh = None
                self._drop(name)
            with self._lock:
                self._names.discard(name)
                if fresh:
                    self._names.add(fresh)
                self._pending -= 1
            if fresh:
                self._free.put(fresh)

    def _reset(self, name: str) -> str | None:
        """Empty ``name`` back to the template's rows and rename it; None (it is dropped) when its
        schema is no longer the template's."""
        import psycopg

        self._disconnect(name)
        with psycopg.connect(database_url(name)) as conn:
            if conn.execute(_SCHEMA_PRINT).fetchone()[0] != self._print:  # type: ignore[index]
                conn.close()
                self._drop(name)
                return None
            # rows only (no new files, unlike TRUNCATE); the triggers are off while the
            # template's rows go back exactly as they were
            conn.execute("SET LOCAL session_replication_role = replica")
            for table in self._seed:
                conn.execute(f'DELETE FROM "{table}"')
            for table, rows in self._seed.items():
                if rows:
                    cols = ", ".join(f'"{c}"' for c in self._columns[table])
                    marks = ", ".join(["%s"] * len(self._columns[table]))
                    conn.cursor().executemany(f'INSERT INTO "{table}" ({cols}) VALUES ({marks})', rows)
            for seq, start, last in self._sequences:
                conn.execute("SELECT setval(%s, %s, %s)", (f'"{seq}"', start if last is None else last, last is not None))
            conn.commit()
        fresh = "ab_" + secrets.token_hex(6)
        with psycopg.connect(pg_admin_url(), autocommit=True) as conn:
            for _ in range(100):  # a terminated backend takes a moment to go
                self._disconnect(name)
                try:
                    conn.execute(f'ALTER DATABASE "{name}" RENAME TO "{fresh}"')
                    return fresh
                except psycopg.errors.ObjectInUse:
                    time.sleep(0.05)
        raise RuntimeError(f"database {name} is still in use")

    @staticmethod
    def _disconnect(name: str) -> None:
        import psycopg

        with psycopg.connect(pg_admin_url(), autocommit=True) as conn:
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                         "WHERE datname = %s AND pid <> pg_backend_pid()", (name,))

    @staticmethod
    def _drop(name: str) -> None:
        import psycopg

        try:
            with psycopg.connect(pg_admin_url(), autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        except Exception:  # pragma: no cover - the server went away; nothing to clean
            pass


def database_url(name: str) -> str:
    return PG_URL.rpartition("/")[0] + "/" + name


BENCH = Path(__file__).resolve().parents[1] / "bench"


def run_bench(script: str, *args: str, timeout: float = 300) -> tuple[dict[str, Any], str]:
    """Run ``bench/<script>`` as a real process against the local server (``--pg``); its JSON
    line and its table (stderr). Fails with the script's stderr when it exits non-zero."""
    import json
    import subprocess
    import sys

    require_pg()
    proc = subprocess.run([sys.executable, str(BENCH / script), "--pg", PG_URL, *args],
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr


def point_home_at(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``home`` the AGENTBOARD_HOME, with no database URL, board or worker identity set."""
    monkeypatch.setenv("AGENTBOARD_HOME", str(home))
    for var in ("AGENTBOARD_DATABASE_URL", "AGENTBOARD_BOARD", "AGENTBOARD_TASK", "AGENTBOARD_RUN_ID",
                "AGENTBOARD_TOKEN", "AGENTBOARD_API_URL", "AGENTBOARD_LLM_BASE_URL",
                "AGENTBOARD_LLM_MODEL", "AGENTBOARD_LLM_API_KEY", "AGENTBOARD_LLM_COMMAND", "OPENAI_API_KEY"):
        monkeypatch.delenv(var, raising=False)


def on_terminal(home: Path, *args: str) -> str:
    """What ``agentboard ARGS`` writes on a terminal (a pseudo-terminal: nothing is stripped but
    the terminal's ``\r`` before each line end)."""
    env = {k: v for k, v in os.environ.items() if k not in ("AGENTBOARD_TASK", "AGENTBOARD_RUN_ID",
                                                              "AGENTBOARD_API_URL", "AGENTBOARD_TOKEN")}
    env.update(AGENTBOARD_HOME=str(home), COLUMNS="200")
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "agentboard", *args], stdin=subprocess.DEVNULL, stdout=slave,
                            stderr=subprocess.PIPE, env=env)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # the other side is closed
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    assert proc.wait(timeout=60) == 0, proc.stderr.read() if proc.stderr else ""
    return b"".join(chunks).decode().replace("\r\n", "\n")  # the terminal's own line ends


def fill(path: Path) -> None:
    """Take every free byte of the file system ``path`` is on (a file of that name)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (65536, 4096, 512, 1):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError:
                continue
    finally:
        os.close(fd)
