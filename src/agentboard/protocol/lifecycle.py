"""The dispatcher's two hooks into the worker protocol.

``prepare`` runs before a worker is spawned and writes everything the worker reads;
``after_exit`` runs whenever a worker process exits while its task is still running on that run
and turns what it left behind into kernel calls: the ``.board/result.json`` contract with its
repair loop and soft degrade, verification of reported success, and the review hand-off.
"""

from __future__ import annotations

import concurrent.futures
import enum
import functools
import json
import logging
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import Settings
from ..domain import states
from ..domain.errors import AgentboardError, NotFound, StaleRun, TooMany
from ..domain.worker_env import WorkerEnv
from ..kernel import (
    boards,
    budgets,
    comments,
    host_access,
    queries,
    runs,
    tasks,
    wiki,
    worker_protocol,
)
from ..kernel.worker_protocol import PrepareInputs
from ..store.engine import Database, Row
from . import boarddir, hidden, project_env, repair, result, review, safefs, verify
from .context import render

log = logging.getLogger(__name__)

#: how a verified success becomes a completion (``board, task id`` and the keywords of
#: ``runs.complete``): ``runs.complete(..., verified=True)`` unless the caller gives another —
#: the dispatcher gives ``dispatch.finish.complete_verified``, which integrates a worktree task's
#: branch first when its board says so
Completer = Callable[..., Row]


def _kernel_complete(db: Database, board: str, task_id: str, **kw: Any) -> Row:
    return runs.complete(db, board, task_id, verified=True, **kw)

PROMPT_FILE = "prompt.md"
REPAIR_PROMPT_FILE = "repair-prompt.md"
WIKI_PAGES = 5


class ExitAction(enum.StrEnum):
    """What the dispatcher does after :func:`after_exit`."""

    HANDLED = "handled"
    """The exit was turned into kernel calls; nothing is left to do."""
    REPAIR = "repair"
    """Start the agent again with ``prompt_file`` within ``deadline_seconds`` (the repair loop)."""
    UNHANDLED = "unhandled"
    """The worker left no report: the dispatcher's own exit rules apply."""


@dataclass
class ExitDecision:
    """The outcome of :func:`after_exit`."""

    action: ExitAction
    prompt_file: Path | None = None
    deadline_seconds: float | None = None
    note: str = ""
    """A one-line account for the log."""
    completed: bool = False
    """The worker's reported success was accepted: the run completed (the task is done or in review)."""


# -- before the spawn ------------------------------------------------------------------------------


NO_MATCH = "no published page matches this task"


def _wiki_pages(db: Database, settings: Settings, board: str, task: Row,
                any_published: bool = True) -> tuple[list[Row], str | None]:
    """Up to 5 relevant published pages within the wiki deadline; ``(pages, why none)``.

    ``any_published=False`` (the board has no published page) skips the lookup: it could only
    find nothing.
    """
    if not settings.wiki_context:
        return [], "wiki context is turned off (AGENTBOARD_WIKI_CONTEXT=0)"
    if not any_published:
        return [], NO_MATCH
    deadline = float(settings.wiki_deadline)
    text = f"{task.get('title') or ''}\n{task.get('body') or ''}"
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="wiki-context")
    try:
        future = pool.submit(wiki.relevant, db, board, text, limit=WIKI_PAGES, timeout_seconds=deadline)
        try:
            pages = future.result(timeout=deadline)
        except concurrent.futures.TimeoutError:
            why = f"the wiki lookup did not finish within {deadline:g} s"
        except Exception as exc:  # the worker still starts; the event says why
            why = f"the wiki lookup failed: {exc}"
        else:
            return list(pages), None if pages else NO_MATCH
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    try:
        runs.record_telemetry(db, board, task["id"], "wiki_unavailable", {"reason": why})
    except AgentboardError:  # pragma: no cover - the event is best effort
        pass
    return [], why


@functools.lru_cache(maxsize=1)
def _example_json() -> str:
    return json.dumps(result.RESULT_EXAMPLE, indent=2, ensure_ascii=False)


def _branch(task: Row) -> str:
    return f" (`{task['branch_name']}`)" if task.get("branch_name") else ""


def protocol_instructions(task: Row, run_id: int, *, verify_enabled: bool, shell_verbs: bool = True) -> str:
    """The protocol part of the worker prompt: how to work and report. ``shell_verbs``: the
    agent's shell can run the ``agentboard`` worker verbs (not Codex's: ``adapters.shell_verbs``);
    without them the prompt names only the MCP tools and ``.board/result.json``."""
    verify_cmds = list(task.get("verify") or [])
    lines = [
        "---",
        "",
        "# How to work and report (agentboard worker protocol)",
        "",
        f"You are working on task {task['id']} (run {run_id}). The workspace is your current directory.",
        "Read `.board/context.md` (the text above), `.board/history.md` (rework notes and earlier",
        "failures — do not repeat them), `.board/wiki/INDEX.md` (relevant team knowledge) and",
        "`.board/task.json` (the task as JSON, with the result schema).",
        "",
    ]
    if task.get("workspace_kind") == "worktree":
        lines += [
            f"Your workspace is a git worktree on the task's own branch{_branch(task)}: commit your work there",
            "before you report. What you leave uncommitted when you report success is committed on the branch",
            "for you once you have exited (and your checks passed); never commit `.board/` or `.mcp.json`.",
            "",
        ]
    lines += [
        "Report exactly once, through ONE of these, when you are finished:",
        "",
        "1. **MCP tools** (if your client reads `.mcp.json`): `kanban_complete` with `summary` (and",
        "   `metadata`), `kanban_block` with `reason` when you need input, `kanban_heartbeat` during",
        "   long work, `kanban_comment`, `kanban_attach`, `kanban_propose` for problems outside this",
        "   task, `kanban_show` to re-read the task.",
    ]
    if shell_verbs:
        lines += [
            "2. **Shell commands**: `agentboard complete --summary \"what you did\"`,",
            "   `agentboard block \"what you need\"`, `agentboard heartbeat --note \"progress\"`,",
            "   `agentboard comment ID \"text\"`. They act on your own task.",
        ]
    else:
        lines += ["   (Your shell has no `agentboard` command: report through these tools or the file below.)"]
    lines += [
        f"{3 if shell_verbs else 2}. **A file**: write `.board/result.json`, for example:",
        "",
        "```json",
        _example_json(),
        "```",
        "",
        "   `success` (true/false) and a non-empty `summary` are required; unknown keys are refused.",
        "   `success: false` means you need input: the summary becomes the question for a person.",
        "   `followUpSuggestions` become comments; `wikiProposals` become draft wiki pages.",
        "",
    ]
    if verify_cmds:
        lines += ["Your success is checked before it is accepted" + ("" if verify_enabled else
                  " (verification is currently turned off)") + ": these commands run in the workspace:", ""]
        lines += [f"- `{c}`" for c in verify_cmds]
        lines += ["", "Run them yourself before reporting.", ""]
    if task.get("review_required"):
        lines += ["This task is reviewed after you finish; reviewers read your summary.", ""]
    lines += [
        "**Messages while you work.** People may comment on your task while you run. Between steps,",
        *(["read them: `agentboard heartbeat` prints the new ones, the `kanban_inbox` MCP tool (and",
           "`kanban_heartbeat`) returns them, and they are appended to `.board/inbox.md`. Take them into"]
          if shell_verbs else
          ["read them: the `kanban_inbox` MCP tool (and `kanban_heartbeat`) returns the new ones, and",
           "they are appended to `.board/inbox.md`. Take them into"]),
        "account; answer with a comment when one asks you something.",
        "",
    ]
    lines += ["Never report success for work you did not do. If you cannot finish, block with a reason."]
    return "\n".join(lines) + "\n"


def prepare_reads(db: Database, settings: Settings, board: str,
                  task_ids: list[str]) -> dict[str, PrepareInputs | AgentboardError]:
    """What :func:`prepare` reads for several tasks of one board, in one transaction (the
    dispatcher claims and prepares a batch). Per task id: the value to pass as ``loaded``, or
    the error reading it raised (``prepare`` raises it again)."""
    return worker_protocol.prepare_inputs_many(db, board, task_ids, wiki_on=settings.wiki_context)


def prepare(db: Database, settings: Settings, board: str, task: Row, run_id: int, workspace: Path, *,
            api_url: str | None = None, token: str | None = None, identity: WorkerEnv | None = None,
            loaded: PrepareInputs | AgentboardError | None = None,
            workspace_info: dict[str, Any] | None = None,
            enrich: Callable[[Row], Row] | None = None, shell_verbs: bool = True) -> Path:
    """Write ``.board/`` (task.json, context.md, wiki/, history.md), ``.mcp.json`` and the prompt
    file before a worker starts; keep them out of git; return the prompt file path.

    ``loaded``: this task's entry of :func:`prepare_reads` (read already), else it is read here.
    ``workspace_info``: the workspace just prepared (``workspace_kind``, ``workspace_path``,
    ``branch_name``, ``base_branch``), shown in the context before the spawn records it, with
    what ``enrich`` adds (the dispatcher passes ``dispatch.diffs.with_git``: the branch facts).
    ``shell_verbs``: the prompt offers the ``agentboard`` worker verbs (:func:`protocol_instructions`).
    """
    workspace = Path(workspace)
    bdir = boarddir.board_dir(workspace)
    workspace.mkdir(parents=True, exist_ok=True)  # the dispatcher's own path (made by dispatch.workspaces)
    # .board/ opened once (made, or a link in its place removed); every file written through it
    with safefs.open_board(workspace) as board_fd:
        boarddir.archive_outputs(workspace, board=board_fd)
        if loaded is None:
            loaded = worker_protocol.prepare_inputs(db, board, task["id"], wiki_on=settings.wiki_context)
        elif isinstance(loaded, AgentboardError):
            raise loaded
        full = loaded.detail
        if workspace_info:
            full = {**full, **{k: v for k, v in workspace_info.items() if v is not None}}
            if enrich is not None:
                full = enrich(full)
        context_md = render(full)
        board_fd.write_text("context.md", context_md)
        board_fd.write_text("task.json", boarddir.task_json_text(
            boarddir.task_document(full, run_id, verify_enabled=settings.verify)))
        pages, why = _wiki_pages(db, settings, board, full, loaded.any_published)
        boarddir.write_wiki(workspace, pages, None if pages else why, board=board_fd)
        board_fd.write_text("history.md", boarddir.history_text(loaded.history))
        board_fd.remove(REPAIR_PROMPT_FILE)
        if identity is None:
            identity = WorkerEnv.for_run(board, full, run_id, workspace, api_url=api_url, token=token)
        boarddir.write_mcp_json(workspace, identity.to_env())
        boarddir.git_exclude(workspace)
        board_fd.write_text(PROMPT_FILE, context_md + "\n" + protocol_instructions(
            full, run_id, verify_enabled=settings.verify, shell_verbs=shell_verbs))
    if board_fd.removed:  # a worker's links (or files) where our folders belong: removed, never followed
        log.warning("run %s of %s: removed %s", run_id, task["id"], ", ".join(board_fd.removed))
    return bdir / PROMPT_FILE


# -- after the exit ----------------------------------------------------------------------------------


def _verify_and_complete(
    db: Database, settings: Settings, board: str, task: Row, run_id: int, workspace: Path, *,
    summary: str, metadata: dict[str, Any], result_line: str | None, usage: dict[str, Any] | None,
    actor: str | None, exit_code: int | None = None, verifying: Callable[[], verify.Setup] | None = None,
    complete: Completer | None = None, apply_verdict: review.VerdictApplier, to_review: bool = False,
) -> ExitDecision:
    """Run the task's verify commands in the workspace, then complete it with the worker's
    report (``to_review``: the worker handed it to review, where it goes once they pass)."""
    task_id = task["id"]
    commands = json.loads(task.get("verify") or "[]") if isinstance(task.get("verify"), str) else list(task.get("verify") or [])
    if commands and not settings.verify:
        metadata["verification"] = {"skipped": True, "passed": None,
                                    "reason": "verification is turned off (AGENTBOARD_VERIFY=0)",
                                    "commands": [{"command": c} for c in commands]}
    elif commands:
        setup = verifying() if verifying is not None else None
        refused = hidden.refusal(task, workspace)
        if setup is not None:
            outcome = verify.run(commands, workspace, timeout=float(settings.verify_timeout),
                                 checks=host_access.board_checks(db, board), confinement=setup.confinement,
                                 base_env=setup.base_env, unavailable=setup.unavailable, cgroup=setup.cgroup,
                                 refused=refused)
        else:
            env = {**WorkerEnv(task=task_id, run_id=run_id).to_env(),
                   **project_env.environment(settings.home, os.environ.get("PATH"), boards.get(db, board))}
            outcome = verify.run(commands, workspace, timeout=float(settings.verify_timeout), env=env, refused=refused,
                                 checks=host_access.board_checks(db, board))
        failed = outcome.failed
        if failed is not None:
            how = "timed out" if failed.timed_out else f"exited with {failed.exit_code}"
            error = f"verification failed: `{failed.command}` {how}\n{failed.output_tail[-1500:]}"
            delay = verify_backoff(settings, int(task.get("consecutive_failures") or 0))
            try:
                out = runs.fail(db, board, task_id, "verify_failed", run_id=run_id, error=error, exit_code=exit_code,
                                cooldown_seconds=delay,
                                payload={"command": failed.command, "exit_code": failed.exit_code,
                                         "timed_out": failed.timed_out, "output_tail": failed.output_tail,
                                         "reported_summary": summary[:400], "retry_in": round(delay, 1)})
            except StaleRun as exc:
                return ExitDecision(ExitAction.HANDLED, note=str(exc))
            _keep_usage(db, run_id, usage)
            boarddir.append_history(workspace, boarddir.verify_section(
                failed.command, failed.exit_code, failed.output_tail, run_id, failed.timed_out))
            runs.update_run(db, run_id, metadata={**metadata, "verification": outcome.summary()})
            return ExitDecision(ExitAction.HANDLED, note=f"verify_failed: `{failed.command}` {how}; task is {out['status']}")
        metadata["verification"] = outcome.summary()
        runs.record_telemetry(db, board, task_id, "verified",
                              {"commands": [r.command for r in outcome.results]}, run_id=run_id)
    try:
        if to_review:
            up = runs.usage_params(usage)
            facts = {"exit_code": exit_code, "input_tokens": up["in_t"], "output_tokens": up["out_t"], "cost_usd": up["cost"]}
            runs.update_run(db, run_id, metadata=metadata, **{k: v for k, v in facts.items() if v is not None})
            done = runs.request_review(db, board, task_id, summary=summary, run_id=run_id, actor=actor, after_exit=True)
        else:
            done = (complete or _kernel_complete)(db, board, task_id, summary=summary, metadata=metadata,
                                                  result=result_line, usage=usage, run_id=run_id, actor=actor,
                                                  exit_code=exit_code)
    except StaleRun as exc:
        return ExitDecision(ExitAction.HANDLED, note=str(exc))
    if done["status"] not in (states.DONE, states.REVIEW):  # its branch could not be integrated
        return ExitDecision(ExitAction.HANDLED, note=f"verified, not integrated; task is {done['status']}: "
                            f"{done.get('block_reason') or ''}")
    note = f"completed; task is {done['status']}"
    if done["status"] == states.REVIEW:
        rv = review.on_review_entered(db, settings, board, task_id, apply=apply_verdict)
        note += f"; review: {rv.get('action')}"
    return ExitDecision(ExitAction.HANDLED, note=note, completed=True)


#: the metrics an open run has spent on so far that a new session of it would add to
_SO_FAR = ("runtime", "tokens", "cost")


def budget_spent(db: Database, board: str, task_id: str, run_id: int) -> str | None:
    """Why no other process of the open run ``run_id`` may start (a repair attempt, the reminder
    of a worker that stopped without reporting: each a new paid session), or None: a budget its
    task counts against (``kernel.budgets.for_task``) is spent once what the run spent so far is
    added to what the budget counted of its closed runs — the tokens and cost its ended processes
    reported (read before this is asked), its runtime until now."""
    found = [b for b in budgets.for_task(db, task_id)
             if any(b.get(budgets.LIMIT_OF[m]) is not None for m in _SO_FAR)]
    if not found:
        return None
    try:
        run = queries.get_run(db, board, run_id)
    except NotFound:  # purged meanwhile: nothing left to start
        return None
    now = time.time()
    so_far = {"runtime": max(0.0, float(run.get("ended_at") or now) - float(run["started_at"])),
              "tokens": float((run.get("input_tokens") or 0) + (run.get("output_tokens") or 0)),
              "cost": float(run.get("cost_usd") or 0)}
    for b in found:
        for m in _SO_FAR:
            limit = b.get(budgets.LIMIT_OF[m])
            total = float(b["spent"][m]) + so_far[m]
            if limit is not None and total >= float(limit):
                return (f"{budgets.scope_name(b)} is spent: {m} {budgets.amount(m, total)} of "
                        f"{budgets.amount(m, float(limit))} with this run's {budgets.amount(m, so_far[m])}; raise it "
                        f"with `agentboard budget set --{b['scope']} {b['ref']} --max-{m} ...`")
    return None


def _keep_usage(db: Database, run_id: int, usage: dict[str, Any] | None) -> None:
    """The usage a worker reported with a success that failed its checks, or with a failure:
    recorded on its (closed) run, so budgets, stats and races count what it spent."""
    if not usage:
        return
    try:
        p = runs.usage_params(usage)
        fields = {k: v for k, v in (("input_tokens", p["in_t"]), ("output_tokens", p["out_t"]),
                                    ("cost_usd", p["cost"])) if v is not None}
        if fields:
            runs.update_run(db, run_id, **fields)
    except AgentboardError as exc:  # a malformed report's usage is the report's problem
        log.info("run %s: its reported usage was not recorded: %s", run_id, exc)


def verify_backoff(settings: Settings, failures: int) -> float:
    """Seconds before the next attempt after a failed verification, ``failures`` failures in a row
    before it: the ``verify_backoff`` delay for that many (the last one beyond), with jitter."""
    delays = list(settings.verify_backoff) or [0.0]
    delay = float(delays[min(failures, len(delays) - 1)])
    jitter = float(settings.verify_backoff_jitter)
    return max(0.0, delay * (1 + random.uniform(-jitter, jitter))) if jitter else delay


def _ingest(db: Database, settings: Settings, board: str, task_id: str, run_id: int, data: dict[str, Any],
            author: str) -> None:
    """followUpSuggestions → comments of the run (within what one run may post: the rest are
    left out); wikiProposals → draft wiki pages (unless wiki is off; as many as one run may
    propose tasks)."""
    for text in data.get("followUpSuggestions") or []:
        try:
            comments.comment(db, board, task_id, f"Follow-up suggestion: {text.strip()}", author=author,
                             mentions=False, kind="suggestion", run_id=run_id)
        except TooMany as exc:
            log.info("run %s of %s: follow-up suggestions left out: %s", run_id, task_id, exc.message)
            break
    if settings.wiki_context:
        for item in (data.get("wikiProposals") or [])[: max(0, int(settings.run_proposal_limit))]:
            wiki.propose(db, board, item["contentMd"], note=item.get("note"), task_id=task_id, author=author)


def _degrade(db: Database, settings: Settings, board: str, task_id: str, run_id: int, workspace: Path,
             log_path: Path | None, parsed: result.Parsed, attempt: int,
             apply_verdict: review.VerdictApplier) -> ExitDecision:
    summary = repair.extract_summary(log_path, parsed.raw)
    raw = boarddir.result_path(workspace)
    try:
        runs.request_review(db, board, task_id, summary=summary, run_id=run_id, actor="dispatcher", after_exit=True)
    except StaleRun as exc:
        return ExitDecision(ExitAction.HANDLED, note=str(exc))
    kept = str(raw) if safefs.exists(raw) else None
    runs.update_run(db, run_id, metadata={"degraded": True, "errors": parsed.errors, "raw_result": kept})
    runs.record_telemetry(db, board, task_id, "result_degraded",
                          {"errors": parsed.errors, "attempts": attempt, "summary": summary[:400],
                           "raw_result": kept}, run_id=run_id)
    boarddir.append_history(workspace, f"## Result degraded (run {run_id})\n\nThe result never validated; "
                            "the task went to review with a summary extracted from the worker's output.\n")
    rv = review.on_review_entered(db, settings, board, task_id, apply=apply_verdict)
    return ExitDecision(ExitAction.HANDLED, note=f"result degraded to review; review: {rv.get('action')}")


def after_exit(db: Database, settings: Settings, board: str, task_id: str, run_id: int, workspace: Path,
               exit_code: int | None, log_path: Path | None, attempt: int = 0,
               verifying: Callable[[], verify.Setup] | None = None, *,
               complete: Completer | None = None, apply_verdict: review.VerdictApplier) -> ExitDecision:
    """Turn what an exited worker left behind into kernel calls (see the module docstring).

    ``attempt`` is 0 after the worker itself, N after the N-th repair attempt. ``verifying``:
    how the task's checks run — confined like the worker, with its environment
    (``dispatch.spawning.Spawner.verifying``); without it they run as the dispatcher.
    ``complete``: see :data:`Completer`. ``apply_verdict``: how a heuristic reviewer's verdict
    is applied when the task lands in review (the dispatcher's ``dispatch.finish.review``, the
    one road to done).
    """
    workspace = Path(workspace)
    log_path = Path(log_path) if log_path else None
    st = worker_protocol.exit_state(db, board, task_id, run_id)
    task, run = st.task, st.run
    if task is None or run is None:
        return ExitDecision(ExitAction.HANDLED, note=f"task {task_id} or run {run_id} no longer exists")
    if task["status"] != states.RUNNING or task["current_run_id"] != run_id:
        if task["status"] == states.REVIEW and run.get("outcome") == "review_requested":
            review.on_review_entered(db, settings, board, task_id, apply=apply_verdict)
        return ExitDecision(ExitAction.HANDLED, note=f"run {run_id} is already closed (task is {task['status']})")
    # the exit code is stored by the call that closes the run (complete / fail); the other paths
    # store it first
    def keep_exit_code() -> None:
        if exit_code is not None:
            runs.update_run(db, run_id, exit_code=exit_code)

    actor = task.get("assignee") or "worker"
    # the usage the dispatcher read from the agent CLI's output is on the open run already: what
    # the worker's report says counts only for a run that has none (a script agent)
    measured = any(run.get(k) is not None for k in ("input_tokens", "output_tokens", "cost_usd"))

    # 1. the worker reported success through the CLI or MCP; verification was pending
    if run.get("pending_report"):
        report = json.loads(run["pending_report"])
        return _verify_and_complete(
            db, settings, board, task, run_id, workspace, summary=report.get("summary") or "",
            metadata=dict(report.get("metadata") or {}), result_line=report.get("result"),
            usage=None if measured else report.get("usage"), actor=report.get("actor") or actor, exit_code=exit_code,
            verifying=verifying, complete=complete, apply_verdict=apply_verdict, to_review=bool(report.get("review")))

    # 2. the .board/result.json contract
    parsed = result.read(boarddir.result_path(workspace))
    if not parsed.exists and (attempt == 0 or run.get("nudged")):
        if (refused := repair.close_refused(db, settings, board, task_id, run, exit_code)) is not None:
            return ExitDecision(ExitAction.HANDLED, note=f"protocol_violation: {refused}")
        keep_exit_code()
        return ExitDecision(ExitAction.UNHANDLED, note="no .board/result.json and no report")
    if not parsed.exists:
        parsed = result.Parsed(True, None, ["$: .board/result.json is missing (it was invalid before)"])
    if not parsed.valid:
        keep_exit_code()
        runs.record_telemetry(db, board, task_id, "result_invalid",
                              {"attempt": attempt + 1, "errors": parsed.errors, "exit_code": exit_code},
                              run_id=run_id)
        if settings.board_repair and attempt < repair.MAX_ATTEMPTS:
            n = attempt + 1
            spent = budget_spent(db, board, task_id, run_id)
            if spent is not None:  # a repair attempt is a new paid session: the budget says no
                budgets.stop_run(db, board, task_id, run_id, f"{spent}; its result.json was invalid and no "
                                 "repair attempt was started")
                return ExitDecision(ExitAction.HANDLED, note=f"result.json invalid; no repair attempt: {spent}")
            boarddir.append_history(workspace, boarddir.repair_section(n, parsed.errors, run_id))
            deadline = float(settings.repair_deadline)
            prompt = boarddir.board_dir(workspace) / REPAIR_PROMPT_FILE
            boarddir.write_text(prompt, repair.repair_prompt(task_id, n, parsed.errors, deadline))
            runs.heartbeat(db, board, task_id, run_id=run_id, note=f"repair attempt {n}: result.json invalid",
                           actor="dispatcher", ttl=int(deadline) + settings.claim_ttl)
            return ExitDecision(ExitAction.REPAIR, prompt_file=prompt, deadline_seconds=deadline,
                                note=f"result.json invalid ({len(parsed.errors)} errors); repair attempt {n}")
        return _degrade(db, settings, board, task_id, run_id, workspace, log_path, parsed, attempt, apply_verdict)

    data = parsed.data or {}
    if attempt > 0:
        runs.record_telemetry(db, board, task_id, "result_repaired", {"attempt": attempt}, run_id=run_id)
    summary = data["summary"].strip()
    if not data["success"]:
        keep_exit_code()
        try:
            tasks.block(db, board, task_id, summary, kind="needs_input", run_id=run_id, actor=actor)
        except StaleRun as exc:
            return ExitDecision(ExitAction.HANDLED, note=str(exc))
        _keep_usage(db, run_id, None if measured else data.get("usage"))
        _ingest(db, settings, board, task_id, run_id, data, actor)
        return ExitDecision(ExitAction.HANDLED, note="worker needs input; task blocked")
    metadata: dict[str, Any] = {"source": "result.json"}
    for key in ("filesChanged", "notes", "followUpSuggestions"):
        if key in data:
            metadata[key] = data[key]
    decision = _verify_and_complete(db, settings, board, task, run_id, workspace, summary=summary,
                                    metadata=metadata, result_line=data.get("result"),
                                    usage=None if measured else data.get("usage"),
                                    actor=actor, exit_code=exit_code, verifying=verifying, complete=complete,
                                    apply_verdict=apply_verdict)
    if decision.completed:
        _ingest(db, settings, board, task_id, run_id, data, actor)
    return decision


# -- several exits at once -----------------------------------------------------------------------------


@dataclass
class PlainCompletion:
    """An exit whose whole effect is one completion (see :func:`plan_plain_completions`)."""

    board: str
    task_id: str
    run_id: int
    summary: str
    metadata: dict[str, Any]
    usage: dict[str, Any] | None
    actor: str
    exit_code: int | None


def plan_plain_completions(db: Database, settings: Settings,
                           exits: list[tuple[str, str, int, Path, int | None]]) -> dict[int, PlainCompletion]:
    """Which of several exits ``(board, task id, run id, workspace, exit code)`` of first attempts
    are plain completions: the task is still running on that run with no pending report, no
    verification, no review and no branch (a worktree task goes through :func:`after_exit`), and ``.board/result.json`` is valid, successful and carries
    nothing else to apply (no follow-up suggestions, no wiki proposals). One read for all.

    Completing those (``kernel.dispatching.complete_runs``) has exactly the effect
    :func:`after_exit` would have; every other exit goes through :func:`after_exit`.
    """
    if not exits:
        return {}
    st = worker_protocol.exit_states(db, [(b, t, r) for b, t, r, _w, _e in exits])
    out: dict[int, PlainCompletion] = {}
    for board, task_id, run_id, workspace, exit_code in exits:
        task, run = st[run_id].task, st[run_id].run
        if (task is None or run is None or task["status"] != states.RUNNING or task["current_run_id"] != run_id
                or run.get("pending_report") or task.get("review_required")
                or task.get("workspace_kind") == "worktree"):  # its branch may be integrated first
            continue
        v = task.get("verify")
        if json.loads(v or "[]") if isinstance(v, str) else v:
            continue  # verification runs first
        parsed = result.read(boarddir.result_path(Path(workspace)))
        if not (parsed.exists and parsed.valid and parsed.data and parsed.data.get("success")):
            continue
        data = parsed.data
        if (data.get("followUpSuggestions") or data.get("result")
                or (settings.wiki_context and data.get("wikiProposals"))):
            continue  # after_exit applies them
        metadata: dict[str, Any] = {"source": "result.json"}
        for key in ("filesChanged", "notes", "followUpSuggestions"):
            if key in data:
                metadata[key] = data[key]
        out[run_id] = PlainCompletion(board, task_id, run_id, data["summary"].strip(), metadata, data.get("usage"),
                                      task.get("assignee") or "worker", exit_code)
    return out


__all__ = [
    "ExitAction", "ExitDecision", "PlainCompletion", "after_exit", "budget_spent", "plan_plain_completions", "prepare",
    "prepare_reads", "protocol_instructions",
]
