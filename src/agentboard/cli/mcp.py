"""``agentboard mcp``: serve the board's kanban_* tools to an MCP client on stdio."""

from __future__ import annotations

import click

from .common import handle_errors


@click.command("mcp")
@handle_errors
def mcp() -> None:
    """MCP server on stdio: the worker's tools (04), scoped by AGENTBOARD_TASK / _RUN_ID / _BOARD / _PROFILE."""
    from agentboard.mcp.server import serve

    serve()
