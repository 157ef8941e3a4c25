"""Approving, rejecting, blocking, unblocking and commenting from chat: the same roads as the
CLI (approval through the one road to done), each an event whose actor is the chat user."""

from __future__ import annotations

from typing import Any

from agentboard.kernel import queries

from .conftest import Chat


def in_review(chat: Chat, title: str) -> dict[str, Any]:
    board = chat.ab.board()
    if not any(p["name"] == "coder" for p in chat.ab.profiles()):
        chat.ab.add_profile("coder", command="true")
    task = board.create(title, assignee="coder", review=True)
    board.claim(task["id"])
    board.complete(task["id"], summary="did it", run_id=board.show(task["id"])["current_run_id"])
    assert board.show(task["id"])["status"] == "review"
    return task


def test_a_task_in_review_is_approved_or_rejected_from_chat(chat: Chat) -> None:
    chat.link("slack", "U111")
    good, bad = in_review(chat, "good work"), in_review(chat, "bad work")
    approved = chat.slash(f"approve {good['id']}").json()["text"]
    rejected = chat.slash(f"reject {bad['id']} the tests fail").json()["text"]
    assert f"Approved {good['id']}" in approved and f"Rejected {bad['id']}" in rejected
    board = chat.ab.board()
    assert board.show(good["id"])["status"] == "done" and board.show(bad["id"])["status"] == "blocked"
    kinds = {(e["task_id"], e["kind"]) for e in queries.events_after(chat.db, "default", 0)
             if e["actor"] == "chat:slack:U111"}
    assert (good["id"], "approved") in kinds and (bad["id"], "rejected") in kinds

    answer = chat.slash(f"approve {good['id']}")
    assert "text" in answer.json(), (answer.status_code, answer.text)
    again = answer.json()["text"]
    assert again.startswith("*Not done:")


def test_block_unblock_comment_and_show_from_chat(chat: Chat) -> None:
    chat.link("slack", "U111")
    task = chat.ab.board().create("Talk to legal")
    assert f"Blocked {task['id']}" in chat.slash(f"block {task['id']} waiting for legal").json()["text"]
    shown = chat.slash(f"show {task['id']}").json()["text"]
    assert "[blocked]" in shown and "waiting for legal" in shown
    assert f"Unblocked {task['id']}" in chat.slash(f"unblock {task['id']}").json()["text"]
    assert f"Commented on {task['id']}" in chat.slash(f"comment {task['id']} legal said yes").json()["text"]
    detail = chat.ab.board().show(task["id"])
    assert [c["body"] for c in detail["comments"]] == ["legal said yes"]
    assert detail["comments"][0]["author"] == "chat:slack:U111"
    listed = chat.slash("list").json()["text"]
    assert task["id"] in listed and "Talk to legal" in listed
    assert "unknown status" in chat.slash("list nonsense").json()["text"]
    assert "/kanban approve ID" in chat.slash("help").json()["text"]


def test_a_block_reason_or_rejection_with_terminal_controls_is_refused_from_chat_as_from_the_cli(chat: Chat) -> None:
    chat.link("slack", "U111")
    task = chat.ab.board().create("Talk to legal")
    bad = in_review(chat, "bad work")
    for command in (f"block {task['id']} waiting \x1b]0;pwned\x07\x1b[2J", f"reject {bad['id']} no \x1b[31mred"):
        answer = chat.slash(command).json()["text"]
        assert "control characters" in answer and "U+001B" in answer, answer
    assert chat.ab.board().show(task["id"])["status"] == "todo"
    assert chat.ab.board().show(bad["id"])["status"] == "review"


def test_list_from_chat_shows_the_newest_tasks_first_as_its_help_says(chat: Chat) -> None:
    chat.link("slack", "U111")
    board = chat.ab.board()
    for i in range(20):
        board.create(f"old urgent {i}", priority=9)
    newest = board.create("just asked for", priority=0)
    lines = chat.slash("list").json()["text"].splitlines()
    listed = [ln for ln in lines if "t_" in ln]
    assert newest["id"] in listed[0] and "old urgent 19" in listed[1]
    assert any("… and more" in ln for ln in lines)


def test_a_task_created_by_a_slash_command_says_its_news_go_to_the_channel_it_has_no_thread(chat: Chat) -> None:
    chat.link("slack", "U111")
    text = chat.slash('create "Rotate the keys"').json()["text"]
    assert "Created t_" in text and "posted in this channel" in text and "this thread" not in text
