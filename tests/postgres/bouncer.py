"""A real PgBouncer in transaction mode of the test's own, on a free loopback port in front of the
test's PostgreSQL server (the ``pgbouncer`` binary: scripts/test installs it; skipped without it,
except under CI, where it fails). Stopped and started again on the same port, it stands in for a
database a client cannot reach for a while."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from testenv import wait_for


def binary() -> str | None:
    return shutil.which("pgbouncer") or next(
        (p for p in ("/usr/sbin/pgbouncer", "/usr/bin/pgbouncer") if os.access(p, os.X_OK)), None)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Bouncer:
    """One PgBouncer: :meth:`start`, :meth:`stop` (and start again: the same port and file)."""

    def __init__(self, pg_url: str, sessions: int) -> None:
        from sqlalchemy.engine import make_url

        found = binary()
        if found is None:
            if os.environ.get("CI") == "true":
                pytest.fail("pgbouncer is not installed: scripts/test installs it (apt-get install pgbouncer)")
            pytest.skip("pgbouncer is not installed (apt-get install pgbouncer)")
        server = make_url(pg_url)
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="ab-pgbouncer-"))
        self.dir.chmod(0o755)  # run as nobody when we are root (pgbouncer refuses root)
        (self.dir / "users.txt").write_text(f'"{server.username or "postgres"}" ""\n')
        self.ini = self.dir / "pgbouncer.ini"
        self.ini.write_text(
            f"[databases]\n* = host={server.host or '127.0.0.1'} port={server.port or 5432}\n"
            f"[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {self.port}\nunix_socket_dir =\n"
            f"auth_type = trust\nauth_file = {self.dir / 'users.txt'}\npool_mode = transaction\n"
            f"default_pool_size = {sessions}\nmax_client_conn = 200\nignore_startup_parameters = extra_float_digits\n")
        for f in self.dir.iterdir():
            f.chmod(0o644)
        self.argv = [found, str(self.ini)] + (["-u", "nobody"] if os.geteuid() == 0 else [])
        self.url = server.set(port=self.port).render_as_string(hide_password=False)
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        import psycopg

        log = open(self.dir / "pgbouncer.log", "ab")  # noqa: SIM115 - the child's
        self.proc = subprocess.Popen(self.argv, stdout=log, stderr=log)
        log.close()

        def up() -> bool:
            try:
                with psycopg.connect(self.url.replace("+psycopg", ""), connect_timeout=2,
                                     prepare_threshold=None) as c:
                    return c.execute("SELECT 1").fetchone() == (1,)
            except psycopg.Error:
                return False
        wait_for(up, 60, "pgbouncer answering")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(30)
        self.proc = None

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


@contextmanager
def pgbouncer(pg_url: str, sessions: int, info: dict[str, Any] | None = None) -> Iterator[str]:
    """PgBouncer in transaction mode in front of the test's database (a pool of ``sessions``
    server sessions); the URL through it. ``info`` gets its configuration file (``ini``) and
    process (``proc``)."""
    bouncer = Bouncer(pg_url, sessions)
    try:
        bouncer.start()
        if info is not None:
            info.update(ini=bouncer.ini, proc=bouncer.proc)
        yield bouncer.url
    finally:
        bouncer.close()
