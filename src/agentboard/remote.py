"""The worker's way to the board: the API, with its run token.

A worker started by the dispatcher gets ``AGENTBOARD_API_URL`` and a run token
(``AGENTBOARD_TOKEN``) — never the home or the database URL. Its CLI verbs and its MCP server
detect that (:func:`worker_mode`) and make the calls below instead of opening a database; each is
one HTTP request to a route that calls the same kernel function. API errors come back as the
same domain errors (so the CLI prints the same one-line message and exits with the same code).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from .domain import errors, worker_env
from .domain.worker_env import WorkerEnv

URL_VAR = worker_env.API_URL
TOKEN_VAR = worker_env.TOKEN
#: seconds a call may take (a completion may run the reviewer)
TIMEOUT = 120.0
#: seconds a call keeps trying while the board cannot take it yet (the API answers 503 with a
#: ``Retry-After``: the verb never reached the database; or the API's port refuses the
#: connection: the request was never sent), so a worker's report outlives a restart
RETRY_FOR = 30.0
#: seconds the look-up of what a run token may do keeps trying when an MCP server starts: its
#: answer only says which tools to list, and an agent's session waits for the list (a live API
#: answers at once; one restarting is often back within this; a gone one costs only this)
SCOPE_RETRY_FOR = 3.0

_ERRORS: dict[str, type[errors.AgentboardError]] = {
    cls.code: cls for cls in (
        errors.InvalidInput, errors.NotFound, errors.Conflict, errors.InvalidTransition, errors.StaleRun,
        errors.Unauthorized, errors.Forbidden, errors.TooLarge, errors.TooMany, errors.Unavailable)
}
_BY_STATUS: dict[int, type[errors.AgentboardError]] = {
    400: errors.InvalidInput, 401: errors.Unauthorized, 403: errors.Forbidden, 404: errors.NotFound,
    409: errors.Conflict, 413: errors.TooLarge, 422: errors.InvalidInput, 429: errors.TooMany,
    503: errors.Unavailable,
}


def worker_mode(environ: Mapping[str, str] | None = None) -> bool:
    """Whether this process reaches the board through the API: it has the API's URL and a token,
    or it has a worker identity (``AGENTBOARD_RUN_ID``) and no home or database to open."""
    env = os.environ if environ is None else environ
    me = WorkerEnv.from_environ(env)
    if me.api_url and me.token:
        return True
    return bool(env.get(worker_env.RUN_ID)) and not env.get("AGENTBOARD_HOME") and not env.get(
        "AGENTBOARD_DATABASE_URL")


def error_for(status: int, body: Any, *, run_id: int | None = None, task_id: str | None = None) -> errors.AgentboardError:
    """The domain error an API error response stands for."""
    err = body.get("error") if isinstance(body, dict) else None
    code = str(err.get("code")) if isinstance(err, dict) else ""
    message = str(err.get("message")) if isinstance(err, dict) else f"the API answered HTTP {status}"
    if status == 401 and run_id is not None and message.startswith(f"run {run_id} is closed"):
        # a run token dies with its run: the worker's report is late, as the kernel would say
        return errors.StaleRun(f"run {run_id} is no longer current for task {task_id} (the run is closed); "
                               "stop and do not report")
    cls = _ERRORS.get(code) or _BY_STATUS.get(status) or errors.AgentboardError
    return cls(message)


def _retry_after(resp: Any) -> float | None:
    """Seconds the API asks to wait before the same request (a 503 whose verb never reached the
    database), or None: the request may have been applied, or will not be."""
    value = resp.headers.get("Retry-After")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


@contextlib.contextmanager
def _or_the_file() -> Iterator[None]:
    """A report the board could not take says where else it can go."""
    try:
        yield
    except errors.Unavailable as exc:
        raise errors.Unavailable(f"{exc.message}; the report can also be written to .board/result.json "
                                 "(applied when this worker exits)") from None


#: what :meth:`WorkerClient.complete` and ``block`` answer for a report kept in the workspace's
#: ``.board/result.json`` because the board could not take it (its ``status``)
KEPT = "kept"


def keep_report(workspace: Path | None, report: dict[str, Any]) -> Path | None:
    """Write the worker's report as its workspace's ``.board/result.json`` (the file the
    dispatcher applies when the worker exits), unless the workspace has none to hold it or the
    worker wrote one itself; the file, or None."""
    if workspace is None:
        return None
    board = Path(workspace) / ".board"
    target = board / "result.json"
    if not board.is_dir() or board.is_symlink() or os.path.lexists(target):
        return None
    import json

    tmp = board / f".result.json.{os.getpid()}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(report, fh)
        os.rename(tmp, target)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        return None
    return target


def _tid(task_id: str) -> str:
    """``task_id`` for a route, checked: an agent's ``t_…/runs``, ``t_…/heartbeat?x=`` or
    ``../../x`` would reach another route of the API, or another task's."""
    from .domain.model import TASK_ID_RE

    if not isinstance(task_id, str) or not TASK_ID_RE.fullmatch(task_id):
        raise errors.InvalidInput(f"{str(task_id)[:80]!r} is not a task id (t_ and hex digits, as `agentboard list` "
                                  "shows them)")
    return task_id


class WorkerClient:
    """Calls of the board's API with one token (a worker's run token)."""

    def __init__(self, url: str, token: str, *, run_id: int | None = None, task_id: str | None = None,
                 timeout: float = TIMEOUT, retry_for: float = RETRY_FOR,
                 on_retry: Callable[[str], None] | None = None, workspace: Path | None = None) -> None:
        import httpx

        self.url = url.rstrip("/")
        self.run_id = run_id
        self.task_id = task_id
        #: the worker's workspace: a report of its own run the board cannot take is kept there
        self.workspace = workspace
        self.retry_for = retry_for
        #: called once per call that has to wait, with why (the CLI says so on stderr)
        self.on_retry = on_retry
        self._http = httpx.Client(base_url=self.url, timeout=timeout, trust_env=False,
                                  headers={"Authorization": f"Bearer {token}"})

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> WorkerClient:
        """The client of a worker's environment; :class:`Unavailable` when it has no API."""
        me = WorkerEnv.from_environ(environ)
        url, token = me.api_url, me.token
        if not url or not token:
            raise errors.Unavailable(
                f"this worker has no API to report to ({URL_VAR} and {TOKEN_VAR} are not set): the "
                "dispatcher that started it serves none; report by writing .board/result.json")
        return cls(url, token, run_id=me.run_id, task_id=me.task, workspace=me.workspace)

    def close(self) -> None:
        self._http.close()

    def call(self, method: str, path: str, *, params: Mapping[str, Any] | None = None,
             json: Any = None, content: bytes | None = None, retry_for: float | None = None) -> Any:
        """One request; the decoded JSON answer, or the domain error the API answered with.
        ``retry_for``: how long to keep trying while the board cannot take it yet (default: the
        client's ``retry_for``)."""
        import httpx

        query = {k: v for k, v in (params or {}).items() if v is not None}
        retry_for = self.retry_for if retry_for is None else retry_for
        deadline = time.monotonic() + retry_for
        pause = 0.5
        told = False
        while True:
            why: str | None = None
            try:
                resp = self._http.request(
                    method, path, params=query, json=json, content=content,
                    headers={"Content-Type": "application/octet-stream"} if content is not None else None)
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:  # nothing was sent
                why = f"cannot reach the board's API at {self.url}: {exc}"
                wait = pause
            except httpx.HTTPError as exc:
                raise errors.Unavailable(f"cannot reach the board's API at {self.url}: {exc}") from None
            else:
                try:
                    body = resp.json()
                except ValueError:
                    body = None
                if resp.status_code < 400:
                    return body
                err = error_for(resp.status_code, body, run_id=self.run_id, task_id=self.task_id)
                retry = _retry_after(resp) if resp.status_code == 503 else None
                if retry is None:
                    raise err
                why, wait = err.message, retry
            left = deadline - time.monotonic()
            if left <= 0:
                raise errors.Unavailable(f"{why} (tried for {retry_for:g}s)")
            if not told and self.on_retry is not None:
                self.on_retry(f"{why}; trying again for up to {retry_for:g}s")
                told = True
            time.sleep(min(max(wait, 0.1), left, 5.0))
            pause = min(pause * 2, 5.0)

    # -- reads --------------------------------------------------------------------------------------

    def task_detail(self, task_id: str, *, board: str | None = None, events: int = 20) -> dict[str, Any]:
        return self.call("GET", f"/api/tasks/{_tid(task_id)}", params={"board": board, "events": events})  # type: ignore[no-any-return]

    def context(self, task_id: str, *, board: str | None = None) -> dict[str, Any]:
        """``{"task_id", "board", "markdown"}``: the worker context."""
        return self.call("GET", f"/api/tasks/{_tid(task_id)}/context", params={"board": board})  # type: ignore[no-any-return]

    def runs(self, task_id: str, *, board: str | None = None) -> list[dict[str, Any]]:
        return self.call("GET", f"/api/tasks/{_tid(task_id)}/runs", params={"board": board})  # type: ignore[no-any-return]

    def events(self, task_id: str, since: int = 0, *, board: str | None = None) -> list[dict[str, Any]]:
        return self.call("GET", f"/api/tasks/{_tid(task_id)}/events",  # type: ignore[no-any-return]
                         params={"board": board, "since": since})

    def attachments(self, task_id: str, *, board: str | None = None) -> list[dict[str, Any]]:
        return self.call("GET", f"/api/tasks/{_tid(task_id)}/attachments", params={"board": board})  # type: ignore[no-any-return]

    def list_tasks(self, board: str | None = None, **filters: Any) -> list[dict[str, Any]]:
        status = filters.pop("status", None)
        if isinstance(status, list | tuple):
            status = ",".join(status)
        return self.call("GET", "/api/tasks", params={"board": board, "status": status, **filters})  # type: ignore[no-any-return]

    # -- writes -------------------------------------------------------------------------------------

    def heartbeat(self, task_id: str, *, run_id: int | None = None, note: str | None = None,
                  ttl: int | None = None, board: str | None = None) -> dict[str, Any]:
        return self.call("POST", f"/api/tasks/{_tid(task_id)}/heartbeat", params={"board": board},  # type: ignore[no-any-return]
                         json={"note": note, "ttl": ttl, "run_id": run_id})

    def inbox(self, task_id: str, *, run_id: int | None = None, board: str | None = None) -> dict[str, Any]:
        """The comments on the worker's task since it last looked (its cursor moves past them)."""
        return self.call("POST", f"/api/tasks/{_tid(task_id)}/inbox", params={"board": board},  # type: ignore[no-any-return]
                         json={"run_id": run_id})

    def complete(self, task_id: str, *, run_id: int | None = None, summary: str | None = None,
                 metadata: dict[str, Any] | None = None, result: str | None = None,
                 usage: dict[str, Any] | None = None, review: bool = False,
                 board: str | None = None) -> dict[str, Any]:
        file = {"success": True, "summary": (summary or "").strip() or "completed (the report could not reach the board)",
                **({"result": result} if result and result.strip() else {}), **({"usage": usage} if usage else {})}
        with self._or_kept(task_id, run_id, file):
            return self.call("POST", f"/api/tasks/{_tid(task_id)}/complete", params={"board": board},  # type: ignore[no-any-return]
                             json={"summary": summary, "metadata": metadata, "result": result, "usage": usage,
                                   "run_id": run_id, "review": review})
        return self._kept(task_id)

    def block(self, task_id: str, reason: str, *, kind: str | None = None, run_id: int | None = None,
              board: str | None = None, on: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"reason": reason, "kind": kind, "run_id": run_id}
        if on:
            body["on"] = on
        file = {"success": False, "summary": reason}
        with self._or_kept(task_id, run_id, None if on or kind not in (None, "needs_input") else file):
            return self.call("POST", f"/api/tasks/{_tid(task_id)}/block", params={"board": board},  # type: ignore[no-any-return]
                             json=body)
        return self._kept(task_id)

    @contextlib.contextmanager
    def _or_kept(self, task_id: str, run_id: int | None, file: dict[str, Any] | None) -> Iterator[None]:
        """A report of this worker's own run that the board still cannot take after
        :data:`RETRY_FOR` is kept as ``.board/result.json`` (``file``), which the dispatcher
        applies when the worker exits: the block then ends without an error (the caller
        answers :meth:`_kept`); else it says where the report can go."""
        try:
            with _or_the_file():
                yield
        except errors.Unavailable as exc:
            own = task_id == self.task_id and run_id is not None and run_id == self.run_id
            kept = keep_report(self.workspace, file) if own and file is not None else None
            if kept is None:
                raise
            self._why_kept = exc.message.split("; the report can also")[0]

    def _kept(self, task_id: str) -> dict[str, Any]:
        why = getattr(self, "_why_kept", "")
        return {"id": task_id, "status": KEPT, "report": ".board/result.json",
                "note": f"the board could not take the report ({why}); it is kept in .board/result.json, which "
                        "the dispatcher applies when this worker exits: stop now"}

    def request_review(self, task_id: str, *, summary: str | None = None, run_id: int | None = None,
                       review: bool = True) -> dict[str, Any]:
        return self.call("POST", f"/api/tasks/{_tid(task_id)}/request-review",  # type: ignore[no-any-return]
                         json={"summary": summary, "run_id": run_id, "review": review})

    def comment(self, task_id: str, body: str, *, mentions: bool = True, board: str | None = None) -> dict[str, Any]:
        return self.call("POST", f"/api/tasks/{_tid(task_id)}/comments", params={"board": board},  # type: ignore[no-any-return]
                         json={"body": body, "mentions": mentions})

    def create(self, board: str | None, fields: dict[str, Any]) -> dict[str, Any]:
        """A new task (for a run token that is not an orchestrator's: only in triage)."""
        body = {k: v for k, v in fields.items() if v is not None}
        return self.call("POST", "/api/tasks", params={"board": board}, json=body)  # type: ignore[no-any-return]

    def link(self, parent_id: str, child_id: str, *, board: str | None = None) -> dict[str, Any]:
        return self.call("POST", "/api/links", params={"board": board},  # type: ignore[no-any-return]
                         json={"parent_id": parent_id, "child_id": child_id})

    def unlink(self, parent_id: str, child_id: str, *, board: str | None = None) -> dict[str, Any]:
        return self.call("DELETE", "/api/links",  # type: ignore[no-any-return]
                         params={"board": board, "parent_id": parent_id, "child_id": child_id})

    def unblock(self, task_id: str) -> dict[str, Any]:
        out = self.call("POST", "/api/tasks/bulk", json={"action": "unblock", "ids": [task_id]})
        first = (out.get("results") or [{}])[0]
        if not first.get("ok"):
            err = first.get("error") or {}
            cls = _ERRORS.get(str(err.get("code"))) or errors.AgentboardError
            raise cls(str(err.get("message") or "unblock failed"))
        return first["task"]  # type: ignore[no-any-return]

    def attach(self, task_id: str, path: Path, *, name: str | None = None,
               board: str | None = None) -> dict[str, Any]:
        """Upload a local file as an attachment of ``task_id``."""
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise errors.InvalidInput(f"{path}: no such file") from None
        except OSError as exc:
            raise errors.InvalidInput(f"{path}: cannot read it ({exc.strerror or exc})") from None
        return self.call("POST", f"/api/tasks/{_tid(task_id)}/attachments",  # type: ignore[no-any-return]
                         params={"board": board, "name": name or path.name}, content=data)


class UnreachableClient(WorkerClient):
    """A worker's client when its dispatcher serves no API: every call answers ``error`` (how to
    report instead). The worker's MCP server still starts with it, because an agent CLI that
    requires its MCP servers would otherwise not begin its session at all."""

    def __init__(self, error: errors.Unavailable, *, run_id: int | None = None, task_id: str | None = None) -> None:
        self.url, self.run_id, self.task_id, self.error = "", run_id, task_id, error

    def close(self) -> None:
        pass

    def call(self, method: str, path: str, *, params: Mapping[str, Any] | None = None,
             json: Any = None, content: bytes | None = None, retry_for: float | None = None) -> Any:
        raise self.error


__all__ = ["TOKEN_VAR", "URL_VAR", "UnreachableClient", "WorkerClient", "error_for", "worker_mode"]
