"""What the CLI, REST and the dashboard call: add a subscription (its URL checked by Apprise
first) and send a test message. Listing, removing and resuming are kernel calls
(``kernel.notifications``)."""

from __future__ import annotations

from collections.abc import Iterable

from ..domain.errors import InvalidInput
from ..kernel import notifications as kn
from ..store.engine import Database, Row
from . import outbound, targets
from .send import INFO, send


def policy(db: Database, trusted: bool) -> outbound.Policy | None:
    """The outbound policy of a target: ``None`` (no limit) for a trusted one, else public
    addresses and the ``notify_allow_hosts`` setting."""
    return None if trusted else outbound.Policy.of(db.settings.notify_allow_hosts)


def add(db: Database, board: str, scope: str, subject: str, target: str, *,
        kinds: Iterable[str] | None = None, actor: str | None = None, trusted: bool = True) -> Row:
    """Subscribe ``target`` (an Apprise URL) to a task, goal, board or profile; events from now
    on are delivered. The URL is refused when Apprise cannot send to it, and, for a target that
    is not ``trusted`` (not subscribed by an administrator, the local CLI or the configuration),
    when it is not a public address (:mod:`.outbound`)."""
    url, shown = targets.check(target, policy(db, trusted))
    return kn.subscribe(db, board, scope, subject, url, shown, kinds=kinds, actor=actor, trusted=trusted)


def test(db: Database, board: str | None, *, sub_id: int | None = None, target: str | None = None,
         timeout: float | None = None, trusted: bool = True) -> Row:
    """Send a test message to a subscription's target (or to ``target``, an Apprise URL).
    ``{"ok": bool, "target": masked, "error": text or None}``; a parked subscription that
    receives it is resumed. A caller that is not ``trusted`` gets the generic error, and a
    target it names (or a subscription that was not subscribed as trusted) is checked as
    :mod:`.outbound` says, when named and on every connection."""
    if (sub_id is None) == (target is None):
        raise InvalidInput("test needs a subscription id or a target URL (one of them)")
    limit = timeout if timeout is not None else db.settings.notify_timeout
    if sub_id is not None:
        row = kn.target_of(db, board, sub_id)
        url, shown = row["target"], row["display"]
        rule = policy(db, bool(row.get("trusted")))
    else:
        rule = policy(db, trusted)
        url, shown = targets.check(target or "", rule)
    error = send(url, "agentboard test", f"A test message from agentboard to {shown}.",
                 timeout=limit, kind=INFO, policy=rule, settings=db.settings)
    if error is not None and not trusted:
        error = outbound.GENERIC_ERROR
    out: Row = {"ok": error is None, "target": shown, "error": error}
    if sub_id is not None:
        out["subscription"] = int(sub_id)
        if error is None and row.get("parked_at") is not None:
            kn.resume(db, board, sub_id)
            out["resumed"] = True
    return out
