"""Browser tests: a real `agentboard serve --no-dispatch` on a temporary home, driven by
Debian's Chromium through Playwright.

One server and one browser per test module; each test gets a fresh, logged-in page. Each module
is an xdist group of its own (`browser-<module>`): its tests share that server and browser, and
modules run on different workers at once.
Locally a missing Chromium (or Playwright) skips these tests with a reason; under CI=true it
fails them.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from testenv import copy_template

CHROMIUM = os.environ.get("AGENTBOARD_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run",
]
ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "test-artifacts" / "screenshots"
LOGIN_RE = re.compile(r"(http://\S+)/login\?token=(\S+)")
CLEAN_ENV = (
    "AGENTBOARD_DATABASE_URL", "AGENTBOARD_BOARD", "AGENTBOARD_TASK", "AGENTBOARD_RUN_ID", "AGENTBOARD_TOKEN",
    "AGENTBOARD_API_URL", "AGENTBOARD_LLM_BASE_URL", "AGENTBOARD_LLM_API_KEY", "OPENAI_API_KEY",
    "AGENTBOARD_PROFILE", "AGENTBOARD_ACTOR",
)


def _unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(reason + " (CI=true: browser tests must run)")
    pytest.skip(reason)


@dataclass
class Server:
    """A running `agentboard serve` and what a test needs to talk to it."""

    url: str
    token: str
    home: Path
    env: dict[str, str]
    proc: subprocess.Popen[str]
    output: list[str] = field(default_factory=list)

    @property
    def login_url(self) -> str:
        return f"{self.url}/login?token={self.token}"

    def api(self, method: str, path: str, **kw: Any) -> Any:
        """Call the REST API with the admin token (to check what the server thinks)."""
        import httpx

        resp = httpx.request(method, self.url + path, headers={"Authorization": f"Bearer {self.token}"},
                             timeout=10, **kw)
        resp.raise_for_status()
        return resp.json()

    def cli(self, *args: str) -> str:
        """Run an `agentboard` verb in another process against the same home."""
        out = subprocess.run([sys.executable, "-m", "agentboard", *args], env=self.env, capture_output=True,
                             text=True, timeout=60)
        assert out.returncode == 0, f"agentboard {' '.join(args)} failed: {out.stderr}"
        return out.stdout


@contextlib.contextmanager
def serving(home: Path, template: Path | None = None, **extra_env: str) -> Iterator[Server]:
    """`agentboard serve --no-dispatch` on ``home`` in another process, until the block ends.
    With ``template`` (the suite's migrated SQLite file), a home without a database starts from
    a copy of it instead of migrating one."""
    if template is not None and not (home / "agentboard.db").exists():
        copy_template(template, home)
    env = {k: v for k, v in os.environ.items() if k not in CLEAN_ENV}
    env.update(AGENTBOARD_HOME=str(home), PYTHONUNBUFFERED="1", **extra_env)
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentboard", "serve", "--port", "0", "--no-dispatch"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    lines: list[str] = []
    found: dict[str, str] = {}
    ready = threading.Event()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            m = LOGIN_RE.search(line)
            if m and not ready.is_set():
                found.update(url=m.group(1), token=m.group(2))
                ready.set()
        ready.set()

    threading.Thread(target=pump, daemon=True).start()
    if not ready.wait(60) or not found:
        proc.kill()
        pytest.fail("agentboard serve did not print a login URL:\n" + "".join(lines))
    try:
        yield Server(url=found["url"], token=found["token"], home=home, env=env, proc=proc, output=lines)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, sqlite_template: Path) -> Iterator[Server]:
    with serving(tmp_path_factory.mktemp("e2e") / "home", sqlite_template) as srv:
        yield srv


@pytest.fixture(scope="module")
def kernel(server: Server) -> Iterator[Any]:
    """The Python API on the server's home: seed data and check results from this process."""
    import agentboard

    client = agentboard.connect(f"sqlite:///{server.home / 'agentboard.db'}")
    try:
        yield client
    finally:
        client.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        _unavailable(f"Chromium not found at {CHROMIUM}")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("the playwright package is not installed")
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser: Any, server: Server, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A fresh logged-in page on the board; a screenshot is saved when the test ends."""
    context = browser.new_context(viewport={"width": 2000, "height": 1000})
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    pg.goto(server.login_url)
    pg.wait_for_selector(".column[data-status='todo']", timeout=15000)
    pg.page_errors = errors  # type: ignore[attr-defined]
    try:
        yield pg
    finally:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        name = re.sub(r"[^\w.-]+", "_", request.node.name)
        try:
            pg.screenshot(path=str(SCREENSHOTS / f"{name}.png"))
        except Exception:  # the screenshot is an artifact, never a reason to fail
            pass
        context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"
