"""The worker's ``AGENTBOARD_*`` environment, defined once: the variable names, the typed
identity the dispatcher gives a worker (:class:`WorkerEnv`), the environment built from it
(:meth:`WorkerEnv.to_env`: the worker process's and its MCP server's ``.mcp.json``) and the
same identity read back (:meth:`WorkerEnv.from_environ`: the MCP server, the worker verbs of the
CLI, the API client of a worker). Nothing else spells these names.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import InvalidInput

#: every variable of agentboard's starts with this (a worker inherits none of the dispatcher's)
PREFIX = "AGENTBOARD_"
TASK = "AGENTBOARD_TASK"
RUN_ID = "AGENTBOARD_RUN_ID"
BOARD = "AGENTBOARD_BOARD"
WORKSPACE = "AGENTBOARD_WORKSPACE"
PROFILE = "AGENTBOARD_PROFILE"
TENANT = "AGENTBOARD_TENANT"
BRANCH = "AGENTBOARD_BRANCH"
API_URL = "AGENTBOARD_API_URL"
TOKEN = "AGENTBOARD_TOKEN"
#: set for a reviewer's run (the review verb and tool answer the review run)
REVIEW_RUN = "AGENTBOARD_REVIEW_RUN"
#: who a person's CLI acts as (never set by the dispatcher)
ACTOR = "AGENTBOARD_ACTOR"
#: the variables :meth:`WorkerEnv.to_env` may write, in this order
NAMES = (TASK, RUN_ID, BOARD, WORKSPACE, PROFILE, TENANT, BRANCH, API_URL, TOKEN, REVIEW_RUN)


@dataclass(frozen=True)
class WorkerEnv:
    """Who a worker is: its task, run, board, workspace and profile, the task's tenant and
    branch, and the API it reports to with its run token."""

    task: str | None = None
    run_id: int | None = None
    board: str | None = None
    workspace: Path | None = None
    profile: str | None = None
    tenant: str | None = None
    branch: str | None = None
    api_url: str | None = None
    token: str | None = None
    review_run: bool = False
    actor: str | None = None

    @classmethod
    def for_run(cls, board: str, task: Mapping[str, Any], run_id: int, workspace: Path, *,
                profile: str | None = None, branch: str | None = None, api_url: str | None = None,
                token: str | None = None, review_run: bool = False) -> WorkerEnv:
        """The identity of run ``run_id`` of ``task``: ``profile`` is the profile running it (a
        reviewer's for a review run; the task's assignee when not given)."""
        return cls(task=str(task["id"]), run_id=int(run_id), board=board, workspace=Path(workspace),
                   profile=str(profile or task.get("assignee") or ""),
                   tenant=str(task["tenant"]) if task.get("tenant") else None,
                   branch=branch or None, api_url=api_url if api_url and token else None,
                   token=token if api_url and token else None, review_run=review_run)

    def to_env(self) -> dict[str, str]:
        """The variables of this identity (a value not given is left out; the API's URL only
        with a token)."""
        values = {TASK: self.task, RUN_ID: None if self.run_id is None else str(self.run_id), BOARD: self.board,
                  WORKSPACE: None if self.workspace is None else str(self.workspace), PROFILE: self.profile,
                  TENANT: self.tenant, BRANCH: self.branch,
                  API_URL: self.api_url if self.token else None, TOKEN: self.token if self.api_url else None,
                  REVIEW_RUN: "1" if self.review_run else None, ACTOR: self.actor}
        return {k: v for k, v in values.items() if v is not None and (v != "" or k == PROFILE)}

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None, *, strict: bool = False) -> WorkerEnv:
        """The identity in ``environ`` (default: this process's). A run id that is not a number
        is ``None``, or ``InvalidInput`` when ``strict``."""
        env = os.environ if environ is None else environ

        def get(name: str) -> str | None:
            return env.get(name) or None

        raw_run = get(RUN_ID)
        run_id: int | None = None
        if raw_run is not None:
            try:
                run_id = int(raw_run)
            except ValueError:
                if strict:
                    raise InvalidInput(f"{RUN_ID}={raw_run!r} is not a run id") from None
        ws = get(WORKSPACE)
        return cls(task=get(TASK), run_id=run_id, board=get(BOARD), workspace=Path(ws) if ws else None,
                   profile=get(PROFILE), tenant=get(TENANT), branch=get(BRANCH), api_url=get(API_URL),
                   token=get(TOKEN), review_run=bool(get(REVIEW_RUN)), actor=get(ACTOR))

    def without_token(self) -> WorkerEnv:
        """The same identity without the API and its run token (what a verification command sees)."""
        return WorkerEnv(**{**self.__dict__, "api_url": None, "token": None})


def is_ours(name: str) -> bool:
    """Whether a variable is one of agentboard's (``AGENTBOARD_*``, any case)."""
    return name.upper().startswith(PREFIX)


#: git's variables that name a repository, its parts or its configuration (``git rev-parse
#: --local-env-vars``, and the configuration ``GIT_CONFIG_COUNT`` numbers): a dispatcher's (one
#: started from a git hook, or by ``git rebase --exec``) would make a worker's git, or a check's,
#: act on that repository instead of its workspace's; git itself clears them when it enters another
GIT_REPOSITORY_VARS = frozenset({
    "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_CONFIG", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT",
    "GIT_OBJECT_DIRECTORY", "GIT_DIR", "GIT_WORK_TREE", "GIT_IMPLICIT_WORK_TREE", "GIT_GRAFT_FILE",
    "GIT_INDEX_FILE", "GIT_NO_REPLACE_OBJECTS", "GIT_REPLACE_REF_BASE", "GIT_PREFIX",
    "GIT_INTERNAL_SUPER_PREFIX", "GIT_SHALLOW_FILE", "GIT_COMMON_DIR", "GIT_NAMESPACE",
})


def names_a_repository(key: str) -> bool:
    """Whether environment variable ``key`` is one of :data:`GIT_REPOSITORY_VARS` (or numbered by its
    ``GIT_CONFIG_COUNT``)."""
    return key in GIT_REPOSITORY_VARS or key.startswith(("GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_"))


def agentboard_dirs() -> set[str]:
    """The folders of agentboard's own interpreter (its virtualenv's ``bin``): left out of a
    worker's ``PATH``, which reaches ``agentboard`` through a folder holding only that executable."""
    out = {os.path.dirname(sys.executable)}
    prefix = getattr(sys, "prefix", "")
    if prefix and prefix != getattr(sys, "base_prefix", prefix):
        out.add(os.path.join(prefix, "bin"))
    return {os.path.normpath(d) for d in out if d}


def user_path(base_path: str | None = None) -> str:
    """The user's ``PATH`` as a worker inherits it (``base_path``, default this process's): without
    agentboard's own virtualenv (:func:`agentboard_dirs`). What a profile's program is looked up
    on before the dispatcher starts it (the project's virtualenv, which a board may put first,
    apart)."""
    base = os.environ.get("PATH", os.defpath) if base_path is None else base_path
    return _without_own(base or os.defpath, sys.executable, getattr(sys, "prefix", ""))


@functools.lru_cache(maxsize=64)
def _without_own(path: str, executable: str, prefix: str) -> str:
    """(one answer per ``PATH`` and interpreter: every worker of a dispatcher has the same)"""
    own = agentboard_dirs()
    return os.pathsep.join(p for p in path.split(os.pathsep) if p and os.path.normpath(p) not in own)


__all__ = ["ACTOR", "API_URL", "BOARD", "BRANCH", "GIT_REPOSITORY_VARS", "NAMES", "PREFIX", "PROFILE", "REVIEW_RUN",
           "RUN_ID", "TASK", "TENANT", "TOKEN", "WORKSPACE", "WorkerEnv", "agentboard_dirs", "is_ours",
           "names_a_repository", "user_path"]
