"""The notifier against a real web hook receiver on loopback (Apprise ``json://`` targets)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from testenv import wait_for as wait_until

import agentboard
from agentboard.kernel import notifications as kn
from agentboard.kernel import supervision
from agentboard.notify import subscriptions
from agentboard.notify.notifier import Notifier

from .conftest import Receiver

#: no waiting: every cycle delivers what is pending
IMMEDIATE = {"notify_batch_delay": 0.0, "notify_digest_window": 0.0, "notify_retry_base": 0.05}
LATER = time.time() + 10_000  # a cycle "later": every retry is due


@pytest.fixture
def nb(home: Path) -> Iterator[Any]:
    """A client on a fresh SQLite home whose notifier sends at once."""
    with agentboard.connect(str(home), **IMMEDIATE, public_url="https://board.example.org") as client:
        yield client


def done(board: Any, title: str, summary: str = "finished", **kw: Any) -> str:
    t = board.create(title, assignee="worker", **kw)
    board.complete(t["id"], summary=summary, actor="alice")
    return str(t["id"])


def sub_row(db: Any, sub_id: int) -> dict[str, Any]:
    return dict(kn.get(db, None, sub_id))


def test_a_completed_task_reaches_the_target_with_its_summary_and_a_link(nb: Any, receiver: Receiver) -> None:
    board = nb.board()
    sub = subscriptions.add(nb.db, "default", "board", "", receiver.url())
    tid = done(board, "Write the report", summary="Report written\nwith many details")
    report = Notifier(nb.db).run_once()
    assert report.messages == 1
    [msg] = receiver.accepted()
    assert msg.type == "success"
    assert tid in msg.message and "Write the report" in msg.message
    assert "Report written" in msg.message and "many details" not in msg.message
    assert f"https://board.example.org/?board=default&task={tid}" in msg.message
    row = sub_row(nb.db, sub["id"])
    assert row["delivered"] == 1 and row["failures"] == 0
    # nothing new: a second cycle sends nothing
    Notifier(nb.db).run_once()
    assert len(receiver.received) == 1


def test_the_cursor_stays_while_the_target_fails_and_the_events_arrive_once_it_recovers(
        nb: Any, receiver: Receiver) -> None:
    board = nb.board()
    sub = subscriptions.add(nb.db, "default", "board", "", receiver.url())
    start = sub_row(nb.db, sub["id"])["cursor"]
    tid = done(board, "Flaky target")
    receiver.fail_next = 2
    notifier = Notifier(nb.db)
    notifier.run_once()
    row = sub_row(nb.db, sub["id"])
    assert row["cursor"] == start, "a failed delivery must not move the cursor"
    assert row["failures"] == 1 and "500" in (row["last_error"] or "")
    assert row["next_attempt_at"] > time.time() - 1, "the retry waits for its back-off"
    assert notifier.run_once(now=time.time() - 1).claimed == 0, "not retried before the back-off"
    notifier.run_once(now=LATER)
    assert sub_row(nb.db, sub["id"])["failures"] == 2
    assert sub_row(nb.db, sub["id"])["cursor"] == start
    notifier.run_once(now=LATER)
    row = sub_row(nb.db, sub["id"])
    assert row["cursor"] > start and row["failures"] == 0 and row["last_error"] is None
    assert len(receiver.refused()) == 2
    [msg] = receiver.accepted()
    assert tid in msg.message


def test_a_target_that_keeps_failing_is_parked_with_its_last_error_and_loses_nothing(
        home: Path, receiver: Receiver) -> None:
    with agentboard.connect(str(home), **IMMEDIATE, notify_park_after=3) as nb:
        board = nb.board()
        sub = subscriptions.add(nb.db, "default", "board", "", receiver.url())
        first = done(board, "Missed while parked")
        receiver.fail_all = True
        notifier = Notifier(nb.db)
        for _ in range(3):
            notifier.run_once(now=LATER)
        row = sub_row(nb.db, sub["id"])
        assert row["parked"] and row["failures"] == 3 and "500" in row["last_error"]
        assert [e["kind"] for e in board.events(kinds=["notify_parked"])] == ["notify_parked"]
        # parked: not retried, however long we wait
        notifier.run_once(now=LATER + 10_000)
        assert len(receiver.received) == 3
        second = done(board, "Also missed")
        receiver.fail_all = False
        out = kn.resume(nb.db, "default", sub["id"])
        assert not out["parked"]
        notifier.run_once()
        text = "\n".join(m.message for m in receiver.accepted())
        assert first in text and second in text


def test_a_burst_goes_out_as_one_digest_and_a_second_burst_waits_for_the_window(
        home: Path, receiver: Receiver) -> None:
    with agentboard.connect(str(home), notify_batch_delay=0.0, notify_digest_window=2.0) as nb:
        board = nb.board()
        sub = subscriptions.add(nb.db, "default", "board", "", receiver.url())
        ids = [done(board, f"task {i}") for i in range(100)]
        notifier = Notifier(nb.db).start()
        try:
            receiver.wait(lambda: len(receiver.accepted()) >= 1)
            [digest] = receiver.accepted()
            assert digest.title.startswith("[default] 100 updates: 100 completed")
            assert all(i in digest.message for i in ids[:50]) and "... and 50 more" in digest.message
            wait_until(lambda: sub_row(nb.db, sub["id"])["delivered"] == 100, what="the cursor to move")
            more = [done(board, f"late {i}") for i in range(5)]
            receiver.wait(lambda: len(receiver.accepted()) >= 2)
            second = receiver.accepted()[1]
            assert "5 updates" in second.title and all(i in second.message for i in more)
            assert len(receiver.received) == 2, "105 completions: two messages, not 105"
        finally:
            notifier.stop()


def test_a_task_subscription_follows_the_tasks_below_it_and_nothing_else(nb: Any, receiver: Receiver) -> None:
    board = nb.board()
    parent = board.create("Parent", assignee="worker")
    child = board.create("Child", assignee="worker", parents=[parent["id"]])
    grandchild = board.create("Grandchild", assignee="worker", parents=[child["id"]])
    other = board.create("Unrelated", assignee="worker")
    subscriptions.add(nb.db, "default", "task", parent["id"], receiver.url())
    listed = kn.list_subscriptions(nb.db, "default", task_id=grandchild["id"])
    assert [s["subject"] for s in listed] == [parent["id"]]
    assert kn.list_subscriptions(nb.db, "default", task_id=other["id"]) == []
    for t in (parent, child, grandchild, other):
        board.complete(t["id"], summary="ok", actor="alice")
    Notifier(nb.db).run_once()
    text = "\n".join(m.message for m in receiver.accepted())
    assert parent["id"] in text and child["id"] in text and grandchild["id"] in text
    assert other["id"] not in text


def test_a_task_subscription_ends_once_its_tasks_are_finished_and_delivered(nb: Any, receiver: Receiver) -> None:
    board = nb.board()
    parent = board.create("Parent", assignee="worker")
    child = board.create("Child", assignee="worker", parents=[parent["id"]])
    sub = subscriptions.add(nb.db, "default", "task", parent["id"], receiver.url())
    board.complete(parent["id"], summary="ok", actor="alice")
    notifier = Notifier(nb.db)
    notifier.run_once()
    assert [s["id"] for s in kn.list_subscriptions(nb.db, "default")] == [sub["id"]], \
        "the child is still open: the subscription stays"
    board.complete(child["id"], summary="ok", actor="alice")
    notifier.run_once()
    assert kn.list_subscriptions(nb.db, "default") == []
    [ended] = board.events(kinds=["notify_unsubscribed"])
    assert ended["payload"]["reason"] == "the task and the tasks below it are finished"
    assert {parent["id"], child["id"]} <= {i for m in receiver.accepted() for i in (parent["id"], child["id"]) if i in m.message}


def test_goal_and_profile_subscriptions_follow_their_tasks(nb: Any, receiver: Receiver) -> None:
    board = nb.board()
    nb.add_profile("alpha", command="true")
    goal = board.goal("Ship it")
    in_goal = board.create("In the goal", assignee="worker", goal=goal["id"])
    alphas = board.create("Alpha's", assignee="alpha")
    neither = board.create("Neither", assignee="worker")
    subscriptions.add(nb.db, "default", "goal", goal["id"], receiver.url("goal"))
    subscriptions.add(nb.db, "default", "profile", "alpha", receiver.url("alpha"),
                      kinds=["completed", "blocked"])
    board.block(alphas["id"], "which database?", kind="needs_input", actor="alice")
    for t in (in_goal, neither):
        board.complete(t["id"], summary="ok", actor="alice")
    # its tasks done, the goal is verifying; a person's verdict completes it
    supervision.goal_verdict(nb.db, "default", goal["id"], passed=True, evidence="checked by hand", actor="alice")
    Notifier(nb.db).run_once()
    goal_text = "\n".join(m.message for m in receiver.accepted("goal"))
    assert in_goal["id"] in goal_text and f"goal completed: goal {goal['id']}" in goal_text
    assert neither["id"] not in goal_text and alphas["id"] not in goal_text
    [alpha_msg] = receiver.accepted("alpha")
    assert alpha_msg.type == "warning"
    assert alphas["id"] in alpha_msg.message and "needs_input: which database?" in alpha_msg.message


def test_kinds_limit_what_a_subscription_delivers(nb: Any, receiver: Receiver) -> None:
    board = nb.board()
    subscriptions.add(nb.db, "default", "board", "", receiver.url(), kinds=["blocked"])
    done(board, "Completed quietly")
    blocked = board.create("Stuck", assignee="worker")
    board.block(blocked["id"], "need a key", actor="alice")
    Notifier(nb.db).run_once()
    [msg] = receiver.accepted()
    assert blocked["id"] in msg.message and "Completed quietly" not in msg.message


def test_notify_default_subscribes_the_tasks_a_person_creates_but_not_an_agents(
        home: Path, receiver: Receiver) -> None:
    with agentboard.connect(str(home), **IMMEDIATE, notify_default=(receiver.url("me"),)) as nb:
        board = nb.board()
        nb.add_profile("coder", command="true")
        mine = board.create("Mine", assignee="worker", actor="alice")
        below = board.create("Below mine", assignee="worker", parents=[mine["id"]], actor="alice")
        agents = board.create("The agent's", assignee="worker", actor="coder")
        subs = kn.list_subscriptions(nb.db, "default")
        assert [(s["scope"], s["subject"]) for s in subs] == [("task", mine["id"])], \
            "the child inherits its parent's subscription instead of getting a copy"
        assert subs[0]["target"] == f"json://127.0.0.1:{receiver.port}/***"
        for t in (mine, below, agents):
            board.complete(t["id"], summary="ok", actor="alice")
        Notifier(nb.db).run_once()
        text = "\n".join(m.message for m in receiver.accepted("me"))
        assert mine["id"] in text and below["id"] in text and agents["id"] not in text


def test_targets_are_never_shown_back_in_full(nb: Any, receiver: Receiver) -> None:
    url = f"json://bot:s3cretpass@127.0.0.1:{receiver.port}/hooks/t0ken-abcdef"
    sub = subscriptions.add(nb.db, "default", "board", "", url)
    assert sub["target"] == f"json://***@127.0.0.1:{receiver.port}/***"
    slack = subscriptions.add(nb.db, "default", "board", "",
                              "slack://T1JJ3T3L2/A1BRTD4JD/TIiajkdnlazkcOXrIdevi7FQ/#general")
    assert "TIiajkdnlazkcOXrIdevi7FQ" not in slack["target"] and slack["target"].startswith("slack://")
    shown = repr(kn.list_subscriptions(nb.db, None)) + repr(nb.board().events())
    for secret in ("s3cretpass", "t0ken-abcdef", "TIiajkdnlazkcOXrIdevi7FQ"):
        assert secret not in shown
    # the notifier still uses the full URL
    done(nb.board(), "Secret-free")
    receiver.fail_next = 1
    Notifier(nb.db).run_once()
    error = sub_row(nb.db, sub["id"])["last_error"]
    assert error and "s3cretpass" not in error and "t0ken-abcdef" not in error
    assert receiver.received[0].path == "/hooks/t0ken-abcdef"


def test_a_url_apprise_cannot_send_to_is_refused_and_nothing_is_written(nb: Any) -> None:
    from agentboard.domain.errors import InvalidInput

    before = nb.board().events()
    for bad in ("not a url", "nosuchservice://x", "json://"):
        with pytest.raises(InvalidInput):
            subscriptions.add(nb.db, "default", "board", "", bad)
    with pytest.raises(InvalidInput, match="unknown event kind"):
        subscriptions.add(nb.db, "default", "board", "", "json://127.0.0.1:9/x", kinds=["finished"])
    assert kn.list_subscriptions(nb.db, None) == [] and nb.board().events() == before


def test_sending_a_test_message_resumes_a_parked_subscription(home: Path, receiver: Receiver) -> None:
    with agentboard.connect(str(home), **IMMEDIATE, notify_park_after=1) as nb:
        sub = subscriptions.add(nb.db, "default", "board", "", receiver.url())
        done(nb.board(), "Lost?")
        receiver.fail_all = True
        Notifier(nb.db).run_once()
        assert sub_row(nb.db, sub["id"])["parked"]
        failed = subscriptions.test(nb.db, None, sub_id=sub["id"])
        assert not failed["ok"] and "500" in failed["error"] and sub_row(nb.db, sub["id"])["parked"]
        receiver.fail_all = False
        ok = subscriptions.test(nb.db, None, sub_id=sub["id"])
        assert ok == {"ok": True, "target": sub["target"], "error": None, "subscription": sub["id"],
                      "resumed": True}
        Notifier(nb.db).run_once()
        assert any("Lost?" in m.message for m in receiver.accepted())


def test_a_notifier_that_outlived_its_lease_loses_the_subscription_and_moves_nothing(
        nb: Any, receiver: Receiver) -> None:
    sub = subscriptions.add(nb.db, "default", "board", "", receiver.url())
    start = sub_row(nb.db, sub["id"])["cursor"]
    now = time.time()
    [mine] = kn.claim_due(nb.db, "host-a", lease=5, now=now)
    assert kn.claim_due(nb.db, "host-b", lease=5, now=now + 1) == [], "held: nobody else takes it"
    assert kn.renew(nb.db, "host-a", [sub["id"]], lease=5, now=now + 4) == {sub["id"]}
    [taken] = kn.claim_due(nb.db, "host-b", lease=5, now=now + 10)  # host-a stalled past its lease
    assert taken["id"] == mine["id"]
    assert kn.renew(nb.db, "host-a", [sub["id"]], lease=5) == set()
    assert kn.delivered(nb.db, "host-a", sub["id"], start + 100, sent=1) is False
    assert sub_row(nb.db, sub["id"])["cursor"] == start
    assert kn.delivered(nb.db, "host-b", sub["id"], start + 1, sent=1) is True
    assert sub_row(nb.db, sub["id"])["cursor"] == start + 1


def test_notify_default_subscribes_a_race_but_not_its_attempts(home: Path) -> None:
    from agentboard.kernel import races

    with agentboard.connect(str(home), **IMMEDIATE, notify_default=("json://127.0.0.1:9/me",)) as nb:
        board = nb.board()
        nb.add_profile("one", command="true")
        nb.add_profile("two", command="true")
        race = board.create("Race it", race=["one", "two"], actor="alice")
        races.settle(nb.db, "default")  # the race is ready: its two attempts' tasks are made
        made = [a["attempt_task_id"] for a in races.attempts(nb.db, "default", race["id"])["attempts"]]
        assert len(made) == 2 and all(made)
        subs = kn.list_subscriptions(nb.db, "default")
        assert [(s["scope"], s["subject"]) for s in subs] == [("task", race["id"])]
        for attempt in made:
            assert kn.list_subscriptions(nb.db, "default", scope="task", subject=attempt) == []
