"""OpenTelemetry traces (`agentboard[otel]`): a real `serve` with its dispatcher exports spans
over OTLP/HTTP to a loopback collector the test runs; without the packages nothing changes."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from testenv import copy_template, wait_for

import agentboard

from .test_serve import Serve

pytestmark = pytest.mark.xdist_group("serve")


@pytest.fixture
def home(home: Path, sqlite_template: Path) -> Path:
    """A fresh home that starts from a copy of the suite's migrated database, as a home that
    has run a first command (each process here would otherwise migrate a new one)."""
    return copy_template(sqlite_template, home)


def _otel_installed() -> bool:
    try:
        import opentelemetry.proto.collector.trace.v1.trace_service_pb2  # noqa: F401
        import opentelemetry.sdk.trace  # noqa: F401
    except ImportError:
        if os.environ.get("CI") == "true":
            raise
        return False
    return True


needs_otel = pytest.mark.skipif(not _otel_installed(), reason="agentboard[otel] is not installed")


class Collector:
    """An OTLP/HTTP receiver on loopback: keeps every span POSTed to /v1/traces."""

    def __init__(self) -> None:
        self.spans: list[dict[str, Any]] = []
        self.posts: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with collector.lock:
                    collector.posts.append((self.path, self.headers.get("Content-Type", "")))
                if self.path == "/v1/traces":
                    collector.add(body)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def add(self, body: bytes) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        req = ExportTraceServiceRequest()
        req.ParseFromString(body)
        for rs in req.resource_spans:
            resource = {a.key: a.value.string_value for a in rs.resource.attributes}
            for ss in rs.scope_spans:
                for s in ss.spans:
                    attrs = {}
                    for a in s.attributes:
                        v = a.value
                        attrs[a.key] = v.string_value if v.HasField("string_value") else v.int_value
                    with self.lock:
                        self.spans.append({"name": s.name, "attrs": attrs, "resource": resource,
                                           "trace": s.trace_id.hex(), "parent": s.parent_span_id.hex(),
                                           "id": s.span_id.hex(),
                                           "start": s.start_time_unix_nano, "end": s.end_time_unix_nano})

    def names(self) -> set[str]:
        with self.lock:
            return {s["name"] for s in self.spans}

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def collector() -> Iterator[Collector]:
    c = Collector()
    yield c
    c.close()


@needs_otel
def test_serve_exports_spans_of_requests_kernel_verbs_passes_and_worker_runs(
        home: Path, collector: Collector) -> None:
    ab = agentboard.connect(str(home))
    ab.add_profile("bot", command="agentboard complete --summary 'traced'")
    s = Serve(home, env={"AGENTBOARD_OTEL_ENDPOINT": collector.url, "OTEL_BSP_SCHEDULE_DELAY": "100",
                                 "AGENTBOARD_DISPATCH_INTERVAL": "0.5"})
    try:
        auth = {"Authorization": f"Bearer {s.token}"}
        made = httpx.post(s.url + "/api/tasks", json={"title": "follow me", "assignee": "bot"}, headers=auth,
                          timeout=30)
        assert made.status_code == 201, made.text
        task_id = made.json()["id"]
        assert httpx.get(s.url + f"/api/tasks/{task_id}", headers=auth, timeout=30).status_code == 200
        httpx.post(s.url + "/api/dispatch", headers=auth, timeout=60)
        wait_for(lambda: ab.board().show(task_id)["status"] == "done", what="the worker's completion")
        wanted = {"POST /api/tasks", "GET /api/tasks/{task_id}", "kernel.tasks.create", "dispatcher.pass",
                  "worker.run"}
        wait_for(lambda: wanted <= collector.names(), what=f"spans {wanted} (got {collector.names()})")
    finally:
        s.stop()
        ab.close()
    assert {path for path, _ in collector.posts} == {"/v1/traces"}
    assert all(ctype == "application/x-protobuf" for _, ctype in collector.posts)
    spans = collector.spans
    assert all(sp["resource"]["service.name"] == "agentboard" for sp in spans)
    request = next(sp for sp in spans if sp["name"] == "POST /api/tasks")
    assert request["attrs"]["http.response.status_code"] == 201
    # the kernel verb ran inside the request: same trace, a descendant of the request's span
    create = next(sp for sp in spans if sp["name"] == "kernel.tasks.create" and sp["trace"] == request["trace"])
    assert create["attrs"]["agentboard.tx"] == "write"
    run = next(sp for sp in spans if sp["name"] == "worker.run")
    assert run["attrs"]["agentboard.task"] == task_id and run["attrs"]["agentboard.board"] == "default"
    assert run["end"] > run["start"]
    passes = [sp for sp in spans if sp["name"] == "dispatcher.pass"]
    assert any(sp["attrs"].get("agentboard.spawned") == 1 for sp in passes)
    # a pass's reads are spans of their own beneath it
    assert any(sp["parent"] == p["id"] and sp["name"].startswith("kernel.") for p in passes for sp in spans)


def test_with_opentelemetry_absent_a_configured_endpoint_changes_nothing(home: Path, collector: Collector,
                                                                         tmp_path: Path) -> None:
    # a Python without the extra's packages (a module finder refuses them; the OpenTelemetry API
    # itself comes with FastAPI)
    blocker = tmp_path / "sitecustomize.py"
    blocker.write_text(
        "import sys\n"
        "class _NoOtel:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.startswith(('opentelemetry.sdk', 'opentelemetry.exporter')):\n"
        "            raise ImportError(name + ' is not installed')\n"
        "        return None\n"
        "sys.meta_path.insert(0, _NoOtel())\n")
    env = {**os.environ, "AGENTBOARD_HOME": str(home), "AGENTBOARD_OTEL_ENDPOINT": collector.url,
           "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    probe = subprocess.run([sys.executable, "-c", "import opentelemetry.sdk"], env=env, capture_output=True,
                           text=True, timeout=60)
    assert probe.returncode != 0, "the blocker did not hide opentelemetry.sdk"
    script = ("import agentboard, json\n"
              "from agentboard import tracing\n"
              "from agentboard.api.app import create_app\n"
              "from agentboard.config import load\n"
              "ab = agentboard.connect(None)\n"
              "t = ab.board().create('untraced')\n"
              "app = create_app(load())\n"
              "print(json.dumps({'id': t['id'], 'tracer': tracing.tracer is None}))\n")
    r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert '"tracer": true' in r.stdout
    assert "install agentboard[otel]" in r.stderr
    assert "Traceback" not in r.stderr
    done = subprocess.run([sys.executable, "-m", "agentboard", "list", "--json"], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and "untraced" in done.stdout
    assert collector.posts == []
