"""What the board's MCP server tells the agent about its tools (kept apart: ``initialize`` is
answered with it before the MCP SDK has loaded)."""

INSTRUCTIONS = (
    "Tools of an agentboard task board. You are a worker on one task: read it with kanban_show, "
    "report progress with kanban_heartbeat, and finish exactly once with kanban_complete (a summary of "
    "what you did) or kanban_block (a reason: what you need). Problems outside your task: kanban_propose."
)
