"""Outbound requests a member can aim: notification targets (subscriptions and test messages).

The attack: a member token asks the server to send a "notification" to a service that only the
server can reach (``json://127.0.0.1:PORT/path?+Header=x`` posts with an injected header,
``form://…?:method=GET`` sends GETs), reads the error text to tell open, closed and non-HTTP
ports apart, or names a plugin that reads a local file. Each test runs the real server with a
real service on loopback and asserts the service received nothing."""

from __future__ import annotations

import dataclasses
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from api.conftest import Api, start_api
from testenv import wait_for

import agentboard
from agentboard.kernel import notifications as kn
from agentboard.notify import outbound
from agentboard.notify.notifier import Notifier
from agentboard.notify.send import send


class Service:
    """A plain HTTP service on loopback that records every request it gets (any method)."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        service = self

        class Handler(BaseHTTPRequestHandler):
            def _record(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                self.rfile.read(length)
                service.requests.append((self.command, self.path, dict(self.headers)))
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            do_GET = do_POST = do_PUT = do_DELETE = _record  # noqa: N815 - http.server names

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = int(self.server.server_address[1])
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Banner:
    """A TCP service that is not HTTP: it writes a banner and closes."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = int(self.sock.getsockname()[1])
        self.connections = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            conn.sendall(b"+OK redis-like banner\r\n")
            conn.close()

    def close(self) -> None:
        self.sock.close()


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = int(s.getsockname()[1])
    s.close()
    return port


@pytest.fixture
def service() -> Iterator[Service]:
    s = Service()
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def api_any(ab: Any) -> Iterator[Api]:
    with start_api(ab) as a:
        yield a


@pytest.fixture
def api(home: Path) -> Iterator[Api]:
    with agentboard.connect(str(home)) as client, start_api(client) as a:
        yield a


def _subscriptions(api: Api) -> list[dict[str, Any]]:
    return kn.list_subscriptions(api.db, None)


def test_a_member_cannot_make_the_server_post_to_a_loopback_service(api_any: Api, service: Service) -> None:
    member = api_any.client(api_any.token("mallory"))
    target = f"json://127.0.0.1:{service.port}/admin/flush?+X-Injected=1"
    r = member.post("/api/notify/test", json={"target": target})
    assert r.status_code == 403, r.text
    assert "not a public address" in r.json()["error"]["message"]
    r = member.post("/api/notify/subscriptions", json={"target": target, "scope": "board"})
    assert r.status_code == 403, r.text
    r = member.post("/api/notify/test", json={"target": f"form://localhost:{service.port}/?:method=GET"})
    assert r.status_code == 403, r.text
    assert service.requests == []
    assert _subscriptions(api_any) == []


def test_a_members_error_does_not_tell_open_closed_and_non_http_ports_apart(api: Api, service: Service) -> None:
    banner = Banner()
    try:
        member = api.client(api.token("mallory"))
        answers = []
        for port in (service.port, _closed_port(), banner.port):
            r = member.post("/api/notify/test", json={"target": f"json://127.0.0.1:{port}/probe"})
            answers.append((r.status_code, r.json()["error"]["message"]))
        assert len(set(answers)) == 1, answers
        assert service.requests == [] and banner.connections == 0
    finally:
        banner.close()


@pytest.mark.parametrize("host", [
    "localhost", "0.0.0.0", "[::1]", "10.0.0.1", "172.16.5.4", "192.168.1.1", "169.254.169.254",
    "[fd00:ec2::254]", "[fe80::1]", "[fc00::5]", "2130706433", "224.0.0.1", "100.64.0.1",
])
def test_private_link_local_metadata_and_disguised_loopback_targets_are_refused_for_members(
        api: Api, host: str) -> None:
    member = api.client(api.token("mallory"))
    r = member.post("/api/notify/subscriptions", json={"target": f"json://{host}:8080/hook"})
    assert r.status_code == 403, (host, r.text)
    assert _subscriptions(api) == []


@pytest.mark.parametrize("address", [
    "::ffff:127.0.0.1", "::ffff:10.1.2.3", "2002:7f00:1::", "64:ff9b::a9fe:a9fe", "::", "ff02::1",
    "100.100.100.200", "198.18.0.1", "240.0.0.1", "255.255.255.255",
])
def test_addresses_that_wrap_a_private_one_are_not_public(address: str) -> None:
    import ipaddress

    assert not outbound.public(ipaddress.ip_address(address))
    assert outbound.public(ipaddress.ip_address("93.184.216.34"))
    assert outbound.public(ipaddress.ip_address("2606:2800:220:1:248:1893:25c8:1946"))


def test_a_member_may_still_subscribe_a_public_address(api: Api) -> None:
    member = api.client(api.token("alice"))
    r = member.post("/api/notify/subscriptions", json={"target": "json://93.184.216.34/hook"})
    assert r.status_code == 201, r.text
    assert r.json()["trusted"] is False


@pytest.mark.parametrize("target", [
    "slack://T1JJ3T3L2/A1BRTD4JD/TIiajkdnlazkcOXrIdevi7FQ?template=/etc/passwd",
    "json://93.184.216.34/hook?attach=/etc/passwd",
    "mailto://user:pass@example.com?pgpkey=/root/.gnupg/key.asc",
    "json://93.184.216.34/hook?+X-Note=file:///etc/shadow",
    "syslog://",
    "rsyslog://93.184.216.34",
])
def test_plugins_that_read_local_files_or_act_on_the_server_are_refused_for_members(api: Api, target: str) -> None:
    member = api.client(api.token("mallory"))
    for path in ("/api/notify/test", "/api/notify/subscriptions"):
        r = member.post(path, json={"target": target})
        assert r.status_code == 403, (target, r.text)
    assert _subscriptions(api) == []


def test_an_administrator_reaches_a_loopback_target(api_any: Api, service: Service) -> None:
    r = api_any.as_admin.post("/api/notify/test", json={"target": f"json://127.0.0.1:{service.port}/ops"})
    assert r.status_code == 200 and r.json()["ok"] is True, r.text
    assert [(m, p) for m, p, _ in service.requests] == [("POST", "/ops")]
    r = api_any.as_admin.post("/api/notify/subscriptions", json={"target": f"json://127.0.0.1:{service.port}/ops"})
    assert r.status_code == 201 and r.json()["trusted"] is True


@pytest.fixture
def allowing_api(home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Api]:
    monkeypatch.setenv("AGENTBOARD_NOTIFY_ALLOW_HOSTS", "127.0.0.1")
    with agentboard.connect(str(home)) as client, start_api(client) as a:
        yield a


def test_a_host_in_notify_allow_hosts_is_reachable_by_members(allowing_api: Api, service: Service) -> None:
    member = allowing_api.client(allowing_api.token("alice"))
    r = member.post("/api/notify/test", json={"target": f"json://127.0.0.1:{service.port}/team"})
    assert r.status_code == 200 and r.json()["ok"] is True, r.text
    assert [p for _, p, _ in service.requests] == ["/team"]
    # another loopback address is not the allowed one
    r = member.post("/api/notify/test", json={"target": f"json://127.0.0.2:{service.port}/team"})
    assert r.status_code == 403
    assert len(service.requests) == 1


def test_a_members_stored_target_is_checked_again_when_the_notifier_sends(
        allowing_api: Api, service: Service) -> None:
    """What a rebinding name does (public when saved, loopback when sent) the allowance
    withdrawn after saving does too: the address is checked on the connection itself."""
    api = allowing_api
    member = api.client(api.token("alice"))
    r = member.post("/api/notify/subscriptions", json={"target": f"json://127.0.0.1:{service.port}/team",
                                                       "kinds": ["created"]})
    assert r.status_code == 201, r.text
    sub_id = r.json()["id"]
    strict = dataclasses.replace(api.ab.settings, notify_allow_hosts=(), notify_batch_delay=0.0,
                                 notify_digest_window=0.0)
    notifier = Notifier(api.db, strict)
    api.ab.board().create("a task that makes an event")
    wait_for(lambda: notifier.run_once().failures or kn.get(api.db, None, sub_id)["failures"], what="a failure")
    row = kn.get(api.db, None, sub_id)
    assert row["last_error"] == outbound.GENERIC_ERROR
    assert service.requests == []
    # a name that resolves to loopback at send time is refused the same way
    assert send(f"json://localhost:{service.port}/x", "t", "b", timeout=5,
                policy=outbound.Policy()) == outbound.GENERIC_ERROR
    assert service.requests == []


def test_a_member_testing_an_admins_subscription_gets_the_generic_error(api: Api) -> None:
    port = _closed_port()
    r = api.as_admin.post("/api/notify/subscriptions", json={"target": f"json://127.0.0.1:{port}/gone"})
    sub_id = r.json()["id"]
    member = api.client(api.token("alice"))
    r = member.post(f"/api/notify/subscriptions/{sub_id}/test")
    assert r.status_code == 200 and r.json() == {**r.json(), "ok": False, "error": outbound.GENERIC_ERROR}
    detail = api.as_admin.post(f"/api/notify/subscriptions/{sub_id}/test").json()["error"]
    assert detail != outbound.GENERIC_ERROR


def test_the_local_cli_subscribes_loopback_targets_as_trusted(home: Path, service: Service) -> None:
    import os
    import subprocess
    import sys

    env = {**os.environ, "AGENTBOARD_HOME": str(home)}
    out = subprocess.run([sys.executable, "-m", "agentboard", "notify", "add", f"json://127.0.0.1:{service.port}/cli",
                          "--json"], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert '"trusted": true' in out.stdout
    assert "serve" in out.stderr or "serve" in out.stdout


def test_the_resolver_answers_as_before_outside_a_delivery() -> None:
    with outbound.guarded(outbound.Policy()):
        with pytest.raises(OSError):
            socket.getaddrinfo("127.0.0.1", 80)
    assert socket.getaddrinfo("127.0.0.1", 80)
    with httpx.Client() as h, pytest.raises(httpx.ConnectError):
        h.get(f"http://127.0.0.1:{_closed_port()}/")
