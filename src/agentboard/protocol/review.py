"""Review: verdict files from a reviewer agent, and what happens when a task enters review.

An unavailable reviewer never approves. With the reviewer agent off (or no LLM configured) the
task waits in review for a person and a ``review_unavailable`` event says
``peer review unavailable``. The ``heuristic`` reviewer is an explicit opt-in for tests and
demos; every record it writes says ``[heuristic]``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..config import Settings
from ..domain import states
from ..domain.errors import InvalidInput
from ..kernel import runs, worker_protocol
from ..store.engine import Database, Row

VERDICTS = ("approved", "changes_requested", "rejected")
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


def read_verdict(path: Path) -> dict[str, Any]:
    """Read and validate a ``review-verdict.json``; raise :class:`InvalidInput` naming every error."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InvalidInput(f"no review verdict at {path}") from None
    except (OSError, ValueError) as exc:
        raise InvalidInput(f"{path.name}: not valid JSON ({exc})") from None
    errs = validate_verdict(data)
    if errs:
        raise InvalidInput(f"{path.name} is invalid: " + "; ".join(errs))
    return data  # type: ignore[no-any-return]


def apply_verdict(db: Database, board: str, task_id: str, verdict: dict[str, Any], *,
                  reviewer: str = "reviewer-agent", actor: str | None = None) -> Row:
    """Store a validated verdict on the run and as a review record, and apply it."""
    errs = validate_verdict(verdict)
    if errs:
        raise InvalidInput("review verdict is invalid: " + "; ".join(errs))
    return runs.review(
        db, board, task_id, verdict["verdict"], verdict.get("summary", ""), reviewer=reviewer,
        score=verdict["score"], findings=verdict.get("findings") or [], actor=actor or reviewer,
    )


def apply_verdict_file(db: Database, board: str, task_id: str, path: Path, *,
                       reviewer: str = "reviewer-agent") -> Row:
    """:func:`read_verdict` then :func:`apply_verdict`."""
    return apply_verdict(db, board, task_id, read_verdict(path), reviewer=reviewer)


# -- entering review -------------------------------------------------------------------------------


def llm_configured(settings: Settings) -> bool:
    """Whether an LLM is configured (base URL and model)."""
    return bool(settings.llm_base_url and settings.llm_model)


def reviewer_mode(settings: Settings) -> tuple[str, str]:
    """``(mode, reason)``: mode is ``agent``, ``heuristic`` or ``off``; reason explains ``off``."""
    setting = settings.reviewer_agent
    if setting == "heuristic":
        return "heuristic", ""
    if setting == "off":
        return "off", "the reviewer agent is turned off (AGENTBOARD_REVIEWER_AGENT=off)"
    if not llm_configured(settings):
        return "off", "no LLM is configured (set AGENTBOARD_LLM_BASE_URL and AGENTBOARD_LLM_MODEL)"
    return "agent", ""


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


def on_review_entered(db: Database, settings: Settings, board: str, task_id: str) -> Row:
    """Call when a task lands in review: run the configured reviewer, or say it is unavailable.

    Never records an approval no reviewer gave: with the reviewer off, no LLM configured or no
    reviewer agent in this installation the task stays in review and one ``review_unavailable``
    event per review entry says so.
    """
    mode, reason = reviewer_mode(settings)
    if mode == "agent":
        return worker_protocol.note_review_unavailable(
            db, board, task_id, "the reviewer agent is not available in this installation")
    if mode == "off":
        return worker_protocol.note_review_unavailable(db, board, task_id, reason)
    entry = worker_protocol.review_entry(db, board, task_id)
    if entry.status != states.REVIEW:
        return {"action": "not_in_review", "status": entry.status}
    run = entry.run or {}
    meta = run.get("metadata")
    try:
        meta = json.loads(meta) if isinstance(meta, str) and meta else (meta or {})
    except ValueError:
        meta = {}
    verdict = heuristic_verdict(run.get("summary"), entry.degraded,
                                meta.get("verification") if isinstance(meta, dict) else None)
    task = apply_verdict(db, board, task_id, verdict, reviewer="heuristic")
    return {"action": "heuristic", "verdict": verdict["verdict"], "status": task["status"]}


__all__ = [
    "HEURISTIC_TAG", "UNAVAILABLE", "VERDICT_SCHEMA", "apply_verdict", "apply_verdict_file",
    "heuristic_verdict", "on_review_entered", "read_verdict", "reviewer_mode", "validate_verdict",
]
