"""Metrics, health checks and JSON logs as an operator meets them: real `serve` and `dispatcher`
processes on SQLite and PostgreSQL, scraped over HTTP and parsed with Prometheus' own parser."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from testenv import wait_for

import agentboard
from agentboard.kernel import tokens

pytestmark = pytest.mark.xdist_group("serve")

GOOD = "sh -c " + shlex.quote("echo '{\"success\": true, \"summary\": \"ok\"}' > .board/result.json")
BAD = "sh -c 'exit 3'"


class Proc:
    """An agentboard command in its own process; its stderr collected line by line."""

    def __init__(self, home: Path, *args: str, env: dict[str, str] | None = None) -> None:
        full_env = {**os.environ, "AGENTBOARD_HOME": str(home), **(env or {})}
        self.proc = subprocess.Popen([sys.executable, "-m", "agentboard", *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=full_env)
        self.out: list[str] = []
        self.err: list[str] = []
        for stream, into in ((self.proc.stdout, self.out), (self.proc.stderr, self.err)):
            threading.Thread(target=self._read, args=(stream, into), daemon=True).start()

    @staticmethod
    def _read(stream: Any, into: list[str]) -> None:
        for line in stream:
            into.append(line)

    def find(self, pattern: str) -> str:
        def found() -> str | None:
            for line in self.out + self.err:
                m = re.search(pattern, line)
                if m:
                    return m.group(1)
            assert self.proc.poll() is None, f"exited: {''.join(self.out + self.err)}"
            return None
        return str(wait_for(found, timeout=60, what=pattern))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def scrape(url: str, token: str | None = None) -> dict[str, Any]:
    """``{family name: [(sample name, labels, value), ...]}`` of a scrape."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    resp = httpx.get(url, headers=headers, timeout=30)
    assert resp.status_code == 200, resp.text
    out: dict[str, Any] = {}
    for fam in text_string_to_metric_families(resp.text):
        out[fam.name] = [(s.name, s.labels, s.value) for s in fam.samples]
    return out


def samples(fams: dict[str, Any], sample: str) -> list[tuple[dict[str, str], float]]:
    return [(labels, value) for fams_ in fams.values() for name, labels, value in fams_ if name == sample]


def test_a_serve_and_a_dispatcher_report_the_board_they_ran_in_metrics_health_checks_and_json_logs(
        ab: Any, home: Path) -> None:
    ab.add_profile("good", command=GOOD)
    ab.add_profile("bad", command=BAD)
    board = ab.board()
    ids = [board.create(f"works {i}", assignee="good")["id"] for i in range(4)]
    failing = board.create("fails", assignee="bad", max_retries=1)["id"]
    ab.close()
    env = {"AGENTBOARD_METRICS_TOKEN": "scrape-secret-123", "AGENTBOARD_STOP_NUDGE": "false",
           "AGENTBOARD_DISPATCH_INTERVAL": "5"}
    serve = Proc(home, "serve", "--port", "0", "--no-dispatch", "--metrics-bind", "127.0.0.1:0",
                 "--log-format", "json", "--log-level", "info", env=env)
    disp = None
    try:
        url = serve.find(r"(http://\S+)/login\?token=")
        admin = serve.find(r"/login\?token=(\S+)")
        open_url = serve.find(r"metrics and health checks at (http://\S+)/metrics")
        # alive at once; not ready before any dispatcher has passed, and the reason is named
        assert httpx.get(url + "/healthz").status_code == 200
        early = httpx.get(url + "/readyz")
        assert early.status_code == 503 and early.json()["failed"] == "dispatcher"

        disp = Proc(home, "dispatcher", "--log-format", "json", "--metrics-port", "0", env=env)
        disp_url = disp.find(r"metrics and health checks at (http://\S+)/metrics")
        client = agentboard.connect(str(home)) if not os.environ.get("AGENTBOARD_DATABASE_URL") \
            else agentboard.connect(os.environ["AGENTBOARD_DATABASE_URL"])
        try:
            b = client.board()
            wait_for(lambda: all(b.show(t)["status"] == "done" for t in ids)
                     and b.show(failing)["status"] not in ("ready", "running"), what="the tasks to finish")
            counts = {c["status"]: c["count"] for c in b.view()["columns"]}
            closed = client.db.read(lambda tx: tx.all(
                "SELECT profile, outcome, COUNT(*) AS n FROM task_runs WHERE status = 'closed' "
                "GROUP BY profile, outcome"))
            member = tokens.create(client.db, "someone", role="member")["token"]
        finally:
            client.close()

        # the dispatcher host's own port: no token, the runs it closed, the board's counts
        fams = scrape(disp_url + "/metrics")
        runs = {(lb["profile"], lb["outcome"]): v for lb, v in samples(fams, "agentboard_runs_total")}
        assert runs == {(r["profile"], r["outcome"]): float(r["n"]) for r in closed}
        assert runs[("good", "completed")] == 4.0 and any(p == "bad" and o != "completed" for p, o in runs)
        tasks = {lb["status"]: v for lb, v in samples(fams, "agentboard_tasks") if lb["board"] == "default"}
        assert tasks == {s: float(n) for s, n in counts.items()} | {"archived": 0.0}
        spawned = sum(v for lb, v in samples(fams, "agentboard_ready_to_spawn_seconds_count"))
        assert spawned == sum(r["n"] for r in closed)
        assert samples(fams, "agentboard_dispatcher_pass_seconds_count")[0][1] >= 1
        assert samples(fams, "agentboard_database_up") == [({}, 1.0)]
        assert httpx.get(disp_url + "/healthz").status_code == 200
        wait_for(lambda: httpx.get(disp_url + "/readyz").status_code == 200, what="the dispatcher ready")

        # serve: the same board-wide counts; /metrics needs the metrics token or an admin token
        assert httpx.get(url + "/metrics").status_code == 401
        assert httpx.get(url + "/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert httpx.get(url + "/metrics", headers={"Authorization": f"Bearer {member}"}).status_code == 403
        for token in ("scrape-secret-123", admin):
            served = scrape(url + "/metrics", token)
            assert {lb["status"]: v for lb, v in samples(served, "agentboard_tasks")
                    if lb["board"] == "default"} == tasks
        assert scrape(open_url + "/metrics")["agentboard_tasks"]  # the tokenless address
        ready = wait_for(lambda: (r := httpx.get(url + "/readyz")).status_code == 200 and r, what="serve ready")
        assert [c["name"] for c in ready.json()["checks"]] == ["database", "migrations", "dispatcher"]
    finally:
        if disp is not None:
            disp.stop()
        serve.stop()

    # one JSON object per line; the lines about a run carry its board, task and run
    lines = [json.loads(line) for line in disp.err if line.startswith("{")]
    assert lines and all({"time", "level", "event", "host"} <= set(d) for d in lines)
    closed_lines = [d for d in lines if d["event"].startswith("run closed")]
    assert {d["task"] for d in closed_lines} == {*ids, failing}
    assert all(isinstance(d["run"], int) and d["board"] == "default" for d in closed_lines)
    spawned_lines = [d for d in lines if d["event"].startswith("spawned ")]
    assert {d["task"] for d in spawned_lines} >= set(ids)
    assert "scrape-secret-123" not in "".join(disp.err + serve.err)
    served_lines = [json.loads(line) for line in serve.err if line.startswith("{")]
    assert served_lines and all({"time", "level", "event", "host"} <= set(d) for d in served_lines)


@pytest.mark.postgres
def test_readyz_names_the_database_while_postgresql_is_unreachable(home: Path, pg_template: str) -> None:
    import psycopg
    from testenv import database_url, pg_admin_url, scratch_database

    with scratch_database(template=pg_template) as name:
        url = database_url(name)
        serve = Proc(home, "serve", "--port", "0", "--no-dispatch",
                     env={"AGENTBOARD_DATABASE_URL": url, "AGENTBOARD_PG_CONNECT_TIMEOUT": "2"})
        try:
            base = serve.find(r"(http://\S+)/login\?token=")
            assert httpx.get(base + "/readyz").json()["failed"] == "dispatcher"  # the database answers
            with psycopg.connect(pg_admin_url(), autocommit=True) as conn:
                conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
            resp = httpx.get(base + "/readyz", timeout=30)
            assert resp.status_code == 503
            body = resp.json()
            assert body["failed"] == "database" and body["ok"] is False
            assert name not in resp.text and "postgresql" not in resp.text  # no URL, no secret
            assert httpx.get(base + "/healthz").status_code == 200
        finally:
            serve.stop()


@pytest.mark.postgres
def test_a_scrape_with_an_admin_token_while_postgresql_is_unreachable_answers_database_up_0(
        home: Path, pg_template: str) -> None:
    import psycopg
    from testenv import database_url, pg_admin_url, scratch_database

    with scratch_database(template=pg_template) as name:
        url = database_url(name)
        with agentboard.connect(url) as ab:
            unused = str(tokens.create(ab.db, "scraper-2", role="admin")["token"])
        serve = Proc(home, "serve", "--port", "0", "--no-dispatch",
                     env={"AGENTBOARD_DATABASE_URL": url, "AGENTBOARD_PG_CONNECT_TIMEOUT": "2"})
        try:
            base = serve.find(r"(http://\S+)/login\?token=")
            admin = serve.find(r"/login\?token=(\S+)")
            assert samples(scrape(base + "/metrics", admin), "agentboard_database_up") == [({}, 1.0)]
            with psycopg.connect(pg_admin_url(), autocommit=True) as conn:
                conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
            down = scrape(base + "/metrics", admin)  # verified a moment ago: the whole scrape
            assert samples(down, "agentboard_database_up") == [({}, 0.0)]
            assert samples(down, "agentboard_db_pool_dead_connections_total")  # what explains the outage
            unknown = scrape(base + "/metrics", unused)  # cannot be checked now: only that the database is down
            assert samples(unknown, "agentboard_database_up") == [({}, 0.0)] and len(unknown) == 1
            assert httpx.get(base + "/metrics", timeout=30).status_code == 401  # still no scrape without a token
        finally:
            serve.stop()


def test_readyz_says_when_the_schema_is_behind_this_version(home: Path, ab: Any) -> None:
    from agentboard.api.app import create_app
    from agentboard.api.serve import BackgroundServer

    ab.db.write(lambda tx: tx.execute("UPDATE alembic_version SET version_num = '0010'"))
    with BackgroundServer(create_app(ab.settings, ab.db)) as server:
        resp = httpx.get(server.url + "/readyz")
    assert resp.status_code == 503
    assert resp.json()["failed"] == "migrations" and "0010" in resp.json()["checks"][-1]["detail"]


def test_an_api_host_not_yet_upgraded_stays_ready_once_a_newer_version_migrated_and_says_to_upgrade_it(
        home: Path, ab: Any) -> None:
    import time

    from agentboard.api.app import create_app
    from agentboard.api.serve import BackgroundServer
    from agentboard.kernel import monitoring
    from agentboard.store.migrate import HEAD

    monitoring.mark_pass(ab.db, "upgraded-host", time.time(), None)  # a dispatcher passes
    newer = f"{int(HEAD) + 1:04d}"  # a rolling upgrade: another host's newer version migrated
    ab.db.write(lambda tx: tx.execute("UPDATE alembic_version SET version_num = :v", {"v": newer}))
    with BackgroundServer(create_app(ab.settings, ab.db)) as server:
        resp = httpx.get(server.url + "/readyz")
        assert resp.status_code == 200, resp.text  # the load balancer keeps it while it works
        migrations = next(c for c in resp.json()["checks"] if c["name"] == "migrations")
        assert migrations["ok"] is True and newer in migrations["detail"]
        assert "upgrade agentboard on this host" in migrations["detail"]
        assert "run any agentboard command" not in migrations["detail"]  # that would be refused, exit 6
        assert httpx.get(server.url + "/api/board", headers={"Authorization": f"Bearer {_admin(ab)}"}).status_code == 200


def _admin(ab: Any) -> str:
    return str(tokens.create(ab.db, "readyz-admin", role="admin")["token"])


def test_a_bad_metrics_address_is_refused_with_what_to_give(home: Path, ab: Any) -> None:
    out = subprocess.run([sys.executable, "-m", "agentboard", "serve", "--port", "0", "--no-dispatch",
                          "--metrics-bind", "nonsense"], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "AGENTBOARD_HOME": str(home)})
    assert out.returncode == 2
    assert "HOST:PORT" in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_json_log_lines_redact_credentials_and_carry_the_ids_of_the_work_at_hand() -> None:
    import io
    import logging

    from agentboard.observe import logs

    stream = io.StringIO()
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    try:
        logs.setup("json", logging.INFO, "host-a", stream=stream)
        log = logging.getLogger("agentboard.dispatch")
        with logs.context(board="b1", task="t_0000abcd", run=7):
            log.warning("cannot reach postgresql://ab:hunter2@db.example/ab?password=x2")
        log.info("plain", extra={"task": "t_1111abcd"})
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
    first, second = (json.loads(line) for line in stream.getvalue().splitlines())
    assert first["board"] == "b1" and first["task"] == "t_0000abcd" and first["run"] == 7
    assert "hunter2" not in first["event"] and "x2" not in first["event"] and "ab:***@" in first["event"]
    assert first["level"] == "warning" and first["host"] == "host-a" and first["time"].endswith("Z")
    assert second["task"] == "t_1111abcd" and "run" not in second


def test_json_log_fields_are_masked_when_they_hold_a_credential_and_the_time_is_utc_to_the_millisecond() -> None:
    import datetime as dt
    import io
    import logging
    import time

    from agentboard.observe import logs

    stream = io.StringIO()
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    try:
        logs.setup("json", logging.INFO, "host-a", stream=stream)
        before = time.time()
        logging.getLogger("agentboard.dispatch").info(
            "reached %s", "the database", extra={"url": "postgresql://ab:hunter2@db.example/ab", "note": "a = b",
                                                 "detail": "token=s3cret&x=1", "plain": "nothing to hide"})
        after = time.time()
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
    line = json.loads(stream.getvalue())
    assert line["event"] == "reached the database" and line["plain"] == "nothing to hide"
    assert line["url"] == "postgresql://ab:***@db.example/ab" and line["detail"] == "token=***&x=1"
    assert line["note"] == "a = b"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", line["time"])
    at = dt.datetime.strptime(line["time"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=dt.UTC).timestamp()
    assert before - 0.001 <= at <= after


def test_a_hot_path_line_says_exactly_what_logging_says_for_the_same_call() -> None:
    import io
    import logging

    from agentboard.observe import logs

    stream = io.StringIO()
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    log = logging.getLogger("agentboard.runs")
    try:
        logs.setup("json", logging.INFO, "host-a", stream=stream)
        with logs.context(board="b1", task="t_0000abcd"):
            for say in (log.info, lambda *a, **k: logs.info(log, *a, **k)):
                say("run closed: %s after %.1f s at %s", "completed", 2.25, "postgresql://ab:hunter2@db/ab",
                    extra={"task": "t_2222abcd", "run": 7, "outcome": None, "note": "token=s3cret"})
                say("plain %d%%", 100)
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    for line in lines:
        line.pop("time")
    assert [list(x.items()) for x in lines[:2]] == [list(x.items()) for x in lines[2:]]
    assert lines[0]["event"] == "run closed: completed after 2.2 s at postgresql://ab:***@db/ab"
    assert lines[0]["task"] == "t_2222abcd" and lines[0]["board"] == "b1" and "outcome" not in lines[0]
    assert lines[0]["note"] == "token=***" and lines[1] == {
        "level": "info", "logger": "agentboard.runs", "event": "plain 100%", "board": "b1", "task": "t_0000abcd",
        "host": "host-a"}


def test_a_hot_path_line_reaches_a_handler_a_program_added_and_is_not_written_below_the_level() -> None:
    import io
    import logging

    from agentboard.observe import logs

    stream = io.StringIO()
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    seen: list[logging.LogRecord] = []
    extra = logging.Handler()
    extra.emit = seen.append  # type: ignore[method-assign]
    log = logging.getLogger("agentboard.dispatch")
    try:
        logs.setup("json", logging.WARNING, "host-a", stream=stream)
        logs.info(log, "not at this level")
        root.setLevel(logging.INFO)
        root.addHandler(extra)
        logs.info(log, "spawned %s", "t_0000abcd", extra={"task": "t_0000abcd"})
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
    (line,) = [json.loads(x) for x in stream.getvalue().splitlines()]
    assert line["event"] == "spawned t_0000abcd" and line["host"] == "host-a"
    assert [(r.getMessage(), getattr(r, "task", None)) for r in seen] == [("spawned t_0000abcd", "t_0000abcd")]


def test_the_lines_of_a_batch_are_written_together_at_its_end_in_the_order_they_were_logged() -> None:
    import io
    import logging

    from agentboard.observe import logs

    stream = io.StringIO()
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    log = logging.getLogger("agentboard.dispatch")
    try:
        logs.setup("json", logging.INFO, "host-a", stream=stream)
        with logs.batch():
            logs.info(log, "one")
            logs.info(log, "two")
            assert stream.getvalue() == ""
            log.warning("three")  # not a hot-path line: written at once, after the two before it
            logs.info(log, "four")
        logs.info(log, "five")
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
    assert [json.loads(x)["event"] for x in stream.getvalue().splitlines()] == ["one", "two", "three", "four", "five"]


def test_runs_of_two_boards_in_one_process_are_all_counted_though_their_databases_number_runs_alike(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from testenv import point_home_at

    from agentboard.dispatch.dispatcher import Dispatcher
    from agentboard.observe import metrics

    def counted() -> float:
        value = metrics.REGISTRY.get_sample_value(
            "agentboard_runs_total", {"board": "default", "profile": "counted-twice", "outcome": "completed"})
        return value or 0.0

    start = counted()
    run_ids = []
    for name in ("first", "second"):
        home = tmp_path / name
        point_home_at(home, monkeypatch)
        client = agentboard.connect(str(home))
        client.settings.home = home
        try:
            client.add_profile("counted-twice", command=GOOD)
            board = client.board()
            ids = [board.create(f"task {i}", assignee="counted-twice")["id"] for i in range(2)]
            d = Dispatcher(client.db, client.settings)

            def done(b: Any = board, ids: list[str] = ids) -> bool:
                return all(b.show(t)["status"] == "done" for t in ids)

            d.start()
            try:
                wait_for(done, what="the tasks done")
            finally:
                d.stop()
            run_ids += client.db.read(lambda tx: [r["id"] for r in tx.all("SELECT id FROM task_runs")])
        finally:
            client.close()
    assert sorted(run_ids) == [1, 1, 2, 2]  # the same run ids in both databases
    assert counted() - start == 4.0


def test_with_metrics_off_a_scrape_holds_only_the_board_wide_metrics(ab: Any) -> None:
    from agentboard.observe import metrics

    ab.board().create("counted on the board")
    metrics.set_enabled(False)
    try:
        text = metrics.render(ab.db).decode()
    finally:
        metrics.set_enabled(True)
    names = {f.name for f in text_string_to_metric_families(text)}
    assert {"agentboard_budget_blocked_tasks", "agentboard_database_up"} <= names  # read at the scrape
    per_process = {"agentboard_runs", "agentboard_db_pool_waits", "agentboard_notify_parkings", "process_cpu_seconds"}
    assert not names & per_process, names & per_process
    assert "agentboard_runs" in {f.name for f in text_string_to_metric_families(metrics.render(ab.db).decode())}
