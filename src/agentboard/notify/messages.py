"""The text people receive: one line per event, a digest for a burst, a link to the task."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from ..store.engine import Row
from .send import FAILURE, INFO, SUCCESS, WARNING

#: how each kind reads, and the Apprise type it is sent as
_KINDS: dict[str, tuple[str, str]] = {
    "completed": ("completed", SUCCESS),
    "blocked": ("blocked", WARNING),
    "gave_up": ("gave up", FAILURE),
    "crashed": ("crashed", FAILURE),
    "timed_out": ("timed out", FAILURE),
    "review_requested": ("waits for review", INFO),
    "budget_warning": ("budget warning", WARNING),
    "budget_exhausted": ("budget exhausted", FAILURE),
    "goal_completed": ("goal completed", SUCCESS),
}
_RANK = {INFO: 0, SUCCESS: 1, WARNING: 2, FAILURE: 3}
#: the most event lines a digest lists (the rest are counted)
DIGEST_LINES = 50


@dataclass(frozen=True)
class Message:
    title: str
    body: str
    kind: str
    events: int


def task_link(public_url: str | None, board: str, task_id: str | None) -> str | None:
    """The dashboard address of a task (``public_url`` set), else ``None``."""
    if not public_url or not task_id:
        return None
    return f"{public_url.rstrip('/')}/?board={quote(board)}&task={quote(task_id)}"


def _detail(event: Mapping[str, Any]) -> str:
    payload: dict[str, Any] = event.get("payload") if isinstance(event.get("payload"), dict) else {}  # type: ignore[assignment]
    kind = event["kind"]
    if kind in ("completed", "review_requested"):
        return str(payload.get("summary") or "").strip().splitlines()[0][:300] if payload.get("summary") else ""
    if kind == "blocked":
        why = str(payload.get("reason") or "").strip()
        block = payload.get("kind")
        text = f"{block}: {why}" if block and why else (why or str(block or ""))
        return text.splitlines()[0][:300] if text else ""
    for key in ("reason", "error", "message", "detail"):
        if payload.get(key):
            return str(payload[key]).splitlines()[0][:300]
    return ""


def line(event: Mapping[str, Any], ctx: Row | None, public_url: str | None) -> str:
    """One event as one line: what happened to which task, the first line of its summary or
    reason, and the link back."""
    label = _KINDS.get(event["kind"], (event["kind"].replace("_", " "), INFO))[0]
    task_id = event.get("task_id")
    payload = event.get("payload") if isinstance(event.get("payload"), dict) else {}
    if task_id:
        title = (ctx or {}).get("title") or ""
        subject = f"{task_id} {title}".strip()
    elif event["kind"].startswith("goal") and isinstance(payload, dict) and payload.get("goal_id"):
        subject = f"goal {payload['goal_id']}"
    else:
        subject = f"board {event['board']}"
    text = f"{label}: {subject}"
    detail = _detail(event)
    if detail:
        text += f" — {detail}"
    link = task_link(public_url, event["board"], task_id)
    if link:
        text += f" {link}"
    return text


def single(event: Mapping[str, Any], ctx: Row | None, public_url: str | None) -> Message:
    label, kind = _KINDS.get(event["kind"], (event["kind"].replace("_", " "), INFO))
    return Message(title=f"[{event['board']}] {label}", body=line(event, ctx, public_url),
                   kind=kind, events=1)


def digest(events: Sequence[Mapping[str, Any]], contexts: dict[str, Row], public_url: str | None) -> Message:
    """A burst as one message: the counts by kind, then one line per event (at most
    :data:`DIGEST_LINES`, the rest counted)."""
    counts = Counter(_KINDS.get(e["kind"], (e["kind"], INFO))[0] for e in events)
    boards = sorted({e["board"] for e in events})
    worst = max((_KINDS.get(e["kind"], ("", INFO))[1] for e in events), key=lambda k: _RANK[k])
    summary = ", ".join(f"{n} {label}" for label, n in counts.most_common())
    lines = [line(e, contexts.get(e.get("task_id") or ""), public_url) for e in events[:DIGEST_LINES]]
    if len(events) > DIGEST_LINES:
        lines.append(f"... and {len(events) - DIGEST_LINES} more")
    return Message(title=f"[{', '.join(boards)}] {len(events)} updates: {summary}",
                   body="\n".join(lines), kind=worst, events=len(events))
