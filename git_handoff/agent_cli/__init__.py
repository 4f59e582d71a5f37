"""Each agent CLI's side: hook payloads in and outputs out, its config files, launching it
and reading what it prints (see docs/architecture.md).

Every supported CLI is one module implementing `AgentCli` (protocol.py), listed in
registry.py. `NAMES` is the registry's keys, for the code that must know them without
importing an adapter (the `hook` command's first step, the `--agent` choice; the
registry's own test checks that the two agree)."""

NAMES = ("claude", "codex", "gemini", "qwen", "copilot", "opencode")
