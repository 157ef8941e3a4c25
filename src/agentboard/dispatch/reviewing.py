"""Review runs: the dispatcher's side of the reviewer agent (``protocol.review``).

For a task in review whose board's reviewer is a profile or the LLM, a pass opens a review run
(``kernel.runs.open_review_run``: a run of the task like any other, counted in the caps, marked
as a review run) and hands it to the job pool, off the pass's critical path:

- **profile**: the review context is written into the task's workspace
  (``.board/review-context.md`` and the prompt) and the profile is started there
  (``Spawner.spawn_review``). When it exits, ``.board/review-verdict.json`` is read and applied;
- **llm**: one LLM call over the same context (``agents.review``), its usage recorded.

A review run that gives no valid verdict closes as ``crashed`` / ``protocol_violation`` /
``timed_out`` (an event says why, in the words the agent CLI's output gives: its parsed error,
never its raw JSON lines) and the next pass tries again; after the failure limit (the task's
``max_retries``, the board's ``failure_limit``, else the setting) the task waits for a person
with a ``review_unavailable`` event. A reviewer CLI that hit a rate limit closes its run as
``rate_limited``, which counts as no failure: the run keeps the reset (``metadata.retry_at``,
the one the CLI printed, else ``rate_limit_cooldown``) and no review run starts on the task
before it. One whose sign-in was refused is not retried: the task waits for a person at once, the
``review_unavailable`` reason saying how to sign the profile in. A profile never reviews its own
work: the task says why and waits for a person.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..domain import states
from ..domain.errors import AgentboardError, Conflict, InvalidInput, StaleRun, Unavailable
from ..kernel import budgets as kbudgets
from ..kernel import dispatching as kd
from ..kernel import races as kraces
from ..kernel import runs as kr
from ..kernel import worker_protocol
from ..kernel.common import run_metadata
from ..protocol import boarddir, review, review_context, safefs
from ..store.engine import Row
from . import adapters, agent_config, liveness, spawn, workspaces
from .reaping import EXIT_RATE_LIMITED
from .runtime import Context
from .spawning import STOP_GRACE, Spawner, SpawnError

log = logging.getLogger("agentboard.dispatch")


@dataclass(frozen=True)
class Started:
    """A review run this pass opened: its board and the profile it counts against (None: the LLM)."""

    board: str
    profile: str | None


class Reviewing:
    """Opens review runs, watches them, and applies what they answer."""

    def __init__(self, ctx: Context, spawner: Spawner) -> None:
        self.ctx = ctx
        self.spawner = spawner
        #: the earliest end of a reviewer's rate limit the last :meth:`start` waited for (a pass
        #: is due then), or None
        self.wake_at: float | None = None

    # -- open review runs (each pass) ----------------------------------------------------------------

    def check(self, rows: list[Row], now: float) -> None:
        """Look at the open review runs (rows of ``PassSnapshot.reviewing``): a reviewer that exited
        is judged on the job pool; one left behind by a dispatcher that stopped is closed."""
        ctx = self.ctx
        for r in rows:
            rid = int(r["id"])
            if ctx.workers.busy(rid):
                continue
            w = ctx.workers.get(rid)
            started = float(r["started_at"] or now)
            if w is not None:
                if w.poll():
                    ctx.jobs.submit(rid, self._judge, r, w)
                elif now - started > float(ctx.settings.stale_timeout):
                    ctx.jobs.submit(rid, self._stop, r, w, f"the reviewer ran longer than {int(ctx.settings.stale_timeout)}s; stopped")
                else:
                    self._renew(r, now)
                continue
            if not ctx.local(r):
                exp = r.get("claim_expires")
                if exp is not None and exp < now:
                    self._close(r, "reclaimed", f"claim expired: the reviewer on host {r['worker_host']!r} is gone")
                continue
            pid = r.get("worker_pid")
            if pid and liveness.pid_alive(int(pid), started_after=started):
                continue  # a reviewer a previous dispatcher started: judged once it is gone
            if pid:
                ctx.jobs.submit(rid, self._judge, r, None)
            elif now - started > float(ctx.settings.spawn_grace) + 5:
                self._close(r, "crashed", "the dispatcher stopped before the review was done")

    def _renew(self, r: Row, now: float) -> None:
        """A live local reviewer keeps its review run's claim, renewed at half its lifetime."""
        ttl = float(self.ctx.settings.claim_ttl)
        exp = r.get("claim_expires")
        if exp is not None and float(exp) - now >= ttl / 2:
            return
        try:
            kr.extend_review_claim(self.ctx.db, r["board"], r["task_id"], int(r["id"]))
        except AgentboardError as exc:
            log.info("review run %s of %s: %s", r["id"], r["task_id"], exc)

    def load(self, rows: list[Row]) -> list[tuple[str, str | None, bool]]:
        """What the open review runs add to the load: ``(board, profile, runs here)`` each."""
        out = []
        for r in rows:
            rid = int(r["id"])
            here = self.ctx.local(r) and (self.ctx.workers.busy(rid) or self.ctx.workers.takes_slot(rid)
                                          and self.ctx.workers.get(rid) is not None)
            out.append((str(r["board"]), r.get("profile"), bool(here)))
        return out

    # -- starting reviews ----------------------------------------------------------------------------

    def start(self, board: Row, profiles: dict[str, Row], room: int, taken: dict[str, int]) -> list[Started]:
        """Open review runs for up to ``room`` tasks in review on ``board``; ``taken`` counts the
        runs per profile (the caps of ``max_concurrency``)."""
        ctx, slug = self.ctx, board["slug"]
        self.wake_at = None
        if room <= 0:
            return []
        reviewer = review.choose_reviewer(ctx.settings, board.get("settings") or {}, profiles)
        if reviewer.mode not in ("profile", "llm"):
            return []  # off or heuristic: the hand-off itself decides (``review.on_review_entered``)
        rows = kd.review_candidates(ctx.db, slug, room + 8)
        shared = {c["id"]: os.path.normpath(str(c["workspace_path"])) for c in rows
                  if c.get("workspace_kind") == "dir" and c.get("workspace_path")}
        busy = kd.folders_in_use(ctx.db, sorted(set(shared.values()))) if shared else {}
        out: list[Started] = []
        for c in rows:
            if len(out) >= room:
                break
            task_id = c["id"]
            folder = shared.get(task_id)
            if folder is not None:  # a shared folder runs one worker (or reviewer) at a time
                holder = busy.get(folder)
                if holder is not None and holder[0] != task_id:
                    continue
                busy[folder] = (task_id, None)
            try:
                why = review.own_work(reviewer, c.get("worker_profile")) or self._gave_up(board, c)
                if why:
                    worker_protocol.note_review_unavailable(ctx.db, slug, task_id, why)
                    continue
            except AgentboardError as exc:
                log.info("review of %s: %s", task_id, exc)
                continue
            until = _rate_limited_until(c, float(ctx.settings.rate_limit_cooldown))
            if until is not None and until > time.time():  # its reviewer's rate limit: after the reset
                self.wake_at = until if self.wake_at is None else min(self.wake_at, until)
                continue
            entry = ctx.workers.get(int(c["entry_run"])) if c.get("entry_run") else None
            if entry is not None and not entry.poll():
                continue  # its worker is still exiting
            profile = profiles.get(reviewer.profile or "") if reviewer.mode == "profile" else None
            if profile is not None:
                limit = profile.get("max_concurrency")
                if limit and taken.get(profile["name"], 0) >= int(limit):
                    continue
            try:  # a review run is a run like any other: its budgets must afford it
                spent = kbudgets.review_gate(ctx.db, slug, task_id, profile["name"] if profile else None)
            except AgentboardError as exc:
                log.info("budgets of a review of %s: %s", task_id, exc)
                continue
            if spent:
                ctx.notes.note(("budget", task_id, spent[:60]), slug, task_id, "respawn_guarded",
                               {"reason": f"no review run: {spent}", "review_run": True})
                continue
            try:
                rid = kr.open_review_run(ctx.db, slug, task_id, reviewer=reviewer.name, host=ctx.host,
                                         profile=profile["name"] if profile else None,
                                         reviews_run=c.get("entry_run"))
            except AgentboardError as exc:
                log.info("opening a review run on %s: %s", task_id, exc)
                continue
            if rid is None:
                continue
            if profile is not None:
                taken[profile["name"]] = taken.get(profile["name"], 0) + 1
                ctx.jobs.submit(rid, self._spawn, board, c, profile, rid)
            else:
                ctx.jobs.submit(rid, self._ask_llm, board, c, rid)
            out.append(Started(slug, profile["name"] if profile else None))
        return out

    def _gave_up(self, board: Row, c: Row) -> str | None:
        """Why no more review runs start for this review entry (the failure limit), or None."""
        limit = int(c.get("max_retries") or (board.get("settings") or {}).get("failure_limit")
                    or self.ctx.settings.failure_limit)
        failed = int(c.get("failed_reviews") or 0)
        if failed < limit:
            return None
        return (f"the reviewer failed {failed} times on this review (last: {c.get('last_error') or 'no verdict'}); "
                "a person must review")

    def _facts(self, board: Row, c: Row) -> review_context.WorkspaceFacts:
        """Where the work of task ``c`` is."""
        try:
            ws = workspaces.plan(self.ctx.home, board, c)
        except workspaces.WorkspaceError:
            return review_context.WorkspaceFacts("none", None)
        path = ws.path
        if ws.kind != "worktree" and c.get("workspace_path"):
            path = Path(c["workspace_path"])
        return review_context.WorkspaceFacts(ws.kind, path, ws.repo, ws.branch, c.get("base_branch"))

    def _spawn(self, board: Row, c: Row, profile: Row, rid: int) -> None:
        """Write the review context into the workspace and start the reviewer (a job)."""
        ctx, slug = self.ctx, board["slug"]
        facts = self._facts(board, c)

        def write(workspace: Path) -> Path:
            text = review_context.build(ctx.db, slug, c["id"], facts, int(ctx.settings.review_diff_max))
            return review_context.prepare(workspace, text, c["id"], rid)

        try:
            self.spawner.spawn_review(board, c, profile, rid, write)
        except SpawnError as exc:
            self._close({"id": rid, "task_id": c["id"], "board": slug}, "spawn_failed", str(exc))

    def _ask_llm(self, board: Row, c: Row, rid: int) -> None:
        """One LLM call over the review context, its verdict applied (a job)."""
        from ..agents import llm
        from ..agents import review as llm_review

        ctx, slug, task_id = self.ctx, board["slug"], c["id"]
        row = {"id": rid, "task_id": task_id, "board": slug}
        try:
            text = review_context.build(ctx.db, slug, task_id, self._facts(board, c), int(ctx.settings.review_diff_max))
            verdict, answer = llm_review.ask(ctx.settings, text)
        except Unavailable as exc:
            self._close(row, "crashed", f"the LLM reviewer is {exc.message}")
            return
        except InvalidInput as exc:
            self._close(row, "protocol_violation", exc.message)
            return
        try:
            llm.record_usage(ctx.db, slug, task_id, llm_review.USE, answer, on_run=True)  # the run counts it
        except AgentboardError as exc:
            log.info("recording the LLM reviewer's usage on %s: %s", task_id, exc)
        self._apply(row, verdict, review.reviewer_label("llm", answer.model), "llm", answer.usage)

    # -- answers -----------------------------------------------------------------------------------------

    def _judge(self, r: Row, w: spawn.Worker | None) -> None:
        """A reviewer exited: apply its verdict file, or close its run saying why there is none."""
        rid = int(r["id"])
        pid = w.pid if w is not None else r.get("worker_pid")
        if pid:
            liveness.end_group(int(pid), grace=2.0)
        self.ctx.cgroups.end(rid, grace=2.0)
        self.ctx.workers.forget(rid)
        workspace = w.workspace if w is not None else Path(r.get("workspace_path") or ".")
        profile = (w.profile if w is not None else None) or {"name": r.get("profile")}
        adapter = str(profile.get("adapter") or "command")
        out = adapters.read_output(adapter, w.log_path if w else None, w.log_offset if w else 0)
        usage = {"input_tokens": out.input_tokens, "output_tokens": out.output_tokens, "cost_usd": out.cost_usd}
        exit_code = w.exit_code if w is not None else None
        path = boarddir.board_dir(workspace) / review.VERDICT_FILE
        try:
            verdict = review.read_verdict(path)
        except InvalidInput as exc:
            self._no_verdict(r, w, profile, out, exc.message, exit_code, usage, written=safefs.exists(path))
            return
        name = str(profile.get("name") or "reviewer")
        self._apply(r, verdict, review.reviewer_label(f"profile:{name}", profile.get("model")), name, usage)

    def _no_verdict(self, r: Row, w: spawn.Worker | None, profile: dict[str, Any], out: adapters.Outcome,
                    why: str, exit_code: int | None, usage: dict[str, Any], *, written: bool) -> None:
        """Close the run of a reviewer that exited without a valid verdict, saying why in the words
        its CLI's output gives: a refused sign-in (the task waits for a person, told how to sign
        the profile in), a rate limit (no failure; the review starts again after the reset), a
        crash or a protocol violation (a failure, tried again up to the failure limit)."""
        adapter = str(profile.get("adapter") or "command")
        cli = adapters.NAMES.get(adapter, "the reviewer")
        said = f": {out.error}" if out.error else ""
        if adapter in adapters.CLI_ADAPTERS:  # its log is its event stream: what it said, never raw JSON
            detail = (f"; its last message: {' '.join(out.final_text.split())[:300]}"
                      if out.final_text and not out.is_error else "")
        else:
            tail = spawn.log_tail(w.log_path, w.log_offset) if w is not None else ""
            detail = f"; last output: {tail}" if tail else ""
        if out.failure == "auth":
            fix = agent_config.login_fix(adapter, profile)
            error = f"{cli} could not sign in. {fix}" + (f" (it said: {out.error})" if out.error else "")
            self._close(r, "crashed", error, exit_code=exit_code, usage=usage)
            name = profile.get("name") or r.get("profile") or "reviewer"
            try:  # retrying cannot help until a person signs it in
                worker_protocol.note_review_unavailable(
                    self.ctx.db, str(r["board"]), str(r["task_id"]),
                    f"the reviewer profile {name!r} could not sign in: {fix}"
                    + (f" (it said: {out.error})" if out.error else "") + "; a person must review")
            except AgentboardError as exc:
                log.info("review of %s: %s", r["task_id"], exc)
            return
        if out.rate_limited or exit_code == EXIT_RATE_LIMITED:
            until = out.retry_at if out.retry_at is not None else time.time() + float(self.ctx.settings.rate_limit_cooldown)
            when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(until))
            source = "the reset time it gave" if out.retry_at is not None else "the rate_limit_cooldown setting"
            meta = run_metadata(r)
            try:  # kept on the run: the passes start no review of the task before it
                kr.update_run(self.ctx.db, int(r["id"]), metadata={**meta, "retry_at": until})
            except AgentboardError as exc:
                log.info("review run %s of %s: %s", r["id"], r["task_id"], exc)
            self._close(r, "rate_limited", f"{cli} hit a rate limit or quota{said} (exit {exit_code}); the review "
                        f"starts again at {when} ({source})", exit_code=exit_code, usage=usage)
            return
        if exit_code not in (0, None) and not written:
            self._close(r, "crashed", f"the reviewer exited with status {exit_code} without a verdict"
                        + (f" ({cli}{said})" if said else "") + detail, exit_code=exit_code, usage=usage)
        else:
            self._close(r, "protocol_violation", f"the reviewer gave no valid verdict: {why}"
                        + (f" ({cli}{said})" if said else "") + detail, exit_code=exit_code, usage=usage)

    def _apply(self, r: Row, verdict: dict[str, Any], reviewer: str, actor: str, usage: dict[str, Any] | None) -> None:
        board, task_id, rid = str(r["board"]), str(r["task_id"]), int(r["id"])
        if verdict.get("verdict") == "approved" and kraces.is_unpicked_race(self.ctx.db, board, task_id):
            self._pick(r, verdict, actor, usage)
            return
        from . import finish

        try:
            v = kr.Verdict.build(verdict["verdict"], verdict.get("summary", ""), reviewer=reviewer,
                                 score=verdict.get("score"), findings=verdict.get("findings") or [])
            out = finish.review_run(self.ctx.db, board, task_id, rid, v, actor=actor, usage=usage)
        except StaleRun:
            return
        except Conflict as exc:  # the task left review meanwhile (a person decided first)
            self._close(r, "superseded", None, usage=usage)
            log.info("review run %s of %s: %s", rid, task_id, exc)
        except InvalidInput as exc:
            self._close(r, "protocol_violation", f"the reviewer's verdict was refused: {exc.message}", usage=usage)
        else:
            if v.verdict == "approved" and out.get("status") != states.DONE:
                log.info("review run %s of %s approved it, but its branch could not be integrated: %s", rid, task_id,
                         out.get("block_reason") or "")

    def _pick(self, r: Row, verdict: dict[str, Any], actor: str, usage: dict[str, Any] | None) -> None:
        """A reviewer approved a race: the attempt it picks wins (``finish.pick``, as from every
        surface); an approval that picks none, or one that may not win, is refused."""
        from . import finish

        n = verdict.get("pick")
        if not isinstance(n, int):
            self._close(r, "protocol_violation", "a race is approved by picking its winning attempt: give "
                        "\"pick\": N in the verdict", usage=usage)
            return
        try:
            finish.pick(self.ctx.db, str(r["board"]), str(r["task_id"]), n, actor=actor)
        except AgentboardError as exc:
            self._close(r, "protocol_violation", f"the reviewer's pick was refused: {exc.message}", usage=usage)
            return
        self._close(r, "reviewed", None, usage=usage)

    def _stop(self, r: Row, w: spawn.Worker, error: str) -> None:
        self.ctx.stop_worker(int(r["id"]), w.pid, grace=STOP_GRACE, proc=w.proc)
        w.poll()
        self.ctx.workers.forget(int(r["id"]))
        self._close(r, "timed_out", error, exit_code=w.exit_code)

    def _close(self, r: Row, outcome: str, error: str | None, *, exit_code: int | None = None,
               usage: dict[str, Any] | None = None) -> None:
        try:
            kr.close_review_run(self.ctx.db, str(r["board"]), str(r["task_id"]), int(r["id"]), outcome,
                                error=error, exit_code=exit_code, usage=usage)
        except AgentboardError as exc:
            log.info("closing review run %s: %s", r["id"], exc)
        if error:
            log.info("review run %s of %s: %s: %s", r["id"], r["task_id"], outcome, error)


def _rate_limited_until(c: Row, cooldown: float) -> float | None:
    """When the rate limit the last review run of candidate ``c`` hit ends (its ``retry_at``;
    a run that kept none: ``cooldown`` after it ended), or None when that run was not rate-limited."""
    if c.get("last_outcome") != "rate_limited":
        return None
    until = run_metadata({"metadata": c.get("last_metadata")}).get("retry_at")
    if isinstance(until, int | float):
        return float(until)
    return float(c.get("last_ended_at") or 0) + cooldown


__all__ = ["Reviewing", "Started"]
