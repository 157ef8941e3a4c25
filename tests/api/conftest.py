"""A real server per test: uvicorn on an ephemeral loopback port, over a fresh home."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from testenv import copy_template

import agentboard
from agentboard.api import create_app
from agentboard.api.serve import BackgroundServer
from agentboard.kernel import queries, tokens

#: one TLS context for every test client (httpx builds one per client otherwise, ~0.1 s each)
_TLS = ssl.create_default_context()


@dataclass
class Api:
    """A running server and what a test needs to talk to it."""

    url: str
    ab: Any  # agentboard.client.Client on the same database
    admin: str
    server: BackgroundServer
    _clients: list[httpx.Client] = field(default_factory=list)

    @property
    def db(self) -> Any:
        return self.ab.db

    def client(self, token: str | None = None, **kw: Any) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        kw.setdefault("verify", _TLS)  # (loopback over http: no context to build per client)
        c = httpx.Client(base_url=self.url, headers=headers, timeout=30, **kw)
        self._clients.append(c)
        return c

    @property
    def as_admin(self) -> httpx.Client:
        return self.client(self.admin)

    def token(self, name: str, role: str = "member", boards: tuple[str, ...] = ()) -> str:
        return str(tokens.create(self.db, name, role=role, boards=list(boards))["token"])

    def last_event(self) -> int:
        return queries.last_event_id(self.db)

    def close(self) -> None:
        for c in self._clients:
            c.close()

    def __enter__(self) -> Api:
        return self

    def __exit__(self, *exc: object) -> None:
        """Close the test's HTTP clients and stop the server."""
        self.close()
        self.server.stop()


def start_api(ab: Any, **app_kw: Any) -> Api:
    """Start a server on ``ab``'s database; use it as ``with start_api(ab) as a:`` to stop it."""
    admin = tokens.create(ab.db, "admin", role="admin")["token"]
    app = create_app(ab.settings, ab.db, **app_kw)
    server = BackgroundServer(app).start()
    return Api(url=server.url, ab=ab, admin=admin, server=server)


@pytest.fixture
def api(home: Path, sqlite_template: Path) -> Iterator[Api]:
    """A server on a fresh SQLite home (a copy of the suite's migrated template)."""
    copy_template(sqlite_template, home)
    with agentboard.connect(str(home)) as client, start_api(client) as a:
        yield a


@pytest.fixture
def api_any(ab: Any) -> Iterator[Api]:
    """A server on each backend (SQLite and PostgreSQL)."""
    with start_api(ab) as a:
        yield a
