"""The notifier: follows the event log and delivers what each subscription asks for.

At least once: a subscription's cursor (the last event id handled) moves only after its target
accepted the message, so a notifier that stops mid-delivery (or a target that fails) sends the
same events again later. A failed delivery is retried with exponential back-off; after
``notify_park_after`` failures in a row the target is parked: kept, shown with its last error,
not retried until someone resumes it.

A burst goes out as one digest: events wait ``notify_batch_delay`` seconds to settle, and after a
message further events wait for the end of ``notify_digest_window``; more than
``notify_digest_after`` pending events make one digest message instead of one message each.

Several notifiers (``serve`` and ``dispatcher`` processes, on several hosts over PostgreSQL)
share the work by leasing subscriptions (``kernel.notifications.claim_due``): one notifier holds a
subscription at a time, so each event is delivered by one host.
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
import uuid
from dataclasses import dataclass, field

from ..config import Settings
from ..domain import events as event_kinds
from ..domain.errors import Unavailable
from ..kernel import notifications as kn
from ..kernel import queries
from ..kernel.rows import EventRow
from ..observe import metrics
from ..observe.outage import Outage
from ..store.engine import Database, Row
from . import messages
from .outbound import Policy
from .send import send

log = logging.getLogger("agentboard.notify")

#: events read per page, and the most pages one cycle reads for one board
PAGE = 1000
MAX_PAGES = 5


@dataclass
class CycleReport:
    """What one cycle did (the counts a test or a benchmark reads)."""

    claimed: int = 0
    messages: int = 0
    events: int = 0
    failures: int = 0
    parked: list[int] = field(default_factory=list)
    held: int = 0


def backoff(settings: Settings, failures: int) -> float:
    """Seconds before retry number ``failures``: base * 2^(failures-1), at most the maximum,
    with a little jitter so several targets failing together do not retry together."""
    delay = settings.notify_retry_base * (2.0 ** max(0, failures - 1))
    return min(delay, settings.notify_retry_max) * random.uniform(1.0, 1.2)


def _kinds(sub: Row) -> frozenset[str]:
    import json

    try:
        kinds = json.loads(sub.get("kinds") or "[]")
    except ValueError:
        kinds = []
    return frozenset(kinds or event_kinds.NOTIFY_DEFAULT)


class Notifier:
    """``start()`` runs :meth:`run_once` in a thread until ``stop()``: on every local commit
    that wrote events, and every ``notify_poll_interval`` seconds for the commits of other
    processes and the retries that fall due."""

    def __init__(self, db: Database, settings: Settings | None = None, *, owner: str | None = None) -> None:
        self.db = db
        self.settings = settings or db.settings
        self.owner = owner or f"{self.settings.host_id}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    # -- the loop ---------------------------------------------------------------------------

    def start(self) -> Notifier:
        if self._thread is None:
            self.db.add_listener(self._on_commit)
            self._thread = threading.Thread(target=self._loop, name="agentboard-notifier", daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout: float = 30.0) -> None:
        self._stop.set()
        self._wake.set()
        self.db.remove_listener(self._on_commit)
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def _on_commit(self, _boards: set[str]) -> None:
        self._wake.set()

    def _loop(self) -> None:
        outage = Outage(log, "notifier cycle")
        while not self._stop.is_set():
            self._wake.clear()
            try:
                report = self.run_once()
            except Unavailable as exc:  # the database away: a line, and growing pauses
                if self._stop.wait(outage.failed(exc)):
                    break
                continue
            except Exception:  # the loop outlives a database hiccup; the next cycle retries
                log.exception("notifier cycle failed")
                report = CycleReport()
            else:
                outage.over()
            metrics.notify_cycle(report.messages, report.failures, len(report.parked))
            if report.claimed and not self._stop.is_set():
                continue  # there may be more due at once
            self._wake.wait(self.settings.notify_poll_interval)
            self._stop.wait(0.05)  # a burst of commits wakes one cycle, not one each

    # -- one cycle --------------------------------------------------------------------------

    _leased_at = 0.0
    _pending: set[int] = set()

    def _still_held(self, sub_id: int) -> bool:
        """Before each message: past half the lease, extend the leases still pending; False when
        this notifier no longer holds ``sub_id`` (it stalled longer than its lease)."""
        lease = self.settings.notify_lease
        if time.time() < self._leased_at + lease / 2:
            return True
        self._leased_at = time.time()
        held = kn.renew(self.db, self.owner, self._pending, lease=lease, now=self._leased_at)
        self._pending &= held
        return sub_id in held

    def run_once(self, now: float | None = None) -> CycleReport:
        """Lease the subscriptions due, read their boards' new events once, deliver, record."""
        report = CycleReport()
        self._leased_at = time.time()
        subs = kn.claim_due(self.db, self.owner, lease=self.settings.notify_lease, now=now)
        report.claimed = len(subs)
        if not subs:
            return report
        pending = {int(s["id"]) for s in subs}
        self._pending = pending
        try:
            # the newest readable event first: every event up to it (in the log's order) is
            # readable now, and one committed later comes after it
            high = queries.last_event_id(self.db)
            idle: dict[int, list[int]] = {}  # position reached -> subscriptions with nothing to send
            for sub in subs:
                if self._stop.is_set():
                    return report
                events, reached = self._events(sub, high)
                task_ids = sorted({t for e in events if (t := e["task_id"])})
                contexts = kn.task_contexts(self.db, task_ids) if task_ids else {}
                if self._handle(sub, events, contexts, reached, report):
                    pending.discard(int(sub["id"]))
                else:
                    idle.setdefault(reached, []).append(int(sub["id"]))
            for reached, ids in idle.items():
                kn.advance(self.db, self.owner, ids, reached)
                pending.difference_update(ids)
        finally:
            kn.release(self.db, self.owner, pending)
        return report

    def _events(self, sub: Row, high: int) -> tuple[list[EventRow], int]:
        """The events after ``sub``'s cursor in the log's order (the cursor is an event id; on
        PostgreSQL ids are not in commit order, so positions are never compared by id), and the
        position reached: the last event read, or ``high`` (read before) when there was none."""
        cursor = int(sub["cursor"])
        out: list[EventRow] = []
        for _ in range(MAX_PAGES):
            page = queries.events_after(self.db, sub["board"], cursor, kinds=sorted(_kinds(sub)), limit=PAGE)
            out.extend(page)
            if len(page) < PAGE:
                return out, (int(out[-1]["id"]) if out else (high or cursor))
            cursor = int(page[-1]["id"])
        return out, cursor  # read the rest next cycle

    def _handle(self, sub: Row, events: list[EventRow], contexts: dict[str, Row], high: int,
                report: CycleReport) -> bool:
        """Deliver what ``sub`` follows among ``events`` (or hold it back); False when nothing
        matched (the caller moves the cursors of all such subscriptions at once)."""
        s = self.settings
        sub_id, cursor = int(sub["id"]), int(sub["cursor"])
        kinds = _kinds(sub)
        matched = [e for e in events if e["kind"] in kinds
                   and kn.covers(sub, contexts.get(e.get("task_id") or ""), e)]
        if not matched:
            return False
        now = time.time()
        ready_at = float(matched[0]["created_at"]) + s.notify_batch_delay
        if sub.get("last_sent_at"):
            ready_at = max(ready_at, float(sub["last_sent_at"]) + s.notify_digest_window)
        if ready_at > now and not sub.get("failures"):
            kn.hold(self.db, self.owner, sub_id, ready_at)
            report.held += 1
            return True
        if len(matched) > s.notify_digest_after:
            batches = [(messages.digest(matched, contexts, s.public_url), int(matched[-1]["id"]))]
        else:
            batches = [(messages.single(e, contexts.get(e.get("task_id") or ""), s.public_url), int(e["id"]))
                       for e in matched]
        sent, done_to = 0, cursor
        # a target not subscribed as trusted connects to public (or allowed) addresses only,
        # checked on every connection (the setting read now: an allowance withdrawn applies)
        rule = None if sub.get("trusted") else Policy.of(s.notify_allow_hosts)
        for message, last_id in batches:
            if not self._still_held(sub_id):
                return True  # another notifier took it over: it delivers from the cursor
            error = send(sub["target"], message.title, message.body, timeout=s.notify_timeout,
                         kind=message.kind, policy=rule, settings=s)
            if error is not None:
                report.failures += 1
                failures = int(sub.get("failures") or 0) + 1
                row = kn.failed(self.db, self.owner, sub_id, error, retry_at=time.time() + backoff(s, failures),
                                park_after=s.notify_park_after, cursor=done_to, sent=sent)
                if row is not None and row["parked"]:
                    report.parked.append(sub_id)
                    log.warning("notification target %s parked after %d failures: %s",
                                sub["display"], failures, error)
                else:
                    log.info("delivery to %s failed (%s); retrying", sub["display"], error)
                return True
            sent += message.events
            done_to = last_id
            report.messages += 1
            report.events += message.events
        kn.delivered(self.db, self.owner, sub_id, high, sent=sent)
        return True


def start_notifier(db: Database, settings: Settings) -> Notifier | None:
    """The notifier a long-running process (``serve``, ``dispatcher``) hosts, started; ``None``
    when the ``notify`` setting is off."""
    if not settings.notify:
        return None
    return Notifier(db, settings).start()
