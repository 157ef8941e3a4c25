"""``agentboard mcp``: serve the board's kanban_* tools to an MCP client on stdio."""

from __future__ import annotations

import click

from .common import handle_errors


@click.command("mcp")
@handle_errors
def mcp() -> None:
    """MCP server on stdio: the worker's kanban_* tools for an MCP-capable agent.

    The tools act on the task, run and board in AGENTBOARD_TASK, AGENTBOARD_RUN_ID and
    AGENTBOARD_BOARD (the dispatcher sets them); see docs/worker-protocol.md.
    """
    from agentboard.mcp.stdio import serve

    serve()
