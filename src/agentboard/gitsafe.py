"""The one way agentboard runs ``git``: with protected settings, on a repository named explicitly.
Over 600 lines on purpose: every git call a workspace can reach, kept in one module so none
bypasses the protections below.

A worker controls everything in its workspace, its worktree's ``.git`` link included, so no git
call of the server or the dispatcher may honour anything a workspace can write. Every call goes
through :func:`run` (or the readers built on it), which

- names the repository with ``--git-dir`` (and ``--work-tree``): git never discovers one from a
  folder, so a planted ``.git`` is never opened and ``safe.directory`` plays no part;
- reads no system or global configuration (``GIT_CONFIG_NOSYSTEM``, ``GIT_CONFIG_GLOBAL=/dev/null``,
  ``GIT_ATTR_NOSYSTEM``) and removes every inherited ``GIT_*`` variable;
- overrides, on the command line (the highest priority), every setting that makes git start a
  program: ``core.fsmonitor``, ``core.hooksPath`` (no hook runs), ``core.pager``, editors,
  ``diff.external``, ``core.sshCommand``, ``core.askPass``, credential helpers, signing and
  signature checks, ``core.alternateRefsCommand``, the ``ext::`` transport, automatic gc, and
  (``drivers_off``) every filter and merge driver the repository's configuration defines;
- reads diffs with ``--no-ext-diff --no-textconv`` and never recurses into submodules.

A worker's *working tree* is read through a **view** (:func:`worktree_status`,
:func:`worktree_diff`): a small repository of our own in ``<git dir>/agentboard/views/<name>``
whose objects are borrowed from the target repository (``objects/info/alternates``), whose
``HEAD`` is the task branch's commit as the target repository has it, with a private index and an
empty configuration. Nothing of the worktree's ``.git`` link, of the worktree's administrative
folder (``.git/worktrees/<name>``: its ``HEAD``, index, ``commondir``, ``config.worktree``) nor
of any configuration defines a program for it; the ``.gitattributes`` a worker writes name
drivers that do not exist there.

Before any call that concerns a task's worktree, :func:`check_worktree_link` checks that its
``.git`` is the file ``gitdir: <repo>/.git/worktrees/<name>`` that ``git worktree add`` wrote (not
a folder, not a symbolic link), that this administrative folder points back at the worktree and
shares the repository's objects; otherwise the call is refused with :class:`UnsafeWorktree`.

This module imports nothing of agentboard but :mod:`agentboard.gitsizes` (which imports nothing), so
every layer (the kernel's diagnostics, the protocol's review context, the dispatcher) may use it.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import stat
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from . import gitsizes

#: settings given on every call's command line (they win over every configuration file)
PROTECTED: tuple[str, ...] = (
    "core.fsmonitor=false",
    "core.hooksPath=/dev/null",
    "core.pager=cat",
    "core.editor=true",
    "sequence.editor=true",
    "core.askPass=",
    "core.sshCommand=ssh",
    "core.gitProxy=",
    "core.alternateRefsCommand=true",
    "core.attributesFile=/dev/null",
    "core.untrackedCache=false",
    "credential.helper=",
    "diff.external=",
    "diff.noprefix=false",
    "diff.mnemonicPrefix=false",
    "diff.relative=false",
    "diff.ignoreSubmodules=all",
    "color.ui=false",
    "status.submoduleSummary=false",
    "submodule.recurse=false",
    "commit.gpgSign=false",
    "tag.gpgSign=false",
    "push.gpgSign=false",
    "log.showSignature=false",
    "merge.verifySignatures=false",
    "gpg.program=false",
    "gpg.ssh.program=false",
    "gpg.x509.program=false",
    "rebase.updateRefs=false",
    "rebase.autoStash=false",
    "gc.auto=0",
    "maintenance.auto=false",
    "protocol.ext.allow=never",
)
#: what a merge driver is replaced by: git's own three-way merge of the same files
MERGE_FILE = "git merge-file --marker-size=%L %A %O %B"
#: environment given to every call (on top of the caller's environment minus ``GIT_*``)
_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_ATTR_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0", "GIT_PAGER": "cat", "PAGER": "cat", "GIT_EDITOR": "true",
        "GIT_SEQUENCE_EDITOR": "true", "GIT_ASKPASS": "", "SSH_ASKPASS": "", "GIT_OPTIONAL_LOCKS": "1"}
#: what a push on the target repository keeps from the owner's configuration and environment
#: (``user_config``): how it reaches and authenticates to the remote
_TRANSPORT_KEYS = ("core.sshCommand", "core.askPass", "credential.helper")
_TRANSPORT_ENV = ("GIT_SSH", "GIT_SSH_COMMAND", "GIT_SSH_VARIANT", "GIT_ASKPASS", "SSH_ASKPASS")
_DRIVER_KEY = re.compile(r"^(filter|merge)\.(.+)\.([a-z]+)$")
_HEX = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")
#: where views live inside a repository's git folder
VIEWS = Path("agentboard") / "views"
#: untracked files rendered into a worktree's diff, at most, and bytes read of each
UNTRACKED_MAX = 50
UNTRACKED_BYTES = 2_000_000


class GitError(Exception):
    """A git call failed or was refused; the message says why."""


class UnsafeWorktree(GitError):
    """A worktree's ``.git`` is not the link ``git worktree add`` wrote: git is not run there."""


def environment(*, user_config: bool = False) -> dict[str, str]:
    """The environment of a git call: the caller's minus every ``GIT_*`` variable, plus the
    protected settings. ``user_config``: keep the user's global and system configuration and
    the transport's variables (``GIT_SSH_COMMAND``, askpass) for a push on the target
    repository, which needs the owner's credentials; never for a call that reads a workspace."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") or (user_config and k in _TRANSPORT_ENV)}
    env.update(_ENV)
    if user_config:
        for k in ("GIT_CONFIG_NOSYSTEM", "GIT_CONFIG_GLOBAL", "GIT_ASKPASS", "SSH_ASKPASS"):
            env.pop(k, None)
        env.update({k: v for k, v in os.environ.items() if k in _TRANSPORT_ENV})
    return env


def argv(git_dir: str | Path, work_tree: str | Path | None, args: Sequence[str],
         extra_config: Sequence[str] = (), *, user_config: bool = False) -> list[str]:
    out = ["git", "--no-pager"]
    protected = [c for c in PROTECTED if not (user_config and c.split("=", 1)[0] in _TRANSPORT_KEYS)]
    for item in (*protected, *extra_config):
        out += ["-c", item]
    out.append(f"--git-dir={git_dir}")
    if work_tree is not None:
        out.append(f"--work-tree={work_tree}")
    return out + list(args)


def run_in(git_dir: str | Path, work_tree: str | Path | None, *args: str, check: bool = True,
           timeout: float = 60, drivers_off: bool = False, user_config: bool = False,
           extra_config: Sequence[str] = (), input: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``git args`` on the repository ``git_dir`` (with ``work_tree`` as its working tree, or
    none), protected (module docstring). ``drivers_off``: also neutralise every filter and
    merge driver the repository's configuration defines (for calls that read or write a working
    tree, or merge). ``check``: raise :class:`GitError` when git fails."""
    config = list(extra_config)
    if drivers_off:
        config += driver_overrides(git_dir)
    try:  # bytes, decoded as they are: text mode would turn a worker's \r into a line break of git's
        raw = subprocess.run(argv(git_dir, work_tree, args, config, user_config=user_config), capture_output=True,
                             env=environment(user_config=user_config), timeout=timeout, cwd="/",
                             stdin=subprocess.DEVNULL if input is None else None,
                             input=None if input is None else input.encode())
        proc = subprocess.CompletedProcess(raw.args, raw.returncode, *(b.decode("utf-8", "replace")
                                                                       for b in (raw.stdout, raw.stderr)))
    except FileNotFoundError:
        raise GitError("git is not installed or not on PATH") from None
    except subprocess.TimeoutExpired:
        raise GitError(f"git {' '.join(args)} timed out in {work_tree or git_dir}") from None
    if check and proc.returncode != 0:
        msg = (proc.stderr or proc.stdout).strip().splitlines()
        raise GitError(f"git {' '.join(args)} failed in {work_tree or git_dir}: {msg[-1] if msg else proc.returncode}")
    return proc


def run(where: str | Path, *args: str, check: bool = True, timeout: float = 60, drivers_off: bool = False,
        user_config: bool = False, extra_config: Sequence[str] = (),
        input: str | None = None) -> subprocess.CompletedProcess[str]:
    """:func:`run_in` on the checkout ``where`` (a repository's top folder, or a linked worktree,
    which must pass :func:`check_worktree_link`)."""
    git_dir, work_tree = locate(where)
    return run_in(git_dir, work_tree, *args, check=check, timeout=timeout, drivers_off=drivers_off,
                  user_config=user_config, extra_config=extra_config, input=input)


def out(where: str | Path, *args: str, **kw: object) -> str:
    """The standard output of :func:`run` (raises :class:`GitError` when git fails)."""
    return run(where, *args, **kw).stdout  # type: ignore[arg-type]


def driver_overrides(git_dir: str | Path) -> list[str]:
    """``-c`` settings that empty every filter driver and replace every merge driver the
    repository's configuration (its includes too) defines: attributes a worker writes can then
    only name drivers that do nothing a plain git would not do."""
    proc = run_in(git_dir, None, "config", "-z", "--name-only", "--get-regexp",
                  r"^(filter|merge)\..*\.(clean|smudge|process|driver)$", check=False, timeout=30)
    if proc.returncode not in (0, 1):
        raise GitError(f"cannot read the configuration of {git_dir}: {proc.stderr.strip()[-200:]}")
    out: list[str] = []
    for key in sorted({k for k in proc.stdout.split("\0") if k}):
        m = _DRIVER_KEY.match(key.strip())
        if not m:
            continue
        section, name, _ = m.groups()
        if "=" in name or "\n" in name:
            raise GitError(f"the repository {git_dir} defines a {section} driver whose name git cannot be "
                           f"told to ignore ({name!r}); remove it from its configuration")
        if section == "filter":
            out += [f"filter.{name}.clean=", f"filter.{name}.smudge=", f"filter.{name}.process=",
                    f"filter.{name}.required=false"]
        else:
            out.append(f"merge.{name}.driver={MERGE_FILE}")
    return sorted(set(out))


# -- where a repository is --------------------------------------------------------------------------


def _read_small(path: Path, limit: int = 4096) -> str:
    """A small regular file's text, never through a symbolic link."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(f"{path} is not a regular file")
        return os.read(fd, limit).decode("utf-8", "replace")
    finally:
        os.close(fd)


def _gitfile_target(dotgit: Path) -> Path:
    text = _read_small(dotgit)
    first = text.splitlines()[0] if text else ""
    if not first.startswith("gitdir: "):
        raise GitError(f"{dotgit} is not a git link")
    target = Path(first[len("gitdir: "):].strip())
    return target if target.is_absolute() else (dotgit.parent / target)


def git_dir_of(repo: str | Path) -> Path:
    """The git folder of the checkout whose top folder is ``repo``: ``repo/.git`` when it is a
    folder, the target of the ``gitdir:`` link a ``.git`` file holds otherwise (a checkout the
    board's owner chose: a submodule, a worktree of another repository). A ``.git`` that is a
    symbolic link is refused."""
    dotgit = Path(repo) / ".git"
    try:
        st = dotgit.lstat()
    except OSError:
        raise GitError(f"{repo} is not a git repository (it has no .git)") from None
    if stat.S_ISLNK(st.st_mode):
        raise UnsafeWorktree(f"{dotgit} is a symbolic link: agentboard does not run git through it")
    if stat.S_ISDIR(st.st_mode):
        return dotgit
    try:
        return _gitfile_target(dotgit)
    except OSError as exc:
        raise GitError(f"cannot read {dotgit}: {exc}") from None


def common_dir(git_dir: str | Path) -> Path:
    """The folder holding the objects and refs of ``git_dir`` (itself, or what its ``commondir``
    names)."""
    gd = Path(git_dir)
    try:
        rel = _read_small(gd / "commondir").strip()
    except OSError:
        return gd
    p = Path(rel)
    return Path(os.path.normpath(p if p.is_absolute() else gd / p))


def toplevel(path: str | Path) -> Path | None:
    """The top folder of the git checkout containing ``path`` (the nearest folder at or above it
    holding a ``.git`` folder, or a ``.git`` file with a ``gitdir:`` line), None when there is
    none. Found without running git."""
    p = Path(os.path.abspath(path))
    if not p.is_dir():
        return None
    for d in (p, *p.parents):
        dotgit = d / ".git"
        try:
            st = dotgit.lstat()
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode) and (dotgit / "HEAD").exists():
            return d
        if stat.S_ISREG(st.st_mode):
            try:
                if _read_small(dotgit).startswith("gitdir: "):
                    return d
            except OSError:
                pass
        if stat.S_ISLNK(st.st_mode):
            return d  # git would use it; :func:`locate` refuses it with the reason
    return None


def check_worktree_link(repo: str | Path, worktree: str | Path) -> Path | None:
    """Check ``worktree``'s ``.git`` before a call that concerns it. A linked worktree's must be
    the link ``git worktree add`` wrote in ``repo``: a regular file reading ``gitdir: <repo's
    git dir>/worktrees/<name>``, that folder a real one whose ``gitdir`` points back at the
    worktree and whose ``commondir`` is the repository's; the administrative folder is
    returned. A real folder (not a symbolic link) is a **task repository**, the confined
    worker's own repository (``dispatch.workspaces``): None is returned, and no git runs in it
    (it is read as data and through a view). Anything else raises :class:`UnsafeWorktree`
    saying what is wrong."""
    wt = Path(os.path.abspath(worktree))
    dotgit = wt / ".git"
    common = Path(os.path.realpath(common_dir(git_dir_of(repo))))
    fix = (f"agentboard will not run git there: remove the worktree (git -C {repo} worktree remove --force {wt}) "
           "or restore its link")
    try:
        st = dotgit.lstat()
    except OSError:
        raise UnsafeWorktree(f"the worktree {wt} has no .git link") from None
    if stat.S_ISDIR(st.st_mode):
        return None
    if not stat.S_ISREG(st.st_mode):
        kind = "a symbolic link" if stat.S_ISLNK(st.st_mode) else "not a file"
        raise UnsafeWorktree(f"the worktree's .git ({dotgit}) is {kind}, not the link git worktree add wrote; {fix}")
    try:
        admin = _gitfile_target(dotgit)
    except (OSError, GitError):
        raise UnsafeWorktree(f"the worktree's .git ({dotgit}) is not a git link; {fix}") from None
    admin = Path(os.path.normpath(admin))
    if admin.parent != common / "worktrees" and Path(os.path.realpath(admin.parent)) != common / "worktrees":
        raise UnsafeWorktree(f"the worktree's .git ({dotgit}) points at {admin}, outside {common}/worktrees; {fix}")
    try:
        ast = admin.lstat()
        back = _read_small(admin / "gitdir").strip()
        shared = _read_small(admin / "commondir").strip()
    except OSError:
        raise UnsafeWorktree(f"the worktree's administrative folder {admin} is missing or not readable; {fix}") from None
    if not stat.S_ISDIR(ast.st_mode):
        raise UnsafeWorktree(f"{admin} is not a folder; {fix}")
    if os.path.realpath(back) != os.path.join(os.path.realpath(wt), ".git"):
        raise UnsafeWorktree(f"{admin}/gitdir does not point back at {dotgit}; {fix}")
    if os.path.realpath(shared if os.path.isabs(shared) else admin / shared) != str(common):
        raise UnsafeWorktree(f"{admin}/commondir does not name the repository's git folder {common}; {fix}")
    return admin


def locate(where: str | Path) -> tuple[Path, Path]:
    """The git folder and working tree of the checkout ``where`` (its top folder). A folder
    directly in a ``.worktrees`` folder is a task's worktree of the repository above: it must
    pass :func:`check_worktree_link`."""
    wt = Path(os.path.abspath(where))
    if wt.parent.name == ".worktrees":
        admin = check_worktree_link(wt.parent.parent, wt)
        if admin is None:
            raise UnsafeWorktree(f"{wt} is a task repository, its worker's own: agentboard runs no git in it")
        return admin, wt
    return git_dir_of(wt), wt


# -- a worker's working tree, read through a view ----------------------------------------------------


def _write_if_changed(path: Path, text: str) -> None:
    try:
        if _read_small(path, 1 << 20) == text:
            return
    except OSError:
        pass
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)


def _view(repo: Path, worktree: Path, tip: str) -> Path:
    """The view of ``worktree`` (module docstring), its ``HEAD`` at ``tip`` and its index
    following it (stat information kept for unchanged files, so reads stay fast)."""
    common = Path(os.path.realpath(common_dir(git_dir_of(repo))))
    view = common / VIEWS / worktree.name
    fresh = not (view / "HEAD").exists()
    if fresh:
        for sub in ("objects/info", "refs/heads", "info"):
            (view / sub).mkdir(parents=True, exist_ok=True)
        fmt = run_in(common, None, "rev-parse", "--show-object-format", check=False).stdout.strip() or "sha1"
        config = "[core]\n\trepositoryformatversion = 0\n\tbare = false\n"
        if fmt != "sha1":
            config = ("[core]\n\trepositoryformatversion = 1\n\tbare = false\n"
                      f"[extensions]\n\tobjectformat = {fmt}\n")
        _write_if_changed(view / "config", config)
        _write_if_changed(view / "objects" / "info" / "alternates", f"{common / 'objects'}\n")
    try:
        excludes = _read_small(common / "info" / "exclude", 1 << 20)
    except OSError:
        excludes = ""
    _write_if_changed(view / "info" / "exclude", excludes)
    try:
        synced = _read_small(view / "synced").strip()
    except OSError:
        synced = ""
    if synced != tip or not (view / "index").exists():
        _write_if_changed(view / "HEAD", tip + "\n")
        for attempt in range(3):  # another reader may hold the index lock for a moment
            # --reset: a one-way merge that keeps the stat information of unchanged files
            proc = run_in(view, worktree, "read-tree", "--reset", tip, check=attempt == 2)
            if proc.returncode == 0:
                break
            time.sleep(0.05)
        _write_if_changed(view / "synced", tip + "\n")
    return view


def branch_tip(repo: str | Path, branch: str) -> str | None:
    """The commit of ``refs/heads/<branch>`` in ``repo`` (None when there is no such branch)."""
    sha = run(repo, "rev-parse", "--verify", "-q", f"refs/heads/{branch}^{{commit}}", check=False).stdout.strip()
    return sha if _HEX.match(sha) else None


def _admin_head(repo: str | Path, worktree: str | Path) -> str:
    """The worktree's ``HEAD`` as data: a linked worktree's from its administrative folder, a
    task repository's from its own ``.git`` (a branch it names resolved there, as data too)."""
    try:
        admin = check_worktree_link(repo, worktree)
        if admin is not None:
            return _read_small(admin / "HEAD").strip()
        own = Path(worktree) / ".git"
        head = _read_small(own / "HEAD").strip()
        ref = head[len("ref: "):] if head.startswith("ref: refs/heads/") else ""
        if not ref or check_branch_name(ref[len("refs/heads/"):]) is not None:
            return head
        try:
            return _read_small(own / ref).strip()
        except FileNotFoundError:
            pass
        for line in _read_small(own / "packed-refs", 64 << 20).splitlines():
            sha, _, name = line.partition(" ")
            if name == ref and _HEX.match(sha):
                return sha
        return head
    except (OSError, GitError):
        return ""


def worktree_head_ref(repo: str | Path, worktree: str | Path) -> str | None:
    """The branch ref (``refs/heads/…``) a task's worktree is on, read as data from its
    administrative folder; None when it is detached or cannot be read."""
    text = _admin_head(repo, worktree)
    if text.startswith("ref: refs/heads/") and check_branch_name(text[len("ref: refs/heads/"):]) is None:
        return text[len("ref: "):]
    return None


def worktree_head(repo: str | Path, worktree: str | Path, branch: str) -> str | None:
    """What the worktree's ``HEAD`` names, read as data (never followed through a link): the
    commit of the branch it is on, or the commit it is detached at. Falls back to ``branch``."""
    text = _admin_head(repo, worktree)
    if _HEX.match(text):
        # a task repository's commit the target has not fetched back yet cannot be read here
        known = run(repo, "cat-file", "-e", f"{text}^{{commit}}", check=False).returncode == 0
        return text if known else (branch_tip(repo, branch) if branch else None)
    ref = worktree_head_ref(repo, worktree)
    if ref:
        return branch_tip(repo, ref[len("refs/heads/"):])
    return branch_tip(repo, branch) if branch else None


def worktree_status(repo: str | Path, worktree: str | Path, branch: str, *, tip: str | None = None) -> list[str]:
    """``git status --porcelain`` lines of a task's worktree against its branch's commit
    (untracked files included, ignored ones not), read through the view."""
    repo, wt = Path(repo), Path(os.path.abspath(worktree))
    check_worktree_link(repo, wt)
    tip = tip or branch_tip(repo, branch)
    if not tip:
        raise GitError(f"the branch {branch} does not exist in {repo}")
    view = _view(repo, wt, tip)
    text = run_in(view, wt, "status", "--porcelain", "--untracked-files=all", "--ignore-submodules=all",
                  "--no-renames").stdout
    return [ln for ln in text.splitlines() if ln.strip()]


def worktree_diff(repo: str | Path, worktree: str | Path, branch: str, *, exclude: Sequence[str] = ()) -> str:
    """The uncommitted work of a task's worktree as a unified diff: its working tree against
    its branch's commit, then each untracked file as a new file (at most :data:`UNTRACKED_MAX`);
    paths starting with one of ``exclude`` left out."""
    repo, wt = Path(repo), Path(os.path.abspath(worktree))
    check_worktree_link(repo, wt)
    tip = branch_tip(repo, branch)
    if not tip:
        return ""
    view = _view(repo, wt, tip)
    return view_diff(view, wt, exclude=exclude)


def view_diff(git_dir: str | Path, work_tree: Path, *, exclude: Sequence[str] = (), drivers_off: bool = False,
              prefix: str = "") -> str:
    """The working tree ``work_tree`` against ``HEAD`` of ``git_dir``, untracked files included
    (a file too big to show listed with its size, never read: ``gitsizes``): only paths under
    ``prefix`` (relative to the top, ending with ``/``; empty: all), those starting with one of
    ``exclude`` left out. ``drivers_off``: the git folder is not a view of ours: its drivers are off."""
    specs = [f":(top){prefix}" if prefix else ":(top)", *[f":(top,exclude){prefix}{p}" for p in exclude]]
    git = functools.partial(run_in, git_dir, work_tree, check=False, drivers_off=drivers_off)
    parts = [gitsizes.diff(git, ("--ignore-submodules=all", "HEAD"), specs, root=work_tree)]
    listed = git("ls-files", "-z", "--others", "--exclude-standard", "--", *specs).stdout
    untracked = [n for n in listed.split("\0") if n]
    for name in untracked[:UNTRACKED_MAX]:
        parts.append(new_file_diff(work_tree, name))
    if len(untracked) > UNTRACKED_MAX:
        parts.append(f"# ... and {len(untracked) - UNTRACKED_MAX} more untracked files\n")
    return "".join(p for p in parts if p)


def new_file_diff(root: Path, name: str) -> str:
    """The diff git shows for the untracked file ``name`` under ``root`` (``git diff --no-index
    /dev/null name``), made without git and without following a symbolic link; ``name`` C-quoted
    as git quotes it (``"b/new\\nline.txt"``), so no name breaks or forges a header."""
    def quoted(prefix: str) -> str:  # git's ``quote_c_style``, octal for bytes outside ASCII
        raw = (prefix + name).encode("utf-8", "surrogateescape")
        esc = dict(zip(b'\a\b\t\n\v\f\r"\\', 'abtnvfr"\\', strict=True))
        if not any(b < 0x20 or b >= 0x7F or b in esc for b in raw):
            return prefix + name
        return '"' + "".join("\\" + esc[b] if b in esc else chr(b) if 0x20 <= b < 0x7F else f"\\{b:03o}" for b in raw) + '"'
    dirfd = -1
    try:
        found = gitsizes.parent_fd(root, name)  # no link followed on the way
        if found is None:
            return ""
        dirfd, leaf = found
        st = os.lstat(leaf, dir_fd=dirfd)
        if stat.S_ISLNK(st.st_mode):
            data, mode = os.readlink(leaf, dir_fd=dirfd).encode("utf-8", "surrogateescape"), "120000"
        elif stat.S_ISREG(st.st_mode):
            fd = os.open(leaf, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dirfd)
            with os.fdopen(fd, "rb") as fh:
                if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                    return ""
                data = fh.read(UNTRACKED_BYTES + 1)
            mode = "100755" if st.st_mode & 0o111 else "100644"
        else:
            return ""
    except OSError:
        return ""
    finally:
        if dirfd >= 0:
            os.close(dirfd)
    head = f"diff --git {quoted('a/')} {quoted('b/')}\nnew file mode {mode}\n"
    if len(data) > UNTRACKED_BYTES:
        return head + f"# {quoted('')}: more than {UNTRACKED_BYTES} bytes, not shown\n"
    blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()[:7]
    head += f"index 0000000..{blob}\n"
    if not data:
        return head
    if b"\0" in data[:8000]:
        return head + f"Binary files /dev/null and {quoted('b/')} differ\n"
    text = data.decode("utf-8", "replace")
    lines = text.split("\n")
    eol = text.endswith("\n")
    if eol:
        lines.pop()
    body = "".join(f"+{ln}\n" for ln in lines)
    if not eol:
        body += "\\ No newline at end of file\n"
    count = "" if len(lines) == 1 else f",{len(lines)}"
    return head + f"--- /dev/null\n+++ {quoted('b/')}\n@@ -0,0 +1{count} @@\n" + body


#: what makes git find no repository at all (an agent reviewing a workspace we cannot view)
NO_REPOSITORY = {"GIT_DIR": os.devnull + "/no-repository", "GIT_CONFIG_NOSYSTEM": "1"}


def reviewer_environment(repo: str | Path | None, worktree: str | Path, branch: str | None,
                         base: str | None = None) -> dict[str, str]:
    """Environment for an agent reviewing a worker's workspace from inside it: its git reads a
    task worktree through the view (our configuration, :data:`PROTECTED` on top; ``branch`` and
    ``base`` named as in ``repo``); elsewhere (no view: the worker may have written ``.git``)
    git finds no repository at all."""
    wt, view = Path(os.path.abspath(worktree)), None
    try:
        tip = branch_tip(repo, branch) if repo and branch and check_worktree_link(repo, wt) is not None else None
        view = _view(Path(repo), wt, tip) if repo and tip else None
        for name in {n for n in (branch, base) if n and view is not None and repo}:
            if (sha := branch_tip(repo, name)) and check_branch_name(name) is None:  # type: ignore[arg-type]
                run_in(view, None, "update-ref", f"refs/heads/{name}", sha, check=False)  # type: ignore[arg-type]
    except (GitError, OSError):
        view = None
    if view is None:
        return dict(NO_REPOSITORY)
    env = {"GIT_DIR": str(view), "GIT_WORK_TREE": str(wt), "GIT_CONFIG_COUNT": str(len(PROTECTED))}
    for i, item in enumerate(PROTECTED):
        key, _, value = item.partition("=")
        env[f"GIT_CONFIG_KEY_{i}"], env[f"GIT_CONFIG_VALUE_{i}"] = key, value
    return env


def remove_view(repo: str | Path, worktree: str | Path) -> None:
    """Forget the view of a removed worktree."""
    import shutil

    try:
        common = Path(os.path.realpath(common_dir(git_dir_of(repo))))
    except GitError:
        return
    shutil.rmtree(common / VIEWS / Path(worktree).name, ignore_errors=True)


# -- names ---------------------------------------------------------------------------------------------


def check_branch_name(name: str) -> str | None:
    """Why ``name`` cannot be a task branch (None when it can): ``domain.model.branch_problem``."""
    from .domain.model import branch_problem

    return branch_problem(name)


__all__ = ["GitError", "PROTECTED", "UnsafeWorktree", "argv", "branch_tip", "check_branch_name", "check_worktree_link",
           "common_dir", "driver_overrides", "environment", "git_dir_of", "locate", "new_file_diff", "out", "remove_view",
           "run", "run_in", "toplevel", "view_diff", "worktree_diff", "worktree_head", "worktree_head_ref", "worktree_status"]
