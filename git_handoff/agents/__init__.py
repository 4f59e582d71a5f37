"""Agents that ship with git handoff (for the demo, tests, and trying the relay out)."""
