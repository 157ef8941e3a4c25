"""The Python API: ``agentboard.connect(url_or_home)`` → :class:`Client` → :class:`Board`.

A thin layer over the kernel functions, for scripts, tests and the benchmarks::

    import agentboard
    ab = agentboard.connect("/tmp/myhome")
    board = ab.board()                      # the default board
    t = board.create("write the report", assignee="writer")
    run = board.claim(t["id"])
    board.complete(t["id"], summary="done", run_id=run["run_id"])
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import config as _config
from .domain import model
from .kernel import (
    attachments,
    boards,
    comments,
    goals,
    links,
    maintenance,
    profiles,
    queries,
    runs,
    tasks,
)
from .store.engine import Database, Row, open_database


class Board:
    """The verbs and read models of one board."""

    def __init__(self, client: Client, slug: str) -> None:
        self.client = client
        self.db = client.db
        self.slug = slug

    def _bind(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            return fn(self.db, self.slug, *args, **kwargs)
        return call

    def __getattr__(self, name: str) -> Any:
        for module in (tasks, runs, links, comments, queries):
            fn = getattr(module, name, None)
            if callable(fn) and name in getattr(module, "__all__", [name]) and not name.startswith("_"):
                return self._bind(fn)
        raise AttributeError(name)

    # explicit names for the read models and a few conveniences
    def list(self, **filters: Any) -> list[Row]:
        return queries.list_tasks(self.db, self.slug, **filters)

    def show(self, task_id: str) -> Row:
        return queries.task_detail(self.db, self.slug, task_id)

    def view(self, **kw: Any) -> Row:
        return queries.board_view(self.db, self.slug, **kw)

    def events(self, cursor: int = 0, **kw: Any) -> list[Row]:
        return queries.events_after(self.db, self.slug, cursor, **kw)

    def attach(self, task_id: str, path: str, **kw: Any) -> Row:
        kw.setdefault("max_bytes", self.client.settings.attachment_max_bytes)
        return attachments.attach(self.db, self.slug, task_id, path, home=self.client.home, **kw)

    def attachments(self, task_id: str) -> list[Row]:
        return attachments.list_attachments(self.db, self.slug, task_id)

    def goal(self, title: str, **kw: Any) -> Row:
        return goals.create(self.db, self.slug, title, **kw)

    def goals(self, **kw: Any) -> list[Row]:
        return goals.list_goals(self.db, self.slug, **kw)

    def __repr__(self) -> str:
        return f"<Board {self.slug} at {self.db.url}>"


class Client:
    """An open home: settings plus the database."""

    def __init__(self, settings: _config.Settings, db: Database) -> None:
        self.settings = settings
        self.db = db
        self.home = settings.home

    def board(self, slug: str | None = None) -> Board:
        return Board(self, model.board_slug(slug or "default"))

    def create_board(self, slug: str, **kw: Any) -> Row:
        return boards.create(self.db, slug, **kw)

    def boards(self, **kw: Any) -> list[Row]:
        return boards.list_boards(self.db, **kw)

    def add_profile(self, name: str, **kw: Any) -> Row:
        return profiles.add(self.db, name, **kw)

    def profiles(self) -> list[Row]:
        return profiles.list_profiles(self.db)

    def prune_events(self, **kw: Any) -> int:
        return maintenance.prune_events(self.db, **kw)

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_home(settings: _config.Settings) -> Database:
    """Create the home folders if needed and open (and migrate) its database."""
    settings.home.mkdir(parents=True, exist_ok=True)
    (settings.home / "boards").mkdir(exist_ok=True)
    db = open_database(settings.url, home=settings.home)
    db.settings = settings  # type: ignore[attr-defined]
    return db


def connect(url_or_home: str | Path | None = None, **overrides: Any) -> Client:
    target = str(url_or_home) if url_or_home is not None else None
    if target and "://" in target:
        settings = _config.load(**overrides)
        if target.startswith("sqlite:///"):
            settings.home = Path(target[len("sqlite:///"):]).parent
        settings.database_url = target
    else:
        settings = _config.load(target, **overrides)
    return Client(settings, open_home(settings))
