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

from ..domain import states
from ..domain.errors import InvalidInput
from ..kernel import runs
from ..kernel.common import get_task
from ..store.engine import Database, Row, Tx

VERDICTS = ("approved", "changes_requested", "rejected")
SEVERITIES = ("critical", "major", "minor", "info")
UNAVAILABLE = "peer review unavailable"
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
    """Store a validated verdict on the run and as a review record, and apply it (01)."""
    errs = validate_verdict(verdict)
    if errs:
        raise InvalidInput("review verdict is invalid: " + "; ".join(errs))
    return runs.review(
        db, board, task_id, verdict["verdict"], verdict.get("summary", ""), reviewer=reviewer,
        score=verdict["score"], findings=verdict.get("findings") or [], actor=actor or reviewer,
    )


def apply_verdict_file(db: Database, board: str, task_id: str, path: Path, *,
                       reviewer: str = "reviewer-agent") -> Row:
    return apply_verdict(db, board, task_id, read_verdict(path), reviewer=reviewer)


# -- entering review -------------------------------------------------------------------------------


def llm_configured(settings: Any) -> bool:
    return bool(getattr(settings, "llm_base_url", None) and getattr(settings, "llm_model", None))


def reviewer_mode(settings: Any) -> tuple[str, str]:
    """``(mode, reason)``: mode is ``agent``, ``heuristic`` or ``off``; reason explains ``off``."""
    setting = getattr(settings, "reviewer_agent", "auto") or "auto"
    if setting == "heuristic":
        return "heuristic", ""
    if setting == "off":
        return "off", "the reviewer agent is turned off (AGENTBOARD_REVIEWER_AGENT=off)"
    if not llm_configured(settings):
        return "off", "no LLM is configured (set AGENTBOARD_LLM_BASE_URL and AGENTBOARD_LLM_MODEL)"
    return "agent", ""


def _entry_state(tx: Tx, board: str, task_id: str) -> Row:
    task = get_task(tx, board, task_id)
    anchor = tx.scalar(
        "SELECT COALESCE(MAX(id), 0) FROM task_events WHERE task_id = :t AND kind = 'review_requested'",
        {"t": task_id},
    )
    noted = tx.scalar(
        "SELECT COUNT(*) FROM task_events WHERE task_id = :t AND kind = 'review_unavailable' AND id > :a",
        {"t": task_id, "a": anchor},
    )
    degraded = tx.scalar(
        "SELECT COUNT(*) FROM task_events WHERE task_id = :t AND kind = 'result_degraded' AND id > :a",
        {"t": task_id, "a": anchor},
    ) if anchor else 0
    # a degraded result records its event just after the review_requested one
    last_run = tx.one(
        "SELECT id, summary, metadata FROM task_runs WHERE task_id = :t AND status = 'closed' ORDER BY id DESC LIMIT 1",
        {"t": task_id},
    )
    degraded_run = 0
    if last_run is not None:
        degraded_run = tx.scalar(
            "SELECT COUNT(*) FROM task_events WHERE task_id = :t AND kind = 'result_degraded' AND run_id = :r",
            {"t": task_id, "r": last_run["id"]},
        )
    return {"status": task["status"], "noted": int(noted or 0), "degraded": int(degraded or 0) + int(degraded_run or 0),
            "run": last_run}


def _unavailable(db: Database, board: str, task_id: str, reason: str) -> Row:
    def _w(tx: Tx) -> Row:
        state = _entry_state(tx, board, task_id)
        if state["status"] != states.REVIEW:
            return {"action": "not_in_review", "status": state["status"]}
        if state["noted"]:
            return {"action": "already_noted"}
        run = state["run"]
        tx.event(board, task_id, "review_unavailable",
                 {"message": UNAVAILABLE, "reason": reason, "waiting_for": "a person"},
                 run_id=run["id"] if run else None, actor="reviewer")
        return {"action": "unavailable", "message": f"{UNAVAILABLE}: {reason}"}
    return db.write(_w)


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


def on_review_entered(db: Database, settings: Any, board: str, task_id: str) -> Row:
    """Call when a task lands in review: run the configured reviewer, or say it is unavailable.

    Never records an approval no reviewer gave: with the reviewer off or no LLM configured the
    task stays in review and one ``review_unavailable`` event per review entry says so.
    """
    mode, reason = reviewer_mode(settings)
    if mode == "agent":
        try:
            from ..agents import review as agent_review  # type: ignore[attr-defined]  # the LLM reviewer (06)

            run_review = agent_review.review_task
        except (ImportError, AttributeError):
            return _unavailable(db, board, task_id, "the reviewer agent is not available in this installation")
        try:
            return {"action": "agent", "result": run_review(db, settings, board, task_id)}
        except Exception as exc:  # the reviewer failed: say so, never approve
            return _unavailable(db, board, task_id, f"the reviewer agent failed: {exc}")
    if mode == "off":
        return _unavailable(db, board, task_id, reason)
    state = db.read(_entry_state, board, task_id)
    if state["status"] != states.REVIEW:
        return {"action": "not_in_review", "status": state["status"]}
    run = state["run"] or {}
    meta = run.get("metadata")
    try:
        meta = json.loads(meta) if isinstance(meta, str) and meta else (meta or {})
    except ValueError:
        meta = {}
    verdict = heuristic_verdict(run.get("summary"), bool(state["degraded"]),
                                meta.get("verification") if isinstance(meta, dict) else None)
    task = apply_verdict(db, board, task_id, verdict, reviewer="heuristic")
    return {"action": "heuristic", "verdict": verdict["verdict"], "status": task["status"]}


__all__ = [
    "HEURISTIC_TAG", "UNAVAILABLE", "VERDICT_SCHEMA", "apply_verdict", "apply_verdict_file",
    "heuristic_verdict", "on_review_entered", "read_verdict", "reviewer_mode", "validate_verdict",
]
