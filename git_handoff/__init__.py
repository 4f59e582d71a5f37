"""git handoff: keep long-running, multi-session coding-agent work safe, inside git."""

__version__ = "0.1.0"

# Started as the `git-handoff` program, hand the run to this repository's command server
# when one fits, before anything heavy is imported (git_handoff/cmdclient.py); in any
# other case this returns at once. `python -m git_handoff` does the same in __main__.py.
from git_handoff import cmdclient as _cmdclient  # noqa: E402

_cmdclient.run_if_started_as_program()
