"""`agentboard service units`: systemd units for `serve` and `dispatcher`.

The units run the installed executable by its absolute path, restart on failure, read secrets
(``AGENTBOARD_DATABASE_URL``, API keys) from an environment file that is never written into the
unit, and are sandboxed as tightly as the workers' isolation allows (docs/deploy.md,
"One host under systemd"):

- ``none``: every hardening below;
- ``user`` (workers run as the worker user): the service runs as root, the worker user's home
  and the isolated workspaces are writable;
- ``sandbox`` (bubblewrap): no ``RestrictNamespaces`` (bubblewrap makes namespaces), no
  ``ProtectKernelTunables``/``ProtectControlGroups``/``ProtectProc`` (a masked ``/proc`` stops
  bubblewrap from mounting its own), and no ``NoNewPrivileges`` when ``bwrap`` is set-uid.
"""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path

import click

from . import common
from .common import handle_errors, json_option

ISOLATIONS = ("none", "user", "sandbox")
SYSTEM_ENV_FILE = Path("/etc/agentboard/env")
SYSTEM_UNIT_DIR = Path("/etc/systemd/system")
#: folders whose contents ``ProtectHome=yes`` hides
HOME_ROOTS = (Path("/home"), Path("/root"), Path("/run/user"))
#: folders ``PrivateTmp=yes`` replaces
TMP_ROOTS = (Path("/tmp"), Path("/var/tmp"))


@dataclass
class UnitPlan:
    """What the two units say; :func:`render` turns it into text."""

    executable: list[str]
    home: Path
    env_file: Path
    user_units: bool
    isolation: str
    run_as: str | None = None
    writable: list[str] = field(default_factory=list)
    no_new_privileges: bool = True
    notes: list[str] = field(default_factory=list)


def executable() -> list[str]:
    """The absolute command line of the installed ``agentboard`` (a pipx or venv symlink is kept
    as it is, so an upgrade in place needs no new unit)."""
    argv0 = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if argv0 is not None and argv0.name == "agentboard" and argv0.exists():
        return [str(argv0.absolute())]
    beside = Path(sys.executable).absolute().parent / "agentboard"  # this interpreter's install
    if beside.is_file() and os.access(beside, os.X_OK):
        return [str(beside)]
    found = shutil.which("agentboard")
    if found:
        return [str(Path(found).absolute())]
    return [str(Path(sys.executable).absolute()), "-m", "agentboard"]


def _under(path: Path, roots: tuple[Path, ...]) -> bool:
    return any(path == r or r in path.parents for r in roots)


def _setuid(path: str | None) -> bool:
    if not path:
        return False
    try:
        return bool(os.stat(path).st_mode & stat.S_ISUID)
    except OSError:
        return False


def detect_isolation(settings: object) -> str:
    """``user`` when a worker user is configured, else ``sandbox`` when a profile asks for
    bubblewrap, else ``none``."""
    if getattr(settings, "worker_user", None):
        return "user"
    modes = _profile_isolations(settings)
    return "sandbox" if "sandbox" in modes else ("user" if "user" in modes else "none")


def _profile_isolations(settings: object) -> set[str]:
    """The isolations of the profiles in the home's database, read without creating or migrating
    anything: ``service units`` runs as root (``sudo``) and must not leave a home or a database
    behind that the ``User=`` of the units cannot open (a home without a database: none)."""
    from agentboard.config import Settings

    if not isinstance(settings, Settings) or (settings.is_sqlite and not settings.db_path.is_file()):
        return set()
    try:
        from agentboard.kernel import profiles
        from agentboard.store.migrate import open_database

        db = open_database(settings.url, settings=settings, migrate=False)
        try:
            return {str(p.get("isolation") or "none") for p in profiles.list_profiles(db)}
        finally:
            db.close()
    except Exception:  # no schema yet, the server out of reach: nothing to learn from the profiles
        return set()


def home_notes(home: Path, run_as: str | None) -> list[str]:
    """What the units need of the home that is not there: it exists, and belongs to the user the
    services run as (``User=``); nothing is created or changed here."""
    user = run_as or "root"
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        return [f"the user {user!r} does not exist yet: create it (useradd --system {user}), then make the home"]
    make = f"sudo install -d -m 700 -o {user} -g {entry.pw_gid} {home}"
    try:
        st = home.stat()
    except FileNotFoundError:
        return [f"the home {home} does not exist yet: make it for {user} ({make}); the services create "
                "what goes in it as they start"]
    except OSError:
        return []
    if st.st_uid != entry.pw_uid:
        try:
            owner = pwd.getpwuid(st.st_uid).pw_name
        except KeyError:
            owner = str(st.st_uid)
        return [f"the home {home} belongs to {owner}, but the services run as {user}: give it to them "
                f"(sudo chown -R {user}: {home})"]
    return []


def plan(*, home: Path, user_units: bool, isolation: str, run_as: str | None, writable: list[str],
         env_file: Path | None, worker_user: str | None) -> UnitPlan:
    env = env_file or (Path.home() / ".config" / "agentboard" / "env" if user_units else SYSTEM_ENV_FILE)
    p = UnitPlan(executable(), home, env, user_units, isolation, run_as, list(writable))
    if isolation == "user":
        if user_units:
            p.notes.append("isolation 'user' needs the dispatcher to run as root: use system units")
        if run_as not in (None, "root"):
            p.notes.append("isolation 'user' needs the dispatcher to run as root; --run-as is ignored")
        p.run_as = None
        from agentboard.dispatch.workspaces import ISOLATED_WORKSPACES

        p.writable.append("-" + str(ISOLATED_WORKSPACES))
        if worker_user:
            try:
                p.writable.append("-" + pwd.getpwnam(worker_user).pw_dir)
            except KeyError:
                p.notes.append(f"the worker user {worker_user!r} does not exist yet "
                               "(agentboard init --worker-user NAME creates it)")
    if isolation == "sandbox" and _setuid(shutil.which("bwrap")):
        p.no_new_privileges = False
        p.notes.append("bwrap is set-uid here: NoNewPrivileges is left out so it can run")
    return p


def _hardening(p: UnitPlan) -> list[str]:
    lines = []
    if p.no_new_privileges:
        lines.append("NoNewPrivileges=yes")
    lines += ["ProtectSystem=strict", f"ReadWritePaths={p.home}"]
    lines += [f"ReadWritePaths={w}" for w in p.writable]
    # ProtectHome=yes would hide a home under /home or /root: read-only there, the home writable
    lines.append("ProtectHome=" + ("read-only" if _under(p.home, HOME_ROOTS) or p.user_units else "yes"))
    if not _under(p.home, TMP_ROOTS):  # a private /tmp would hide a home kept there
        lines.append("PrivateTmp=yes")
    lines += ["PrivateDevices=yes", "ProtectKernelModules=yes", "ProtectKernelLogs=yes",
              "ProtectClock=yes", "ProtectHostname=yes", "RestrictRealtime=yes", "RestrictSUIDSGID=yes",
              "LockPersonality=yes", "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK",
              "UMask=0077"]
    if p.isolation != "sandbox":
        lines += ["ProtectKernelTunables=yes", "ProtectControlGroups=yes", "RestrictNamespaces=yes"]
    return lines


def _quote(arg: str) -> str:
    if arg and all(c.isalnum() or c in "/._-+=:@," for c in arg):
        return arg
    return '"' + arg.replace("\\", "\\\\").replace('"', '\\"') + '"'


def render(p: UnitPlan, what: str) -> str:
    """The text of ``agentboard-<what>.service`` (``what``: serve or dispatcher)."""
    if what == "serve":
        description = "agentboard API and dashboard"
        # the dispatcher has its own unit: serve must not start a second one on the same home
        args = ["serve", "--no-dispatch"]
    else:
        description = "agentboard dispatcher"
        args = ["dispatcher"]
    unit = ["[Unit]", f"Description={description}"]
    if not p.user_units:
        unit += ["Wants=network-online.target", "After=network-online.target postgresql.service"]
    service = ["", "[Service]", "Type=simple",
               "ExecStart=" + " ".join(_quote(a) for a in [*p.executable, *args]),
               f"Environment=AGENTBOARD_HOME={_quote(str(p.home))}",
               "Environment=PYTHONUNBUFFERED=1",
               # secrets (AGENTBOARD_DATABASE_URL, API keys) live here, never in the unit
               f"EnvironmentFile=-{p.env_file}",
               f"WorkingDirectory={p.home}"]
    if p.run_as:
        service.append(f"User={p.run_as}")
    service += ["Restart=on-failure", "RestartSec=5s", "TimeoutStopSec=60s"]
    if what == "dispatcher":
        # workers are processes of their own: a restart (an upgrade) leaves them running and the
        # next dispatcher picks their exits up
        service.append("KillMode=process")
        # its cgroup is its own to divide: each worker runs in a cgroup of its own beneath it, so
        # what a worker leaves running outside its process group ends with its run
        service.append("Delegate=yes")
    service += _hardening(p)
    install = ["", "[Install]", "WantedBy=" + ("default.target" if p.user_units else "multi-user.target")]
    return "\n".join(unit + service + install) + "\n"


@common.group("service")
def service() -> None:
    """Run agentboard as a service (systemd)."""


@service.command("units")
@click.option("--dir", "directory", default=None, metavar="DIR",
              help="write the units here (default /etc/systemd/system, or ~/.config/systemd/user with --user)")
@click.option("--user", "user_units", is_flag=True, help="user units (systemctl --user), WantedBy=default.target")
@click.option("--isolation", type=click.Choice(["auto", *ISOLATIONS]), default="auto", show_default=True,
              help="the workers' isolation the sandboxing must leave room for (auto: from worker_user and "
                   "the profiles)")
@click.option("--run-as", default=None, metavar="USER",
              help="User= of system units (default: the user running this command unless root)")
@click.option("--writable", multiple=True, metavar="PATH",
              help="another folder the services and their workers may write (project folders, the agent "
                   "CLIs' logins such as ~/.claude); repeatable")
@click.option("--env-file", default=None, metavar="FILE",
              help="the environment file with secrets (default /etc/agentboard/env, or "
                   "~/.config/agentboard/env with --user)")
@json_option
@handle_errors
def units(directory: str | None, user_units: bool, isolation: str, run_as: str | None,
          writable: tuple[str, ...], env_file: str | None, as_json: bool) -> None:
    """Write agentboard-serve.service and agentboard-dispatcher.service."""
    from agentboard.domain.errors import InvalidInput

    s = common.settings()
    mode = detect_isolation(s) if isolation == "auto" else isolation
    if run_as is None and not user_units and os.geteuid() != 0:
        run_as = pwd.getpwuid(os.geteuid()).pw_name
    paths = []
    for w in writable:
        path = Path(w).expanduser()
        if not path.is_absolute():
            raise InvalidInput(f"--writable {w}: give an absolute path")
        paths.append(str(path))
    p = plan(home=s.home, user_units=user_units, isolation=mode, run_as=None if user_units else run_as,
             writable=paths, env_file=Path(env_file).expanduser().absolute() if env_file else None,
             worker_user=s.worker_user)
    if not user_units:
        p.notes += home_notes(s.home, p.run_as)
    default_dir = Path.home() / ".config" / "systemd" / "user" if user_units else SYSTEM_UNIT_DIR
    target = Path(directory).expanduser() if directory else default_dir
    try:
        target.mkdir(parents=True, exist_ok=True)
        written = []
        for what in ("serve", "dispatcher"):
            path = target / f"agentboard-{what}.service"
            path.write_text(render(p, what))
            written.append(str(path))
    except OSError as exc:
        raise InvalidInput(f"cannot write the units in {target}: {exc.strerror}; give --dir DIR "
                           "(or run as root for /etc/systemd/system)") from None
    ctl = "systemctl --user" if user_units else "systemctl"
    steps = []
    if s.database_url:
        steps.append(f"put AGENTBOARD_DATABASE_URL=<the database URL> in {p.env_file} (mode 0600)")
    steps += [f"{ctl} daemon-reload", f"{ctl} enable --now agentboard-dispatcher agentboard-serve"]
    out = {"units": written, "isolation": mode, "env_file": str(p.env_file), "executable": p.executable,
           "notes": p.notes, "next": steps}
    if as_json:
        common.emit_json(out)
        return
    for path_text in written:
        click.echo(f"wrote {path_text}")
    for note in p.notes:
        click.echo(f"note: {note}", err=True)
    for step in steps:
        click.echo(f"next: {step}")
