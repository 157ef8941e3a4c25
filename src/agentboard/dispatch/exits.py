"""One thread watches every worker's exit: a pidfd per worker in one ``selectors`` (epoll) loop.

A worker's exit wakes the dispatcher at once. The pidfd of a child becomes readable when it
exits; the watcher then reaps it through ``Popen.poll`` (which keeps the exit status for the
pass, and serializes with the pass's own polls), so no zombie lingers. A host with 500 workers
holds one watcher thread, not 500.

Where ``os.pidfd_open`` is missing (not Linux ≥ 5.3) or refused (out of descriptors), the
worker is polled by the same thread every :data:`POLL_EVERY` seconds instead.
"""

from __future__ import annotations

import logging
import os
import selectors
import subprocess
import threading
from collections.abc import Callable

log = logging.getLogger("agentboard.dispatch")

#: seconds between polls of the workers that have no pidfd
POLL_EVERY = 0.25


class ExitWatcher:
    """Calls ``on_exit()`` (from its one thread) whenever a watched process exits.

    The thread, its selector and its wake-up pipe exist only between the first :meth:`watch`
    and :meth:`close` (the dispatcher's stop): a process that makes and stops many dispatchers
    keeps no thread or descriptor of theirs. A watch after a close starts them again."""

    def __init__(self, on_exit: Callable[[], None]) -> None:
        self.on_exit = on_exit
        self._lock = threading.Lock()
        self._sel: selectors.BaseSelector | None = None
        self._rd = self._wr = -1
        self._pending: list[subprocess.Popen[bytes] | int] = []
        self._polled: list[subprocess.Popen[bytes]] = []
        self._count = 0
        self._thread: threading.Thread | None = None
        self._closing = False

    @property
    def watching(self) -> int:
        """How many processes are watched right now."""
        with self._lock:
            return self._count + len(self._pending) + len(self._polled)

    @property
    def running(self) -> bool:
        """Whether the watcher's thread is running."""
        with self._lock:
            return self._thread is not None

    def watch(self, proc: subprocess.Popen[bytes] | int) -> None:
        """Call ``on_exit()`` once ``proc`` has exited (thread-safe; starts the thread when none
        runs). A pid (not our child: a worker adopted from an earlier dispatcher) is watched
        through its pidfd too; without one it is left to the passes. Ignored while a
        :meth:`close` is under way."""
        with self._lock:
            if self._closing:
                return
            if self._thread is None:
                self._sel = selectors.DefaultSelector()
                self._rd, self._wr = os.pipe()
                os.set_blocking(self._rd, False)
                os.set_blocking(self._wr, False)
                self._sel.register(self._rd, selectors.EVENT_READ, None)
                self._thread = threading.Thread(target=self._loop, args=(self._sel, self._rd),
                                                name="agentboard-exits", daemon=True)
                self._thread.start()
            self._pending.append(proc)
            if len(self._pending) == 1:  # else its poke is still on its way: the loop takes them all
                self._poke()

    def _poke(self) -> None:
        """Wake the loop (the caller holds the lock, so the pipe is still open)."""
        if self._wr < 0:
            return
        try:
            os.write(self._wr, b"x")
        except (BlockingIOError, OSError):
            pass  # the pipe is full: the loop is awake anyway

    def close(self) -> None:
        """Stop the thread and forget what it watched (the processes are not touched)."""
        with self._lock:
            thread = self._thread
            if thread is None:
                return
            self._closing = True
            self._poke()
        if thread is not threading.current_thread():
            thread.join(5.0)

    def _add(self, sel: selectors.BaseSelector, procs: list[subprocess.Popen[bytes] | int]) -> bool:
        """Register ``procs``; True when one has exited already."""
        exited = False
        for proc in procs:
            if isinstance(proc, subprocess.Popen) and proc.returncode is not None:
                exited = True
                continue
            try:
                fd = os.pidfd_open(proc if isinstance(proc, int) else proc.pid)
            except ProcessLookupError:  # reaped already
                exited = True
                continue
            except (AttributeError, OSError):
                if isinstance(proc, subprocess.Popen):
                    self._polled.append(proc)
                continue
            sel.register(fd, selectors.EVENT_READ, proc)
            self._count += 1
        return exited

    def _loop(self, sel: selectors.BaseSelector, rd: int) -> None:
        while True:
            with self._lock:
                if self._closing:
                    break
                pending, self._pending = self._pending, []
                fired = self._add(sel, pending)
                polled = bool(self._polled)
            try:
                events = sel.select(0 if fired else (POLL_EVERY if polled else None))
            except OSError:  # pragma: no cover - a descriptor closed under us
                log.exception("the exit watcher's select failed")
                events = []
            for key, _ in events:
                if key.data is None:
                    try:
                        while os.read(rd, 4096):
                            pass
                    except (BlockingIOError, OSError):
                        pass
                    continue
                with self._lock:
                    sel.unregister(key.fd)
                    self._count -= 1
                os.close(key.fd)
                if isinstance(key.data, subprocess.Popen):
                    key.data.poll()  # reaped now: no zombie lingers until the pass
                fired = True
            if polled:
                with self._lock:
                    still = [p for p in self._polled if p.poll() is None]
                    fired = fired or len(still) != len(self._polled)
                    self._polled = still
            if fired:
                try:
                    self.on_exit()
                except Exception:  # pragma: no cover - waking never fails the watcher
                    log.exception("waking the dispatcher after an exit failed")
        with self._lock:  # under the lock: no watch() pokes a pipe being closed
            for key in list(sel.get_map().values()):
                if key.data is not None:
                    os.close(key.fd)
            sel.close()
            os.close(rd)
            os.close(self._wr)
            self._sel, self._rd, self._wr = None, -1, -1
            self._pending, self._polled, self._count = [], [], 0
            self._thread, self._closing = None, False
