"""Isolation of worker processes: a profile's ``isolation`` says how its workers are kept from
the host.

- ``none`` (default): the worker runs as the dispatcher's OS user and can read what that user
  can, the agentboard home included.
- ``user``: the worker runs as the worker user (``worker_user`` in ``config.toml``, created by
  ``agentboard init --worker-user NAME`` as root). The dispatcher must run as root; the home is
  0700 and out of that user's reach. Scratch workspaces of such workers live outside the home
  (:func:`agentboard.dispatch.workspaces.isolated_root`) and belong to the worker user.
- ``sandbox``: the worker runs under bubblewrap (``bwrap``): the whole filesystem read-only, its
  workspace and a private ``/tmp`` writable, the agentboard home hidden under an empty tmpfs, its
  own PID namespace, no capabilities, the network shared (it reaches the API on loopback). When
  the dispatcher runs as root and a worker user is configured, bubblewrap itself runs as that
  user too (as for ``user``; this needs unprivileged user namespaces). What the worker needs
  that the private ``/tmp`` would hide is bound back read-only (:func:`needed_paths`): the
  ``agentboard`` command and the installation it runs, the profile's program, its interpreter
  and a script given to it, and the project's virtualenv. A program inside the home is refused.

Verification (``protocol.verify``) runs a task's checks under the same confinement as the
profile that did the work, with the worker's environment.

A mode that cannot be honoured (not root, no worker user, no ``bwrap``) is an
:class:`IsolationError`: the worker is not started and the reason is its spawn error; a worker
is never started with less isolation than its profile asks for.
"""

from __future__ import annotations

import functools
import os
import pwd
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ..config import Settings
from ..domain.errors import InvalidInput

MODES = ("none", "user", "sandbox")
# runs its arguments as a child and exits with their status (never replaced by them: no exec)
_WAIT = '"$@"; c=$?; exit $c'


class IsolationError(Exception):
    """The isolation a profile asks for is not available here; the message says why."""


@dataclass(frozen=True)
class Confinement:
    """How one worker is isolated: the OS user it runs as and the sandbox around it."""

    mode: str = "none"
    #: the worker user's name, uid and gid (``user``, or ``sandbox`` run by root with a worker user)
    user: str | None = None
    uid: int | None = None
    gid: int | None = None
    #: the bubblewrap executable (``sandbox``)
    bwrap: str | None = None
    #: the agentboard home, hidden from a sandboxed worker that runs as the dispatcher's user
    home: Path | None = None
    #: ``setpriv``, to change user inside the exit-status wrapper of a one-shot dispatch
    setpriv: str | None = None
    #: paths bound read-only into the sandbox over its private ``/tmp`` (:func:`needed_paths`)
    visible: tuple[str, ...] = ()

    @property
    def confines(self) -> bool:
        """False for ``none``: the process runs on the host as the dispatcher's user."""
        return self.mode != "none"

    def describe(self) -> str:
        """One line saying what confines a process run with this confinement."""
        if self.mode == "none":
            return ("none: not confined (runs on the host as the dispatcher's user, with the worker's "
                    "environment)")
        who = f"as the worker user {self.user}" if self.user else "as the dispatcher's user"
        if self.mode == "user":
            return f"user: {who}, the home out of reach"
        return f"sandbox: bubblewrap {who}, read-only host, the home hidden"

    def showing(self, paths: Iterable[str | Path]) -> Confinement:
        """This confinement with ``paths`` also visible (read-only) inside the sandbox."""
        if self.bwrap is None:
            return self
        out = list(self.visible)
        for p in paths:
            if str(p) not in out:
                out.append(str(p))
        return replace(self, visible=tuple(out))

    @property
    def separate_user(self) -> bool:
        """True when the worker runs as another OS user than the dispatcher."""
        return self.uid is not None

    def command(self, argv: list[str], workspace: Path, *, switch_in_argv: bool = False) -> list[str]:
        """``argv`` wrapped in the sandbox; with ``switch_in_argv`` the change of user is part of
        the command line (``setpriv``) instead of :meth:`popen_ids` (a wrapper that must stay the
        dispatcher's user runs it)."""
        out: list[str] = []
        if switch_in_argv and self.uid is not None:
            if self.setpriv is None:
                raise IsolationError("isolation 'user' in a one-shot dispatch needs setpriv (util-linux), "
                                     "which was not found on PATH")
            out += [self.setpriv, f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups", "--"]
        if self.bwrap is not None:
            ws = str(workspace)
            # bwrap's --die-with-parent follows the *thread* that started it; a waiting sh as its
            # parent keeps a sandbox alive after that thread ends (pool and request threads do)
            out += ["/bin/sh", "-c", _WAIT, "agentboard-sandbox",
                    self.bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
            for p in self.visible:  # before the home is hidden: nothing of the home shows through
                out += ["--ro-bind-try", p, p]
            bind = ["--bind", ws, ws]
            hide = ["--tmpfs", str(self.home)] if self.home is not None else []
            # the other tasks' worktrees beside this one: their files (the run tokens in their
            # .mcp.json among them) are theirs; the worker's own folder is bound back below
            if workspace.parent.name == ".worktrees":
                out += ["--tmpfs", str(workspace.parent)]
            # every worker user's scratch workspace of every home (theirs too: one OS user reads them all)
            from .workspaces import ISOLATED_WORKSPACES

            if ISOLATED_WORKSPACES.is_dir():
                out += ["--tmpfs", str(ISOLATED_WORKSPACES)]
            # the later mount wins: a workspace inside the home is bound back over the hidden home;
            # a home inside the workspace stays hidden
            if self.home is not None and self.home.is_relative_to(workspace):
                out += bind + hide
            else:
                out += hide + bind
            out += ["--chdir", ws, "--unshare-pid", "--die-with-parent", "--cap-drop", "ALL", "--"]
        return out + argv

    def popen_ids(self, *, switch_in_argv: bool = False) -> tuple[int | None, int | None, list[int] | None]:
        """``user``, ``group`` and ``extra_groups`` for ``subprocess.Popen``: the worker user, or
        nothing to change."""
        if self.uid is None or switch_in_argv:
            return None, None, None
        return self.uid, self.gid, []

    def environment(self, env: dict[str, str], workspace: Path) -> dict[str, str]:
        """The worker's environment: a worker running as another user gets its workspace as
        ``HOME`` (unless the profile set one) and its own ``USER``/``LOGNAME``."""
        if self.uid is None:
            return env
        out = dict(env)
        if out.get("HOME") == os.environ.get("HOME"):
            out["HOME"] = str(workspace)
        out["USER"] = out["LOGNAME"] = str(self.user)
        return out


NONE = Confinement()


# -- what a sandboxed process must still see -------------------------------------------------------

#: folders a sandbox replaces with its own empty ones
_PRIVATE = ("/tmp",)


def _private_root(path: str) -> str | None:
    for root in _PRIVATE:
        if path == root or path.startswith(root.rstrip("/") + "/"):
            return root
    return None


def _install_root(path: str) -> str:
    """What to show for a file the sandbox would hide: its installation (the folder above a
    ``bin/`` — a virtualenv, an npm or other prefix), else its folder; never a private root
    itself (then only the file)."""
    parent = os.path.dirname(path)
    if os.path.basename(parent) == "bin":
        prefix = os.path.dirname(parent)
        if _private_root(prefix) not in (None, prefix):
            return prefix
    if _private_root(parent) in (None, parent):
        return path
    return parent


def _interpreter(program: str, env: Mapping[str, str]) -> str | None:
    """The interpreter named on a script's ``#!`` line (``env NAME`` looked up on PATH)."""
    try:
        with open(program, "rb") as fh:
            head = fh.read(256)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    words = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").split()
    if not words:
        return None
    if os.path.basename(words[0]) == "env":
        names = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
        return shutil.which(names[0], path=env.get("PATH")) if names else None
    return words[0]


@functools.lru_cache(maxsize=1)
def agentboard_paths() -> tuple[str, ...]:
    """Where this agentboard lives: its interpreter's prefix, the folder of its package (an
    editable install's source included) and the folders its imports come from (``sys.path``:
    site-packages reached through a ``.pth`` file, say). The same for the life of the process."""
    import agentboard

    out = [sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable)),
           os.path.dirname(os.path.dirname(os.path.abspath(agentboard.__file__))),
           *[p for p in sys.path if p and os.path.isabs(p) and os.path.isdir(p)]]
    return tuple(dict.fromkeys(os.path.realpath(p) for p in out if p))


def needed_paths(argv: Sequence[str], env: Mapping[str, str], *, extra: Iterable[str | Path] = ()) -> list[str]:
    """The paths a sandboxed worker needs that its private ``/tmp`` would hide: the program of
    ``argv`` (as named and its real file), its ``#!`` interpreter, a script given to it, the
    folders on its ``PATH`` (where ``agentboard`` is) and its ``VIRTUAL_ENV``, agentboard's own
    installation, and ``extra``. Each as its installation folder (:func:`_install_root`)."""
    wanted: list[str] = []
    program = argv[0] if argv else ""
    if program and os.sep not in program:
        program = shutil.which(program, path=env.get("PATH")) or ""
    files = [program] if program else []
    if program:
        interp = _interpreter(program, env)
        if interp:
            files.append(interp)
    files += [a for a in argv[1:3] if os.path.isabs(a) and os.path.isfile(a)]
    for f in files:
        wanted += [os.path.abspath(f), os.path.realpath(f)]
    wanted += [p for p in env.get("PATH", "").split(os.pathsep) if os.path.isabs(p)]
    if env.get("VIRTUAL_ENV"):
        wanted.append(env["VIRTUAL_ENV"])
    wanted += agentboard_paths()
    wanted += [str(p) for p in extra]
    out: list[str] = []
    for p in wanted:
        p = os.path.normpath(p)
        if _private_root(p) is None or not os.path.exists(p):
            continue
        if os.path.isdir(p):
            if _private_root(p) == p:
                continue
            up = os.path.dirname(p)
            root = up if os.path.basename(p) == "bin" and _private_root(up) not in (None, up) else p
        else:
            root = _install_root(p)
        if root not in out and not any(root.startswith(o.rstrip("/") + "/") for o in out):
            out = [o for o in out if not o.startswith(root.rstrip("/") + "/")] + [root]
    return out


def check_program(argv: Sequence[str], env: Mapping[str, str], conf: Confinement) -> None:
    """:class:`IsolationError` when the sandbox of ``conf`` would hide the program ``argv``
    runs (or the script given to it): it lies inside the agentboard home."""
    if conf.bwrap is None or conf.home is None or not argv:
        return
    program = argv[0] if os.sep in argv[0] else (shutil.which(argv[0], path=env.get("PATH")) or argv[0])
    home = os.path.realpath(conf.home)
    for f in [program, *[a for a in argv[1:3] if os.path.isabs(a) and os.path.isfile(a)]]:
        for p in {os.path.abspath(f), os.path.realpath(f)}:
            if p == home or p.startswith(home.rstrip("/") + "/"):
                raise IsolationError(f"the sandbox cannot see {f}: it is inside the agentboard home {conf.home}, "
                                     "which a sandboxed worker never sees; install the program elsewhere")


def resolve(mode: str | None, settings: Settings) -> Confinement:
    """The confinement of a profile's ``isolation`` on this host, or :class:`IsolationError`."""
    mode = mode or "none"
    if mode == "none":
        return NONE
    if mode not in MODES:
        raise IsolationError(f"unknown isolation {mode!r}: use one of {', '.join(MODES)}")
    root = os.geteuid() == 0
    user = uid = gid = None
    if mode == "user" or (mode == "sandbox" and root and settings.worker_user):
        if not root:
            raise IsolationError("isolation 'user' needs the dispatcher to run as root, to start the worker as "
                                 "the worker user; not started")
        if not settings.worker_user:
            raise IsolationError("isolation 'user' needs a worker user: run `agentboard init --worker-user NAME` "
                                 "as root; not started")
        try:
            pw = pwd.getpwnam(settings.worker_user)
        except KeyError:
            raise IsolationError(f"the worker user {settings.worker_user!r} does not exist: create it with "
                                 "`agentboard init --worker-user NAME` as root; not started") from None
        if pw.pw_uid == 0 or pw.pw_uid == os.geteuid():
            raise IsolationError(f"the worker user {settings.worker_user!r} must be another user than root and "
                                 "the dispatcher's; not started")
        try:
            shared = settings.home.stat().st_mode & 0o077
        except OSError as exc:
            raise IsolationError(f"cannot check the home {settings.home}: {exc.strerror or exc}; not started") from None
        if shared:
            raise IsolationError(f"the home {settings.home} is readable by other users: `chmod 700` it (or run "
                                 "`agentboard init --worker-user NAME`); not started")
        user, uid, gid = pw.pw_name, pw.pw_uid, pw.pw_gid
    bwrap = None
    if mode == "sandbox":
        bwrap = shutil.which("bwrap")
        if bwrap is None:
            raise IsolationError("isolation 'sandbox' needs bubblewrap: install it (Debian: apt-get install "
                                 "bubblewrap); bwrap was not found on PATH; not started")
    # a sandbox run by the worker user needs no tmpfs over the home: the home is 0700, out of its reach
    hide = settings.home if uid is None else None
    return Confinement(mode, user, uid, gid, bwrap, hide, shutil.which("setpriv"))


def run_argv(command: str, conf: Confinement, workspace: Path) -> list[str]:
    """The command line that runs the shell ``command`` in ``workspace`` under ``conf`` (the
    change of user, if any, through :meth:`Confinement.popen_ids`)."""
    return conf.command(["/bin/sh", "-c", command], workspace)


# -- setting up the worker user (`agentboard init --worker-user NAME`, as root) --------------------

_USER_NAME = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")


def ensure_worker_user(name: str) -> bool:
    """Create the system user ``name`` (no home, no login shell) unless it exists. Returns whether
    it was created. Needs root."""
    if not _USER_NAME.match(name):
        raise InvalidInput(f"invalid worker user name {name!r}: use lowercase letters, digits, - and _ "
                           "(at most 32, starting with a letter or _)")
    if os.geteuid() != 0:
        raise InvalidInput("--worker-user needs root: it creates the user and starts workers as that user")
    try:
        pw = pwd.getpwnam(name)
    except KeyError:
        pw = None
    if pw is not None:
        if pw.pw_uid == 0:
            raise InvalidInput(f"the worker user {name!r} is root; choose an unprivileged user")
        return False
    useradd = shutil.which("useradd") or "/usr/sbin/useradd"
    shell = "/usr/sbin/nologin" if os.path.exists("/usr/sbin/nologin") else "/bin/false"
    done = subprocess.run([useradd, "--system", "--no-create-home", "--home-dir", "/nonexistent", "--shell", shell,
                           "--user-group", name], capture_output=True, text=True)
    if done.returncode != 0:
        raise InvalidInput(f"useradd {name} failed: {done.stderr.strip() or done.returncode}")
    return True


def close_home(home: Path, worker_user: str) -> None:
    """Make the home 0700 and check that the worker user does not own it."""
    pw = pwd.getpwnam(worker_user)
    if home.stat().st_uid == pw.pw_uid:
        raise InvalidInput(f"the home {home} belongs to the worker user {worker_user!r}; it must belong to the "
                           "user that runs the dispatcher")
    home.chmod(0o700)


def record_worker_user(config: Path, name: str) -> None:
    """Set ``worker_user = "name"`` in ``config.toml`` (in its ``[agentboard]`` table when it has one)."""
    line = f'worker_user = "{name}"'
    text = config.read_text() if config.exists() else ""
    data = tomllib.loads(text) if text else {}
    lines = text.splitlines()
    in_section = not isinstance(data.get("agentboard"), dict)
    section_start = None
    for i, ln in enumerate(lines):
        stripped = ln.strip()
        if stripped.startswith("["):
            in_section = stripped == "[agentboard]"
            if in_section:
                section_start = i
            continue
        if in_section and re.match(r"^worker_user\s*=", stripped):
            lines[i] = line
            break
    else:
        if isinstance(data.get("agentboard"), dict) and section_start is not None:
            lines.insert(section_start + 1, line)
        else:
            lines.insert(0, line)
    config.write_text("\n".join(lines) + "\n")
