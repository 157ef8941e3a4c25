"""Diagnostics: what is wrong on a board, and the command that fixes it.

:func:`diagnose` reads the board (one read transaction) and looks at the host where it must (a
profile's command on ``PATH``, a worker's pid, the board's target directory, the SQLite file).
Each finding has a ``kind``, a one-line ``message``, the ``fix`` command that clears it (None
when no command can: install a program, restore a backup), when the fix has a REST equivalent,
the ``action`` (method, path, body) the dashboard's button calls, and what it is about:
``concerns`` (``task``, ``goal``, ``board``, ``profile``, or None for the database) and
``subject`` (that task's, goal's, board's or profile's id or name).

A task's view (``task_id``) holds only what concerns that task: its own findings, and those of
its goal, its board and its profile (a spent budget of one of them, the board's target
directory, the profile's command) — never another task's.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .. import gitsafe
from ..config import Settings
from ..store.engine import Database, Row, Tx, in_list, sqlite_file
from . import budgets
from .common import default_assignee
from .profiles import command_fix, command_problem, relative_script, relative_script_warning


@dataclass
class Finding:
    kind: str
    board: str | None
    message: str
    fix: str | None = None
    action: dict[str, Any] | None = None
    task_id: str | None = None
    severity: str = "warning"
    facts: dict[str, Any] = field(default_factory=dict)
    #: what the finding is about: ``task``, ``goal``, ``board``, ``profile`` (None: the database)
    concerns: str | None = None
    #: the id or name of that task, goal, board or profile
    subject: str | None = None

    def __post_init__(self) -> None:
        if self.concerns is None:
            if self.task_id:
                self.concerns, self.subject = "task", self.task_id
            elif self.board:
                self.concerns, self.subject = "board", self.board


def _q(s: str) -> str:
    return shlex.quote(s)


def _profile_problem(p: Row) -> str | None:
    env = p.get("env")
    try:
        path = (json.loads(env) if isinstance(env, str) else env or {}).get("PATH")
    except (ValueError, AttributeError):
        path = None
    return command_problem(p.get("command"), str(p.get("adapter") or "command"), path_env=path)


def _relative_problem(p: Row, board: Row | None) -> tuple[str, str] | None:
    """Why a profile whose command names its program or script by a relative path cannot start
    a task of ``board``, with the fix (the command with an absolute path), or None: the path
    resolves in the task's workspace, which is a new empty folder on a board without a target
    directory, and holds what the target holds otherwise (None when the target has that file)."""
    if str(p.get("adapter") or "command") != "command":
        return None
    found = relative_script(p.get("command"))
    warned = relative_script_warning(str(p["name"]), p.get("command"))
    if found is None or warned is None:
        return None
    script, runner = found
    target = (board or {}).get("default_workdir")
    if target and os.path.isfile(os.path.join(str(target), script)):
        return None
    where = f"the board's target {target}, which has no {script}" if target else "a new empty folder"
    what = f"script {script!r} (run by {runner})" if runner else f"program {script!r}"
    return (f"its {what} is a relative path, which resolves in the task's workspace ({where}): give its absolute "
            "path", warned[1])


def _kept_report(r: Row) -> str | None:
    """Where the report of a running task's worker is kept, when it reported but its exit was
    never recorded (no dispatcher saw it: its API had stopped, or it exited after the pass that
    started it): the run's pending report, or ``.board/result.json`` in its workspace."""
    if r.get("pending_report"):
        return "the run's pending report"
    ws = r.get("workspace_path")
    if ws and os.path.isfile(Path(str(ws)) / ".board" / "result.json"):
        return str(Path(str(ws)) / ".board" / "result.json")
    return None


def _pid_alive(pid: int) -> bool:
    """Whether process ``pid`` runs: a zombie (it exited; nobody has reaped it yet, as when the
    process that started it is gone) does not (as ``dispatch.liveness.pid_alive`` says)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return fh.read().rpartition(")")[2].split()[:1] not in (["Z"], ["X"])
    except OSError:
        return True


def _git_dirty(path: str) -> str | None:
    """The tracked files ``git status --porcelain`` lists as changed in a git checkout (None when
    there are none, or it is not git). Untracked files are left out: integration refuses only a
    branch that would write over one of them, and says which; a person's own scripts and notes
    there are theirs to keep (stashing them would take away, say, the agent script a profile runs)."""
    if not os.path.lexists(Path(path) / ".git"):
        return None
    try:
        out = gitsafe.run(path, "status", "--porcelain", "--untracked-files=no", "--ignore-submodules=all",
                          check=False, timeout=20, drivers_off=True)
    except (OSError, gitsafe.GitError):
        return None
    lines = [ln for ln in out.stdout.splitlines() if ln.strip() and not ln[3:].startswith(".board")]
    return "; ".join(lines[:5]) + (f" (+{len(lines) - 5} more)" if len(lines) > 5 else "") if lines else None


def _reads(tx: Tx, boards: list[str], task_id: str | None, now: float, settings: Settings) -> dict[str, Any]:
    params: dict[str, Any] = {}
    inb = in_list("b", boards, params)
    only = ""
    if task_id:
        only = " AND t.id = :tid"
        params["tid"] = task_id
    return {
        "task": tx.one("SELECT id, board, goal_id, assignee, status FROM tasks WHERE id = :tid", {"tid": task_id})
        if task_id else None,
        "boards": tx.all("SELECT slug, default_workdir, settings FROM boards WHERE slug IN " + inb, dict(params)),
        "profiles": {r["name"]: r for r in tx.all("SELECT * FROM profiles")},
        "running_per_profile": {r["assignee"]: int(r["n"]) for r in tx.all(
            "SELECT assignee, COUNT(*) AS n FROM tasks WHERE status = 'running' GROUP BY assignee")},
        "ready": tx.all(
            "SELECT t.id, t.board, t.title, t.assignee, t.updated_at, t.last_outcome, t.cooldown_until, "
            "(SELECT MAX(e.created_at) FROM task_events e WHERE e.task_id = t.id AND e.kind = 'respawn_guarded') "
            "AS guarded_at, (SELECT e.payload FROM task_events e WHERE e.task_id = t.id "
            "AND e.kind = 'respawn_guarded' ORDER BY e.id DESC LIMIT 1) AS guard_payload "
            "FROM tasks t WHERE t.status = 'ready' AND t.board IN " + inb + only, dict(params)),
        "running": tx.all(
            "SELECT t.id, t.board, t.claim_expires, t.claim_lock, t.worker_pid, t.worker_host, t.current_run_id, "
            "t.workspace_path, (SELECT r.pending_report FROM task_runs r WHERE r.id = t.current_run_id) "
            "AS pending_report FROM tasks t WHERE t.status = 'running' AND t.board IN " + inb + only, dict(params)),
        # an attempt of a race that is not running is the race's to run again (unblocking it alone is
        # refused): left out, the race has its own findings
        "blocked": tx.all(
            "SELECT t.id, t.board, t.assignee, t.block_kind, t.block_reason, t.updated_at, t.last_failure_error "
            "FROM tasks t WHERE t.status = 'blocked' AND t.board IN " + inb + only + " AND (t.race_of IS NULL OR "
            "EXISTS (SELECT 1 FROM tasks r WHERE r.id = t.race_of AND r.status IN ('ready', 'running')))",
            dict(params)),
        "default_assignee": {b: default_assignee(tx, b) for b in boards},
    }


def _silent_hosts(db: Database, settings: Settings, now: float, hosts: set[str]) -> dict[str, float]:
    """Of ``hosts`` (those running tasks), each whose dispatcher left a pass mark and has not
    passed for two intervals and more (``observe.health.pass_window``): when it last did."""
    if not hosts:
        return {}
    from . import monitoring

    window = _pass_window(settings)
    try:
        marks = monitoring.dispatcher_passes(db)
    except Exception:  # the marks are a hint: diagnostics go on without them
        return {}
    return {m["host"]: float(m["at"]) for m in marks if m["host"] in hosts and now - float(m["at"]) > window}


def _pass_window(settings: Settings) -> float:
    """How long a live dispatcher goes at most without a pass mark: two intervals, and some."""
    from . import monitoring

    return 2 * max(float(settings.dispatch_interval), monitoring.PASS_MARK_EVERY) + 30.0


def _undispatched(db: Database, settings: Settings, now: float, ready: list[Row]) -> list[Finding]:
    """An info finding per board holding ready tasks that no dispatcher has passed over lately
    (no ``dispatcher``, ``serve`` or ``dispatch`` pass on this database within
    :func:`_pass_window`): nothing starts them until one runs."""
    from . import monitoring

    waiting: dict[str, int] = {}
    for t in ready:
        waiting[t["board"]] = waiting.get(t["board"], 0) + 1
    if not waiting:
        return []
    try:
        marks = monitoring.dispatcher_passes(db)
    except Exception:  # the marks are a hint: diagnostics go on without them
        return []
    window = _pass_window(settings)
    out = []
    for slug, n in sorted(waiting.items()):
        seen = [float(m["at"]) for m in marks if m.get("boards") is None or slug in (m.get("boards") or ())]
        last = max(seen, default=None)
        if last is not None and now - last <= window:
            continue
        when = f"for {int(now - last)}s" if last is not None else "yet"
        out.append(Finding("no_dispatcher", slug, f"{n} task(s) are ready on board {slug!r}, but no dispatcher has "
                           f"run a pass on it {when}: nothing starts them until one runs (`agentboard dispatch` "
                           "runs one pass now)", "agentboard dispatcher", None, severity="info",
                           facts={"ready": n, "last_pass": last}))
    return out


#: what a refused sign-in says (libpq and the server): a wrong password, a role that does not
#: exist, no password given, the server's access rules (``pg_hba.conf``)
_SIGN_IN = re.compile(
    r"password authentication failed|authentication failed|role \"[^\"]*\" does not exist|"
    r"no password supplied|password is required|no pg_hba\.conf entry|permission denied for database", re.I)
_NO_DATABASE = re.compile(r"database \"([^\"]*)\" does not exist|no such database: ([^\s,;]+)", re.I)
#: PgBouncer refusing the session settings agentboard sends at connection (``options``): it is
#: a pooler in front of the server, and agentboard has not been told so
_POOLER = re.compile(r"unsupported startup parameter", re.I)
_NO_SERVER = re.compile(
    r"refused|could not connect|timeout expired|timed out|could not translate host name|no such host|"
    r"name or service not known|failed to resolve host|no route to host|network is unreachable|"
    r"is the server running|server closed the connection", re.I)
#: a database a newer agentboard migrated (``store.migrate``): it answers, this version cannot use it
_NEWER_SCHEMA = re.compile(r"newer than this agentboard knows", re.I)
UPGRADE_FIX = "upgrade agentboard on this host (docs/deploy.md, Upgrades)"
#: a database that answers but cannot be read (``store.migrate.current_revision``: a damaged file,
#: an exclusive lock, a failing disk); what to do follows its last ``; ``
_UNREADABLE = re.compile(r"^(?:cannot open the database: )?cannot read the database ")


def unreachable(why: str) -> Finding:
    """The finding of a database that cannot be used (``why``: the driver's words, or the
    schema check's), with the fix its cause calls for.

    The causes are told apart by what the server said, the most specific first: libpq's message
    always begins ``connection failed: connection to server at … failed``, whatever the cause,
    and ``does not exist`` ends a missing role's message as well as a missing database's."""
    text = " ".join(why.split())
    if _NEWER_SCHEMA.search(text):  # what every other verb says too
        return Finding("database_newer_schema", None, text.removeprefix("cannot open the database: "), UPGRADE_FIX,
                       severity="error")
    said = "the database does not answer"
    if _UNREADABLE.search(text):
        what, _, advice = text.partition("; ")
        return Finding("database_unreadable", None, what.removeprefix("cannot open the database: "),
                       advice or None, severity="error")
    if _POOLER.search(text):
        said = "a connection pooler answers and refuses agentboard's session settings"
        fix = ("for PgBouncer in transaction mode set AGENTBOARD_PG_TRANSACTION_POOLER=true (pg_transaction_pooler "
               "in config.toml) and pg_listen_url to the server itself (docs/deploy.md, PgBouncer in transaction mode)")
    elif _SIGN_IN.search(text):
        said = "the database refuses the connection"
        fix = ("check the user and password in database_url / AGENTBOARD_DATABASE_URL (the role must exist on "
               "the server) and the server's access rules (pg_hba.conf)")
    elif missing := _NO_DATABASE.search(text):
        said = "the database does not exist"
        name = missing.group(1) or missing.group(2)
        fix = (f"create the database (`createdb {shlex.quote(name) if name else 'NAME'}` on the server) and run "
               "`agentboard init`, or point database_url / AGENTBOARD_DATABASE_URL at the right one")
    elif _NO_SERVER.search(text):
        fix = "start the database server, or check the host and port in database_url / AGENTBOARD_DATABASE_URL"
    else:
        fix = "check database_url / AGENTBOARD_DATABASE_URL and the database server"
    return Finding("database_unreachable", None, f"{said}: {text}", fix, severity="error")


def unreachable_found(why: str) -> list[Row]:
    """:func:`diagnose`'s answer when the database cannot even be opened."""
    return [asdict(unreachable(why))]


def _database(db: Database, settings: Settings) -> list[Finding]:
    out: list[Finding] = []
    try:
        if db.dialect == "sqlite":
            result = db.read(lambda tx: [r["integrity_check"] if "integrity_check" in r else next(iter(r.values()))
                                         for r in tx.all("PRAGMA integrity_check")])
            if result != ["ok"]:
                out.append(Finding("database_integrity", None, "the SQLite database fails its integrity check: "
                                   + "; ".join(str(r) for r in result[:5]), None, severity="error"))
        else:
            db.read(lambda tx: tx.scalar("SELECT 1"))
    except Exception as exc:  # a broken connection is the finding
        out.append(unreachable(str(exc)))
        return out
    if db.dialect == "sqlite":
        wal = Path(sqlite_file(db.url) + "-wal")
        try:
            size = wal.stat().st_size
        except OSError:
            size = 0
        limit = int(settings.wal_alert_mb) * 1024 * 1024
        if size > limit:
            out.append(Finding("wal_large", None, f"the write-ahead log {wal} is {size // (1024 * 1024)} MB "
                               f"(over {settings.wal_alert_mb} MB): a reader holds it open, or it was never "
                               "checkpointed", "agentboard gc", facts={"wal_bytes": size}))
    return out


def diagnose(db: Database, boards: list[str], *, task_id: str | None = None, host: str | None = None,
             now: float | None = None, tasks_only: bool = False) -> list[Row]:
    """The findings on ``boards`` (or only those about ``task_id``; ``tasks_only``: those about
    some task, without the target directory and database checks), worst first."""
    settings = db.settings
    now = time.time() if now is None else now
    data = db.read(_reads, boards, task_id, now, settings)
    found: list[Finding] = []
    profiles: dict[str, Row] = data["profiles"]
    board_rows: dict[str, Row] = {b["slug"]: b for b in data["boards"]}
    problems: dict[tuple[str, str], tuple[str, str] | None] = {}

    def problem_of(name: str, slug: str) -> tuple[str, str] | None:
        """Why profile ``name`` cannot start a task of board ``slug``, and the fix."""
        if (name, slug) not in problems:
            why = _profile_problem(profiles[name])
            problems[name, slug] = ((why, command_fix(name, why)) if why is not None
                                    else _relative_problem(profiles[name], board_rows.get(slug)))
        return problems[name, slug]

    cap_wait = float(settings.cap_wait_minutes) * 60
    for t in data["ready"]:
        tid, slug = t["id"], t["board"]
        name = t["assignee"] or data["default_assignee"].get(slug)
        p = profiles.get(name) if name else None
        if not name:
            found.append(Finding("no_assignee", slug, f"{tid} is ready but has no assignee and the board has no "
                                 "default_assignee", _assign_fix(tid, profiles), _assign_action(tid, profiles), tid))
        elif p is None:
            found.append(Finding("no_profile", slug, f"{tid} is ready for profile {name!r}, which does not exist",
                                 _assign_fix(tid, profiles), _assign_action(tid, profiles), tid))
        elif not p["enabled"]:
            found.append(Finding("profile_disabled", slug, f"{tid} is ready for profile {name!r}, which is disabled",
                                 f"agentboard profiles set {_q(name)} --enabled",
                                 {"method": "PATCH", "path": f"/api/profiles/{name}", "body": {"enabled": True}}, tid,
                                 concerns="profile", subject=name))
        elif (broken := problem_of(name, slug)) is not None:
            found.append(Finding("command_not_found", slug, f"{tid} is ready for profile {name!r}, which cannot "
                                 f"start: {broken[0]} (command {p['command']!r})", broken[1], None,
                                 tid, severity="error", concerns="profile", subject=name))
        elif (p.get("max_concurrency") and data["running_per_profile"].get(name, 0) >= int(p["max_concurrency"])
              and now - float(t["updated_at"] or now) > cap_wait):
            cap = int(p["max_concurrency"])
            found.append(Finding("at_cap", slug, f"{tid} has waited {int((now - float(t['updated_at'])) // 60)} min: "
                                 f"profile {name!r} is at its concurrency cap of {cap}",
                                 f"agentboard profiles set {_q(name)} --max-concurrency {cap * 2}",
                                 {"method": "PATCH", "path": f"/api/profiles/{name}", "body": {"max_concurrency": cap * 2}},
                                 tid, severity="info"))
        if (t["guarded_at"] is not None and float(t["guarded_at"]) >= float(t["updated_at"] or 0)
                and t["last_outcome"] != "unguarded"):
            reason = _payload(t["guard_payload"]).get("reason") or "held by the respawn guard"
            if reason != "rate-limit cooldown" or (t["cooldown_until"] or 0) > now:
                found.append(Finding("respawn_guarded", slug, f"{tid} is held by the respawn guard: {reason}",
                                     f"agentboard unguard {tid}",
                                     {"method": "POST", "path": f"/api/tasks/{tid}/unguard", "body": {}}, tid))
    found.extend(_undispatched(db, settings, now, data["ready"]))
    silent = _silent_hosts(db, settings, now, {str(r["worker_host"]) for r in data["running"] if r["worker_host"]})
    for r in data["running"]:
        tid, slug = r["id"], r["board"]
        exp = r["claim_expires"]
        gone = exp is not None and float(exp) < now
        why = f"its claim expired {int(now - float(exp))}s ago" if gone else ""
        if not gone and r["worker_pid"] and host is not None and r["worker_host"] == host \
                and not _pid_alive(int(r["worker_pid"])):
            gone, why = True, f"its worker process {r['worker_pid']} is gone"
        if not gone and r["worker_host"] in silent and r["worker_host"] != host:
            lapse = f"; its claim lapses in {int(float(exp) - now)}s, then another host restarts it" if exp else ""
            gone, why = True, (f"its host {r['worker_host']!r} has not run a dispatcher pass for "
                               f"{int(now - silent[r['worker_host']])}s (stopped or dead?){lapse}")
        kept = _kept_report(r) if gone and (host is None or r["worker_host"] in (host, None)) else None
        if kept:  # its worker finished: a pass records its exit and applies the report (reclaim throws it away)
            found.append(Finding("orphan_run", slug, f"{tid} is running (run {r['current_run_id']}) but {why}; "
                                 f"its report is kept ({kept}): a dispatcher pass applies it (`agentboard reclaim` "
                                 "would discard it and run the agent again)", "agentboard dispatch",
                                 {"method": "POST", "path": "/api/dispatch", "body": None}, tid,
                                 facts={"kept_report": kept}))
        elif gone:
            found.append(Finding("orphan_run", slug, f"{tid} is running (run {r['current_run_id']}) but {why}",
                                 f"agentboard reclaim {tid}",
                                 {"method": "POST", "path": f"/api/tasks/{tid}/reclaim", "body": {}}, tid))
    long_after = float(settings.blocked_alert_hours) * 3600
    for b in data["blocked"]:
        tid, slug = b["id"], b["board"]
        name = b["assignee"] or data["default_assignee"].get(slug)
        broken = problem_of(name, slug) if name and name in profiles else None
        if broken and b["block_kind"] in ("gave_up", "manual", "needs_input", None):
            # unblocking would only fail again: the profile is what to fix
            found.append(Finding("command_not_found", slug, f"{tid} is blocked and its profile {name!r} cannot "
                                 f"start: {broken[0]} (command {profiles[str(name)]['command']!r}); fix the "
                                 "profile, then unblock the task", broken[1], None, tid, severity="error",
                                 concerns="profile", subject=name))
        if b["block_kind"] == "gave_up":
            found.append(Finding("gave_up", slug, f"{tid} tripped its circuit breaker: {b['block_reason']}"
                                 + (f" (its profile {name!r} cannot start: fix that first)" if broken else ""),
                                 f"agentboard unblock {tid}",
                                 {"method": "PATCH", "path": f"/api/tasks/{tid}", "body": {"status": "ready"}}, tid))
        elif b["block_kind"] != "budget" and now - float(b["updated_at"] or now) > long_after:
            hours = int((now - float(b["updated_at"])) // 3600)
            found.append(Finding("blocked_long", slug, f"{tid} has been blocked for {hours} h "
                                 f"({b['block_kind'] or 'manual'}): {b['block_reason']}",
                                 f"agentboard unblock {tid}",
                                 {"method": "PATCH", "path": f"/api/tasks/{tid}", "body": {"status": "ready"}}, tid,
                                 severity="info"))
    from . import diagnostics_waiting as waiting  # escalated, rate-limited again, cannot sign in
    escalated = [Finding(**f) for f in waiting.escalated(db, data["blocked"]) + waiting.rate_limited(db, data["blocked"])]
    held = {f.task_id for f in escalated}  # (their own finding, not "blocked for long")
    found = [f for f in found if not (f.kind == "blocked_long" and f.task_id in held)] + escalated
    task = data["task"]
    if task is not None and task["status"] == "todo" and not any(f.concerns == "profile" for f in found):
        name = task["assignee"] or data["default_assignee"].get(task["board"])
        if name and name in profiles and (broken := problem_of(name, task["board"])) is not None:
            found.append(Finding("command_not_found", task["board"], f"{task['id']} will be run by profile {name!r}, "
                                 f"which cannot start: {broken[0]} (command {profiles[name]['command']!r})",
                                 broken[1], None, task["id"], severity="error", concerns="profile",
                                 subject=name))
    if not tasks_only:
        mine = (task["assignee"] or data["default_assignee"].get(task["board"])) if task is not None else None
        found.extend(Finding(**f) for f in (waiting.sign_in(db, boards, profiles, mine) if task is None or mine else []))
    if task is not None:
        found.extend(_budget_findings(db, [task["board"]], data["blocked"], budgets.for_task(db, task["id"])))
        if task["goal_id"]:
            found.extend(_goal_findings(db, [task["board"]], now, long_after, goal=task["goal_id"]))
    else:
        found.extend(_budget_findings(db, boards, data["blocked"]))
        if not tasks_only:
            found.extend(_goal_findings(db, boards, now, long_after))
    if not tasks_only and task_id is None:
        found.extend(_notify_findings(db, boards))
        found.extend(_supervisor_findings(db, boards))
    if tasks_only:
        found = [f for f in found if f.task_id]
    else:
        for b in data["boards"]:
            if task_id is None or (task is not None and b["slug"] == task["board"]):
                found.extend(_target(b))
        if task_id is None:
            found.extend(_database(db, settings))
    order = {"error": 0, "warning": 1, "info": 2}
    found.sort(key=lambda f: (order.get(f.severity, 3), f.board or "", f.kind, f.task_id or ""))
    return [asdict(f) for f in found]


def _payload(text: Any) -> dict[str, Any]:
    try:
        value = json.loads(text or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _assign_fix(tid: str, profiles: dict[str, Row]) -> str:
    """Give the task an agent: the one there is, or the person picks among several."""
    enabled = sorted(n for n, p in profiles.items() if p["enabled"])
    if len(enabled) == 1:
        return f"agentboard assign {tid} {_q(enabled[0])}"
    if enabled:
        shown = ", ".join(enabled[:8]) + (", …" if len(enabled) > 8 else "")
        return f"agentboard assign {tid} PROFILE (one of: {shown})"
    return "agentboard profiles add NAME --command CMD"


def _assign_action(tid: str, profiles: dict[str, Row]) -> dict[str, Any] | None:
    """The one-click fix only when there is one agent to give the task to: with several, which
    one is the person's choice (the assignee field), never the first name in the list."""
    enabled = [n for n, p in profiles.items() if p["enabled"]]
    if len(enabled) != 1:
        return None
    return {"method": "PATCH", "path": f"/api/tasks/{tid}", "body": {"assignee": enabled[0]}}


def _budget_findings(db: Database, boards: list[str], blocked: list[Row],
                     only: list[Row] | None = None) -> list[Finding]:
    """Spent budgets (of ``boards``, or ``only`` these: a task's own, its goal's, board's and
    profile's) and the tasks of ``blocked`` a budget holds."""
    out: list[Finding] = []
    held: dict[str, list[str]] = {}
    for b in blocked:
        if b["block_kind"] == "budget":
            held.setdefault(b["board"], []).append(b["id"])
    seen: set[tuple[str, str]] = set()
    for slug in boards:
        for bud in (only if only is not None else budgets.show(db, board=slug)):
            key = (bud["scope"], bud["ref"])
            if key in seen or not bud["exhausted"]:
                continue
            seen.add(key)
            m = bud["metric"]
            line = bud["lines"][m]["text"]
            out.append(Finding("budget_spent", bud.get("board") or slug,
                               f"the {bud['scope']} {bud['ref']} budget is spent ({m} {line}); its tasks are not started",
                               f"agentboard budget clear --{bud['scope']} {_q(bud['ref'])}",
                               {"method": "DELETE", "path": f"/api/budgets/{bud['scope']}/{bud['ref']}", "body": None},
                               bud["ref"] if bud["scope"] == "task" else None, facts={"budget": bud},
                               concerns=bud["scope"], subject=bud["ref"]))
    for slug, ids in held.items():
        if not any(f.board == slug for f in out):
            out.append(Finding("budget_blocked", slug, f"{len(ids)} task(s) blocked by a budget that cannot afford "
                               f"another run: {', '.join(ids[:10])}", "agentboard budget show", None,
                               ids[0] if len(ids) == 1 else None, severity="info", facts={"tasks": ids}))
    return out


def _goal_findings(db: Database, boards: list[str], now: float, long_after: float,
                   goal: str | None = None) -> list[Finding]:
    """Goals whose tasks have all been done for longer than ``long_after`` seconds and that still
    wait for a verdict (``verifying``): nobody has judged them, or their checks never settled them."""
    from .goals import verdict_command

    def _r(tx: Tx) -> list[Row]:
        params: dict[str, Any] = {}
        where = "g.id = :g" if goal else "g.board IN " + in_list("b", boards, params)
        params["g"] = goal
        return tx.all("SELECT g.id, g.board, g.title, g.verify, MAX(t.completed_at) AS done_at FROM goals g "
                      "JOIN tasks t ON t.goal_id = g.id WHERE g.status = 'verifying' AND " + where
                      + " GROUP BY g.id, g.board, g.title, g.verify", params)
    out: list[Finding] = []
    for g in db.read(_r) if boards or goal else []:
        waited = now - float(g["done_at"] or now)
        if waited <= long_after:
            continue
        checks = g["verify"] not in (None, "", "[]")
        why = ("its verify commands have not settled it (is a dispatcher running?)" if checks
               else "nobody has given it a verdict")
        out.append(Finding("goal_verifying", g["board"], f"goal {g['id']} ({g['title']}) has waited "
                           f"{int(waited // 3600)} h since its last task was done: {why}; give it a verdict "
                           "(--fail \"what is missing\" opens it again)", verdict_command(g["id"]),
                           None, severity="info", concerns="goal", subject=g["id"],
                           facts={"hours": round(waited / 3600, 1)}))
    return out


def _notify_findings(db: Database, boards: list[str]) -> list[Finding]:
    """Notification targets parked after failing again and again (their events wait)."""
    from . import notifications

    out: list[Finding] = []
    for slug in boards:
        for s in notifications.list_subscriptions(db, slug):
            if s.get("parked"):
                out.append(Finding("notify_parked", slug, f"notifications to {s['target']} are parked after "
                                   f"{s['failures']} failures (last: {s['last_error']}); its events wait",
                                   f"agentboard notify resume {s['id']}",
                                   {"method": "POST", "path": f"/api/notify/subscriptions/{s['id']}/resume",
                                    "body": None}, facts={"subscription": s["id"]}))
    return out


def _supervisor_findings(db: Database, boards: list[str]) -> list[Finding]:
    """A board's supervisor that cannot run (its profile missing or disabled) while wakes wait."""
    from . import supervision

    out: list[Finding] = []
    for slug in boards:
        st = supervision.status(db, slug)
        waiting = int(st["wakes"].get("pending", 0))
        if not st["problem"] or not waiting:
            continue
        name = str(st["profile"])
        if "disabled" in st["problem"]:
            fix = f"agentboard profiles set {_q(name)} --enabled"
            action: dict[str, Any] | None = {"method": "PATCH", "path": f"/api/profiles/{name}",
                                              "body": {"enabled": True}}
        else:
            fix = f"agentboard supervisor disable --board {_q(slug)}"
            action = {"method": "POST", "path": f"/api/supervisor/disable?board={slug}", "body": None}
        out.append(Finding("supervisor_unavailable", slug, f"{waiting} supervisor wake(s) wait on board {slug!r}: "
                           f"{st['problem']}", fix, action, severity="error", facts={"pending": waiting}))
    return out


def _target(b: Row) -> list[Finding]:
    path = b.get("default_workdir")
    if not path:
        return []
    slug = b["slug"]
    if not Path(path).is_dir():
        return [Finding("target_missing", slug, f"board {slug!r} works in {path}, which does not exist",
                        f"mkdir -p {_q(path)}", concerns="board", subject=slug)]
    dirty = _git_dirty(path)
    if dirty:
        return [Finding("target_dirty", slug, f"board {slug!r} works in {path}, whose tracked files have "
                        f"uncommitted changes (integration refuses a task's branch that changes one of them): {dirty}",
                        f"git -C {_q(path)} stash", concerns="board", subject=slug)]
    return []


__all__ = ["Finding", "diagnose"]
