"""Bounding retries beyond the per-task counter: systemic failures and respawn guards.

The per-task circuit breaker (``consecutive_failures`` against ``max_retries`` / the board's
``failure_limit`` / the global one, and three protocol violations in a row) lives in the kernel
(``runs.fail``). Here:

- :func:`fingerprint`: an error with ids, paths and numbers masked, so that several tasks failing
  in one pass with the same fingerprint (e.g. a missing binary) are recognised as one systemic
  failure and blocked at once instead of each burning its retries;
- :func:`guard`: reasons not to respawn a ready task now (logged as ``respawn_guarded``).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any, TypeVar

SYSTEMIC_MIN = 3

T = TypeVar("T")

_MASKS = (
    (re.compile(r"\bt_[0-9a-f]{8}\b"), "<task>"),
    (re.compile(r"/[^\s'\"]*"), "<path>"),
    (re.compile(r"\b\d+(\.\d+)?\b"), "<n>"),
)


def fingerprint(error: str | None) -> str:
    text = (error or "").strip().lower()
    for rx, repl in _MASKS:
        text = rx.sub(repl, text)
    return text[:300]


def systemic_groups(failures: list[tuple[T, str]],
                    minimum: int = SYSTEMIC_MIN) -> tuple[list[tuple[T, str]], list[tuple[T, str]]]:
    """Split ``(item, error)`` failures into (systemic, individual) by shared fingerprint."""
    groups: dict[str, list[tuple[T, str]]] = {}
    for item, err in failures:
        groups.setdefault(fingerprint(err), []).append((item, err))
    systemic: list[tuple[T, str]] = []
    single: list[tuple[T, str]] = []
    for members in groups.values():
        (systemic if len(members) >= minimum else single).extend(members)
    return systemic, single


#: an HTTP status of an API that refused the agent (401, 403, 429), as the agent CLIs and the
#: API clients print it: ``HTTP 401``, ``HTTP/1.1 403``, ``HTTP Error 429``, ``status code 403``,
#: ``unexpected status 401``, ``Error code: 429``, ``API Error: 401``, ``"statusCode":401``,
#: ``"code":429`` — never a bare number (``line 403`` of a traceback, a port, a count)
_HTTP_STATUS = (r"(?:\bhttps?(?:/[\d.]+)?(?:[ _]error)?|\bstatus(?:[ _]?code)?|\berror[ _]code|\bapi[ _]error|"
                r"\bresponse[ _]code|[\"']code)[\"']?\s*:?\s*[\"'(]?(?:401|403|429)\b")
#: what an agent CLI or an API says when it refuses for auth, quota or rate limit (Claude Code,
#: Codex, Gemini CLI, opencode and the OpenAI / Anthropic / Gemini APIs: ``agentcli`` classifies
#: the same runs; this guard catches them in any worker's last output). Each is a phrase the
#: service prints, matched as words of text: never inside an identifier or a path
#: (``tests/test_authentication.py``, ``test_quota.py``), nor a disk quota
_AUTH_WORDS = (
    r"unauthori[sz]ed|unauthenticated|forbidden|permission_denied|too many requests|not logged in|"
    r"please run /login|oauth token has expired|"
    r"(?:invalid|incorrect|missing|no|bad|expired|revoked)[ _-]+(?:x-)?api[ _-]?key|api[ _-]?key (?:is )?"
    r"(?:invalid|not valid|expired|missing|required|not set)|api_key_invalid|"
    r"authentication[ _-]?(?:failed|failure|error|required)|(?:invalid|failed)[ _]authentication|"
    r"(?:provider)?autherror|rate[ _-]?limit(?:ed|s|ing|error|_error|_exceeded)?|usage limit|"
    r"insufficient[ _]quota|exceeded your (?:current )?quota|(?<!disk )quota (?:exceeded|exhausted|reached|"
    r"will reset)|(?:terminal)?quota_?error|exhausted your (?:capacity|quota)|resource[ _]exhausted|"
    r"billing[ _](?:hard[ _])?limit(?:[ _]reached)?|billing[ _]not[ _]active|plan and billing details|"
    r"credit balance (?:is )?too low"
)
_AUTH = re.compile(_HTTP_STATUS + r"|(?<![\w/])(?:" + _AUTH_WORDS + r")(?![\w/]|\.\w)", re.I)
_PR = re.compile(r"https?://\S+/pull/\d+|https?://\S+/merge_requests/\d+|\bPR #\d+|\bpull request #?\d+", re.I)
_AGENT_ACTORS = {None, "", "dispatcher", "worker", "supervisor", "agent", "system"}


def auth_like(error: str | None) -> bool:
    return bool(error) and bool(_AUTH.search(error or ""))


def guard(task: dict[str, Any], *, profiles: set[str],
          comments: Callable[[str, float], list[dict[str, Any]]] | None = None,
          reopened: Callable[[str], dict[str, Any] | None] | None = None,
          now: float | None = None) -> str | None:
    """Why ``task`` must not be respawned now, or None.

    ``comments(task_id, since)`` and ``reopened(task_id)`` are called only when the cheap facts
    on the row say they may matter.
    """
    now = now or time.time()
    if task.get("last_outcome") == "unguarded":  # a person let it run (`agentboard unguard`)
        return None
    if int(task.get("consecutive_failures") or 0) > 0 and auth_like(task.get("last_failure_error")):
        return ("the last failure looks like an auth, quota or rate-limit error "
                f"({(task.get('last_failure_error') or '')[:200]}); fix it, then `agentboard unguard {task['id']}` "
                "lets the dispatcher start it again")
    last_comment = task.get("last_comment_at")
    if task.get("last_outcome") in ("completed", "approved") and reopened is not None:
        ev = reopened(task["id"])
        if ev is not None and now - float(ev["created_at"]) < 3600:
            actor = ev.get("actor")
            human = actor not in _AGENT_ACTORS and actor not in profiles
            newer_comment = last_comment is not None and float(last_comment) > float(ev["created_at"]) - 1
            if not human and not newer_comment:
                return ("it completed less than an hour ago and was reopened by an agent without a new "
                        "human signal; comment on it or reopen it yourself to run it again")
    if last_comment is not None and now - float(last_comment) < 86400 and comments is not None:
        for c in comments(task["id"], now - 86400):
            if _PR.search(c.get("body") or ""):
                return ("a recent comment mentions an open pull request; review or close it, then "
                        f"`agentboard unguard {task['id']}` lets the dispatcher start it again")
    return None
