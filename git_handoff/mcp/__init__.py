"""The MCP adapter: the stdio server and its tool table (see docs/architecture.md)."""
