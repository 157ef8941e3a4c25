"""The worker context: every section, capped, identical on every surface."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from agentboard.protocol.context import BODY_CAP, RUNS_SHOWN, build_worker_context


def test_context_sections(ab: Any, board: Any, tmp_path: Path) -> None:
    goal = board.goal("Faster imports", acceptance=["import time under 100 ms"])
    parent = board.create("profile the imports", assignee="worker-a")
    run = board.claim(parent["id"])
    board.complete(parent["id"], summary="numpy import dominates", metadata={"ms": 240}, run_id=run["run_id"])
    t = board.create("lazy-load numpy", body="x" * (BODY_CAP + 50), assignee="worker-a", parents=[parent["id"]],
                     goal=goal["id"], verify=["pytest -q"])
    for i in range(RUNS_SHOWN + 2):
        r = board.claim(t["id"])
        board.fail(t["id"], "crashed", run_id=r["run_id"], error=f"boom {i}", count_failure=False)
    board.comment(t["id"], "try importlib.util.LazyLoader")
    (tmp_path / "trace.txt").write_text("trace")
    board.attach(t["id"], str(tmp_path / "trace.txt"))
    ctx = build_worker_context(ab.db, "default", t["id"])
    assert ctx.startswith(f"# Task {t['id']}: lazy-load numpy")
    assert "**Goal:** Faster imports" in ctx and "- `pytest -q`" in ctx
    assert f"showing {BODY_CAP} of {BODY_CAP + 50} characters" in ctx
    assert "trace.txt" in ctx
    assert f"boom {RUNS_SHOWN + 1}" in ctx and "boom 1\n" not in ctx and "(2 older attempts not shown)" in ctx
    assert "numpy import dominates" in ctx and '{"ms": 240}' in ctx
    assert "try importlib.util.LazyLoader" in ctx
    assert "- import time under 100 ms" in ctx
    import os
    env = {k: v for k, v in os.environ.items()}
    out = subprocess.run([sys.executable, "-m", "agentboard", "context", t["id"]], capture_output=True, text=True,
                         env=env, timeout=60)
    assert out.returncode == 0
    # the CLI prints the same text (ages are rendered relative to now: compare without them)
    strip = lambda s: [ln for ln in s.splitlines() if " ago" not in ln]  # noqa: E731
    assert strip(out.stdout) == strip(ctx)
