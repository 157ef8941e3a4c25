"""Adapters: how each kind of agent CLI is started and how its output is read.

- ``command``: the profile's command line with ``{task_id} {run_id} {workspace}
  {prompt_file} {board}`` substituted; run directly, or by ``/bin/sh -c`` when it uses shell
  syntax (pipes, redirections, ``&&``, ``$VAR``).
- ``claude``: Claude Code non-interactive: ``claude -p --output-format stream-json --verbose
  <permission flags> --mcp-config <workspace>/.mcp.json -- <prompt>`` with
  ``MCP_CONNECTION_NONBLOCKING=0`` and ``MCP_CONNECT_TIMEOUT_MS=60000`` (its first turn waits
  for the board's MCP server); usage and
  cost come from the final ``{"type": "result"}`` event.
- ``codex``: ``codex exec --json <sandbox flags> … -- <prompt>``; token usage comes from
  ``turn.completed`` events; the MCP server is passed as ``-c mcp_servers.…`` overrides, its
  tools approved (``default_tools_approval_mode="approve"``) and required at start.
- ``gemini``: Gemini CLI headless: ``gemini --output-format stream-json --approval-mode M
  --prompt=<prompt>`` in a trusted folder (``GEMINI_CLI_TRUST_WORKSPACE``); the MCP server and
  the allowed shell commands are in the workspace's ``.gemini/settings.json`` (kept out of git);
  usage from the final ``{"type": "result"}`` event's ``stats``.
- ``opencode``: ``opencode run --format json … -- <prompt>``; the MCP server and the
  permission rules are in a config file under ``.board/`` named by ``OPENCODE_CONFIG``; usage
  and cost are the sums of the ``step_finish`` events.

A reviewer (``build(review=True)``) is started in the reviewed worker's workspace with the
reviewer's rights: it gets the board's MCP server alone and reads none of the workspace's own
configuration (docs/security.md): Claude Code ``--setting-sources user --strict-mcp-config``
with an inline ``--mcp-config`` (its identity as ``${NAME}`` references: no token in argv);
Codex the workspace marked untrusted (``-c projects=…``: no ``.codex/``); opencode
``OPENCODE_DISABLE_PROJECT_CONFIG=1``; Gemini CLI ``advanced.ignoreLocalEnv``, and refused when
the workspace's ``.gemini/`` holds anything beside the adapter's ``settings.json``.

Each reads the installed CLI's version first (once per executable path and modification time)
and refuses a version whose flags it was not built for. The profile's ``permission``
(``edit``, ``full``, ``read``) maps to each CLI's own permission and sandbox flags; the task's
``model`` (else the profile's) is passed as the CLI's model option.

The profile's ``command`` names the executable (default: the adapter's name), so a profile can
point at a wrapper or a test double.

Reading the output (``agentboard/agentcli.py``, re-exported here: :func:`outcome_of`) also
classifies a failure: ``auth`` (no key, expired login: the task waits for a person, with the
login command), ``rate_limit`` (with the reset time when the CLI printed one) or ``network``
(retried with back-off).
"""

from __future__ import annotations

import functools
import json
import os
import re
import shlex
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..agentcli import (  # what the CLIs print, read (re-exported for the dispatcher)
    CLI_ADAPTERS as CLI_ADAPTERS,
)
from ..agentcli import (
    AdapterError as AdapterError,
)
from ..agentcli import (
    Outcome as Outcome,
)
from ..agentcli import (
    Waiting as Waiting,
)
from ..agentcli import _obj
from ..agentcli import (
    json_events as json_events,
)
from ..agentcli import (
    outcome_of as outcome_of,
)
from ..agentcli import (
    progress as progress,
)
from ..agentcli import (
    read_output as read_output,
)
from ..agentcli import (
    reset_time as reset_time,
)
from ..agentcli import (
    resolve_executable as resolve_executable,
)
from ..agentcli import (
    tool_uses as tool_uses,
)
from ..agentcli import (
    waiting as waiting,
)
from ..agentcli import (
    waiting_for_network as waiting_for_network,
)
from ..protocol import safefs

PLACEHOLDERS = ("task_id", "run_id", "workspace", "prompt_file", "board")
_SHELL_CHARS = re.compile(r"[|&;<>`$()*?~]")
# the longest prompt passed inline; longer ones are read from the prompt file by the agent
_INLINE_PROMPT_MAX = 100_000


@dataclass
class Launch:
    argv: list[str]
    adapter: str
    #: environment the agent CLI needs on top of the worker's (its config file)
    env: dict[str, str] = field(default_factory=dict)


@functools.lru_cache(maxsize=256)
def _words(command: str) -> tuple[str, ...]:
    """``shlex.split(command)``, parsed once per command (every worker of a profile has the
    same); a command that cannot be parsed raises ``ValueError`` every time."""
    return tuple(shlex.split(command))


def _substitute(text: str, values: dict[str, str], quote: bool) -> str:
    for key in PLACEHOLDERS:
        token = "{" + key + "}"
        if token in text:
            text = text.replace(token, shlex.quote(values[key]) if quote else values[key])
    return text


def build(profile: dict[str, Any], *, task_id: str, run_id: int, workspace: Path, prompt_file: Path,
          board: str, path_env: str | None = None, worker_uid: int | None = None,
          model: str | None = None, review: bool = False, mcp_env: dict[str, str] | None = None) -> Launch:
    """The command line of a worker. ``worker_uid``: the user it runs as when not the
    dispatcher's own (the ``claude`` adapter picks flags Claude Code accepts as root);
    ``model``: the task's own model, over the profile's.

    ``review``: a reviewer judging another worker's workspace (below: a reviewer): no
    configuration in the workspace may reach the CLI, and its only MCP server is the board's
    own, with the identity ``mcp_env`` (else read from the workspace's ``.mcp.json``, that
    server alone)."""
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
                first = _words(command)[0]
            except (ValueError, IndexError):
                first = ""
            if first and "=" not in first and not _SHELL_CHARS.search(first):
                _check_shell_first(first, path_env, workspace)
            return Launch(["/bin/sh", "-c", _substitute(command, values, True)], adapter)
        try:
            argv = [_substitute(a, values, False) for a in _words(command)]
        except ValueError as exc:
            raise AdapterError(f"cannot parse the command of profile {profile.get('name')!r}: {exc}") from None
        if not argv:
            raise AdapterError(f"profile {profile.get('name')!r} has an empty command")
        argv[0] = resolve_executable(argv[0], path_env, workspace)
        return Launch(argv, adapter)
    if adapter not in CLI_ADAPTERS:
        raise AdapterError(f"unknown adapter {adapter!r}: use command, {', '.join(CLI_ADAPTERS)}")
    try:
        base = list(_words(command)) if command else [adapter]
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
    # a reviewer gets the board's server alone, never one the worker listed in its workspace
    servers = _review_server(mcp_env, _mcp_spec(mcp)) if review else _mcp_spec(mcp)
    if adapter == "claude":
        argv = [*base, "-p", "--output-format", "stream-json", "--verbose",
                *_claude_permission(permission, as_root, list(servers) if review else _mcp_servers(mcp),
                                    profile.get("name"))]
        if review:  # no project or local settings (hooks, MCP servers, env), no .mcp.json
            argv += _claude_review_flags(servers)
        elif safefs.exists(mcp):
            argv += ["--mcp-config", str(mcp)]
        if model:
            argv += ["--model", str(model)]
        # `claude -p` otherwise takes its first turn while the MCP servers still connect (and
        # waits at most 5 s for them), and a quick model then finds no kanban_* tools: wait for them
        given = profile.get("env") or {}
        env = {k: v for k, v in _CLAUDE_MCP_WAIT.items() if k not in given}
        return Launch([*argv, "--", prompt], adapter, env)
    if adapter == "gemini":
        settings = _gemini_settings(permission, servers, {str(k): str(v) for k, v in _obj(profile.get("env")).items()})
        if review:  # refused when the workspace holds Gemini CLI configuration beside its settings
            settings = _gemini_review_settings(workspace, settings)
        _write_gemini_settings(workspace, settings)
        argv = [*base, "--output-format", "stream-json", "--approval-mode", _GEMINI_APPROVAL[permission]]
        if model:
            argv += ["--model", str(model)]
        # a trusted folder: Gemini CLI reads the workspace's settings and keeps the approval mode
        return Launch([*argv, f"--prompt={prompt}"], adapter, {"GEMINI_CLI_TRUST_WORKSPACE": "true"})
    if adapter == "opencode":
        if model and "/" not in str(model):
            raise AdapterError(f"opencode names a model provider/model (e.g. anthropic/claude-sonnet-4-5), not {model!r}: "
                               "set the task's or the profile's --model that way")
        config = _write_config(workspace, OPENCODE_CONFIG, _opencode_config(permission, servers))
        argv = [*base, "run", "--format", "json", "--print-logs", "--log-level", "ERROR"]
        if model:
            argv += ["--model", str(model)]
        env = {"OPENCODE_CONFIG": str(config), "OPENCODE_DISABLE_AUTOUPDATE": "1"}
        if review:  # no opencode.json(c), .opencode/ (plugins, tools, agents) nor AGENTS.md of the workspace
            env.update(_OPENCODE_REVIEW_ENV)
        return Launch([*argv, "--", prompt], adapter, env)
    argv = [*base, "exec", "--json", "--skip-git-repo-check", *_CODEX_PERMISSION[permission], "--cd", str(workspace)]
    if model:
        argv += ["--model", str(model)]
    argv += _codex_mcp_overrides(servers if review else _raw_servers(mcp))
    if review:  # the workspace untrusted: no project .codex/ config, hooks or rules
        argv += _codex_untrusted(workspace)
    return Launch([*argv, "--", prompt], adapter)


# -- the installed CLI's version ---------------------------------------------------------------

#: the adapters that start an agent CLI (the others run the profile's command line)
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
#: the agent CLIs whose shell cannot run the ``agentboard`` worker verbs, so their prompt never
#: offers them: Codex runs each command in a login shell (``bash -lc``), whose PATH is the
#: system's (the dispatcher's ``agentboard`` is not on it), and in ``edit`` and ``read`` inside its
#: sandbox, which has no network (the board's API on loopback included); it starts the board's MCP
#: server outside its sandbox, so its workers report through the MCP tools or ``.board/result.json``
NO_SHELL_VERBS = frozenset({"codex"})
#: the config files the ``gemini`` adapter (in the workspace, kept out of git) and the
#: ``opencode`` adapter (under ``.board/``) write
GEMINI_SETTINGS = ".gemini/settings.json"
OPENCODE_CONFIG = "opencode.json"
_VERSION_RE = re.compile(r"(\d+)\.(\d+)\.(\d+)")
_VERSION_TIMEOUT = 60.0
_versions: dict[tuple[str, int, int], tuple[int, int, int]] = {}
_versions_lock = threading.Lock()


def shell_verbs(profile: dict[str, Any]) -> bool:
    """Whether a profile's workers can run the ``agentboard`` worker verbs from their agent's
    shell (what their prompt offers): not Codex's (:data:`NO_SHELL_VERBS`)."""
    return str(profile.get("adapter") or "command") not in NO_SHELL_VERBS


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

#: Claude Code's first turn waits for the MCP servers (up to a minute: a busy host starts
#: ``agentboard mcp`` slowly)
_CLAUDE_MCP_WAIT = {"MCP_CONNECTION_NONBLOCKING": "0", "MCP_CONNECT_TIMEOUT_MS": "60000"}

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
        servers = safefs.loads(_workspace_text(mcp)).get("mcpServers", {})
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


def _raw_servers(mcp: Path) -> dict[str, dict[str, Any]]:
    """The entries of the workspace's ``.mcp.json`` as written (each a dict, under a plain name)."""
    try:
        servers = safefs.loads(_workspace_text(mcp)).get("mcpServers", {})
    except (OSError, ValueError, AttributeError):
        return {}
    if not isinstance(servers, dict):
        return {}
    return {str(n): spec for n, spec in servers.items()
            if isinstance(spec, dict) and re.fullmatch(r"[A-Za-z0-9_-]+", str(n))}


def _codex_mcp_overrides(servers: dict[str, dict[str, Any]]) -> list[str]:
    """``-c mcp_servers.…`` overrides for the MCP servers ``servers``."""
    out: list[str] = []
    for name, spec in servers.items():
        if spec.get("command"):
            out += ["-c", f"mcp_servers.{name}.command={json.dumps(str(spec['command']))}"]
        if spec.get("args"):
            out += ["-c", f"mcp_servers.{name}.args={json.dumps([str(a) for a in spec['args']])}"]
        env = spec.get("env")
        if isinstance(env, dict) and env:
            # the board's own server reads its identity (the run token among it) from the
            # worker's environment, which Codex passes on by name: on a command line it would
            # be readable by every local user (``ps``, ``/proc/<pid>/cmdline``)
            passed = sorted(str(k) for k in env if name == "agentboard" and str(k).startswith("AGENTBOARD_"))
            inline = {str(k): str(v) for k, v in env.items() if str(k) not in passed}
            if passed:
                out += ["-c", f"mcp_servers.{name}.env_vars={json.dumps(passed)}"]
            if inline:
                inner = ", ".join(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in inline.items())
                out += ["-c", f"mcp_servers.{name}.env={{ {inner} }}"]
        # the tools run without asking (with approval_policy "never" Codex otherwise refuses
        # every MCP call); the turn waits for the board's server to start (else a slow server
        # is left out of the turn), while another server that fails to start is left out
        # rather than failing the run
        out += ["-c", f'mcp_servers.{name}.default_tools_approval_mode="approve"']
        if name == "agentboard":
            out += ["-c", f"mcp_servers.{name}.required=true"]
    return out


_GEMINI_APPROVAL = {"edit": "auto_edit", "full": "yolo", "read": "default"}


def _mcp_spec(mcp: Path) -> dict[str, dict[str, Any]]:
    """The MCP servers of the workspace's ``.mcp.json`` (name → command, args, env)."""
    try:
        servers = safefs.loads(_workspace_text(mcp)).get("mcpServers", {})
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


def _gemini_settings(permission: str, servers: dict[str, dict[str, Any]], env: dict[str, str]) -> dict[str, Any]:
    """Gemini CLI settings: the board's MCP servers (trusted: their tools run without asking)
    and the shell commands the permission mode allows (``full`` allows everything already).

    A profile that gives Gemini CLI an API key or an endpoint (``GEMINI_API_KEY``,
    ``GOOGLE_GEMINI_BASE_URL``) signs in with the key: headless Gemini CLI otherwise takes an
    endpoint for a "gateway" sign-in it then refuses ("Invalid auth method selected")."""
    out: dict[str, Any] = {"mcpServers": {n: {**spec, "trust": True} for n, spec in servers.items()}}
    if env.get("GEMINI_API_KEY") or env.get("GOOGLE_GEMINI_BASE_URL"):
        out["security"] = {"auth": {"selectedType": "gemini-api-key"}}
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


# -- a reviewer reads no configuration of the workspace it reviews ------------------------------

#: opencode: no opencode.json(c), .opencode/ (plugins, tools, agents) nor AGENTS.md of the workspace
_OPENCODE_REVIEW_ENV = {"OPENCODE_DISABLE_PROJECT_CONFIG": "1"}
#: what a Gemini CLI reviewer accepts in the workspace's ``.gemini/`` (the adapter's own settings)
_GEMINI_REVIEW_ALLOWED = frozenset({"settings.json"})


def _review_server(mcp_env: dict[str, str] | None, listed: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """A reviewer's MCP servers: the board's own with the identity ``mcp_env`` (else the board's
    entry of the workspace's ``.mcp.json``, which the dispatcher wrote), never another."""
    from ..protocol import boarddir

    if mcp_env is None:
        return {"agentboard": listed["agentboard"]} if "agentboard" in listed else {}
    entry = boarddir.mcp_server_entry(dict(mcp_env))
    return {"agentboard": {"command": str(entry["command"]), "args": [str(a) for a in entry["args"]],
                           "env": {str(k): str(v) for k, v in entry["env"].items()}}}


def _claude_review_flags(servers: dict[str, dict[str, Any]]) -> list[str]:
    """User settings only (no ``.claude/settings*.json``, no ``.mcp.json``) and ``servers``
    alone, inline, each environment value a ``${NAME}`` reference Claude Code expands from its
    own environment (the reviewer's identity): the run token never on the command line."""
    config = {"mcpServers": {name: {"command": spec["command"], "args": list(spec["args"]),
                                    "env": {k: "${" + k + "}" for k in spec["env"] if re.fullmatch(r"[A-Za-z_]\w*", k)}}
                             for name, spec in servers.items()}}
    return ["--setting-sources", "user", "--strict-mcp-config", "--mcp-config", json.dumps(config)]


def _codex_untrusted(workspace: Path) -> list[str]:
    """The workspace an explicitly untrusted project (Codex looks at its own entry before its
    repository's): no ``.codex/`` config, hooks or rules, whatever the user trusted."""
    paths = dict.fromkeys([str(workspace), os.path.abspath(workspace), os.path.realpath(workspace)])
    return ["-c", "projects={ " + ", ".join(f'{json.dumps(p)} = {{ trust_level = "untrusted" }}' for p in paths) + " }"]


def _gemini_review_settings(workspace: Path, settings: dict[str, Any]) -> dict[str, Any]:
    """A reviewer's Gemini CLI settings (no ``.env`` of the workspace), or AdapterError when the
    workspace's ``.gemini/`` holds what Gemini CLI reads in a trusted folder (where alone it
    starts MCP servers) and has no switch for: ``.env``, extensions, agents, policies, commands."""
    try:
        with safefs.open_root(workspace) as root:
            found = []
            if root.lstat(".gemini") is not None:
                with root.sub(".gemini") as d:
                    found = sorted(e.name for e in os.scandir(d.fd) if e.name not in _GEMINI_REVIEW_ALLOWED)
    except OSError:  # a link or a file where .gemini/ belongs
        found = ["(not a folder)"]
    if found:
        shown = ", ".join(f".gemini/{n}" for n in found[:5]) + (" …" if len(found) > 5 else "")
        raise AdapterError(
            f"the workspace holds Gemini CLI configuration ({shown}) that a Gemini CLI reviewer would load with the "
            "reviewer's rights and cannot be told to ignore; it is not started: a person reviews this task "
            "(or a reviewer profile of another adapter)")
    return {**settings, "advanced": {**_obj(settings.get("advanced")), "ignoreLocalEnv": True}}
