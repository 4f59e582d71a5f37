"""Sharing the state: the remote's layout, fetch and push, what comes in checked, the fleet
lock (see docs/architecture.md)."""
