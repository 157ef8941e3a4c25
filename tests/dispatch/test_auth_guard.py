"""The respawn guard for a failure that looks like an auth, quota or rate-limit refusal: it holds
back only what an agent CLI or an API says when it refuses (401, 403, 429, a bad key, a spent
quota), not a worker whose output merely contains such a number or word (a traceback's line 403,
a test file named after authentication, a full disk); and the task it holds says the command that
releases it, which does."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys

import pytest

from agentboard.dispatch import breaker

from .conftest import all_in, events, wait_for

#: what a worker's crash may show in its last output that is no refusal of its agent's service
ORDINARY_FAILURES = [
    'Traceback (most recent call last):\n  File "/work/app/views.py", line 403, in login\n'
    "    raise ValueError(user)\nValueError: alice",
    "FAILED tests/test_authentication.py::test_login - AssertionError: assert 200 == 302",
    "OSError: [Errno 122] Disk quota exceeded: '/work/app/build/out.bin'",
]


def _agent(ab, name: str, said: str) -> None:
    """A profile whose worker prints ``said`` and exits 1 the first time, and reports done after."""
    marker, script = ab.home / f"{name}.once", ab.home / f"{name}.sh"
    script.write_text("#!/bin/sh\n"
                      f"if [ -e {marker} ]; then\n"
                      "  echo '{\"success\": true, \"summary\": \"done on the second try\"}' > .board/result.json\n"
                      f"else\n  touch {marker}\n  cat <<'EOF'\n{said}\nEOF\n  exit 1\nfi\n")
    script.chmod(0o755)
    ab.add_profile(name, command=str(script))


@pytest.mark.parametrize("said", ORDINARY_FAILURES, ids=["traceback-line-403", "test-authentication", "disk-quota"])
def test_a_crash_whose_output_only_mentions_403_authentication_or_quota_is_retried_like_any_crash(
        ab, board, dispatcher, said):
    _agent(ab, "w", said)
    t = board.create("fix the login view", assignee="w")["id"]
    dispatcher()
    wait_for(lambda: all_in(board, [t], {"done"}), timeout=60, what="the task retried and done")
    assert [r["outcome"] for r in board.runs(t)] == ["crashed", "completed"]
    assert said.splitlines()[-1] in board.runs(t)[0]["error"]  # what the guard read
    assert not events(board, t, "respawn_guarded")


def test_an_api_refusal_holds_the_task_back_until_the_command_its_reason_names_releases_it(ab, board, dispatcher):
    _agent(ab, "w", "Error: request failed: HTTP 401 Unauthorized (invalid api key)")
    t = board.create("call the API", assignee="w")["id"]
    d = dispatcher()
    (held,) = wait_for(lambda: events(board, t, "respawn_guarded"), timeout=60, what="the guard")
    reason = held["payload"]["reason"]
    assert "looks like an auth, quota or rate-limit error" in reason and "HTTP 401 Unauthorized" in reason
    assert f"`agentboard unguard {t}`" in reason and "reclaim" not in reason and "unblock the task" not in reason
    assert board.show(t)["status"] == "ready" and len(board.runs(t)) == 1
    # the command the reason names is the one that releases the task
    command = shlex.split(re.search(r"`(agentboard [^`]+)`", reason).group(1))
    env = {**os.environ, "AGENTBOARD_HOME": str(ab.home)}
    if ab.settings.database_url:
        env["AGENTBOARD_DATABASE_URL"] = ab.settings.database_url
    out = subprocess.run([sys.executable, "-m", "agentboard", *command[1:]], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    d.wake()
    wait_for(lambda: all_in(board, [t], {"done"}), timeout=60, what="the released task done")
    assert [r["outcome"] for r in board.runs(t)] == ["crashed", "completed"]


#: what the agent CLIs and the APIs print when they refuse (the recordings under tests/fakes,
#: docs/dispatcher.md "Failures, classified", the API clients' errors)
REFUSALS = [
    "Invalid API key · Please run /login",
    "Not logged in · Please run /login",
    "Claude AI usage limit reached|1767225600",
    '{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}',
    '{"name":"APIError","data":{"message":"invalid x-api-key","statusCode":401}}',
    "stream error: unexpected status 401 Unauthorized",
    "429 Too Many Requests",
    "Error: 429 rate limit exceeded, usage limit reached",
    '[API Error: {"error":{"code":429,"message":"Quota exceeded for metric: generativelanguage"}}]',
    "You exceeded your current quota, please check your plan and billing details.",
    '{"error": {"code": "insufficient_quota"}}',
    "Error: You have exhausted your capacity on this model. Your quota will reset after 1h12m30s.",
    "anthropic.AuthenticationError: Error code: 401",
    "openai.RateLimitError: Error code: 429",
    "urllib.error.HTTPError: HTTP Error 403: Forbidden",
    "status code 403",
    "authentication failed for this token",
    "Your credit balance is too low to access the Anthropic API",
    "RESOURCE_EXHAUSTED",
    "ProviderAuthError: no API key for anthropic",
]
#: crashes that name such a number or word and are no refusal
NOT_REFUSALS = ORDINARY_FAILURES + [
    'File "/work/app/models.py", line 401, in save',
    "could not bind port 4290: address in use",
    "FAILED tests/test_quota.py::test_limits - KeyError: 'x'",
    "FAILED tests/test_api.py::test_forbidden_returns_403 - assert 200 == 403",
    "ERROR tests/unauthorized/test_views.py - ImportError",
]


def _guard(error: str) -> str | None:
    task = {"id": "t_00000001", "consecutive_failures": 1, "last_failure_error": "worker exited with status 1; "
            "last output: " + error, "last_outcome": "crashed"}
    return breaker.guard(task, profiles=set())


def test_what_an_agent_cli_or_api_says_when_it_refuses_holds_the_task_back_naming_unguard() -> None:
    held = {said: _guard(said) for said in REFUSALS}
    assert [said for said, why in held.items() if why is None] == []
    assert all("`agentboard unguard t_00000001`" in str(why) for why in held.values())


def test_a_line_number_a_port_a_test_file_or_a_disk_quota_does_not_hold_the_task_back() -> None:
    assert [said for said in NOT_REFUSALS if _guard(said) is not None] == []


def test_a_task_held_for_a_pull_request_named_in_a_recent_comment_names_unguard_to_release_it() -> None:
    import time

    now = time.time()
    task = {"id": "t_00000002", "consecutive_failures": 0, "last_comment_at": now - 60, "last_outcome": "crashed"}
    why = breaker.guard(task, profiles=set(), now=now,
                        comments=lambda tid, since: [{"body": "opened https://github.com/o/r/pull/12 for this"}])
    assert why is not None and "open pull request" in why
    assert "`agentboard unguard t_00000002`" in why and "reclaim" not in why
