"""The fields of a board's settings and of a profile, and their limits: the constants that both
the schema (:mod:`.settings_schema`) and its pydantic models (:mod:`.settings_models`) use."""

from __future__ import annotations

import re

ADAPTERS = ("command", "claude", "codex", "gemini", "opencode")
#: how a profile's workers are isolated from the host (``dispatch/isolation.py``)
ISOLATION = ("none", "user", "sandbox")
#: what an agent CLI (``claude``, ``codex``, ``gemini``, ``opencode``) may do without asking (``dispatch/adapters.py``)
PERMISSION = ("edit", "full", "read")
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
#: the largest ``max_parallel`` / ``failure_limit``
COUNT_MAX = 100_000
MAX_CONCURRENCY_MAX = 10_000
COMMAND_MAX = 10_000
DESCRIPTION_MAX = 16 * 1024
MODEL_MAX = 200
#: the board settings whose values are typed (the others are kept as given)
BOARD_KEYS = ("max_parallel", "failure_limit", "rework_limit", "default_assignee", "auto_decompose", "reviewer", "base", "integrate",
              "review_before_integrate", "env_setup")
#: what approval does with a worktree task's branch (``dispatch/integrate.py``)
INTEGRATE = ("none", "merge", "squash", "rebase", "pr")
#: a git branch name as a board's ``base`` (no spaces, no leading '-'; '..' is refused apart)
BRANCH_RE = re.compile(r"^[A-Za-z0-9._/@+][A-Za-z0-9._/@+-]{0,199}$")
#: the supervisor's board settings (typed like the keys above; see docs/supervisor.md)
SUPERVISOR_KEYS = ("supervisor", "replan_after", "block_loop_limit", "stuck_after", "escalate_to",
                   "supervision_budget")
#: a ``reviewer`` setting: a profile (``profile:NAME``), one LLM call, the test heuristic, or none
REVIEWER_RE = re.compile(r"^(llm|off|heuristic|profile:[A-Za-z0-9][A-Za-z0-9_.-]{0,63})$")
#: the fields a profile's add and update take
PROFILE_FIELDS = frozenset(("command", "adapter", "isolation", "permission", "description", "max_concurrency", "env", "skills",
                            "model", "enabled", "orchestrator"))
