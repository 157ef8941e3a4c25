"""One dispatcher identity per host id: a second dispatcher that would share its host id with a
live one elsewhere refuses to start.

A dispatcher checks the processes of the runs that carry its host id, and closes those whose
process it cannot find on its machine (docs/dispatcher.md). Two dispatchers with one host id on
two machines (cloned machines or containers sharing a host name, the default host id), or on one
machine with two homes, would each close the other's live runs as crashed and run the tasks
again. So each dispatcher signs the host's pass mark (``kernel.monitoring.mark_pass``) with who
it is: the machine (its boot id and pid namespace), its home and its owner key
(:func:`.guard.owner_key`). A mark holds the host id for another dispatcher when it was signed:

- on this machine and home: never (the dispatchers of one home share its guard files, and take
  over each other's workers as :mod:`.guard` says);
- on this machine, another home: while its process runs;
- on another machine: for :data:`FRESH` seconds after it was written (a live dispatcher writes
  one every ``PASS_MARK_EVERY`` seconds, between its passes too, from a thread of its own
  (``observe.health.PassMarks.keep``): an idle dispatcher passes only once per
  ``dispatch_interval``, which may be longer than :data:`FRESH`; after a machine's death the id
  is free again then).

The check runs as a dispatcher starts, before it takes over or stops anything, and with every
mark after that (a dispatcher that finds its host id taken says so in its log once a minute).
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from typing import Any

from ..domain.errors import Conflict
from .guard import owner_alive

#: how long a mark from another machine holds the host id (seconds)
FRESH = 60.0


class HostIdInUse(Conflict):
    """Another live dispatcher runs with this host id."""

    code = "host_id_in_use"


def machine() -> str:
    """This machine as the kernel tells it: its boot id, and the pid namespace (a container's
    pids are not another's)."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        boot = socket.gethostname()
    try:
        ns = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        ns = 0
    return f"{boot}/{ns}"


def identity(home: Path, owner: str) -> dict[str, Any]:
    """Who this dispatcher is, as its marks carry it."""
    return {"machine": machine(), "home": str(Path(home).resolve()), "owner": owner, "node": socket.gethostname()}


def holds(other: dict[str, Any], at: float, me: dict[str, Any], now: float | None = None) -> bool:
    """Whether the mark signed ``other`` at ``at`` keeps the host id from ``me`` (see the top)."""
    if other.get("owner") == me.get("owner"):
        return False
    if other.get("machine") == me.get("machine"):
        return other.get("home") != me.get("home") and owner_alive(str(other.get("owner") or ""))
    return (time.time() if now is None else now) - at < FRESH


def describe(host: str, other: dict[str, Any], at: float) -> str:
    """One line: which dispatcher holds ``host``, and what to do."""
    pid = str(other.get("owner") or "?").split(":", 1)[0]
    ago = max(0, int(time.time() - at))
    return (f"another dispatcher runs with host id {host!r} (pid {pid} on {other.get('node') or '?'}, "
            f"home {other.get('home') or '?'}, seen {ago} s ago): give each dispatcher its own host id "
            f"(AGENTBOARD_HOST_ID or host_id in config.toml; docs/deploy.md)")
