"""The web surface: REST routes, the WebSocket event stream, auth, and the dashboard's files.

``create_app`` is loaded on first use: importing a light module of the package (``serve``'s
process helpers, ``answers``) does not build FastAPI's routes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .app import create_app

__all__ = ["create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from .app import create_app

        return create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
