"""The MCP surface: ``agentboard mcp`` (kanban_* tools on stdio)."""
