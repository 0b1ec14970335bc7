"""Serving the index: the HTTP service, its client, and the MCP tools."""
