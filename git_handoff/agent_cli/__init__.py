"""Each agent CLI's side: hook payloads in and outputs out, its config files, launching it
and reading what it prints (see docs/architecture.md)."""
