"""Clover as an ACP agent (docs/acp.md); see server.py."""
