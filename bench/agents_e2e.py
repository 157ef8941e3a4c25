"""What the dispatcher adds to a real agent CLI's own time, against the scripted model server.

For each installed CLI (Claude Code, Codex, Gemini CLI, opencode; `scripts/test` installs them in
`.cache/agentclis`),
the same scripted task — write a file, run a command, `kanban_complete` through the board's MCP
server — is run N times two ways:

- **by hand**: the adapter's exact command line started directly in a prepared git worktree
  (with the same `.mcp.json`), timed from start to exit;
- **through the dispatcher**: a task created ready on a board with a `--workdir`, a dispatcher
  pass starts it in its worktree, timed from the task being ready to its worker's exit being
  recorded (the task done).

It prints the wall times (p50), their ratio (goal <= 1.2), ready -> first model request (p50/p99:
the time the dispatcher and the CLI take before the model is asked anything), and how long
`agentboard mcp` takes to answer ``initialize`` and ``tools/list`` (p50/p99).

    python bench/agents_e2e.py [--runs 5] [--clis claude,codex,gemini,opencode] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from _shared import load_average  # noqa: E402

CLIS = ROOT / ".cache" / "agentclis" / "node_modules" / ".bin"
SCRIPT = [
    {"calls": [{"write": {"path": "{cwd}/hello.txt", "content": "hello"}}]},
    {"calls": [{"shell": "wc -c < hello.txt > size.txt"}]},
    {"calls": [{"mcp": "kanban_complete", "args": {"summary": "wrote hello.txt"}}]},
    {"text": "Done."},
]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def _git_repo(path: Path) -> None:
    path.mkdir(parents=True)
    for args in (["init", "-q", "-b", "main"], ["config", "user.email", "b@example.com"], ["config", "user.name", "B"]):
        subprocess.run(["git", "-C", str(path), *args], check=True)
    (path / "README.md").write_text("bench\n")
    subprocess.run(["git", "-C", str(path), "add", "."], check=True)
    subprocess.run(["git", "-C", str(path), "commit", "-qm", "first"], check=True)


class Server:
    """The scripted model server, a process of its own (in this process it would compete for the
    interpreter with the dispatcher and the API being measured)."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.script, self.log = folder / "script.json", folder / "requests.jsonl"
        self.script.write_text(json.dumps({"turns": SCRIPT}))
        self.proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "fakes" / "model_server.py"),
                                      str(self.script), str(self.log)], stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().strip()

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def _server(folder: Path) -> tuple[Server, Path, Path]:
    server = Server(folder)
    return server, server.script, server.log


def _rescript(script: Path, log: Path, server: Server) -> None:
    """A fresh script for the next run (the server starts its turns over)."""
    script.write_text(json.dumps({"turns": SCRIPT, "generation": uuid.uuid4().hex}))
    log.write_text("")


def _first_request(log: Path) -> float | None:
    for line in log.read_text().splitlines():
        row = json.loads(line)
        if row["agentic"]:
            return float(row["at"])
    return None


def _profile_env(cli: str, url: str, keep: Path) -> dict[str, str]:
    if cli == "claude":
        return {"ANTHROPIC_BASE_URL": url, "ANTHROPIC_API_KEY": "sk-bench"}
    if cli == "gemini":
        return {"GOOGLE_GEMINI_BASE_URL": url, "GEMINI_API_KEY": "sk-bench"}
    if cli == "opencode":
        return {"OPENCODE_CONFIG_CONTENT": json.dumps({
            "provider": {"bench": {"npm": "@ai-sdk/openai-compatible", "name": "bench",
                                   "options": {"baseURL": f"{url}/v1", "apiKey": "sk-bench"},
                                   "models": {"m1": {"name": "m1"}}}}, "model": "bench/m1"})}
    home = keep / ("codex-" + uuid.uuid4().hex[:8])
    home.mkdir(parents=True)
    (home / "config.toml").write_text(
        f'model = "gpt-5.1-codex"\nmodel_provider = "bench"\n[model_providers.bench]\nname = "bench"\n'
        f'base_url = "{url}/v1"\nwire_api = "responses"\nenv_key = "BENCH_KEY"\n')
    return {"CODEX_HOME": str(home), "BENCH_KEY": "sk-bench"}


def by_hand(cli: str, runs: int, tmp: Path, keep: Path) -> dict[str, Any]:
    from agentboard.dispatch import adapters

    server, script, log = _server(tmp / f"hand-{cli}")
    penv = _profile_env(cli, server.url, keep)
    env = {**os.environ, "HOME": str(tmp / "user"), **penv}
    walls, firsts = [], []
    try:
        for i in range(runs):
            _rescript(script, log, server)
            repo = tmp / f"hand-{cli}-{i}"
            _git_repo(repo)
            # no API: the report is refused at once (an API that refuses connections is tried
            # for 30 s, as across a dispatcher's restart)
            (repo / ".mcp.json").write_text(json.dumps({"mcpServers": {"agentboard": {
                "command": sys.executable, "args": ["-m", "agentboard", "mcp"],
                "env": {"AGENTBOARD_TASK": "t_00000000", "AGENTBOARD_RUN_ID": "1", "AGENTBOARD_BOARD": "default"}}}}))
            prompt = repo / ".git" / "prompt.md"
            prompt.write_text("Write hello.txt, count its bytes, then report with kanban_complete.")
            profile = {"name": "bench", "adapter": cli, "command": str(CLIS / cli), "env": penv}
            launch = adapters.build(profile, task_id="t_00000000", run_id=1, workspace=repo, prompt_file=prompt,
                                    board="default")
            started = time.time()
            subprocess.run(launch.argv, cwd=repo, env={**env, **launch.env, "PWD": str(repo)}, stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, timeout=300)
            walls.append(time.time() - started)
            first = _first_request(log)
            if first:
                firsts.append(first - started)
    finally:
        server.stop()
    return {"wall": walls, "first_request": firsts}


def through_dispatcher(cli: str, runs: int, tmp: Path, keep: Path) -> dict[str, Any]:
    import agentboard
    from agentboard.api.serve import WorkerAPI, run_tokens
    from agentboard.dispatch.dispatcher import Dispatcher

    server, script, log = _server(tmp / f"disp-{cli}")
    os.environ["HOME"] = str(tmp / "user")
    ab = agentboard.connect(str(tmp / f"home-{cli}"))
    repo = tmp / f"disp-{cli}-repo"
    _git_repo(repo)
    ab.create_board("proj", workdir=str(repo))
    ab.add_profile("agent", adapter=cli, command=str(CLIS / cli), env=_profile_env(cli, server.url, keep))
    board = ab.board("proj")
    api = WorkerAPI(ab.settings, ab.db).start()
    d = Dispatcher(ab.db, ab.settings, api_url=api.url, token_factory=run_tokens(ab.db))
    d.start()
    walls, firsts = [], []
    try:
        for i in range(runs):
            _rescript(script, log, server)
            task = board.create(f"bench {i}", assignee="agent")
            ready = float(task["created_at"])
            d.wake()
            deadline = time.time() + 300
            while time.time() < deadline:
                runs_ = [r for r in board.runs(task["id"]) if not r.get("synthetic")]
                if runs_ and runs_[0].get("exit_code") is not None:
                    break
                time.sleep(0.05)
            walls.append(time.time() - ready)
            first = _first_request(log)
            if first:
                firsts.append(first - ready)
            if board.show(task["id"])["status"] != "done":
                print(f"warning: {cli} bench task {i} ended {board.show(task['id'])['status']}", file=sys.stderr)
    finally:
        d.stop()
        api.stop()
        server.stop()
    return {"wall": walls, "first_request": firsts}


def mcp_ready(runs: int) -> dict[str, list[float]]:
    """Seconds from starting `agentboard mcp` to its answer to initialize, then to tools/list."""
    env = {**os.environ, "AGENTBOARD_TASK": "t_00000000", "AGENTBOARD_RUN_ID": "1", "AGENTBOARD_BOARD": "default"}
    init, listed = [], []
    for _ in range(runs):
        started = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "agentboard", "mcp"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, env=env)
        assert proc.stdin is not None and proc.stdout is not None
        stdin = proc.stdin

        def send(msg: dict[str, Any], stdin: Any = stdin) -> None:
            stdin.write((json.dumps(msg) + "\n").encode())
            stdin.flush()

        send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}})
        proc.stdout.readline()
        init.append(time.perf_counter() - started)
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        proc.stdout.readline()
        listed.append(time.perf_counter() - started)
        proc.kill()
        proc.wait()
    return {"initialize": init, "tools_list": listed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--clis", default="claude,codex,gemini,opencode", help="which CLIs, comma-separated")
    args = parser.parse_args()
    keep = ROOT / ".cache" / "bench-agents"  # Codex will not make its sandbox helper under /tmp
    out: dict[str, Any] = {"load_average": load_average(), "runs": args.runs, "clis": {}}
    with tempfile.TemporaryDirectory(prefix="ab-bench-agents-") as t:
        tmp = Path(t)
        (tmp / "user").mkdir()
        try:
            for cli in args.clis.split(","):
                if not (CLIS / cli).exists():
                    out["clis"][cli] = {"skipped": f"not installed in {CLIS}"}
                    continue
                hand = by_hand(cli, args.runs, tmp, keep)
                disp = through_dispatcher(cli, args.runs, tmp, keep)
                h, dd = statistics.median(hand["wall"]), statistics.median(disp["wall"])
                out["clis"][cli] = {
                    "by_hand_wall_p50": round(h, 3), "dispatcher_wall_p50": round(dd, 3), "ratio": round(dd / h, 2),
                    "by_hand_first_request_p50": round(statistics.median(hand["first_request"]), 3),
                    "ready_to_first_request_p50": round(pct(disp["first_request"], 0.5), 3),
                    "ready_to_first_request_p99": round(pct(disp["first_request"], 0.99), 3)}
        finally:
            shutil.rmtree(keep, ignore_errors=True)
    m = mcp_ready(args.runs)
    out["mcp"] = {k + "_p50": round(pct(v, 0.5), 3) for k, v in m.items()} | {
        k + "_p99": round(pct(v, 0.99), 3) for k, v in m.items()}
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(f"load average {out['load_average']}, {args.runs} runs each")
    for cli, r in out["clis"].items():
        if "skipped" in r:
            print(f"{cli}: skipped ({r['skipped']})")
            continue
        print(f"{cli}: by hand {r['by_hand_wall_p50']}s, through the dispatcher {r['dispatcher_wall_p50']}s "
              f"(ratio {r['ratio']}, goal <= 1.2); first model request: by hand {r['by_hand_first_request_p50']}s, "
              f"ready -> first request p50 {r['ready_to_first_request_p50']}s p99 {r['ready_to_first_request_p99']}s")
    mm = out["mcp"]
    print(f"agentboard mcp: initialize p50 {mm['initialize_p50']}s p99 {mm['initialize_p99']}s; "
          f"tools/list p50 {mm['tools_list_p50']}s p99 {mm['tools_list_p99']}s")


if __name__ == "__main__":
    main()
