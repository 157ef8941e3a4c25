"""What one dispatcher pass did: a typed report, turned into the JSON document that
``agentboard dispatch --json`` and ``POST /api/dispatch`` answer with (:meth:`PassReport.to_dict`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Seen(StrEnum):
    """What checking one running task found that the report counts (the counter's name)."""

    EXIT = "exits"
    TIMEOUT = "timeouts"
    STALE = "stale"
    RECLAIMED = "reclaimed"
    EXTENDED = "extended"


@dataclass(frozen=True)
class Spawned:
    """A worker started and recorded in this pass."""

    board: str
    task: str
    run_id: int
    pid: int
    profile: str
    workspace: str

    def to_dict(self) -> dict[str, Any]:
        return {"board": self.board, "task": self.task, "run_id": self.run_id, "pid": self.pid,
                "profile": self.profile, "workspace": self.workspace}


@dataclass(frozen=True)
class WouldSpawn:
    """A task a dry run would start."""

    board: str
    task: str
    title: str
    profile: str
    priority: int

    def to_dict(self) -> dict[str, Any]:
        return {"board": self.board, "task": self.task, "title": self.title, "profile": self.profile,
                "priority": self.priority}


@dataclass(frozen=True)
class Skipped:
    """A ready task not started (or, without a task, the whole spawn step skipped), and why."""

    reason: str
    task: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"reason": self.reason} if self.task is None else {"task": self.task, "reason": self.reason}


@dataclass(frozen=True)
class SpawnFailed:
    """A claimed task whose worker could not be started; ``systemic`` when it was blocked with
    others failing the same way."""

    task: str
    error: str
    systemic: bool

    def to_dict(self) -> dict[str, Any]:
        return {"task": self.task, "error": self.error, "systemic": self.systemic}


@dataclass
class PassReport:
    host: str
    dry_run: bool
    spawned: list[Spawned] = field(default_factory=list)
    would_spawn: list[WouldSpawn] = field(default_factory=list)
    exits: int = 0
    timeouts: int = 0
    stale: int = 0
    reclaimed: int = 0
    extended: int = 0
    promoted: int = 0
    #: tasks whose rate-limit block ended and went back to the queue in this pass
    resumed: int = 0
    skipped: list[Skipped] = field(default_factory=list)
    skipped_boards: list[str] = field(default_factory=list)
    spawn_failed: list[SpawnFailed] = field(default_factory=list)
    #: set when ``skipped_boards`` is not empty
    skipped_reason: str | None = None
    #: ready tasks the pass chose and a budget blocked at their claim instead
    budget_blocked: list[Skipped] = field(default_factory=list)

    def count(self, seen: Seen) -> None:
        setattr(self, seen.value, getattr(self, seen.value) + 1)

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data (the keys and order the CLI and the API have always shown)."""
        out: dict[str, Any] = {
            "host": self.host, "dry_run": self.dry_run,
            "spawned": [s.to_dict() for s in self.spawned],
            "would_spawn": [s.to_dict() for s in self.would_spawn],
            "exits": self.exits, "timeouts": self.timeouts, "stale": self.stale, "reclaimed": self.reclaimed,
            "extended": self.extended, "promoted": self.promoted,
            "skipped": [s.to_dict() for s in self.skipped],
            "skipped_boards": list(self.skipped_boards),
            "spawn_failed": [f.to_dict() for f in self.spawn_failed],
        }
        if self.resumed:
            out["resumed"] = self.resumed
        if self.budget_blocked:
            out["budget_blocked"] = [s.to_dict() for s in self.budget_blocked]
        if self.skipped_reason is not None:
            out["skipped_reason"] = self.skipped_reason
        return out
