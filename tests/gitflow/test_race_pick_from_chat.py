"""A race's winner picked from chat (``/kanban pick ID N``) takes the same road as ``agentboard
pick``: the winner's branch is integrated and the pick is recorded under the chat user."""

from __future__ import annotations

from typing import Any

from agentboard.api.auth import Principal
from agentboard.chat import actions

from .conftest import events, wait_for
from .test_races import attempts, create_race, race_board


def chat_user(role: str = "member") -> Principal:
    return Principal(token_id=0, name="chat:slack:U111", role=role)


def test_a_race_is_picked_from_chat_and_the_winner_is_integrated(ab: Any, tmp_path: Any, dispatcher: Any) -> None:
    board, repo = race_board(ab, tmp_path)
    tid = create_race(ab, "--race", "bad,good")
    dispatcher()
    wait_for(lambda: board.show(tid)["status"] == "review", what="the race to reach review", timeout=60)
    assert attempts(ab, tid)["can_pick"] == [2]

    viewer = actions.Context(db=ab.db, settings=ab.settings, who=chat_user("viewer"))
    assert "read-only" in actions.run_text(viewer, f"pick {tid} 2").headline
    member = actions.Context(db=ab.db, settings=ab.settings, who=chat_user())
    refused = actions.run_text(member, f"pick {tid} 1")
    assert not refused.ok and "has not passed" in refused.headline and board.show(tid)["status"] == "review"

    answer = actions.run_text(member, f"pick {tid} 2")
    assert answer.ok and answer.headline == f"Picked attempt 2 of {tid}" and "(merged)" in answer.lines[0]
    assert (repo / "notes.txt").read_text() == "good\n"
    assert board.show(tid)["status"] == "done"
    [won] = events(board, tid, "race_won")
    assert won["payload"]["n"] == 2 and won["actor"] == "chat:slack:U111"
