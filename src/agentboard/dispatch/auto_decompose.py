"""Auto mode: the dispatcher decomposes triage tasks by itself, off the pass's critical path.

On a board with ``auto_decompose`` on (the board's setting, else the installation's), each pass
hands at most ``auto_decompose_per_pass`` triage tasks to the LLM — fewer while earlier ones are
still being decomposed — on this module's own threads; the pass itself only reads which tasks to
hand over and never waits for an answer, so a slow or hanging LLM never delays a spawn. A task
whose attempt failed waits out its back-off (``kernel.fanout.retry_delay``, recorded on the task
as a ``decompose_failed`` event with ``retry_at``) before it is tried again. With auto mode off
(manual) nothing here ever calls the LLM.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor

from ..agents import llm
from ..domain.errors import AgentboardError, Unavailable
from ..kernel import fanout
from ..store.engine import Row
from .runtime import Context

log = logging.getLogger("agentboard.dispatch")

#: the actor the board's events name for auto mode
ACTOR = "auto-decompose"


class AutoDecomposer:
    """The triage tasks being decomposed and the threads that do it (shared by the pass thread,
    which hands tasks over, and the pool threads, which finish them; behind one lock)."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self._lock = threading.Lock()
        self._inflight: set[str] = set()
        self._pool: ThreadPoolExecutor | None = None

    def inflight(self) -> set[str]:
        with self._lock:
            return set(self._inflight)

    def schedule(self, boards: list[Row], now: float) -> list[str]:
        """Hand the next triage tasks of the auto boards in ``boards`` to the LLM; returns their
        ids at once (the pass never waits for an answer)."""
        settings = self.ctx.settings
        auto = [b for b in boards if fanout.auto_decompose_on(self.ctx.db, b["slug"], b.get("settings") or {})]
        if not auto or not llm.availability(settings, "decomposer")[0]:
            return []
        busy = self.inflight()
        room = int(settings.auto_decompose_per_pass) - len(busy)
        handed: list[str] = []
        for b in auto:
            if room <= 0:
                break
            for row in fanout.auto_candidates(self.ctx.db, b["slug"], room, now=now, exclude=busy):
                with self._lock:
                    self._inflight.add(row["id"])
                self._executor().submit(self._one, b["slug"], row["id"])
                handed.append(row["id"])
                room -= 1
        return handed

    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=max(1, int(self.ctx.settings.auto_decompose_per_pass)),
                                            thread_name_prefix="agentboard-decompose")
        return self._pool

    def _one(self, board: str, task_id: str) -> None:
        from ..agents.decompose import decompose

        db = self.ctx.db
        try:
            out = decompose(db, board, task_id, settings=self.ctx.settings, actor=ACTOR)
            if not out.ok:
                log.info("auto-decompose of %s failed: %s", task_id, out.reason)
        except Unavailable as exc:  # the backend did not answer: back off like a bad answer
            try:
                fanout.record_failure(db, board, task_id, use="decomposer", error=exc.message, actor=ACTOR)
            except AgentboardError:
                pass
        except AgentboardError as exc:  # the task moved on meanwhile (released, archived, ...)
            log.info("auto-decompose of %s skipped: %s", task_id, exc.message)
        except Exception:
            log.exception("auto-decompose of %s failed", task_id)
        finally:
            with self._lock:
                self._inflight.discard(task_id)
            self.ctx.wake()

    def wait_idle(self, timeout: float) -> bool:
        """Wait until nothing is being decomposed (tests, the one-shot pass)."""
        import time

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.inflight():
                return True
            time.sleep(0.01)
        return False

    def drain(self) -> None:
        """Wait for the decompositions under way (the dispatcher is stopping)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
