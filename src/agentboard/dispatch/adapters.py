"""Adapters: how each kind of agent CLI is started and how its output is read.

- ``command``: the profile's command line with ``{task_id} {run_id} {workspace}
  {prompt_file} {board}`` substituted; run directly, or by ``/bin/sh -c`` when it uses shell
  syntax (pipes, redirections, ``&&``, ``$VAR``).
- ``claude``: Claude Code non-interactive: ``claude -p --output-format stream-json --verbose
  <permission flags> --mcp-config <workspace>/.mcp.json -- <prompt>``; usage and cost come from
  the final ``{"type": "result"}`` event.
- ``codex``: ``codex exec --json <sandbox flags> … -- <prompt>``; token usage comes from
  ``turn.completed`` events; the MCP server is passed as ``-c mcp_servers.…`` overrides.
- ``gemini``: Gemini CLI headless: ``gemini --output-format stream-json --approval-mode M
  --prompt=<prompt>`` in a trusted folder (``GEMINI_CLI_TRUST_WORKSPACE``); the MCP server and
  the allowed shell commands are in the workspace's ``.gemini/settings.json`` (kept out of git);
  usage from the final ``{"type": "result"}`` event's ``stats``.
- ``opencode``: ``opencode run --format json … -- <prompt>``; the MCP server and the
  permission rules are in a config file under ``.board/`` named by ``OPENCODE_CONFIG``; usage
  and cost are the sums of the ``step_finish`` events.

Each reads the installed CLI's version first (once per executable path and modification time)
and refuses a version whose flags it was not built for. The profile's ``permission``
(``edit``, ``full``, ``read``) maps to each CLI's own permission and sandbox flags; the task's
``model`` (else the profile's) is passed as the CLI's model option.

The profile's ``command`` names the executable (default: the adapter's name), so a profile can
point at a wrapper or a test double.

Reading the output (:func:`outcome_of`) also classifies a failure: ``auth`` (no key, expired
login: the task waits for a person, with the login command), ``rate_limit`` (with the reset
time when the CLI printed one) or ``network`` (retried with back-off).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..protocol import safefs

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
    #: environment the agent CLI needs on top of the worker's (its config file)
    env: dict[str, str] = field(default_factory=dict)


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
          board: str, path_env: str | None = None, worker_uid: int | None = None,
          model: str | None = None) -> Launch:
    """The command line of a worker. ``worker_uid``: the user it runs as when not the
    dispatcher's own (the ``claude`` adapter picks flags Claude Code accepts as root);
    ``model``: the task's own model, over the profile's."""
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
        raise AdapterError(f"unknown adapter {adapter!r}: use command, {', '.join(CLI_ADAPTERS)}")
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
    model = model or profile.get("model")
    if adapter == "claude":
        argv = [*base, "-p", "--output-format", "stream-json", "--verbose",
                *_claude_permission(permission, as_root, _mcp_servers(mcp), profile.get("name"))]
        if safefs.exists(mcp):
            argv += ["--mcp-config", str(mcp)]
        if model:
            argv += ["--model", str(model)]
        return Launch([*argv, "--", prompt], adapter)
    if adapter == "gemini":
        _write_gemini_settings(workspace, _gemini_settings(permission, _mcp_spec(mcp)))
        argv = [*base, "--output-format", "stream-json", "--approval-mode", _GEMINI_APPROVAL[permission]]
        if model:
            argv += ["--model", str(model)]
        # a trusted folder: Gemini CLI reads the workspace's settings and keeps the approval mode
        return Launch([*argv, f"--prompt={prompt}"], adapter, {"GEMINI_CLI_TRUST_WORKSPACE": "true"})
    if adapter == "opencode":
        if model and "/" not in str(model):
            raise AdapterError(f"opencode names a model provider/model (e.g. anthropic/claude-sonnet-4-5), not {model!r}: "
                               "set the task's or the profile's --model that way")
        config = _write_config(workspace, OPENCODE_CONFIG, _opencode_config(permission, _mcp_spec(mcp)))
        argv = [*base, "run", "--format", "json", "--print-logs", "--log-level", "ERROR"]
        if model:
            argv += ["--model", str(model)]
        return Launch([*argv, "--", prompt], adapter,
                      {"OPENCODE_CONFIG": str(config), "OPENCODE_DISABLE_AUTOUPDATE": "1"})
    argv = [*base, "exec", "--json", "--skip-git-repo-check", *_CODEX_PERMISSION[permission], "--cd", str(workspace)]
    if model:
        argv += ["--model", str(model)]
    argv += _codex_mcp_overrides(mcp)
    return Launch([*argv, "--", prompt], adapter)


# -- the installed CLI's version ---------------------------------------------------------------

#: the adapters that start an agent CLI (the others run the profile's command line)
CLI_ADAPTERS = ("claude", "codex", "gemini", "opencode")
#: what a profile lets an agent CLI do without asking
PERMISSIONS = ("edit", "full", "read")
#: the versions whose flags each adapter builds for: [lowest, first unsupported)
SUPPORTED: dict[str, tuple[tuple[int, int, int], tuple[int, int, int]]] = {
    "claude": ((2, 0, 0), (3, 0, 0)),
    "codex": ((0, 100, 0), (1, 0, 0)),
    "gemini": ((0, 20, 0), (1, 0, 0)),
    "opencode": ((1, 0, 0), (2, 0, 0)),
}
#: the npm package of each agent CLI
PACKAGES = {"claude": "@anthropic-ai/claude-code", "codex": "@openai/codex", "gemini": "@google/gemini-cli",
            "opencode": "opencode-ai"}
_PACKAGES = PACKAGES
#: each agent CLI's name as its users know it
NAMES = {"claude": "Claude Code", "codex": "Codex", "gemini": "Gemini CLI", "opencode": "opencode"}
_NAMES = NAMES
#: how a person gives each agent CLI its credentials
LOGIN = {
    "claude": "run `claude` once and `/login`, or set ANTHROPIC_API_KEY in the profile's env",
    "codex": "run `codex login`, or set OPENAI_API_KEY in the profile's env",
    "gemini": "run `gemini` once and choose a sign-in method, or set GEMINI_API_KEY in the profile's env",
    "opencode": "run `opencode auth login`, or set the model provider's API key (e.g. ANTHROPIC_API_KEY) in the "
                "profile's env",
}
#: the config files the ``gemini`` adapter (in the workspace, kept out of git) and the
#: ``opencode`` adapter (under ``.board/``) write
GEMINI_SETTINGS = ".gemini/settings.json"
OPENCODE_CONFIG = "opencode.json"
_VERSION_RE = re.compile(r"(\d+)\.(\d+)\.(\d+)")
_VERSION_TIMEOUT = 60.0
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


def forget_versions() -> None:
    """Forget the versions read so far (each executable's is read again on its next use)."""
    with _versions_lock:
        _versions.clear()


def _range(low: tuple[int, int, int], high: tuple[int, int, int]) -> str:
    return f">= {'.'.join(map(str, low))}, < {'.'.join(map(str, high))}"


def _package_version(adapter: str, executable: str) -> tuple[int, int, int] | None:
    """The version in the npm package the executable belongs to (its ``package.json``), when it
    is one: no need to start the CLI (Gemini CLI takes seconds to print its version)."""
    try:
        here = Path(os.path.realpath(executable)).parent
    except OSError:
        return None
    for folder in (here, *list(here.parents)[:3]):
        try:
            meta = json.loads((folder / "package.json").read_text())
        except (OSError, ValueError):
            continue
        if isinstance(meta, dict) and meta.get("name") == PACKAGES[adapter]:
            found = _VERSION_RE.match(str(meta.get("version") or ""))
            if found:
                major, minor, patch = (int(g) for g in found.groups())
                return major, minor, patch
        return None  # the first package.json up the tree is another package's
    return None


def _probe_version(adapter: str, executable: str) -> tuple[int, int, int]:
    packaged = _package_version(adapter, executable)
    if packaged is not None:
        return packaged
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
        servers = json.loads(_workspace_text(mcp)).get("mcpServers", {})
    except (OSError, ValueError, AttributeError):
        return []
    return [str(n) for n in servers if re.fullmatch(r"[A-Za-z0-9_-]+", str(n))] if isinstance(servers, dict) else []


def _check_shell_first(first: str, path_env: str | None, workspace: Path) -> None:
    builtins = {"cd", "echo", "printf", "exec", "exit", "test", "[", "set", "export", "true", "false",
                "read", ":", ".", "eval", "if", "for", "while", "{", "(", "trap", "sleep", "env"}
    if first in builtins:
        return
    resolve_executable(first, path_env, workspace)


def _workspace_text(path: Path) -> str:
    """A file the dispatcher wrote in the workspace (``.mcp.json``, a prompt), read without
    following a link and refused when hard-linked (``protocol.safefs``): the worker may have
    replaced it. A missing or refused file reads as empty."""
    try:
        data = safefs.read_file(path, limit=safefs.READ_LIMIT)
    except OSError:
        return ""
    return data.decode("utf-8", "replace") if data is not None else ""


def _prompt_text(prompt_file: Path) -> str:
    try:
        text = _workspace_text(prompt_file)
    except OSError:
        text = ""
    if not text or len(text.encode()) > _INLINE_PROMPT_MAX:
        return (f"Read your instructions in the file {prompt_file} and follow them. "
                "Report through the agentboard tools (kanban_complete / kanban_block) or .board/result.json.")
    return text


def _codex_mcp_overrides(mcp: Path) -> list[str]:
    try:
        servers = json.loads(_workspace_text(mcp)).get("mcpServers", {})
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


_GEMINI_APPROVAL = {"edit": "auto_edit", "full": "yolo", "read": "default"}


def _mcp_spec(mcp: Path) -> dict[str, dict[str, Any]]:
    """The MCP servers of the workspace's ``.mcp.json`` (name → command, args, env)."""
    try:
        servers = json.loads(_workspace_text(mcp)).get("mcpServers", {})
    except (OSError, ValueError, AttributeError):
        return {}
    if not isinstance(servers, dict):
        return {}
    out: dict[str, dict[str, Any]] = {}
    for name, spec in servers.items():
        if not isinstance(spec, dict) or not spec.get("command") or not re.fullmatch(r"[A-Za-z0-9_-]+", str(name)):
            continue
        env = _obj(spec.get("env"))
        out[str(name)] = {"command": str(spec["command"]), "args": [str(a) for a in spec.get("args") or []],
                          "env": {str(k): str(v) for k, v in env.items()}}
    return out


def _write_config(workspace: Path, name: str, data: dict[str, Any]) -> Path:
    """Write an agent CLI's config file in the workspace (a bare name: under ``.board/``),
    owner-only: it holds the run token of the MCP server's environment."""
    rel = name if "/" in name else f".board/{name}"
    path = workspace / rel
    folder, _, fname = rel.rpartition("/")
    try:  # folders opened without following links; a link or hard link at the name is replaced
        with safefs.open_root(workspace) as root, root.sub(folder, create=True) as d:
            d.write_text(fname, json.dumps(data, indent=2), mode=0o600)
    except OSError as exc:
        raise AdapterError(f"cannot write the agent's config file {path}: {exc.strerror or exc}") from None
    return path


def _write_gemini_settings(workspace: Path, data: dict[str, Any]) -> Path:
    """The workspace settings Gemini CLI reads in a trusted folder; never one the repository
    tracks (it would show in the task's diff)."""
    from ..protocol import boarddir

    if safefs.exists_in(workspace, GEMINI_SETTINGS) and boarddir.is_tracked(workspace, GEMINI_SETTINGS):
        raise AdapterError(f"the repository tracks {GEMINI_SETTINGS}, where the gemini adapter puts the board's MCP "
                           "server: untrack it, or give the task a scratch workspace")
    path = _write_config(workspace, GEMINI_SETTINGS, data)
    boarddir.git_exclude(workspace, [GEMINI_SETTINGS])  # once per repository (it adds only missing lines)
    return path


def _gemini_settings(permission: str, servers: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Gemini CLI settings: the board's MCP servers (trusted: their tools run without asking)
    and the shell commands the permission mode allows (``full`` allows everything already)."""
    out: dict[str, Any] = {"mcpServers": {n: {**spec, "trust": True} for n, spec in servers.items()}}
    if permission == "edit":
        out["tools"] = {"allowed": ["run_shell_command"]}
    elif permission == "read":
        out["tools"] = {"allowed": ["run_shell_command(agentboard)"]}
    return out


_OPENCODE_PERMISSION: dict[str, dict[str, Any]] = {
    "edit": {"edit": "allow", "bash": "allow", "question": "deny"},
    "full": {"*": "allow", "external_directory": "allow", "doom_loop": "allow", "question": "deny"},
    "read": {"edit": "deny", "bash": {"*": "deny", "agentboard *": "allow"}, "question": "deny"},
}


def _opencode_config(permission: str, servers: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """opencode config: the board's MCP servers as local servers and the permission rules."""
    return {
        "$schema": "https://opencode.ai/config.json",
        "mcp": {n: {"type": "local", "command": [spec["command"], *spec["args"]], "environment": spec["env"],
                    "enabled": True} for n, spec in servers.items()},
        "permission": _OPENCODE_PERMISSION[permission],
    }


# -- reading the output ------------------------------------------------------------------------

_RATE_LIMIT = re.compile(r"usage limit|rate.?limit|\b429\b|too many requests|quota|resource.?exhausted", re.I)
_AUTH = re.compile(
    r"not logged in|please run /login|/login\b|invalid api key|invalid x-api-key|authentication_error|"
    r"\b401\b|unauthori[sz]ed|oauth token has expired|token (has )?expired|login (has )?expired|"
    r"please set an auth method|api key not valid|api_key_invalid|unauthenticated|missing bearer|"
    r"incorrect api key|no api key|ProviderAuthError|ProviderModelNotFoundError|permission_denied|"
    r"could not load the default credentials|codex login", re.I)
_NETWORK = re.compile(
    r"fetch failed|econnrefused|econnreset|enotfound|eai_again|etimedout|getaddrinfo|connection refused|"
    r"connection error|connection reset|unable to connect|cannot connect to api|error sending request|"
    r"stream disconnected|waiting for network|network (error|is unreachable)|socket hang up|"
    r"dns error|timed out while connecting|overloaded|bad gateway|service unavailable", re.I)
#: the CLIs print a reset time in one of these ways
_RESET_EPOCH = re.compile(r"(?:limit reached|limit)\|(\d{10})\b", re.I)
_RESET_IN = re.compile(r"(?:try again|retry|reset[s]?)\s+(?:in|after)\s+((?:\d+(?:\.\d+)?\s*(?:days?|hours?|minutes?|mins?|"
                       r"seconds?|secs?|d|h|m|s)(?![a-z])[\s,]*(?:and\s+)?)+)", re.I)
_RETRY_DELAY = re.compile(r"\"retryDelay\"\s*:\s*\"(\d+(?:\.\d+)?)s\"|retry-after\"?\s*[:=]\s*\"?(\d+)", re.I)
_UNIT = {"d": 86400, "h": 3600, "m": 60, "s": 1}
#: the longest cool-down a printed reset time may set
_RESET_MAX = 8 * 86400.0


@dataclass
class Outcome:
    """What the agent's output says: usage, a final message, whether and how it failed."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    final_text: str | None = None
    is_error: bool = False
    rate_limited: bool = False
    #: a CLI adapter run whose output has no final event (Claude Code's and Gemini CLI's
    #: ``result``, Codex's ``turn.completed``/``turn.failed``, opencode's ``step_finish`` or
    #: ``error``): it stopped before doing any work
    no_result: bool = False
    #: ``auth``, ``rate_limit`` or ``network`` when the run failed for that reason
    failure: str | None = None
    #: when a rate limit ends (epoch seconds), when the CLI said
    retry_at: float | None = None
    #: the error the CLI reported, in one line
    error: str | None = None
    #: tool calls the agent made
    tool_uses: int = 0


def _read_log(log_path: Path | None, since: int = 0, max_bytes: int = 4 * 1024 * 1024) -> str:
    if log_path is None or not log_path.exists():
        return ""
    try:
        size = log_path.stat().st_size
        start = max(since, size - max_bytes)
        with log_path.open("rb") as fh:
            fh.seek(start)
            data = fh.read()
    except OSError:
        return ""
    return data.decode("utf-8", "replace")


def _json_lines(log_path: Path | None, since: int = 0, max_bytes: int = 4 * 1024 * 1024) -> list[dict[str, Any]]:
    return json_events(_read_log(log_path, since, max_bytes))


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
    """Usage, the final message and the failure class from the part of the log this run wrote
    (from ``since``)."""
    text = _read_log(log_path, since)
    return outcome_of(adapter, json_events(text), text)


def outcome_of(adapter: str, events: list[dict[str, Any]], text: str = "") -> Outcome:
    """Usage, the final message and the failure class in the output of an agent CLI run:
    ``events`` its JSON lines, ``text`` all it printed (stderr included) when known."""
    out = Outcome()
    reader = _READERS.get(adapter)
    if reader is None:
        return out
    reader(events, out)
    if out.is_error or out.no_result:
        _classify(out, events, text)
    return out


def _claude(events: list[dict[str, Any]], out: Outcome) -> None:
    for ev in events:
        if ev.get("type") == "assistant":
            content = (ev.get("message") or {}).get("content") if isinstance(ev.get("message"), dict) else None
            if isinstance(content, list):
                out.tool_uses += sum(1 for c in content if isinstance(c, dict) and c.get("type") == "tool_use")
        if ev.get("type") != "result":
            continue
        usage = ev.get("usage") or {}
        out.input_tokens = _int(usage.get("input_tokens"))
        out.output_tokens = _int(usage.get("output_tokens"))
        cost = ev.get("total_cost_usd", ev.get("cost_usd"))
        out.cost_usd = float(cost) if isinstance(cost, int | float) else None
        out.final_text = ev.get("result") if isinstance(ev.get("result"), str) else None
        out.is_error = bool(ev.get("is_error")) or ev.get("subtype") not in (None, "success")
        if out.is_error:
            out.error = _line(out.final_text or ev.get("subtype"))
    out.no_result = not any(ev.get("type") == "result" for ev in events)


def _codex(events: list[dict[str, Any]], out: Outcome) -> None:
    tin = tout = 0
    seen = False
    for ev in events:
        kind = ev.get("type")
        if kind == "turn.completed" and isinstance(ev.get("usage"), dict):
            seen = True
            tin += _int(ev["usage"].get("input_tokens")) or 0
            tout += _int(ev["usage"].get("output_tokens")) or 0
        elif kind in ("item.started", "item.completed") and isinstance(ev.get("item"), dict):
            item = ev["item"]
            if kind == "item.completed" and item.get("type") in ("agent_message", "assistant_message") \
                    and isinstance(item.get("text"), str):
                out.final_text = item["text"]
            elif kind == "item.started" and item.get("type") in ("command_execution", "mcp_tool_call", "file_change",
                                                                   "web_search"):
                out.tool_uses += 1
        elif kind in ("turn.failed", "error"):
            out.is_error = True
            err = _obj(ev.get("error")) or ev
            out.error = _line(err.get("message") or json.dumps(ev))
    if seen:
        out.input_tokens, out.output_tokens = tin, tout
    out.no_result = not any(ev.get("type") in ("turn.completed", "turn.failed") for ev in events)


def _gemini(events: list[dict[str, Any]], out: Outcome) -> None:
    text: list[str] = []
    for ev in events:
        kind = ev.get("type")
        if kind == "tool_use":
            out.tool_uses += 1
            text = []  # the final message is what the agent said after its last tool call
        elif kind == "message" and ev.get("role") == "assistant" and isinstance(ev.get("content"), str):
            text.append(ev["content"])
        elif kind == "error" and ev.get("severity") == "error":
            out.error = _line(ev.get("message"))
        elif kind == "result":
            stats = _obj(ev.get("stats"))
            out.input_tokens = _int(stats.get("input_tokens"))
            out.output_tokens = _int(stats.get("output_tokens"))
            if ev.get("status") != "success":
                out.is_error = True
                err = _obj(ev.get("error"))
                out.error = _line(err.get("message")) or out.error or "the run ended with an error"
    out.final_text = "".join(text).strip() or None
    out.no_result = not any(ev.get("type") == "result" for ev in events)


def _opencode(events: list[dict[str, Any]], out: Outcome) -> None:
    tin = tout = 0
    cost = 0.0
    steps = 0
    for ev in events:
        kind = ev.get("type")
        part = _obj(ev.get("part"))
        if kind == "tool_use":
            out.tool_uses += 1
        elif kind == "text" and isinstance(part.get("text"), str):
            out.final_text = part["text"]
        elif kind == "step_finish":
            steps += 1
            tokens = _obj(part.get("tokens"))
            cache = _obj(tokens.get("cache"))
            tin += (_int(tokens.get("input")) or 0) + (_int(cache.get("read")) or 0) + (_int(cache.get("write")) or 0)
            tout += (_int(tokens.get("output")) or 0) + (_int(tokens.get("reasoning")) or 0)
            if isinstance(part.get("cost"), int | float):
                cost += float(part["cost"])
        elif kind == "error":
            out.is_error = True
            err = _obj(ev.get("error"))
            data = _obj(err.get("data"))
            out.error = _line(f"{err.get('name') or 'error'}: {data.get('message') or ''}".strip(": "))
    if steps:
        out.input_tokens, out.output_tokens, out.cost_usd = tin, tout, round(cost, 9)
    out.no_result = not steps and not out.is_error


_READERS = {"claude": _claude, "codex": _codex, "gemini": _gemini, "opencode": _opencode}


def _classify(out: Outcome, events: list[dict[str, Any]], text: str) -> None:
    """The failure class of a run that failed, from its error and what it printed."""
    said = "\n".join(filter(None, [out.error, out.final_text if out.is_error else None]))
    # the error events and stderr lines (not what the agent's tools printed)
    noise = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("{"))
    errors = "\n".join(_error_text(ev) for ev in events)
    for source in (said, errors, noise):
        if not source:
            continue
        if _RATE_LIMIT.search(source):
            out.failure, out.rate_limited = "rate_limit", True
            out.retry_at = reset_time(source)
            return
        if _AUTH.search(source):
            out.failure = "auth"
            return
        if _NETWORK.search(source):
            out.failure = "network"
            return


def _error_text(ev: dict[str, Any]) -> str:
    """The error words of one event (its message, status, the error it carries), not its numbers."""
    kind = ev.get("type")
    if kind not in ("error", "turn.failed", "result", "system"):
        return ""
    if kind == "system" and ev.get("subtype") != "api_retry":
        return ""
    if kind == "result" and not (ev.get("is_error") or ev.get("status") == "error"):
        return ""
    parts: list[str] = []
    for key in ("message", "result", "error", "error_status"):
        value = ev.get(key)
        if isinstance(value, dict):
            data = _obj(value.get("data"))
            parts += [str(value.get(k)) for k in ("name", "type", "message") if value.get(k)]
            parts += [str(data.get(k)) for k in ("message", "statusCode", "responseBody") if data.get(k)]
        elif value is not None and not isinstance(value, bool):
            parts.append(str(value))
    return " ".join(parts)


def reset_time(text: str, now: float | None = None) -> float | None:
    """When a rate limit ends, from what the CLI printed (Claude Code's ``limit reached|<epoch>``,
    "try again in 2h 30m", "retry in 34.5s", a ``retryDelay``/``retry-after``), else None."""
    import time
    at = time.time() if now is None else now
    m = _RESET_EPOCH.search(text)
    if m:
        epoch = float(m.group(1))
        return epoch if at < epoch <= at + _RESET_MAX else None
    m = _RESET_IN.search(text)
    if m:
        total = 0.0
        for num, unit in re.findall(r"(\d+(?:\.\d+)?)\s*([a-z]+)", m.group(1), re.I):
            total += float(num) * _UNIT.get(unit[0].lower(), 0)
        if 0 < total <= _RESET_MAX:
            return at + total
    m = _RETRY_DELAY.search(text)
    if m:
        secs = float(m.group(1) or m.group(2))
        if 0 < secs <= _RESET_MAX:
            return at + secs
    return None


def progress(adapter: str, log_path: Path, since: int, max_bytes: int = 1024 * 1024) -> tuple[int, int]:
    """The tool calls an agent CLI's log shows after byte ``since`` (the last ``max_bytes`` of
    it), and the offset to read from next time (after the last whole line)."""
    if adapter not in _READERS:
        return 0, since
    try:
        size = log_path.stat().st_size
        start = max(since, size - max_bytes)
        with log_path.open("rb") as fh:
            fh.seek(start)
            data = fh.read(size - start)
    except OSError:
        return 0, since
    end = data.rfind(b"\n") + 1
    return tool_uses(adapter, data[:end].decode("utf-8", "replace")), start + end


#: what an agent CLI prints while it waits for a network that is not there (Codex waits without
#: end): a run showing it is stopped and retried with back-off, like one that exited offline
_OFFLINE = re.compile(r"waiting for network", re.I)


def waiting_for_network(adapter: str, log_path: Path, since: int, max_bytes: int = 256 * 1024) -> tuple[bool, int]:
    """Whether an agent CLI's log, after byte ``since`` (its last ``max_bytes``), shows it waiting
    for a network it cannot reach; and the offset to read from next time."""
    if adapter not in CLI_ADAPTERS:
        return False, since
    try:
        size = log_path.stat().st_size
        start = max(since, size - max_bytes)
        with log_path.open("rb") as fh:
            fh.seek(start)
            data = fh.read(size - start)
    except OSError:
        return False, since
    end = data.rfind(b"\n") + 1
    return bool(_OFFLINE.search(data[:end].decode("utf-8", "replace"))), start + end


def tool_uses(adapter: str, text: str) -> int:
    """How many tool calls an agent CLI's output (a part of its log) shows: each one is a sign of
    progress (a heartbeat)."""
    if adapter not in _READERS:
        return 0
    out = Outcome()
    _READERS[adapter](json_events(text), out)
    return out.tool_uses


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _line(value: Any) -> str | None:
    if not value:
        return None
    first = str(value).strip().splitlines()
    return first[0][:500] if first else None


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value)
