"""The real agent CLIs under the real dispatcher, against a scripted model server.

Each test gets a home driven through the `agentboard` command line (real processes), a git
project the board works on in worktrees (the home starts as a copy of the suite's migrated
database; the board and the profiles are set up, and the tasks and runs read, through the same
command line in the test's process, which spares an interpreter start per setup command and per
poll), and a scripted model server process
(``tests/fakes/model_server.py``) the profile points its CLI at — the only thing set beyond the
adapter's defaults is the endpoint:

- Claude Code: ``--env ANTHROPIC_BASE_URL=<server> --env ANTHROPIC_API_KEY=<any>``;
- Codex: ``--env CODEX_HOME=<dir>`` whose ``config.toml`` names the server as its model
  provider (``wire_api = "responses"``), with the provider's key in ``--env``;
- Gemini CLI: ``--env GOOGLE_GEMINI_BASE_URL=<server> --env GEMINI_API_KEY=<any>``;
- opencode: ``--env OPENCODE_CONFIG_CONTENT=<config>`` naming the server as an OpenAI-compatible
  provider (``options.baseURL``) and its model as the default ``model``.

`scripts/test` installs the four CLIs into `.cache/agentclis`; locally a missing one skips its
tests with a reason, under CI=true it fails them.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from testenv import cli_in_process, copy_template
from testenv import real_cli as real_cli
from testenv import wait_for as wait_for

ROOT = Path(__file__).resolve().parents[2]
FAKES = ROOT / "tests" / "fakes"
#: Codex refuses to create its sandbox helper under the temp folder (and a checkout may be there):
#: its homes live in the user's cache
CODEX_HOMES = Path.home() / ".cache" / "agentboard-tests" / "codex-homes"


class Model:
    """The scripted model server, a process of its own."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.script_file = folder / "script.json"
        self.log_file = folder / "requests.jsonl"
        self.script_file.write_text("{}")
        self.proc = subprocess.Popen([sys.executable, str(FAKES / "model_server.py"), str(self.script_file),
                                      str(self.log_file)], stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().strip()
        assert self.url.startswith("http://127.0.0.1:"), self.url

    def script(self, *turns: dict[str, Any], usage: dict[str, int] | None = None) -> None:
        """The replies to the next agent turns (see the server's docstring)."""
        data: dict[str, Any] = {"turns": list(turns)}
        if usage:
            data["usage"] = usage
        self.script_file.write_text(json.dumps(data))

    def release(self) -> None:
        """Let a reply held by ``{"hang": ...}`` go."""
        data = json.loads(self.script_file.read_text())
        self.script_file.write_text(json.dumps({**data, "release": True}))

    def requests(self, agentic: bool = True) -> list[dict[str, Any]]:
        if not self.log_file.exists():
            return []
        rows = [json.loads(line) for line in self.log_file.read_text().splitlines() if line.strip()]
        return [r for r in rows if r["agentic"] or not agentic]

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


@pytest.fixture
def model(tmp_path: Path) -> Iterator[Model]:
    m = Model(tmp_path / "model")
    yield m
    m.stop()


class Board:
    """A home and a git project, driven through the `agentboard` command line."""

    def __init__(self, tmp_path: Path, template: Path) -> None:
        self.home = tmp_path / "home"
        self.user_home = tmp_path / "user"
        self.user_home.mkdir()
        self.repo = tmp_path / "project"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTBOARD_")}
        self.env.update({"AGENTBOARD_HOME": str(self.home), "HOME": str(self.user_home),
                         "DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"})
        self.cwd = tmp_path
        self.processes: list[subprocess.Popen[str]] = []
        self.codex_homes: list[Path] = []
        _git_repo(self.repo)
        copy_template(template, self.home)
        self.setup("boards", "create", "proj", "--workdir", str(self.repo), "--switch")

    def __call__(self, *args: str, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([sys.executable, "-m", "agentboard", *args], env=self.env, cwd=self.cwd,
                              capture_output=True, text=True, timeout=timeout)
        if check:
            assert proc.returncode == 0, f"agentboard {' '.join(args)}\n{proc.stdout}\n{proc.stderr}"
        return proc

    def setup(self, *args: str) -> str:
        """``agentboard ARGS`` through the real entry point in this process (setting up, not the
        behaviour under test); returns its output."""
        code, out, err = cli_in_process(list(args), self.env)
        assert code == 0, f"agentboard {' '.join(args)}\n{out}\n{err}"
        return out

    def json(self, *args: str) -> Any:
        return json.loads(self(*args, "--json").stdout)

    def task(self, task_id: str) -> dict[str, Any]:
        """`agentboard show ID --json`, read in this process: tests poll it while the agents run,
        and a new interpreter per poll would take the CPU the agents need."""
        return json.loads(self.setup("show", task_id, "--json"))

    def runs(self, task_id: str) -> list[dict[str, Any]]:
        """`agentboard runs ID --json`, read in this process (polled, like :meth:`task`)."""
        out = json.loads(self.setup("runs", task_id, "--json"))
        return out["runs"] if isinstance(out, dict) else out

    def worker_said(self, task_id: str, needle: str) -> str:
        """The lines of the task's worker log (the CLI's own output, as the dispatcher keeps it)
        that mention ``needle``, or its last lines: what a failed assertion shows of what the CLI
        did and what it was answered."""
        log = self.home / "boards" / "proj" / "logs" / f"{task_id}.log"
        lines = log.read_text(errors="replace").splitlines() if log.exists() else ["(no worker log)"]
        hits = [ln for ln in lines if needle in ln] or lines[-40:]
        return "\n".join(ln[:2000] for ln in hits)

    def start(self, *args: str) -> subprocess.Popen[str]:
        proc = subprocess.Popen([sys.executable, "-m", "agentboard", *args], env=self.env, cwd=self.cwd,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.processes.append(proc)
        return proc

    # -- profiles that point a real CLI at the scripted server --------------------------------------

    def claude(self, model: Model, name: str = "claude1", *more: str) -> str:
        self.setup("profiles", "add", name, "--adapter", "claude", "--command", real_cli("claude"),
             "--env", f"ANTHROPIC_BASE_URL={model.url}", "--env", "ANTHROPIC_API_KEY=sk-scripted", *more)
        return name

    def codex(self, model: Model, name: str = "codex1", *more: str) -> str:
        self.setup("profiles", "add", name, "--adapter", "codex", "--command", real_cli("codex"),
             "--env", f"CODEX_HOME={self.codex_home(model)}", "--env", "SCRIPTED_API_KEY=sk-scripted", *more)
        return name

    def gemini(self, model: Model, name: str = "gemini1", *more: str) -> str:
        self.setup("profiles", "add", name, "--adapter", "gemini", "--command", real_cli("gemini"),
             "--env", f"GOOGLE_GEMINI_BASE_URL={model.url}", "--env", "GEMINI_API_KEY=sk-scripted", *more)
        return name

    def opencode(self, model: Model, name: str = "opencode1", *more: str) -> str:
        self.setup("profiles", "add", name, "--adapter", "opencode", "--command", real_cli("opencode"),
             "--env", f"OPENCODE_CONFIG_CONTENT={json.dumps(opencode_config(model.url))}", *more)
        return name

    def codex_home(self, model: Model) -> Path:
        folder = CODEX_HOMES / uuid.uuid4().hex[:12]
        folder.mkdir(parents=True)
        self.codex_homes.append(folder)
        (folder / "config.toml").write_text(codex_config(model.url))
        return folder

    def close(self) -> None:
        for proc in self.processes:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
        for pid in self.own_processes():  # what a plain `dispatch` left serving, and its workers
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        for folder in self.codex_homes:
            shutil.rmtree(folder, ignore_errors=True)

    def own_processes(self) -> list[int]:
        """The processes this test started that outlive a command: a background pass (its
        AGENTBOARD_HOME is this home) and workers (their workspace is in this project)."""
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                environ = (entry / "environ").read_bytes().split(b"\0")
            except OSError:
                continue
            if f"AGENTBOARD_HOME={self.home}".encode() in environ or any(
                    e.startswith(f"AGENTBOARD_WORKSPACE={self.repo}".encode()) for e in environ):
                found.append(int(entry.name))
        return found


def codex_config(url: str) -> str:
    """A Codex config whose model provider is the server at ``url`` (no retries: a fault shows at once)."""
    return (f'model = "gpt-5.1-codex"\nmodel_provider = "scripted"\n\n[model_providers.scripted]\nname = "scripted"\n'
            f'base_url = "{url}/v1"\nwire_api = "responses"\nenv_key = "SCRIPTED_API_KEY"\n'
            "request_max_retries = 0\nstream_max_retries = 0\n")


def opencode_config(url: str) -> dict[str, Any]:
    """An opencode config whose model is the server at ``url``, an OpenAI-compatible provider."""
    return {"provider": {"scripted": {"npm": "@ai-sdk/openai-compatible", "name": "scripted",
                                      "options": {"baseURL": f"{url}/v1", "apiKey": "sk-scripted"},
                                      "models": {"m1": {"name": "m1"}}}},
            "model": "scripted/m1"}


def _git_repo(path: Path) -> None:
    path.mkdir()
    run = lambda *a: subprocess.run(["git", "-C", str(path), *a], check=True, capture_output=True)  # noqa: E731
    run("init", "-q", "-b", "main")
    run("config", "user.email", "dev@example.com")
    run("config", "user.name", "Dev")
    (path / "README.md").write_text("# project\n")
    run("add", "README.md")
    run("commit", "-qm", "first")


@pytest.fixture
def board(tmp_path: Path, sqlite_template: Path) -> Iterator[Board]:
    b = Board(tmp_path, sqlite_template)
    yield b
    b.close()


def branch_files(repo: Path, branch: str) -> list[str]:
    out = subprocess.run(["git", "-C", str(repo), "ls-tree", "-r", "--name-only", branch], capture_output=True,
                         text=True, check=True)
    return out.stdout.split()
