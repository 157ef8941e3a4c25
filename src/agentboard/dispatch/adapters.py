"""Adapters: how each kind of agent CLI is started and how its output is read.

- ``command``: the profile's command line with ``{task_id} {run_id} {workspace}
  {prompt_file} {board}`` substituted; run directly, or by ``/bin/sh -c`` when it uses shell
  syntax (pipes, redirections, ``&&``, ``$VAR``).
- ``claude``: Claude Code non-interactive: ``claude -p --output-format stream-json --verbose
  <permission flags> --mcp-config <workspace>/.mcp.json -- <prompt>``; usage and cost come from
  the final ``{"type": "result"}`` event.
- ``codex``: ``codex exec --json <sandbox flags> … -- <prompt>``; token usage comes from
  ``turn.completed`` events.

Both read the installed CLI's version first (once per executable path and modification time)
and refuse a version whose flags they were not built for. The profile's ``permission``
(``edit``, ``full``, ``read``) maps to each CLI's own permission and sandbox flags.

The profile's ``command`` names the executable for ``claude``/``codex`` (default ``claude`` /
``codex``), so a profile can point at a wrapper or a test double.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import threading
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
          board: str, path_env: str | None = None, worker_uid: int | None = None) -> Launch:
    """The command line of a worker. ``worker_uid``: the user it runs as when not the
    dispatcher's own (the ``claude`` adapter picks flags Claude Code accepts as root)."""
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
    if adapter not in CLI_ADAPTERS:
        raise AdapterError(f"unknown adapter {adapter!r}: use command, claude or codex")
    try:
        base = shlex.split(command) if command else [adapter]
    except ValueError as exc:
        raise AdapterError(f"cannot parse the command of profile {profile.get('name')!r}: {exc}") from None
    base[0] = resolve_executable(base[0], path_env, workspace)
    cli_version(adapter, base[0])  # every supported version takes the flags below
    permission = str(profile.get("permission") or "edit")
    if permission not in PERMISSIONS:
        raise AdapterError(f"unknown permission {permission!r}: use one of {', '.join(PERMISSIONS)}")
    as_root = (os.geteuid() if worker_uid is None else worker_uid) == 0
    prompt = _prompt_text(prompt_file)
    mcp = workspace / ".mcp.json"
    model = profile.get("model")
    if adapter == "claude":
        argv = [*base, "-p", "--output-format", "stream-json", "--verbose",
                *_claude_permission(permission, as_root, _mcp_servers(mcp), profile.get("name"))]
        if mcp.exists():
            argv += ["--mcp-config", str(mcp)]
        if model:
            argv += ["--model", str(model)]
        return Launch([*argv, "--", prompt], adapter)
    argv = [*base, "exec", "--json", "--skip-git-repo-check", *_CODEX_PERMISSION[permission], "--cd", str(workspace)]
    if model:
        argv += ["--model", str(model)]
    argv += _codex_mcp_overrides(mcp)
    return Launch([*argv, "--", prompt], adapter)


# -- the installed CLI's version ---------------------------------------------------------------

#: the adapters that start an agent CLI (the others run the profile's command line)
CLI_ADAPTERS = ("claude", "codex")
#: what a profile lets a ``claude``/``codex`` agent do without asking
PERMISSIONS = ("edit", "full", "read")
#: the versions whose flags each adapter builds for: [lowest, first unsupported)
SUPPORTED: dict[str, tuple[tuple[int, int, int], tuple[int, int, int]]] = {
    "claude": ((2, 0, 0), (3, 0, 0)),
    "codex": ((0, 100, 0), (1, 0, 0)),
}
_PACKAGES = {"claude": "@anthropic-ai/claude-code", "codex": "@openai/codex"}
_NAMES = {"claude": "Claude Code", "codex": "Codex"}
_VERSION_RE = re.compile(r"(\d+)\.(\d+)\.(\d+)")
_VERSION_TIMEOUT = 20.0
_versions: dict[tuple[str, int, int], tuple[int, int, int]] = {}
_versions_lock = threading.Lock()


def cli_version(adapter: str, executable: str) -> tuple[int, int, int]:
    """The version of the agent CLI at ``executable`` (``--version``, read once per path and
    modification time), or AdapterError when it cannot be read or is not one the adapter supports."""
    try:
        st = os.stat(executable)
    except OSError as exc:
        raise AdapterError(f"cannot read {executable}: {exc.strerror}") from None
    key = (executable, st.st_mtime_ns, st.st_size)
    with _versions_lock:
        version = _versions.get(key)
    if version is None:
        version = _probe_version(adapter, executable)
        with _versions_lock:
            _versions[key] = version
    low, high = SUPPORTED[adapter]
    if not low <= version < high:
        shown = ".".join(map(str, version))
        raise AdapterError(
            f"{_NAMES[adapter]} {shown} at {executable} is not supported (supported: {_range(low, high)}); "
            f"install one with `npm install -g {_PACKAGES[adapter]}@{low[0]}.x` or point the profile's "
            "command at a supported executable")
    return version


def _range(low: tuple[int, int, int], high: tuple[int, int, int]) -> str:
    return f">= {'.'.join(map(str, low))}, < {'.'.join(map(str, high))}"


def _probe_version(adapter: str, executable: str) -> tuple[int, int, int]:
    try:
        proc = subprocess.run([executable, "--version"], capture_output=True, text=True, stdin=subprocess.DEVNULL,
                              timeout=_VERSION_TIMEOUT, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        raise AdapterError(f"cannot run `{executable} --version` to learn the {_NAMES[adapter]} version: {exc}") from None
    found = _VERSION_RE.search(proc.stdout) or _VERSION_RE.search(proc.stderr)
    if proc.returncode != 0 or found is None:
        said = (proc.stdout + proc.stderr).strip().splitlines()
        raise AdapterError(
            f"`{executable} --version` did not print a {_NAMES[adapter]} version (exit {proc.returncode}"
            + (f": {said[0][:200]}" if said else "") + f"); is it {_PACKAGES[adapter]}?")
    major, minor, patch = (int(g) for g in found.groups())
    return major, minor, patch


# -- permission modes --------------------------------------------------------------------------

_CODEX_PERMISSION = {
    "edit": ["--sandbox", "workspace-write", "-c", 'approval_policy="never"'],
    "full": ["--dangerously-bypass-approvals-and-sandbox"],
    "read": ["--sandbox", "read-only", "-c", 'approval_policy="never"'],
}


def _claude_permission(permission: str, as_root: bool, servers: list[str], profile: object) -> list[str]:
    """Claude Code's flags for a permission mode. Every mode lets the agent report through the
    board's MCP tools and ``agentboard`` commands; Claude Code refuses to bypass its permission
    checks as root, so ``full`` is refused there with the settings that fix it."""
    tools = [f"mcp__{name}" for name in servers]
    if permission == "full":
        if as_root:
            raise AdapterError(
                "Claude Code refuses to bypass its permission checks as root (permission = full): set "
                f"`agentboard profiles set {profile} --permission edit`, or run its workers as another user "
                f"(`--isolation user`, or a dispatcher that is not root)")
        return ["--dangerously-skip-permissions"]
    if permission == "edit":
        return ["--permission-mode", "acceptEdits", "--allowedTools=" + ",".join(["Bash", *tools])]
    return ["--permission-mode", "default", "--allowedTools=" + ",".join(["Bash(agentboard *)", *tools])]


def _mcp_servers(mcp: Path) -> list[str]:
    try:
        servers = json.loads(mcp.read_text()).get("mcpServers", {})
    except (OSError, ValueError, AttributeError):
        return []
    return [str(n) for n in servers if re.fullmatch(r"[A-Za-z0-9_-]+", str(n))] if isinstance(servers, dict) else []


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
    #: a ``claude``/``codex`` run whose output has no final event (Claude Code's ``result``,
    #: Codex's ``turn.completed``/``turn.failed``): it stopped before doing any work
    no_result: bool = False


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
        out.no_result = not any(ev.get("type") == "result" for ev in events)
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
        out.no_result = not any(ev.get("type") in ("turn.completed", "turn.failed") for ev in events)
    return out


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value)
