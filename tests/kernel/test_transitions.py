"""Every (status, verb) pair of ``domain.states.TRANSITIONS``, driven through the real kernel verbs.

A verb must succeed exactly when the table lists the task's status for it, land in one of the
statuses the table allows, and otherwise be refused (InvalidTransition / Conflict) with the
database unchanged.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kernelkit import check_invariants, reach, snapshot, status_of

from agentboard.domain import states
from agentboard.domain.errors import Conflict
from agentboard.kernel import attachments, branches, comments, runs, tasks

Verb = Callable[[Any, str, str, Path], Any]


def _fail(outcome: str, db: Any, board: str, task_id: str, home: Path) -> Any:
    return runs.fail(db, board, task_id, outcome, error=f"{outcome} happened")


#: verb in the table → how a user applies it to a task
VERBS: dict[str, Verb] = {
    "release": lambda db, b, t, h: tasks.release(db, b, t),
    "claim": lambda db, b, t, h: runs.claim(db, b, t),
    "heartbeat": lambda db, b, t, h: runs.heartbeat(db, b, t, note="still here"),
    "complete": lambda db, b, t, h: runs.complete(db, b, t, summary="all done"),
    "request_review": lambda db, b, t, h: runs.request_review(db, b, t, summary="please look"),
    "approve": lambda db, b, t, h: runs.approve(db, b, t, text="good"),
    "request_changes": lambda db, b, t, h: runs.request_changes(db, b, t, "fix the tests"),
    "reject": lambda db, b, t, h: runs.reject(db, b, t, "wrong approach"),
    "block": lambda db, b, t, h: tasks.block(db, b, t, "need a decision"),
    "unblock": lambda db, b, t, h: tasks.unblock(db, b, t),
    "assign": lambda db, b, t, h: tasks.assign(db, b, t, "someone-else"),
    "reclaim": lambda db, b, t, h: runs.reclaim(db, b, t, reason="stuck"),
    "reopen": lambda db, b, t, h: tasks.reopen(db, b, t, reason="not quite"),
    "archive": lambda db, b, t, h: tasks.archive(db, b, t),
    "restore": lambda db, b, t, h: tasks.restore(db, b, t),
    "gave_up": lambda db, b, t, h: runs.give_up(db, b, t, "systemic failure"),
    "integration_refused": lambda db, b, t, h: branches.refuse_integration(db, b, t, "the target is dirty"),
    "edit": lambda db, b, t, h: tasks.edit(db, b, t, title="renamed"),
    "comment": lambda db, b, t, h: comments.comment(db, b, t, "a note"),
    "attach": lambda db, b, t, h: attachments.attach(db, b, t, "notes.txt", home=h, data=b"hello"),
    **{
        o: functools.partial(_fail, o)
        for o in states.RETURN_OUTCOMES
        if o != "reclaimed"
    },
}

#: verbs of the table with no kernel entry point of their own (covered elsewhere)
NOT_DIRECT = {
    "create": "creation decides the first status; covered by the creation and linking tests",
    "specify": "an LLM helper built on release",
    "decompose": "an LLM helper built on create + link",
    "promote": "automatic on completion; by hand through set_status (test_set_status_*)",
    "demote": "automatic on link/reopen; by hand through set_status",
    "wait": "a dependency block (block --kind dependency --on ID); covered by tests/supervisor",
    "block_loop": "automatic when a task is blocked too often; covered by tests/supervisor",
}


def test_every_verb_of_the_table_is_covered() -> None:
    assert set(states.TRANSITIONS) == set(VERBS) | set(NOT_DIRECT)


@pytest.mark.parametrize("verb", sorted(VERBS))
def test_verb_from_every_status(ab: Any, verb: str) -> None:
    db, board, home = ab.db, "default", ab.settings.home
    allowed = states.TRANSITIONS[verb]
    for status in states.STATUSES:
        tid = reach(db, board, status, title=f"{verb} from {status}")
        before = snapshot(db, tid)
        try:
            VERBS[verb](db, board, tid, home)
        except Conflict as exc:
            assert status not in allowed, f"{verb} from {status} was refused: {exc}"
            assert snapshot(db, tid) == before, f"refused {verb} from {status} changed the database"
        else:
            assert status in allowed, f"{verb} from {status} succeeded but the table forbids it"
            after = status_of(db, tid)
            assert after in allowed[status], f"{verb} moved {status} -> {after}; table allows {sorted(allowed[status])}"
            assert snapshot(db)["max_event"] > before["max_event"], f"{verb} from {status} wrote no event"
    check_invariants(db)


def test_refused_move_names_the_task_and_the_allowed_statuses(board: Any) -> None:
    t = board.create("x", assignee="w")
    with pytest.raises(Conflict) as err:
        board.reopen(t["id"])
    assert t["id"] in err.value.message and "done" in err.value.message
