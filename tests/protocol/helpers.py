"""Drive one worker attempt the way the dispatcher does: claim, prepare, spawn a real fake
agent process, then after_exit (with repair attempts) — used until/besides the dispatcher tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from agentboard.dispatch import finish
from agentboard.protocol import lifecycle

FAKE_AGENT = Path(__file__).with_name("fake_agent.py")


def worker_env(ab: Any, task_id: str, run_id: int, workspace: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTBOARD_")}
    env.update(AGENTBOARD_HOME=str(ab.settings.home), AGENTBOARD_BOARD="default", AGENTBOARD_TASK=task_id,
               AGENTBOARD_RUN_ID=str(run_id), AGENTBOARD_WORKSPACE=str(workspace), AGENTBOARD_PROFILE="worker-a")
    if ab.settings.database_url:
        env["AGENTBOARD_DATABASE_URL"] = ab.settings.database_url
    env.update(extra)
    return env


def attempt(ab: Any, task_id: str, workspace: Path, mode: str, *, settings: Any = None,
            **extra_env: str) -> tuple[list[lifecycle.ExitDecision], int]:
    """One full attempt on ``task_id``; returns the decisions of after_exit and the run id."""
    settings = settings or ab.settings
    board = ab.board()
    run = board.claim(task_id)
    run_id = run["run_id"]
    task = board.show(task_id)
    workspace.mkdir(parents=True, exist_ok=True)
    prompt = lifecycle.prepare(ab.db, settings, "default", task, run_id, workspace)
    log_path = workspace.parent / f"{task_id}.log"
    env = worker_env(ab, task_id, run_id, workspace, FAKE_AGENT_MODE=mode, **extra_env)
    decisions = []
    n = 0
    while True:
        with open(log_path, "ab") as log:
            proc = subprocess.run([sys.executable, str(FAKE_AGENT), str(prompt)], cwd=workspace, env=env,
                                  stdout=log, stderr=subprocess.STDOUT, timeout=120)
        d = lifecycle.after_exit(ab.db, settings, "default", task_id, run_id, workspace, proc.returncode,
                                 log_path, n, apply_verdict=finish.review)
        decisions.append(d)
        if d.action != "repair":
            return decisions, run_id
        assert d.prompt_file is not None and d.deadline_seconds
        prompt = d.prompt_file
        n += 1
