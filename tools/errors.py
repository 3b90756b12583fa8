class ToolRefused(Exception):
    """A tool call the gateway refuses; the text reaches the agent as an MCP tool error."""
