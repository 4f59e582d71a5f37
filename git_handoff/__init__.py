"""git handoff: keep long-running, multi-session coding-agent work safe, inside git."""

__version__ = "0.1.0"
