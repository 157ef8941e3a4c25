"""Adapters: how each kind of agent CLI is started and how its output is read.

- ``command``: the profile's command line with ``{task_id} {run_id} {workspace}
  {prompt_file} {board}`` substituted; run directly, or by ``/bin/sh -c`` when it uses shell
  syntax (pipes, redirections, ``&&``, ``$VAR``).
- ``claude``: Claude Code non-interactive: ``claude -p <prompt> --output-format stream-json
  --verbose --mcp-config <workspace>/.mcp.json``; usage and cost come from the final
  ``{"type": "result"}`` event.
- ``codex``: ``codex exec --json … <prompt>``; token usage comes from ``turn.completed`` events.

The profile's ``command`` names the executable for ``claude``/``codex`` (default ``claude`` /
``codex``), so a profile can point at a wrapper or a test double.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PLACEHOLDERS = ("task_id", "run_id", "workspace", "prompt_file", "board")
_SHELL_CHARS = re.compile(r"[|&;<>`$()*?~]")
# the longest prompt passed inline; longer ones are read from the prompt file by the agent
_INLINE_PROMPT_MAX = 100_000


class AdapterError(Exception):
    """The agent cannot be started (bad command, missing executable); the message says why."""


@dataclass
class Launch:
    argv: list[str]
    adapter: str


def _substitute(text: str, values: dict[str, str], quote: bool) -> str:
    for key in PLACEHOLDERS:
        token = "{" + key + "}"
        if token in text:
            text = text.replace(token, shlex.quote(values[key]) if quote else values[key])
    return text


def resolve_executable(name: str, path_env: str | None, cwd: Path) -> str:
    """The absolute path of ``name`` (on PATH or a path), or AdapterError saying why not."""
    if os.sep in name:
        p = Path(name) if os.path.isabs(name) else cwd / name
        if not p.exists():
            raise AdapterError(f"command {name!r} does not exist")
        if p.is_dir():
            raise AdapterError(f"command {name!r} is a directory, not a program")
        if not os.access(p, os.X_OK):
            raise AdapterError(f"command {name!r} is not executable (chmod +x it)")
        return str(p)
    found = shutil.which(name, path=path_env)
    if found is None:
        raise AdapterError(f"command {name!r} was not found on PATH")
    return found


def build(profile: dict[str, Any], *, task_id: str, run_id: int, workspace: Path, prompt_file: Path,
          board: str, path_env: str | None = None) -> Launch:
    adapter = profile.get("adapter") or "command"
    command = (profile.get("command") or "").strip()
    values = {"task_id": task_id, "run_id": str(run_id), "workspace": str(workspace),
              "prompt_file": str(prompt_file), "board": board}
    if adapter == "command":
        if not command:
            raise AdapterError(f"profile {profile.get('name')!r} has no command")
        bare = re.sub(r"'[^']*'", "", _substitute(command, {k: "" for k in PLACEHOLDERS}, False))
        if _SHELL_CHARS.search(bare):
            try:
                first = shlex.split(command)[0]
            except (ValueError, IndexError):
                first = ""
            if first and "=" not in first and not _SHELL_CHARS.search(first):
                _check_shell_first(first, path_env, workspace)
            return Launch(["/bin/sh", "-c", _substitute(command, values, True)], adapter)
        try:
            argv = [_substitute(a, values, False) for a in shlex.split(command)]
        except ValueError as exc:
            raise AdapterError(f"cannot parse the command of profile {profile.get('name')!r}: {exc}") from None
        if not argv:
            raise AdapterError(f"profile {profile.get('name')!r} has an empty command")
        argv[0] = resolve_executable(argv[0], path_env, workspace)
        return Launch(argv, adapter)
    try:
        base = shlex.split(command) if command else [adapter]
    except ValueError as exc:
        raise AdapterError(f"cannot parse the command of profile {profile.get('name')!r}: {exc}") from None
    base[0] = resolve_executable(base[0], path_env, workspace)
    prompt = _prompt_text(prompt_file)
    mcp = workspace / ".mcp.json"
    model = profile.get("model")
    if adapter == "claude":
        argv = [*base, "-p", prompt, "--output-format", "stream-json", "--verbose",
                "--dangerously-skip-permissions"]
        if mcp.exists():
            argv += ["--mcp-config", str(mcp)]
        if model:
            argv += ["--model", str(model)]
        return Launch(argv, adapter)
    if adapter == "codex":
        argv = [*base, "exec", "--json", "--skip-git-repo-check", "--full-auto", "--cd", str(workspace)]
        if model:
            argv += ["--model", str(model)]
        argv += _codex_mcp_overrides(mcp)
        argv.append(prompt)
        return Launch(argv, adapter)
    raise AdapterError(f"unknown adapter {adapter!r}: use command, claude or codex")


def _check_shell_first(first: str, path_env: str | None, workspace: Path) -> None:
    builtins = {"cd", "echo", "printf", "exec", "exit", "test", "[", "set", "export", "true", "false",
                "read", ":", ".", "eval", "if", "for", "while", "{", "(", "trap", "sleep", "env"}
    if first in builtins:
        return
    resolve_executable(first, path_env, workspace)


def _prompt_text(prompt_file: Path) -> str:
    try:
        text = prompt_file.read_text()
    except OSError:
        text = ""
    if not text or len(text.encode()) > _INLINE_PROMPT_MAX:
        return (f"Read your instructions in the file {prompt_file} and follow them. "
                "Report through the agentboard tools (kanban_complete / kanban_block) or .board/result.json.")
    return text


def _codex_mcp_overrides(mcp: Path) -> list[str]:
    try:
        servers = json.loads(mcp.read_text()).get("mcpServers", {})
    except (OSError, ValueError, AttributeError):
        return []
    out: list[str] = []
    for name, spec in servers.items():
        if not isinstance(spec, dict) or not re.fullmatch(r"[A-Za-z0-9_-]+", str(name)):
            continue
        if spec.get("command"):
            out += ["-c", f"mcp_servers.{name}.command={json.dumps(str(spec['command']))}"]
        if spec.get("args"):
            out += ["-c", f"mcp_servers.{name}.args={json.dumps([str(a) for a in spec['args']])}"]
        env = spec.get("env")
        if isinstance(env, dict) and env:
            inner = ", ".join(f"{json.dumps(str(k))} = {json.dumps(str(v))}" for k, v in env.items())
            out += ["-c", f"mcp_servers.{name}.env={{ {inner} }}"]
    return out


# -- reading the output ------------------------------------------------------------------------

_RATE_LIMIT = re.compile(r"usage limit|rate.?limit|\b429\b|too many requests|quota", re.I)


@dataclass
class Outcome:
    """What the agent's output says: usage, a final message, whether it hit a rate limit."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    final_text: str | None = None
    is_error: bool = False
    rate_limited: bool = False


def _json_lines(log_path: Path | None, since: int = 0, max_bytes: int = 4 * 1024 * 1024) -> list[dict[str, Any]]:
    if log_path is None or not log_path.exists():
        return []
    try:
        size = log_path.stat().st_size
        start = max(since, size - max_bytes)
        with log_path.open("rb") as fh:
            fh.seek(start)
            data = fh.read()
    except OSError:
        return []
    return json_events(data.decode("utf-8", "replace"))


def json_events(text: str) -> list[dict[str, Any]]:
    """The JSON objects of an agent's output, one per line (other lines are skipped)."""
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if isinstance(obj, dict):
                out.append(obj)
    return out


def read_output(adapter: str, log_path: Path | None, since: int = 0) -> Outcome:
    """Usage and the final message from the part of the log this run wrote (from ``since``)."""
    return outcome_of(adapter, _json_lines(log_path, since))


def outcome_of(adapter: str, events: list[dict[str, Any]]) -> Outcome:
    """Usage and the final message in the JSON events of a ``claude`` or ``codex`` run: Claude
    Code's final ``{"type": "result"}`` event, Codex's ``turn.completed`` usage and last agent
    message."""
    out = Outcome()
    if adapter == "claude":
        for ev in events:
            if ev.get("type") != "result":
                continue
            usage = ev.get("usage") or {}
            out.input_tokens = _int(usage.get("input_tokens"))
            out.output_tokens = _int(usage.get("output_tokens"))
            cost = ev.get("total_cost_usd", ev.get("cost_usd"))
            out.cost_usd = float(cost) if isinstance(cost, int | float) else None
            out.final_text = ev.get("result") if isinstance(ev.get("result"), str) else None
            out.is_error = bool(ev.get("is_error")) or ev.get("subtype") not in (None, "success")
            out.rate_limited = out.is_error and bool(_RATE_LIMIT.search(str(ev.get("result") or "")))
    elif adapter == "codex":
        tin = tout = 0
        seen = False
        for ev in events:
            kind = ev.get("type")
            if kind == "turn.completed" and isinstance(ev.get("usage"), dict):
                seen = True
                tin += _int(ev["usage"].get("input_tokens")) or 0
                tout += _int(ev["usage"].get("output_tokens")) or 0
            elif kind == "item.completed" and isinstance(ev.get("item"), dict):
                item = ev["item"]
                if item.get("type") in ("agent_message", "assistant_message") and isinstance(item.get("text"), str):
                    out.final_text = item["text"]
            elif kind in ("turn.failed", "error"):
                out.is_error = True
                msg = json.dumps(ev)
                out.rate_limited = out.rate_limited or bool(_RATE_LIMIT.search(msg))
        if seen:
            out.input_tokens, out.output_tokens = tin, tout
    return out


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value)
