"""`profiles check`: would this profile's agent start, and what would it need?

For each profile, in order, each with the fix when it fails:

- **executable**: the program found (path) on the ``PATH`` a worker gets (:func:`worker_path`:
  not agentboard's own virtualenv) and, for an agent CLI, its version and whether the adapter
  supports it;
- **command line**: the argv the dispatcher would run (the prompt elided), built for that
  version, this host's user (root) and the profile's ``permission``, and the environment the
  adapter adds;
- **flags accepted**: the CLI is started with that exact argv in a scratch workspace, a home
  with no credentials and every request sent to a closed port: it must get past its arguments
  and settings and stop only where it needs its login or its service (``run=False`` skips it);
- **MCP wiring**: the board's MCP server reaches the agent the way that CLI reads it;
- **credentials**: whether a key or a login appears to be present (the profile's env, this
  process's environment, the CLI's credential files in the worker's home; for Codex the
  ``env_key`` of the model provider its ``config.toml`` names, for opencode a provider's
  ``apiKey`` in ``OPENCODE_CONFIG_CONTENT`` or its config file);
- **Codex home** (a warning, Codex only): a ``CODEX_HOME`` under the temp folder, where Codex
  will not create its sandbox helper, so every shell command of its workers fails;
- **turn** (``turn=True``, ``profiles check NAME --turn``): one tiny real turn ("reply with OK")
  with the worker's environment and the profile's endpoint and credentials: the login works,
  which model answered, how long it took, the usage (and cost when the CLI reports it). It
  spends a few tokens.

The same report backs ``agentboard profiles check``, ``GET /api/profiles/{name}/check`` and the
dashboard's profiles page.
"""

from __future__ import annotations

import json
import os
import re
import select
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import Settings
from ..domain.worker_env import WorkerEnv
from ..kernel.profiles import command_fix, command_problem, relative_script, relative_script_warning
from ..protocol import project_env
from . import adapters, agent_config

#: the environment variables that hold each agent CLI's credentials
CREDENTIAL_ENV = {
    "claude": ("ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_USE_BEDROCK",
               "CLAUDE_CODE_USE_VERTEX"),
    "codex": ("OPENAI_API_KEY", "CODEX_API_KEY"),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GENAI_USE_GCA"),
    "opencode": ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_GENERATIVE_AI_API_KEY",
                 "OPENROUTER_API_KEY", "OPENCODE_API_KEY", "GROQ_API_KEY", "XAI_API_KEY"),
}
#: each agent CLI's credential files, relative to the worker's home
CREDENTIAL_FILES = {
    "claude": (".claude/.credentials.json",),
    "codex": (".codex/auth.json",),
    "gemini": (".gemini/oauth_creds.json",),
    "opencode": (".local/share/opencode/auth.json",),
}
#: output that shows the CLI refused its command line or its settings
REFUSALS = ("unexpected argument", "unknown option", "Unknown argument", "Not enough arguments", "Invalid values",
            "error: invalid value", "Usage: codex exec", "cannot be used with root", "Configuration is invalid",
            "Invalid configuration", "Invalid MCP configuration", "not running in a trusted directory")
#: output that shows the CLI got past its arguments (it started its session or asked for its login)
STARTED = {
    "claude": ('"type":"result"',),
    "codex": ('"turn.started"', '"thread.started"'),
    "gemini": ('"type":"init"', "Please set an Auth method", "must specify the GEMINI_API_KEY", "fetch failed"),
    "opencode": ('"type":"error"', '"type":"step_start"', "Unable to connect", "ProviderModelNotFoundError"),
}
#: seconds the flag check gives a CLI to reach its login or its service
RUN_TIMEOUT = 120.0
_ELIDED = "<prompt>"


@dataclass
class Item:
    name: str
    ok: bool
    detail: str
    fix: str | None = None
    #: a warning: it may work (say, credentials kept where this check cannot see them)
    warn: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "ok": self.ok, "warn": self.warn, "detail": self.detail, "fix": self.fix}


@dataclass
class Report:
    profile: str
    adapter: str
    items: list[Item] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(i.ok for i in self.items)

    def to_dict(self) -> dict[str, Any]:
        return {"profile": self.profile, "adapter": self.adapter, "ok": self.ok,
                "checks": [i.to_dict() for i in self.items]}


def worker_path(profile_env: dict[str, str]) -> str:
    """The ``PATH`` a worker of a profile gets (:func:`.spawn.worker_env`): the profile's own, else
    this process's without agentboard's own virtualenv and with the folder holding only
    ``agentboard`` (a board's project virtualenv, which it may put first, apart). What the
    checks find a program on, so that "ok" means the dispatcher can start it."""
    return profile_env.get("PATH") or project_env.path_for(None, os.environ.get("PATH"), None)


def check(profile: dict[str, Any], *, run: bool = True, worker_uid: int | None = None,
          home: str | None = None, turn: bool = False) -> Report:
    """The report of one profile (see the module's docstring). ``worker_uid``: the user its
    workers run as when not this process's (``isolation = user``); ``home``: their home."""
    adapter = str(profile.get("adapter") or "command")
    report = Report(str(profile.get("name")), adapter)
    env = {k: str(v) for k, v in (profile.get("env") or {}).items()}
    path_env = worker_path(env)
    with tempfile.TemporaryDirectory(prefix="agentboard-check-") as tmp:
        ws = Path(tmp) / "workspace"
        (ws / ".board").mkdir(parents=True)
        prompt = ws / ".board" / "prompt.md"
        prompt.write_text("Say hello.")
        mcp_env = WorkerEnv(task="t_00000000", run_id=0).to_env()
        (ws / ".mcp.json").write_text(json.dumps({"mcpServers": {"agentboard": {
            "command": sys.executable, "args": ["-m", "agentboard", "mcp"], "env": mcp_env}}}))
        if not _executable(report, profile, adapter, path_env, ws):
            return report
        try:
            launch = adapters.build(profile, task_id="t_00000000", run_id=0, workspace=ws, prompt_file=prompt,
                                    board="default", path_env=path_env, worker_uid=worker_uid)
        except adapters.AdapterError as exc:
            report.items.append(Item("command line", False, str(exc), _start_fix(report.profile, profile, str(exc))))
            return report
        shown = [a.replace("Say hello.", _ELIDED) if a.endswith("Say hello.") else a for a in launch.argv]
        extra = "; env " + " ".join(f"{k}={v}" for k, v in launch.env.items()) if launch.env else ""
        report.items.append(Item("command line", True, shlex.join(shown) + extra))
        if adapter not in adapters.CLI_ADAPTERS:
            return report
        if run:
            report.items.append(_flags(adapter, launch, ws, Path(tmp) / "home", path_env))
        report.items.append(_mcp(adapter, launch, ws))
        report.items.append(_credentials(adapter, profile, env, home))
        if adapter == "codex" and (warning := _codex_home_in_temp(report.profile, env)) is not None:
            report.items.append(warning)
    if turn:
        took = take_turn(profile, worker_uid=worker_uid, home=home)
        if took.ok:  # the CLI signed in: its credentials are where it looks (a key named in its config)
            report.items = [Item(i.name, True, f"{i.detail}; but the turn signed in", None, warn=True)
                            if i.name == "credentials" and not i.ok else i for i in report.items]
        report.items.append(took)
    return report


#: what ends a turn in each agent CLI's output
TURN_END = {
    "claude": ('"type":"result"',),
    "codex": ('"turn.completed"', '"turn.failed"'),
    "gemini": ('"type":"result"',),
    "opencode": ('"type":"step_finish"', '"type":"error"'),
}
TURN_PROMPT = "Reply with OK and nothing else. Do not use any tool."


def take_turn(profile: dict[str, Any], *, worker_uid: int | None = None, home: str | None = None,
              timeout: float = RUN_TIMEOUT) -> Item:
    """One real turn of the profile's agent CLI, as its workers would take it (their
    environment, the profile's env, its model), asked to reply with OK."""
    adapter = str(profile.get("adapter") or "command")
    if adapter not in adapters.CLI_ADAPTERS:
        return Item("turn", True, "not an agent CLI: nothing to ask", warn=True)
    own = {k: str(v) for k, v in (profile.get("env") or {}).items()}
    env = {**{k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}, **own, "PATH": worker_path(own)}
    if home:
        env["HOME"] = home
    with tempfile.TemporaryDirectory(prefix="agentboard-turn-") as tmp:
        ws = Path(tmp)
        (ws / ".board").mkdir()
        prompt = ws / ".board" / "prompt.md"
        prompt.write_text(TURN_PROMPT)
        try:
            launch = adapters.build(profile, task_id="t_00000000", run_id=0, workspace=ws, prompt_file=prompt,
                                    board="default", path_env=env.get("PATH"), worker_uid=worker_uid)
        except adapters.AdapterError as exc:
            return Item("turn", False, str(exc), _fix_of(str(exc)))
        env.update(launch.env)
        started = time.monotonic()
        output = run_until(launch.argv, env, ws, TURN_END[adapter], timeout)
        took = time.monotonic() - started
    name = adapters.NAMES[adapter]
    events = adapters.json_events(output)
    out = adapters.outcome_of(adapter, events, output)
    if out.failure == "auth":
        return Item("turn", False, f"{name} could not sign in: {out.error or 'no login'}",
                    agent_config.login_fix(adapter, profile, home))
    if out.is_error or out.no_result:
        said = out.error or " | ".join(output.strip().splitlines()[-2:])[:300] or "no output"
        fix = ("wait for the limit to reset, or use another key" if out.failure == "rate_limit" else
               "check the profile's endpoint (its env) and network" if out.failure == "network" else
               "run the command line by hand to see why")
        return Item("turn", False, f"{name} did not finish a turn in {took:.1f}s: {said}", fix)
    model = (_model_of(events) or str(profile.get("model") or "") or agent_config.configured_model(adapter, profile, home)
             or "the CLI's default model")
    usage = (f"{out.input_tokens} input / {out.output_tokens} output tokens"
             if out.input_tokens is not None else "no usage reported")
    cost = f", ${out.cost_usd:.4f}" if out.cost_usd else ""
    reply = (out.final_text or "").strip().replace("\n", " ")[:60]
    return Item("turn", True, f"signed in; {model} replied {reply!r} in {took:.1f}s; {usage}{cost}",
                None if reply.upper().startswith("OK") else "the model answered, but not with OK: check the model",
                warn=not reply.upper().startswith("OK"))


def _written(stats: Any) -> tuple[int, int]:
    """A model's share of a Gemini CLI answer: its output tokens, then all its tokens."""
    m = stats if isinstance(stats, dict) else {}
    return int(m.get("output_tokens") or 0), int(m.get("total_tokens") or 0)


def _model_of(events: list[dict[str, Any]]) -> str | None:
    """The model that answered, as the CLI named it in its output: Gemini CLI's result event
    counts each model's tokens (its init event names the router, ``auto``; the answer is the
    model that wrote the most), else Claude Code's and Gemini CLI's init event."""
    for ev in events:
        models = (ev.get("stats") or {}).get("models") if ev.get("type") == "result" else None
        if isinstance(models, dict) and models:
            return str(max(models.items(), key=lambda item: _written(item[1]))[0])
    for ev in events:
        if ev.get("type") in ("system", "init") and isinstance(ev.get("model"), str):
            return str(ev["model"])
        msg = ev.get("message")
        if ev.get("type") == "assistant" and isinstance(msg, dict) and isinstance(msg.get("model"), str):
            return str(msg["model"])
    return None


def _executable(report: Report, profile: dict[str, Any], adapter: str, path_env: str | None, ws: Path) -> bool:
    command = str(profile.get("command") or (adapter if adapter != "command" else "")).strip()
    try:
        first = shlex.split(command)[0] if command else ""
    except ValueError as exc:
        report.items.append(Item("executable", False, f"cannot parse the command: {exc}",
                                 f"agentboard profiles set {report.profile} --command '...'"))
        return False
    if not first:
        report.items.append(Item("executable", False, "the profile has no command",
                                 f"agentboard profiles set {report.profile} --command '...'"))
        return False
    if adapter == "command":
        # a command line: its program on the workers' PATH (one only agentboard's own virtualenv has
        # is named as such), and a script given to an interpreter (``sh /path/run.sh``), are
        # checked here, or the check would pass a command that cannot run
        problem = command_problem(command, adapter, path_env=path_env)
        if problem is not None:
            report.items.append(Item("executable", False, problem, command_fix(report.profile, problem)))
            return False
        if (relative := relative_script_warning(report.profile, command)) is not None:
            report.items.append(Item("executable", True, relative[0], relative[1], warn=True))
        return True
    try:
        path = adapters.resolve_executable(first, path_env, ws)
    except adapters.AdapterError as exc:
        report.items.append(Item("executable", False, str(exc),
                                 f"npm install -g {adapters.PACKAGES[adapter]}, or `agentboard profiles set "
                                 f"{report.profile} --command /path/to/{adapter}`"))
        return False
    try:
        version = adapters.cli_version(adapter, path)
    except adapters.AdapterError as exc:
        report.items.append(Item("executable", False, f"{path}: {exc}", _fix_of(str(exc))))
        return False
    low, high = adapters.SUPPORTED[adapter]
    report.items.append(Item("executable", True, f"{path} ({adapters.NAMES[adapter]} {'.'.join(map(str, version))}; "
                                                 f"supported >= {'.'.join(map(str, low))}, < {'.'.join(map(str, high))})"))
    return True


def _start_fix(name: str, profile: dict[str, Any], message: str) -> str | None:
    """The fix of a command line that cannot be built: the command with an absolute path for a
    relative one, ``chmod +x`` for a program that is not executable, the command with the full
    path of one that is missing; else what the message names."""
    relative = relative_script_warning(name, profile.get("command"))
    if relative is not None and str(profile.get("adapter") or "command") == "command":
        return relative[1]
    found = re.match(r"command '(.+)' is not executable", message)
    if found:
        return f"chmod +x {shlex.quote(found.group(1))}"
    if re.match(r"command '.+' (does not exist|was not found on PATH|is a directory)", message):
        return command_fix(name, "program")
    return _fix_of(message)


def _fix_of(message: str) -> str | None:
    """The commands a message names (between backticks), else its advice after a colon."""
    commands = re.findall(r"`([^`]+)`", message)
    if commands:
        return " or ".join(c for c in commands if c.startswith(("agentboard", "npm")) or "--" in c) or None
    if ": set " in message:
        return message[message.index(": set ") + 2:]
    return None


def _flags(adapter: str, launch: adapters.Launch, ws: Path, home: Path, path_env: str) -> Item:
    """Start the CLI with its exact argv, no credentials and no network: it must get past its
    arguments and settings and stop at its login or its service."""
    (home / ".codex").mkdir(parents=True, exist_ok=True)
    closed = "http://127.0.0.1:9"
    env = {k: v for k, v in os.environ.items() if k in ("LANG", "TERM", "TMPDIR")}
    env["PATH"] = path_env
    env.update({"HOME": str(home), "CODEX_HOME": str(home / ".codex"), "XDG_CONFIG_HOME": str(home / ".config"),
                "XDG_DATA_HOME": str(home / ".local/share"), "XDG_CACHE_HOME": str(home / ".cache"),
                "HTTPS_PROXY": closed, "HTTP_PROXY": closed, "https_proxy": closed, "http_proxy": closed,
                "NO_PROXY": "", "no_proxy": "", "DISABLE_AUTOUPDATER": "1", "OPENCODE_DISABLE_MODELS_FETCH": "1",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", **launch.env})
    output = run_until(launch.argv, env, ws, STARTED[adapter], RUN_TIMEOUT)
    refused = next((r for r in REFUSALS if r in output), None)
    if refused is not None:
        line = next((ln for ln in output.splitlines() if refused in ln), refused)
        return Item("flags accepted", False, f"{adapters.NAMES[adapter]} refused its command line: {line.strip()[:300]}",
                    "install a supported version, or change the profile's permission/model")
    if not any(m in output for m in STARTED[adapter]):
        tail = " | ".join(output.strip().splitlines()[-3:])[:300]
        return Item("flags accepted", False, f"{adapters.NAMES[adapter]} did not start a session within "
                    f"{int(RUN_TIMEOUT)}s: {tail or 'no output'}", "run the command line by hand to see why")
    out = adapters.outcome_of(adapter, adapters.json_events(output), output)
    stop = {"auth": "its login", "network": "its service", "rate_limit": "its service"}.get(out.failure or "",
                                                                                          "its service")
    return Item("flags accepted", True, f"{adapters.NAMES[adapter]} took the command line and settings and stopped "
                f"at {stop} (run with no credentials and no network)")


def run_until(argv: list[str], env: dict[str, str], cwd: Path, markers: tuple[str, ...], timeout: float) -> str:
    """What a program prints (stdout and stderr) until one of ``markers`` or its exit; then
    it and its process group are ended."""
    try:
        proc = subprocess.Popen(argv, env={**env, "PWD": str(cwd)}, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    except OSError as exc:
        return f"cannot start {argv[0]}: {exc.strerror or exc}"
    assert proc.stdout is not None
    out = b""
    wanted = tuple(m.encode() for m in markers)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and not any(m in out for m in wanted):
            ready, _, _ = select.select([proc.stdout], [], [], 0.5)
            if ready:
                chunk = os.read(proc.stdout.fileno(), 65536)
                if not chunk:
                    break
                out += chunk
            elif proc.poll() is not None:
                break
    finally:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
        proc.wait()
        proc.stdout.close()
    return out.decode("utf-8", "replace")


def _mcp(adapter: str, launch: adapters.Launch, ws: Path) -> Item:
    """Where the board's MCP server is given to the agent, and whether it is there."""
    if adapter == "claude":
        ok = "--mcp-config" in launch.argv
        how = "--mcp-config <workspace>/.mcp.json, its tools allowed (mcp__agentboard)"
    elif adapter == "codex":
        ok = any(a.startswith("mcp_servers.agentboard.command=") for a in launch.argv)
        how = "-c mcp_servers.agentboard.command/args/env"
    elif adapter == "gemini":
        ok = _has_server(ws / adapters.GEMINI_SETTINGS, "mcpServers")
        how = f"<workspace>/{adapters.GEMINI_SETTINGS} mcpServers.agentboard (trusted)"
    else:
        ok = _has_server(ws / ".board" / adapters.OPENCODE_CONFIG, "mcp")
        how = f"OPENCODE_CONFIG=<workspace>/.board/{adapters.OPENCODE_CONFIG} mcp.agentboard (local)"
    return Item("MCP wiring", ok, how if ok else f"the board's MCP server is missing from {how}",
                None if ok else "report the adapter's output: the MCP server was not wired")


def _has_server(path: Path, key: str) -> bool:
    try:
        return "agentboard" in (json.loads(path.read_text()).get(key) or {})
    except (OSError, ValueError, AttributeError):
        return False


def _credentials(adapter: str, profile: dict[str, Any], env: dict[str, str], home: str | None) -> Item:
    if adapter == "codex" and (provider := agent_config.codex_provider(profile, home)) is not None and not provider.openai_auth:
        return _provider_credentials(provider, env)
    names = [n for n in CREDENTIAL_ENV[adapter] if agent_config.lookup(env, n)]
    home_dir = Path(env.get("HOME") or home or os.path.expanduser("~"))
    if adapter == "codex" and (env.get("CODEX_HOME") or os.environ.get("CODEX_HOME")):
        files = [Path(env.get("CODEX_HOME") or os.environ["CODEX_HOME"]) / "auth.json"]
    else:
        files = [home_dir / f for f in CREDENTIAL_FILES[adapter]]
    if adapter == "claude":
        files.append(home_dir / ".claude.json")  # a login kept by Claude Code's own config
    found = [str(f) for f in files if _nonempty(f, adapter)]
    if adapter == "opencode":
        found += agent_config.opencode_keys(env, home)
    if names or found:
        return Item("credentials", True, "present: " + ", ".join([*(f"${n}" for n in names), *found]))
    fix = adapters.LOGIN[adapter] + (" (as the user the workers run as)" if home else "")
    if adapter == "opencode":
        return Item("credentials", True, "none found: opencode's free models need none, other providers do", fix,
                    warn=True)
    return Item("credentials", False, f"no {', '.join('$' + n for n in CREDENTIAL_ENV[adapter][:2])} and no login in "
                f"{home_dir}", fix)


def _provider_credentials(provider: agent_config.CodexProvider, env: dict[str, str]) -> Item:
    where = f"Codex's model provider {provider.name!r} in {provider.config}"
    if provider.local:
        return Item("credentials", True, f"none needed: Codex's model provider {provider.name!r} is a local one")
    if not provider.defined:
        return Item("credentials", True, f"model provider {provider.name!r} is not defined in {provider.config}: "
                    "Codex refuses a provider it does not know", f"add [model_providers.{provider.name}] (its "
                    "base_url and env_key) to that config.toml, or name a provider it defines", warn=True)
    if provider.env_key:
        if agent_config.lookup(env, provider.env_key):
            return Item("credentials", True, f"present: ${provider.env_key} (the env_key of {where})")
        return Item("credentials", False, f"no ${provider.env_key}, the env_key of {where}",
                    f"set {provider.env_key} in the profile's env (`codex login` does not sign in to that provider)")
    if provider.bearer:
        return Item("credentials", True, f"present: the experimental_bearer_token of {where}")
    return Item("credentials", True, f"none needed: {where} names no env_key")


def _codex_home_in_temp(profile: str, env: dict[str, str]) -> Item | None:
    """A warning when the profile's ``CODEX_HOME`` is under the temp folder: Codex will not create
    its helper binaries (its sandbox, ``codex-linux-sandbox``) there, so every shell command of its
    workers fails."""
    given = agent_config.lookup(env, "CODEX_HOME")
    if not given:
        return None
    folder = os.path.realpath(os.path.expanduser(given))
    temps = {os.path.realpath(t) for t in ("/tmp", tempfile.gettempdir(), agent_config.lookup(env, "TMPDIR") or "/tmp")}
    temp = next((t for t in sorted(temps) if folder == t or folder.startswith(t.rstrip("/") + "/")), None)
    if temp is None:
        return None
    return Item("Codex home", True,
                f"CODEX_HOME {given} is under the temp folder {temp}, where Codex refuses to create its helper "
                "binaries: every shell command its workers run in its sandbox then fails (`bwrap: execvp "
                "codex-linux-sandbox`)",
                f"move that folder (its config.toml, auth.json) outside {temp}, then `agentboard profiles set "
                f"{profile} --env CODEX_HOME=/path/outside/tmp`", warn=True)


def _nonempty(path: Path, adapter: str) -> bool:
    try:
        text = path.read_text()
    except OSError:
        return False
    if path.name == ".claude.json":
        return '"oauthAccount"' in text
    return bool(text.strip())


def worker_identity(profile: dict[str, Any], settings: Settings) -> tuple[int | None, str | None]:
    """The user a profile's workers run as, and its home, when not this process's."""
    from . import isolation

    try:
        conf = isolation.resolve(profile.get("isolation"), settings)
    except isolation.IsolationError:
        return None, None
    if conf.uid is None:
        return None, None
    try:
        import pwd
        return conf.uid, pwd.getpwuid(conf.uid).pw_dir
    except KeyError:
        return conf.uid, None


def root_problem(profile: dict[str, Any], settings: Settings) -> str | None:
    """Why this host's dispatcher could not start the profile's agent as the user its workers
    run as (Claude Code's refusal of ``permission = full`` as root), with the setting to change."""
    if str(profile.get("adapter") or "") != "claude" or str(profile.get("permission") or "edit") != "full":
        return None
    uid, _home = worker_identity(profile, settings)
    if (os.geteuid() if uid is None else uid) != 0:
        return None
    return (f"profile {profile.get('name')}: its workers would run as root here, where Claude Code refuses permission "
            f"= full: `agentboard profiles set {profile.get('name')} --permission edit`, or `--isolation user`")


def check_profiles(profiles: list[dict[str, Any]], settings: Settings, *, run: bool = True,
                   turn: bool = False) -> list[Report]:
    """The reports of several profiles (their flag checks one after the other)."""
    out = []
    for p in profiles:
        uid, home = worker_identity(p, settings)
        out.append(check(p, run=run, worker_uid=uid, home=home, turn=turn))
    return out


__all__ = ["Item", "Report", "check", "check_profiles", "relative_script", "relative_script_warning", "root_problem",
           "run_until", "take_turn", "worker_identity"]
