"""agentboard: a durable task board on which named AI agents and people collaborate."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:  # pragma: no cover
    from .client import Client


def connect(url_or_home: str | os.PathLike[str] | None = None, **settings: Any) -> Client:
    """Open a board home (a folder) or a database URL and return a :class:`~agentboard.client.Client`.

    Keyword arguments override settings by name (``failure_limit=3``, ``claim_ttl=600``...).
    """
    from .client import connect as _connect

    return _connect(url_or_home, **settings)


__all__ = ["__version__", "connect"]
