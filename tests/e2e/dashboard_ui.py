"""What the dashboard's browser tests share: how long a change may take to show, where their
screenshots go, unique titles, a board with a ``coder`` profile, and Playwright's ``expect``
(None without Playwright: the browser fixture then skips, or fails under CI, with the reason)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips (or fails under CI) with the reason
    expect = None  # type: ignore[assignment]

T = 10_000  # ms: the longest a user-visible change may take to appear
SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"


def uniq(label: str) -> str:
    return f"{label} {uuid.uuid4().hex[:6]}"


def coder(kernel: Any) -> Any:
    """The kernel's default board, with a ``coder`` profile to assign tasks to."""
    if not any(p["name"] == "coder" for p in kernel.profiles()):
        kernel.add_profile("coder", command="true")
    return kernel.board()


__all__ = ["SCREENSHOTS", "T", "coder", "expect", "uniq"]
