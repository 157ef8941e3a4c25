"""A goal's checks run the code its tasks' workers wrote, so they never run with more than the
most confined of those workers had: a worker's environment (no secret of the dispatcher's) and,
when a worker was sandboxed, the sandbox."""

from __future__ import annotations

import shutil
from typing import Any

import pytest

from agentboard.kernel import goals

from .conftest import RESULT_OK, wait_for


def _settled(ab: Any, board: Any, goal: str) -> dict[str, Any]:
    wait_for(lambda: goals.show(ab.db, board.slug, goal)["evidence"], what="the goal's checks to run")
    return dict(goals.show(ab.db, board.slug, goal))


def test_a_goals_checks_do_not_see_the_dispatchers_secrets(
        ab: Any, board: Any, dispatcher: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEPLOY_SECRET", "s3cr3t")  # in the dispatcher's environment, denied to workers
    ab.add_profile("w", command=RESULT_OK)
    goal = goals.create(ab.db, board.slug, "ship it", verify=['sh -c \'test -z "$DEPLOY_SECRET"\''])["id"]
    board.create("build", assignee="w", goal=goal)
    dispatcher()
    shown = _settled(ab, board, goal)
    assert "ok: " in shown["evidence"], shown["evidence"]
    assert shown["status"] == "done"


def test_a_goal_whose_worker_was_sandboxed_has_its_checks_sandboxed_too(
        ab: Any, board: Any, dispatcher: Any) -> None:
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap (bwrap) is not installed")
    ab.add_profile("jailed", command=RESULT_OK, isolation="sandbox")
    db_file = ab.settings.home / "agentboard.db"
    # the home (its database, its tokens) is hidden from a sandbox: the check sees no database there
    goal = goals.create(ab.db, board.slug, "ship it", verify=[f"test ! -e {db_file}"])["id"]
    board.create("build", assignee="jailed", goal=goal)
    dispatcher()
    shown = _settled(ab, board, goal)
    assert "ok: " in shown["evidence"], shown["evidence"]
