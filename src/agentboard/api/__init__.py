"""The web surface: REST routes, the WebSocket event stream, auth, and the dashboard's files."""

from .app import create_app

__all__ = ["create_app"]
