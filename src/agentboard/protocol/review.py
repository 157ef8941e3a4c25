"""Review: who reviews a task that enters review, the verdict schema and how a verdict applies.

The reviewer of a board (its ``reviewer`` setting, else the ``reviewer_agent`` setting, else the
default) is one of:

- ``profile:NAME`` — the dispatcher starts that profile in the task's workspace as a review run
  (``dispatch/reviewing.py``) with the review context (``protocol/review_context.py``); it
  answers with ``.board/review-verdict.json``. A profile never reviews its own work.
- ``llm`` — the dispatcher makes one LLM call over the same context (``agents/review.py``).
- ``heuristic`` — a deterministic verdict for tests and demos; every record says ``[heuristic]``.
- ``off`` — nobody: the task waits in review for a person.

The default is a profile named ``reviewer`` if one exists, else ``llm`` if an LLM is configured,
else off. An unavailable reviewer never approves: the task waits in review for a person and one
``review_unavailable`` event per review entry says ``peer review unavailable`` and why.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ..config import Settings
from ..domain import states
from ..domain.errors import InvalidInput
from ..kernel import dispatching, worker_protocol
from ..store.engine import Database, Row

VERDICTS = states.VERDICTS
SEVERITIES = ("critical", "major", "minor", "info")
UNAVAILABLE = worker_protocol.REVIEW_UNAVAILABLE
HEURISTIC_TAG = "[heuristic]"

VERDICT_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "agentboard review verdict (.board/review-verdict.json)",
    "type": "object",
    "additionalProperties": False,
    "required": ["verdict", "score", "summary"],
    "properties": {
        "score": {"type": "integer", "minimum": 0, "maximum": 100},
        "verdict": {"enum": list(VERDICTS)},
        "summary": {"type": "string"},
        # a race (docs/races.md): the attempt an approval picks as the winner
        "pick": {"type": "integer", "minimum": 1},
        "findings": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["severity", "message"],
                "properties": {
                    "file": {"type": "string"},
                    "severity": {"enum": list(SEVERITIES)},
                    "message": {"type": "string", "minLength": 1},
                },
            },
        },
    },
}


def validate_verdict(data: Any) -> list[str]:
    """Every way ``data`` breaks the verdict schema (empty list: valid)."""
    if not isinstance(data, dict):
        return ["$: must be a JSON object"]
    allowed = VERDICT_SCHEMA["properties"]
    errs = [f"$.{k}: unknown key (allowed: {', '.join(allowed)})" for k in sorted(data) if k not in allowed]
    v = data.get("verdict")
    if v not in VERDICTS:
        errs.append(f"$.verdict: must be one of {', '.join(VERDICTS)}, got {json.dumps(v)}")
    s = data.get("score")
    if isinstance(s, bool) or not isinstance(s, int) or not 0 <= s <= 100:
        errs.append(f"$.score: must be an integer from 0 to 100, got {json.dumps(s)}")
    summary = data.get("summary")
    if not isinstance(summary, str):
        errs.append("$.summary: required, a string")
    elif v in ("changes_requested", "rejected") and not summary.strip():
        errs.append(f"$.summary: a {v} verdict needs a summary saying why")
    pick = data.get("pick")
    if "pick" in data and (isinstance(pick, bool) or not isinstance(pick, int) or pick < 1):
        errs.append(f"$.pick: must be the number of an attempt (1 or more), got {json.dumps(pick)}")
    findings = data.get("findings", [])
    if not isinstance(findings, list):
        errs.append("$.findings: must be an array")
        findings = []
    for i, f in enumerate(findings):
        where = f"$.findings[{i}]"
        if not isinstance(f, dict):
            errs.append(f"{where}: must be an object")
            continue
        fprops = allowed["findings"]["items"]["properties"]
        errs += [f"{where}.{k}: unknown key" for k in sorted(f) if k not in fprops]
        if f.get("severity") not in SEVERITIES:
            errs.append(f"{where}.severity: must be one of {', '.join(SEVERITIES)}")
        if not isinstance(f.get("message"), str) or not f["message"].strip():
            errs.append(f"{where}.message: required, a non-empty string")
        if "file" in f and not isinstance(f["file"], str):
            errs.append(f"{where}.file: must be a string")
    return errs


def write_verdict(workspace: Path, data: dict[str, Any]) -> Path:
    """A review run's answer: validate ``data`` against the verdict schema and write it to the
    workspace's ``.board/review-verdict.json``, applied by the dispatcher when the review run
    ends (the ``kanban_review`` tool and ``agentboard review`` inside a review run call this)."""
    errs = validate_verdict(data)
    if errs:
        raise InvalidInput("the verdict is invalid: " + "; ".join(errs))
    from .boarddir import board_dir, write_text

    path = board_dir(workspace) / VERDICT_FILE
    write_text(path, json.dumps(data, indent=2) + "\n")
    return path


def read_verdict(path: Path) -> dict[str, Any]:
    """Read and validate a ``review-verdict.json``; raise :class:`InvalidInput` naming every error."""
    from . import safefs

    try:
        raw = safefs.read_file(path, limit=1024 * 1024)  # no link followed, no hard link read
        if raw is None:
            raise FileNotFoundError(path)
        data = safefs.loads(raw.decode("utf-8"))
    except FileNotFoundError:
        raise InvalidInput(f"no review verdict at {path}") from None
    except safefs.Unsafe as exc:
        raise InvalidInput(f"{path.name} refused: {exc.strerror}") from None
    except (OSError, ValueError) as exc:
        raise InvalidInput(f"{path.name}: not valid JSON ({exc})") from None
    errs = validate_verdict(data)
    if errs:
        raise InvalidInput(f"{path.name} is invalid: " + "; ".join(errs))
    return data  # type: ignore[no-any-return]


class VerdictApplier(Protocol):
    """How a verdict becomes the task's: its caller's road to done. The dispatcher and the
    surfaces give ``dispatch.finish.review`` (an approval integrates the task's branch when its
    board says so); the protocol never applies a verdict by itself."""

    def __call__(self, db: Database, board: str, task_id: str, verdict: str, text: str = "", *,
                 reviewer: str | None = None, score: int | None = None, findings: list[Any] | None = None,
                 actor: str | None = None) -> Row: ...


def apply_verdict(db: Database, board: str, task_id: str, verdict: dict[str, Any], *, apply: VerdictApplier,
                  reviewer: str = "reviewer-agent", actor: str | None = None) -> Row:
    """Check a verdict and hand it to ``apply``, which stores it on the run and as a review
    record and applies it."""
    errs = validate_verdict(verdict)
    if errs:
        raise InvalidInput("review verdict is invalid: " + "; ".join(errs))
    return apply(db, board, task_id, verdict["verdict"], verdict.get("summary", ""), reviewer=reviewer,
                 score=verdict["score"], findings=verdict.get("findings") or [], actor=actor or reviewer)


def apply_verdict_file(db: Database, board: str, task_id: str, path: Path, *, apply: VerdictApplier,
                       reviewer: str = "reviewer-agent") -> Row:
    """:func:`read_verdict` then :func:`apply_verdict`."""
    return apply_verdict(db, board, task_id, read_verdict(path), apply=apply, reviewer=reviewer)


# -- who reviews ------------------------------------------------------------------------------------

#: the profile that reviews by default, when it exists
DEFAULT_PROFILE = "reviewer"
#: where a review run answers
VERDICT_FILE = "review-verdict.json"


@dataclass(frozen=True)
class Reviewer:
    """The reviewer chosen for a board: ``mode`` is ``profile``, ``llm``, ``heuristic`` or
    ``off``; ``reason`` says why it is off."""

    mode: str
    profile: str | None = None
    reason: str = ""

    @property
    def name(self) -> str:
        """How review records name it: ``profile:NAME``, ``llm``, ``heuristic``."""
        return f"profile:{self.profile}" if self.mode == "profile" else self.mode


def llm_availability(settings: Settings) -> tuple[bool, str]:
    """Whether an LLM is configured for reviewing (no network), and what or why not."""
    from ..agents import llm

    return llm.availability(settings, "reviewer")


def choose_reviewer(settings: Settings, board_settings: dict[str, Any], profiles: dict[str, Row]) -> Reviewer:
    """The reviewer of a board with these settings and profiles (see the module docstring)."""
    value = board_settings.get("reviewer") or None
    where = "the board's reviewer setting"
    if value is None and settings.reviewer_agent not in ("auto", ""):
        value, where = settings.reviewer_agent, "AGENTBOARD_REVIEWER_AGENT"
    if value == "on":
        value = "llm"
    if value == "off":
        return Reviewer("off", reason=f"the reviewer agent is turned off ({where} is off)")
    if value == "heuristic":
        return Reviewer("heuristic")
    if value is not None and value.startswith("profile:"):
        name = value.split(":", 1)[1]
        p = profiles.get(name)
        if p is None:
            return Reviewer("off", reason=f"the reviewer profile {name!r} ({where}) does not exist")
        if not p.get("enabled"):
            return Reviewer("off", reason=f"the reviewer profile {name!r} ({where}) is disabled")
        return Reviewer("profile", name)
    if value is None:
        p = profiles.get(DEFAULT_PROFILE)
        if p is not None and p.get("enabled"):
            return Reviewer("profile", DEFAULT_PROFILE)
    ok, why = llm_availability(settings)
    if ok:
        return Reviewer("llm")
    if value == "llm":
        return Reviewer("off", reason=f"the LLM reviewer ({where}) is {why}")
    return Reviewer("off", reason=f"no reviewer profile named {DEFAULT_PROFILE!r} and no LLM is configured ({why})")


def board_reviewer(db: Database, settings: Settings, board: str) -> Reviewer:
    """:func:`choose_reviewer` for a board, reading its settings and the profiles."""
    board_settings, profiles = dispatching.review_facts(db, board)
    return choose_reviewer(settings, board_settings, profiles)


def own_work(reviewer: Reviewer, worker_profile: str | None) -> str | None:
    """Why ``reviewer`` may not review work done by ``worker_profile`` (None when it may)."""
    if reviewer.mode == "profile" and worker_profile and reviewer.profile == worker_profile:
        return (f"the reviewer profile {worker_profile!r} did this work itself, and a reviewer never "
                "reviews its own work; a person must review it (or set the board's reviewer to another profile)")
    return None


def reviewer_label(name: str, model: str | None) -> str:
    """How a review record names an agent reviewer and its model: ``profile:reviewer (sonnet)``."""
    return f"{name} ({model})" if model else name


# -- entering review -------------------------------------------------------------------------------


def heuristic_verdict(summary: str | None, degraded: bool, verification: dict[str, Any] | None) -> dict[str, Any]:
    """A deterministic verdict from what the run recorded (tests and demos only)."""
    if degraded:
        return {"verdict": "changes_requested", "score": 30, "findings": [],
                "summary": f"{HEURISTIC_TAG} the worker's result.json never validated; "
                           "write a valid .board/result.json describing the work"}
    if not (summary or "").strip():
        return {"verdict": "changes_requested", "score": 30, "findings": [],
                "summary": f"{HEURISTIC_TAG} the run recorded no summary of what was done"}
    checked = bool(verification and verification.get("passed") and not verification.get("skipped"))
    return {"verdict": "approved", "score": 80 if checked else 70, "findings": [],
            "summary": f"{HEURISTIC_TAG} approved: a summary is present"
                       + ("; verification commands passed" if checked else "")}


def on_review_entered(db: Database, settings: Settings, board: str, task_id: str, *, apply: VerdictApplier) -> Row:
    """Call when a task lands in review: run the configured reviewer, or say it is unavailable.

    ``heuristic`` applies its verdict at once, through ``apply`` (``dispatch.finish.review``:
    ``dispatch.finish.review_entered`` calls this with it); ``profile`` and ``llm`` are queued for the
    dispatcher (``{"action": "review_queued", "reviewer"}``), which starts the review run. Never
    records an approval no reviewer gave: with the reviewer off, unavailable or refused (its own
    work) the task stays in review and one ``review_unavailable`` event per review entry says why.
    """
    entry = worker_protocol.review_entry(db, board, task_id)
    if entry.status != states.REVIEW:
        return {"action": "not_in_review", "status": entry.status}
    reviewer = board_reviewer(db, settings, board)
    if reviewer.mode == "off":
        return worker_protocol.note_review_unavailable(db, board, task_id, reviewer.reason)
    run = entry.run or {}
    refused = own_work(reviewer, run.get("profile"))
    if refused:
        return worker_protocol.note_review_unavailable(db, board, task_id, refused)
    if reviewer.mode in ("profile", "llm"):
        return {"action": "review_queued", "reviewer": reviewer.name}
    meta = run.get("metadata")
    try:
        meta = json.loads(meta) if isinstance(meta, str) and meta else (meta or {})
    except ValueError:
        meta = {}
    verdict = heuristic_verdict(run.get("summary"), entry.degraded,
                                meta.get("verification") if isinstance(meta, dict) else None)
    task = apply_verdict(db, board, task_id, verdict, apply=apply, reviewer="heuristic")
    return {"action": "heuristic", "verdict": verdict["verdict"], "status": task["status"]}


__all__ = [
    "DEFAULT_PROFILE", "HEURISTIC_TAG", "UNAVAILABLE", "VERDICT_FILE", "VERDICT_SCHEMA", "Reviewer", "VerdictApplier",
    "write_verdict",
    "apply_verdict", "apply_verdict_file", "board_reviewer", "choose_reviewer", "heuristic_verdict",
    "llm_availability", "on_review_entered", "own_work", "read_verdict", "reviewer_label", "validate_verdict",
]
