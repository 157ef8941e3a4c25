"""Schedules and --not-before: cron occurrences, firing once per occurrence, missed-occurrence
policies, clones and templates, tasks that wait for their time."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from kernelkit import check_invariants

import agentboard
from agentboard.domain import cron, states
from agentboard.domain.errors import InvalidInput
from agentboard.kernel import queries, schedules, tasks
from agentboard.store.engine import Database


def ts(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, tz=UTC).strftime("%Y-%m-%d %H:%M %a")


def test_cron_expressions_give_the_next_occurrence_in_utc() -> None:
    weekdays = cron.parse("0 9 * * 1-5")
    assert iso(weekdays.next_after(ts("2026-12-04T09:00"))) == "2026-12-07 09:00 Mon"  # Friday 9:00 -> Monday
    assert iso(weekdays.next_after(ts("2026-12-07T08:59:30"))) == "2026-12-07 09:00 Mon"
    assert iso(cron.parse("*/15 * * * *").next_after(ts("2026-12-01T10:07"))) == "2026-12-01 10:15 Tue"
    assert iso(cron.parse("@monthly").next_after(ts("2026-12-15T00:00"))) == "2027-01-01 00:00 Fri"
    assert iso(cron.parse("0 0 29 feb *").next_after(ts("2026-03-01T00:00"))) == "2028-02-29 00:00 Tue"
    assert iso(cron.parse("0 12 1 * sun").next_after(ts("2026-12-01T13:00"))) == "2026-12-06 12:00 Sun"  # dom OR dow
    assert len(cron.parse("0 * * * *").occurrences(ts("2026-12-01T00:00"), ts("2026-12-01T05:00"))) == 5
    for bad, needle in (("0 9 * *", "5 fields"), ("61 * * * *", "outside"), ("0 9 * * xyz", "not a number"),
                        ("0 0 31 2 *", "never fires")):
        with pytest.raises(InvalidInput, match=needle):
            cron.parse(bad)


def template_home(home: Path) -> None:
    (home / "templates").mkdir(parents=True, exist_ok=True)
    (home / "templates" / "triage.toml").write_text(
        '[[task]]\nkey = "look"\ntitle = "Triage {date} ({team})"\nassignee = "worker"\n'
        '[[task]]\ntitle = "Report {date}"\nparents = ["look"]\nassignee = "worker"\n')


def test_a_schedule_fires_each_occurrence_once(home: Path) -> None:
    db = agentboard.connect(str(home)).db
    template_home(home)
    start = ts("2026-12-07T08:00")  # a Monday
    s = schedules.add(db, "default", "0 9 * * 1-5", template="triage", values={"team": "infra"}, home=home,
                      now=start)
    assert s["next_at"] == ts("2026-12-07T09:00")
    assert schedules.tick(db, ["default"], now=start + 60, home=home)[0] == []
    fired, _, due = schedules.tick(db, ["default"], now=ts("2026-12-07T09:00:20"), home=home)
    assert len(fired) == 1 and len(fired[0]["tasks"]) == 2
    assert due == ts("2026-12-08T09:00")
    assert schedules.tick(db, ["default"], now=ts("2026-12-07T09:00:40"), home=home)[0] == []
    titles = sorted(t["title"] for t in queries.list_tasks(db, "default"))
    assert titles == ["Report 2026-12-07", "Triage 2026-12-07 (infra)"]
    fired, _, _ = schedules.tick(db, ["default"], now=ts("2026-12-08T09:01"), home=home)
    assert len(fired) == 1
    assert [f["occurrence_at"] for f in schedules.fires(db, "default", s["id"])] == [
        ts("2026-12-07T09:00"), ts("2026-12-08T09:00")]
    check_invariants(db)


def test_missed_occurrences_are_skipped_or_fired_once_as_the_schedule_says(home: Path) -> None:
    db = agentboard.connect(str(home)).db
    template_home(home)
    start = ts("2026-12-07T08:00")
    skip = schedules.add(db, "default", "0 9 * * *", template="triage", values={"team": "a"}, home=home, now=start)
    once = schedules.add(db, "default", "0 9 * * *", template="triage", values={"team": "b"}, missed="once",
                         home=home, now=start)
    later = ts("2026-12-10T15:00")  # three days down: 9:00 on the 7th, 8th, 9th and 10th were missed
    fired, _, _ = schedules.tick(db, ["default"], now=later, grace=600, home=home)
    by_id = {f["schedule"]: f for f in fired}
    assert by_id[skip["id"]]["tasks"] == [] and by_id[skip["id"]]["skipped"] == 4
    assert len(by_id[once["id"]]["tasks"]) == 2 and by_id[once["id"]]["skipped"] == 3
    assert by_id[once["id"]]["occurrence"] == ts("2026-12-10T09:00")
    kinds = [e["kind"] for e in queries.events_after(db, "default", 0) if e["kind"].startswith("schedule_")]
    assert kinds.count("schedule_skipped") == 2 and kinds.count("schedule_fired") == 1
    assert all(s["next_at"] == ts("2026-12-11T09:00") for s in schedules.list_schedules(db, "default"))


def test_a_schedule_can_clone_a_task(home: Path) -> None:
    db = agentboard.connect(str(home)).db
    src = tasks.create(db, "default", "Rotate the logs", body="run logrotate", assignee="ops", verify=["true"],
                       priority=4)
    tasks.archive(db, "default", src["id"])
    s = schedules.add(db, "default", "@daily", clone=src["id"], now=ts("2026-12-07T08:00"))
    fired, _, _ = schedules.tick(db, ["default"], now=ts("2026-12-08T00:00:05"))
    copy = queries.task_detail(db, "default", fired[0]["tasks"][0])
    assert (copy["title"], copy["body"], copy["assignee"], copy["priority"], copy["verify"]) == (
        "Rotate the logs", "run logrotate", "ops", 4, ["true"])
    assert copy["status"] == states.READY and copy["created_by"] == f"schedule:{s['id']}"


def test_a_schedule_needs_one_source_and_a_fillable_template(home: Path) -> None:
    db = agentboard.connect(str(home)).db
    template_home(home)
    with pytest.raises(InvalidInput, match="exactly one"):
        schedules.add(db, "default", "@daily", home=home)
    with pytest.raises(InvalidInput, match="--set team="):
        schedules.add(db, "default", "@daily", template="triage", home=home)
    with pytest.raises(InvalidInput, match="--missed"):
        schedules.add(db, "default", "@daily", template="triage", values={"team": "x"}, missed="all", home=home)
    assert schedules.list_schedules(db, "default") == []


def test_a_task_created_not_before_a_time_waits_in_todo_until_then(home: Path) -> None:
    db = agentboard.connect(str(home)).db
    now = time.time()
    later = tasks.create(db, "default", "later", assignee="worker", not_before=now + 3600)
    parent = tasks.create(db, "default", "parent", assignee="worker")
    child = tasks.create(db, "default", "child", assignee="worker", parents=[parent["id"]], not_before=now + 3600)
    assert later["status"] == states.TODO
    # the parent finishing does not release a child whose time has not come
    from agentboard.kernel import runs

    run = runs.claim(db, "default", parent["id"])
    runs.complete(db, "default", parent["id"], summary="ok", run_id=run["run_id"])
    assert queries.task_detail(db, "default", child["id"])["status"] == states.TODO
    _, promoted, due = schedules.tick(db, ["default"], now=now + 60)
    assert promoted == [] and due == pytest.approx(now + 3600)
    _, promoted, _ = schedules.tick(db, ["default"], now=now + 3601)
    assert sorted(promoted) == sorted([later["id"], child["id"]])
    assert queries.task_detail(db, "default", later["id"])["status"] == states.READY
    check_invariants(db)


DISPATCHER_ENV = {"AGENTBOARD_DISPATCH_INTERVAL": "0.2"}


@pytest.mark.postgres
def test_two_dispatchers_on_postgresql_fire_an_occurrence_once(tmp_path: Path, pg_database: str) -> None:
    """Two `agentboard dispatcher` processes on one PostgreSQL database see the same schedule due
    again and again (its next time is set back each round): each occurrence makes one set of tasks."""
    home = tmp_path / "home"
    (home / "templates").mkdir(parents=True)
    (home / "templates" / "ping.toml").write_text('[[task]]\ntitle = "ping {date}"\n')
    client = agentboard.connect(pg_database)
    db: Database = client.db
    s = schedules.add(db, "default", "* * * * *", template="ping", home=home)
    env = {**os.environ, "AGENTBOARD_HOME": str(home), "AGENTBOARD_DATABASE_URL": pg_database, **DISPATCHER_ENV}
    procs = [subprocess.Popen([sys.executable, "-m", "agentboard", "dispatcher", "--quiet"],
                              env={**env, "AGENTBOARD_HOST_ID": f"host-{n}"}, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL) for n in range(2)]

    def next_at() -> float:
        return float(db.read(lambda tx: tx.scalar("SELECT next_at FROM schedules WHERE id = :i", {"i": s["id"]})))

    try:
        rounds = 8
        for _ in range(rounds):
            past = time.time() // 60 * 60  # this minute's occurrence: due now, perhaps fired already
            db.write(lambda tx, p=past: tx.execute("UPDATE schedules SET next_at = :p WHERE id = :i",
                                                   {"p": p, "i": s["id"]}))
            deadline = time.time() + 60
            while next_at() <= time.time() and time.time() < deadline:
                time.sleep(0.05)
            assert next_at() > time.time(), "no dispatcher picked the schedule up"
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(timeout=60)
    fires = schedules.fires(db, "default", s["id"])
    occurrences = [f["occurrence_at"] for f in fires]
    assert len(occurrences) == len(set(occurrences)) >= 1
    assert len(occurrences) <= 2  # the rounds take well under two minutes: one or two occurrences
    made = [t for t in queries.list_tasks(db, "default") if t["title"].startswith("ping ")]
    assert len(made) == len(fires)
    assert sorted(t["id"] for t in made) == sorted(i for f in fires for i in f["task_ids"])
    client.close()
