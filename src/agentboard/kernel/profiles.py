"""Profiles: named agents stored in the database (how to start them is the dispatcher's business)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import time
from typing import Any

from ..domain import model, settings_schema, worker_env
from ..domain.errors import Conflict, InvalidInput, NotFound
from ..store.engine import Database, Row, Tx, dump_json

#: programs that run the script named after their options (``sh run.sh``, ``python3 agent.py``)
_INTERPRETER_RE = re.compile(r"^(sh|bash|dash|zsh|ksh|fish|python(\d+(\.\d+)?)?|pypy3?|node|nodejs|deno|bun|ruby|"
                             r"perl|php|Rscript|tsx|ts-node|uv)$")
#: options after which an interpreter runs code given inline or a module, not a script file
_INLINE_FLAGS = frozenset(("-c", "-m", "-e", "-E", "--eval", "-p", "--print", "-r", "run", "eval"))
#: the program a worker always finds: the dispatcher puts a folder holding only ``agentboard`` on its PATH
SHIM_PROGRAM = "agentboard"
#: shell builtins a command line may start with (no program to find)
_BUILTINS = frozenset(("cd", "echo", "printf", "exec", "exit", "test", "[", "set", "export", "true", "false", "read",
                       ":", ".", "eval", "if", "for", "while", "{", "(", "trap", "sleep"))


def command_problem(command: str | None, adapter: str = "command", *, path_env: str | None = None) -> str | None:
    """Why this host could not start a profile's command, or None: its program is not on the
    ``PATH`` a worker gets (``path_env``, the profile's own; else this process's without
    agentboard's own virtualenv, :func:`.worker_env.user_path`, as the dispatcher gives a worker),
    or its path does not exist or is not executable, or the script given to an interpreter
    (``sh /path/run.sh``, ``python3 /path/agent.py``) does not exist. Paths relative to the
    workspace and placeholders cannot be checked here and pass (:func:`relative_script`)."""
    text = (command or "").strip() or (adapter if adapter != "command" else "")
    if not text:
        return "the profile has no command"
    try:
        words = shlex.split(text)
    except ValueError as exc:
        return f"cannot parse the command: {exc}"
    while words and ("=" in words[0].split("/")[0] or words[0] == "env"):  # VAR=value prefixes, env
        words = words[1:]
    if not words:
        return None
    exe = words[0]
    if "{" in exe or exe in _BUILTINS or re.search(r"[;&|<>`$()]", exe):
        return None
    path_env = path_env if path_env is not None else worker_env.user_path()
    if "/" in exe:
        if not os.path.isabs(exe):
            return None  # relative to the workspace
        if not os.path.exists(exe):
            return f"program {exe!r} does not exist"
        if os.path.isdir(exe) or not os.access(exe, os.X_OK):
            return f"program {exe!r} is not an executable file (chmod +x it)"
    elif exe != SHIM_PROGRAM and shutil.which(exe, path=path_env) is None:
        if shutil.which(exe, path=os.pathsep.join(sorted(worker_env.agentboard_dirs()))):
            return (f"program {exe!r} was not found on PATH: only agentboard's own virtualenv has it, and "
                    "workers do not get that folder")
        return f"program {exe!r} was not found on PATH"
    if not _INTERPRETER_RE.match(os.path.basename(exe)):
        return None
    for word in words[1:]:
        if word in _INLINE_FLAGS or re.search(r"[;&|<>`$]", word):
            return None
        if word.startswith("-"):
            continue
        if "{" in word or not os.path.isabs(word):
            return None  # a placeholder, or a path relative to the workspace
        if not os.path.isfile(word):
            return f"script {word!r} (run by {os.path.basename(exe)}) does not exist"
        return None
    return None


def command_fix(profile: str, problem: str) -> str:
    """The command that clears :func:`command_problem`'s ``problem`` of ``profile``: ``chmod +x``
    for a program that is not executable, else the profile's command with the full path of a
    program (or script) that exists."""
    found = re.match(r"program '(.+)' is not an executable file", problem)
    if found:
        return f"chmod +x {shlex.quote(found.group(1))}"
    if problem.startswith("script "):
        return f"agentboard profiles set {shlex.quote(profile)} --command '<program> /full/path/to/the/script ...'"
    return f"agentboard profiles set {shlex.quote(profile)} --command '/full/path/to/the/program ...'"


def command_warning(profile: Row) -> str | None:
    """The one-line warning about a profile whose command this host could not start, or whose
    script is a relative path (it resolves in each task's workspace), or None."""
    problem = command_problem(profile.get("command"), str(profile.get("adapter") or "command"),
                              path_env=(_env(profile).get("PATH")))
    if problem is None:
        relative = (relative_script_warning(str(profile["name"]), profile.get("command"))
                    if str(profile.get("adapter") or "command") == "command" else None)
        return f"profile {profile['name']}: {relative[0]} (`{relative[1]}`)" if relative else None
    return (f"profile {profile['name']}: {problem}; the dispatcher cannot start it until that is fixed "
            f"(`{command_fix(str(profile['name']), problem)}`)")


def relative_script(command: str | None) -> tuple[str, str | None] | None:
    """The script of a command line that names it by a relative path (``python3 research.py
    {task_id}``, ``./agent.sh``) and the interpreter running it (None: the script is the program),
    else None. A worker starts in its task's workspace, so the path resolves there, where it
    exists only if the task's repository holds it."""
    try:
        words = shlex.split((command or "").strip())
    except ValueError:
        return None
    while words and ("=" in words[0].split("/")[0] or words[0] == "env"):  # VAR=value prefixes, env
        words = words[1:]
    if not words or "{" in words[0] or any(c in words[0] for c in ";&|<>`$()"):
        return None
    exe = words[0]
    if "/" in exe and not os.path.isabs(exe):
        return exe, None
    if not _INTERPRETER_RE.match(os.path.basename(exe)):
        return None
    for word in words[1:]:
        if word in _INLINE_FLAGS or any(c in word for c in ";&|<>`$"):
            return None
        if not word.startswith("-"):
            return None if "{" in word or os.path.isabs(word) else (word, os.path.basename(exe))
    return None


def relative_script_warning(profile: str, command: str | None) -> tuple[str, str] | None:
    """The warning about a command line whose script is a relative path (:func:`relative_script`)
    and its fix, the command with an absolute path (the file's own when this folder has it), or None."""
    found = relative_script(command)
    if found is None:
        return None
    script, runner = found
    what = f"script {script!r} (run by {runner})" if runner else f"program {script!r}"
    here = os.path.abspath(script)
    absolute = here if os.path.isfile(here) else "/path/to/" + os.path.basename(script)
    fixed = re.sub(rf"(?<![\w./-]){re.escape(script)}(?![\w./-])", lambda _: absolute, str(command), count=1)
    return (f"{what} is a relative path, which resolves in each task's workspace, where it usually does not "
            "exist: give its absolute path",
            f"agentboard profiles set {profile} --command {shlex.quote(fixed)}")


def _env(profile: Row) -> dict[str, Any]:
    env = profile.get("env")
    if isinstance(env, str):
        try:
            env = json.loads(env or "{}")
        except ValueError:
            env = {}
    return env if isinstance(env, dict) else {}


def did_you_mean(name: str, names: list[str]) -> str:
    """``" (did you mean 'fixer'?)"`` when a profile name is close to ``name`` (a typo), else ``""``."""
    from difflib import get_close_matches

    near = get_close_matches(name, names, n=1, cutoff=0.6)
    return f" (did you mean '{near[0]}'?)" if near else ""


def unknown_profile_warning(tx: Tx, name: str) -> str:
    """The warning about a task assigned to ``name``, which is no profile (with the profile its
    name is a typo of, if one is close)."""
    return no_profile_warning(name, [str(r["name"]) for r in tx.all("SELECT name FROM profiles")])


def no_profile_warning(name: str, profiles: list[str]) -> str:
    """:func:`unknown_profile_warning`, given the names of the ``profiles`` there are."""
    return (f"no profile named {name!r}{did_you_mean(name, profiles)}: the dispatcher will not start this task "
            f"until one is added (`agentboard profiles add {name} --command ...`); fine if a person does it")


def assignee_warning(db: Database, name: str) -> str | None:
    """:func:`unknown_profile_warning` when ``name`` is no profile, else None."""
    def _r(tx: Tx) -> str | None:
        if tx.one("SELECT name FROM profiles WHERE name = :n", {"n": name}) is not None:
            return None
        return unknown_profile_warning(tx, name)
    return db.read(_r)


def profile_out(row: Row) -> Row:
    out = dict(row)
    out["env"] = json.loads(out.get("env") or "{}")
    out["skills"] = json.loads(out.get("skills") or "[]")
    out["enabled"] = bool(out.get("enabled"))
    out["orchestrator"] = bool(out.get("orchestrator"))
    return out


def _get(tx: Tx, name: str) -> Row:
    row = tx.one("SELECT * FROM profiles WHERE name = :n", {"n": name})
    if row is None:
        raise NotFound(f"no profile {name!r}; add one with `agentboard profiles add {name} --command ...`")
    return row


def get(db: Database, name: str) -> Row:
    return profile_out(db.read(_get, name))


def recent_runs(db: Database, name: str, *, limit: int = 10) -> list[Row]:
    """The profile's latest finished runs, newest first: the task's title, the run's outcome
    and summary (what describing a profile from its record reads)."""
    def _r(tx: Tx) -> list[Row]:
        _get(tx, name)
        return tx.all(
            "SELECT r.id AS run_id, r.task_id, t.title, r.outcome, r.summary, r.ended_at"
            " FROM task_runs r JOIN tasks t ON t.id = r.task_id"
            " WHERE r.profile = :n AND r.ended_at IS NOT NULL"
            " ORDER BY r.ended_at DESC, r.id DESC LIMIT :lim", {"n": name, "lim": int(limit)})
    return db.read(_r)


def list_profiles(db: Database) -> list[Row]:
    return [profile_out(r) for r in db.read(lambda tx: tx.all("SELECT * FROM profiles ORDER BY name"))]


def _validate(fields: dict[str, Any]) -> dict[str, Any]:
    """The stored values of ``fields``, checked by the one profile schema
    (:func:`agentboard.domain.settings_schema.profile_fields`)."""
    checked = settings_schema.profile_fields(
        {k: v for k, v in fields.items() if k in settings_schema.PROFILE_FIELDS})
    out: dict[str, Any] = {}
    for k, v in fields.items():
        if v is None:
            continue
        if k in ("env", "skills"):
            v = dump_json(checked[k])
        elif k in ("enabled", "orchestrator"):
            v = 1 if checked[k] else 0
        elif k == "description":
            v = model.body(checked[k], 16 * 1024, "description")
        elif k in checked:
            v = checked[k]
        else:
            raise InvalidInput(f"unknown profile field {k!r}")
        out[k] = v
    return out


def default_command(adapter: str | None, command: str | None) -> str:
    """The command a new profile stores: ``command`` as given, else, for an agent CLI's adapter,
    the CLI's executable name (found on ``PATH`` when the worker starts). A script's profile
    (adapter ``command``) has no default: it says how to start the agent."""
    if command is not None and command.strip():
        return command
    clis = [a for a in settings_schema.ADAPTERS if a != "command"]
    if adapter in clis:
        return str(adapter)
    if adapter in (None, "command"):
        raise InvalidInput("a profile needs --command CMD (how to start the agent, e.g. "
                           "--command \"python3 agent.py {task_id}\"), or --adapter "
                           f"{'|'.join(clis)} for an agent CLI on PATH")
    raise InvalidInput(f"unknown adapter {adapter!r}: use one of {', '.join(settings_schema.ADAPTERS)}")


def add(
    db: Database, name: str, *, command: str | None = None, adapter: str = "command", description: str = "",
    max_concurrency: int | None = None, env: dict[str, str] | None = None, skills: list[str] | None = None,
    model_name: str | None = None, enabled: bool = True, orchestrator: bool = False, isolation: str = "none",
    permission: str = "edit", actor: str | None = None,
) -> Row:
    name = model.profile_name(name)
    fields = _validate({
        "command": default_command(adapter, command), "adapter": adapter, "description": description, "max_concurrency": max_concurrency,
        "env": env or {}, "skills": skills or [], "model": model_name, "enabled": enabled, "orchestrator": orchestrator,
        "isolation": isolation, "permission": permission,
    })
    fields.setdefault("max_concurrency", None)
    fields.setdefault("model", None)
    fields.setdefault("isolation", "none")
    fields.setdefault("permission", "edit")

    def _w(tx: Tx) -> Row:
        if tx.one("SELECT name FROM profiles WHERE name = :n", {"n": name}):
            raise Conflict(f"profile {name!r} already exists; change it with `agentboard profiles set {name} ...`")
        now = time.time()
        tx.execute(
            "INSERT INTO profiles (name, description, adapter, command, env, max_concurrency, skills, model, enabled, "
            "orchestrator, isolation, permission, created_at, updated_at) VALUES (:name, :description, :adapter, :command, "
            ":env, :max_concurrency, :skills, :model, :enabled, :orchestrator, :isolation, :permission, :now, :now)",
            {"name": name, "now": now, **fields},
        )
        tx.event("default", None, "profile_changed", {"profile": name, "action": "added"}, actor=actor, at=now)
        return _get(tx, name)

    return _with_warnings(profile_out(db.write(_w)))


def _with_warnings(p: Row) -> Row:
    """An added or changed profile, with ``warnings``: what would stop the dispatcher starting it
    (its program or script missing on this host). The change is kept: the program may be
    installed later, or exist only on the dispatcher's host."""
    warning = command_warning(p)
    return {**p, "warnings": [warning] if warning else []}


def update(db: Database, name: str, *, actor: str | None = None, **fields: Any) -> Row:
    if "model_name" in fields:
        fields["model"] = fields.pop("model_name")
    changes = _validate(fields)

    def _w(tx: Tx) -> Row:
        _get(tx, name)
        if changes:
            now = time.time()
            sets = ", ".join(f"{k} = :{k}" for k in changes)
            tx.execute(f"UPDATE profiles SET {sets}, updated_at = :now WHERE name = :pname", {**changes, "now": now, "pname": name})
            tx.event("default", None, "profile_changed", {"profile": name, "action": "updated", "fields": sorted(changes)}, actor=actor, at=now)
        return _get(tx, name)

    out = profile_out(db.write(_w))
    return _with_warnings(out) if "command" in changes or "adapter" in changes or "env" in changes else out


def remove(db: Database, name: str, *, actor: str | None = None) -> Row:
    """Remove a profile (refused while tasks of it run). The answer's ``waiting`` lists the tasks
    still assigned to it (todo, ready or blocked), which now wait (``no_profile``) until a profile of that name exists or
    they are given to another, and ``warnings`` says so."""
    def _w(tx: Tx) -> tuple[Row, list[str]]:
        row = _get(tx, name)
        running = tx.scalar("SELECT COUNT(*) FROM tasks WHERE assignee = :n AND status = 'running'", {"n": name})
        if running:
            raise Conflict(f"profile {name!r} has {running} running task(s); wait or reclaim them first")
        waiting = [str(r["id"]) for r in tx.all(
            "SELECT id FROM tasks WHERE assignee = :n AND status IN ('todo', 'ready', 'blocked') "
            "ORDER BY created_at, id", {"n": name})]
        tx.execute("DELETE FROM profiles WHERE name = :n", {"n": name})
        tx.event("default", None, "profile_changed", {"profile": name, "action": "removed"}, actor=actor)
        return row, waiting

    row, waiting = db.write(_w)
    out = profile_out(row)
    out["waiting"] = waiting
    out["warnings"] = [waiting_warning(name, waiting)] if waiting else []
    return out


def waiting_warning(name: str, waiting: list[str]) -> str:
    """The warning about the tasks left assigned to removed profile ``name``."""
    shown = ", ".join(waiting[:10]) + (f" and {len(waiting) - 10} more" if len(waiting) > 10 else "")
    return (f"{len(waiting)} unfinished task(s) are still assigned to {name!r} and will wait until a profile of "
            f"that name exists again: {shown}; give each another with `agentboard assign ID PROFILE`, or "
            f"`agentboard profiles add {name} --command ...`")
