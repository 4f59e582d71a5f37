"""`git handoff`: the command line. Adapters only: parse, call one core function,
render text or JSON. Exit codes come from core/errors.py (`failure`: the one mapping of
an exception to its exit code and message, shared with the MCP tools); `_run` only
reads it, and gives click's own errors and interrupts theirs.

Subcommands live in one module per area and are imported only when used, so
`git handoff --help` and the hooks' entry points stay fast.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import traceback
from typing import TYPE_CHECKING, Any

import click

from git_handoff import __version__
from git_handoff.core import display
from git_handoff.core.errors import (
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    Failure,
    HandoffError,
    Signalled,
    failure,
    interrupt_exit_code,
)

if TYPE_CHECKING:  # the store module imports pygit2: at run time only the commands that need it load it
    from git_handoff.state.store import StateStore

TRACEBACK_HINT = "rerun with `git handoff --debug ...` for the traceback"

# name -> module under git_handoff.cli that defines a click command of that name
COMMANDS: dict[str, str] = {
    "init": "tasks",
    "add": "tasks",
    "import": "tasks",
    "list": "tasks",
    "show": "tasks",
    "edit": "tasks",
    "status": "tasks",
    "next": "tasks",
    "log": "tasks",
    "graph": "tasks",
    "claim": "work",
    "renew": "work",
    "release": "work",
    "checkpoint": "work",
    "verify": "work",
    "done": "work",
    "fail": "work",
    "attempts": "work",
    "restore": "work",
    "secrets": "secrets",
    "session": "session",
    "decide": "session",
    "blocker": "session",
    "doc": "session",
    "prompt": "session",
    "ack": "session",
    "hooks": "hooks",
    "hook": "hooks",
    "sync": "sync",
    "trust": "sync",
    "integrate": "sync",
    "relay": "relay",
    "dispatch": "dispatch",
    "demo": "demo",
    "mcp": "mcp",
    "serve": "serve",
    "rm": "revise",
    "rename": "revise",
    "reopen": "revise",
    "completion": "completion",
    "launcher": "launcher",
}

# Where a command is known by another name too.
ALIASES: dict[str, str] = {"ls": "list", "ready": "next"}


class Interrupted(Exception):
    """Ctrl-C (or SIGTERM, SIGHUP) inside a command, passed around click (which would print
    a blank line first); `exit_code` is 128 + the signal's number."""

    def __init__(self, cause: BaseException | None = None) -> None:
        super().__init__()
        self.exit_code = interrupt_exit_code(cause)
        self.signum = cause.signum if isinstance(cause, Signalled) else None


class LazyGroup(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as exc:
            raise Interrupted(exc) from None

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [name for name in COMMANDS if self.get_command(ctx, name) is not None]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        name = ALIASES.get(cmd_name, cmd_name)
        module_name = COMMANDS.get(name)
        if module_name is None:
            return None
        try:
            module = importlib.import_module(f"git_handoff.cli.{module_name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"git_handoff.cli.{module_name}":
                return None
            raise
        command = getattr(module, name.replace("-", "_") + "_cmd", None)
        return command if isinstance(command, click.Command) else None


CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


@click.group(cls=LazyGroup, context_settings=CONTEXT_SETTINGS, invoke_without_command=True)
@click.version_option(__version__, prog_name="git handoff")
@click.option("--debug", is_flag=True, help="Show the traceback of an unexpected error.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Keep long-running, multi-session coding-agent work safe, inside git.

    The state (a task graph, claims, checkpoints, failed attempts, sessions and
    handoff documents) lives on refs/harness/state: one commit per change, so
    `git log refs/harness/state` is the audit trail, and `git handoff sync`
    shares it through any git remote.

    \b
    A session's protocol:
      git handoff ack                 # first thing in a new session
      git handoff claim               # take the next eligible task
      git handoff checkpoint ID MSG   # after each significant step
      git handoff done ID             # runs the task's check; completes or rolls back
      git handoff fail ID --reason R  # give up: the attempt is saved, the tree rolled back

    Exit codes: 0 done, 1 a normal negative answer (nothing eligible, check
    failed, limit reached), 2 bad input / not initialized (nothing changed),
    3 contention (nothing changed; retry), 130 interrupted (143 SIGTERM, 129 SIGHUP).
    """
    if debug:
        os.environ["GIT_HANDOFF_DEBUG"] = "1"
    if ctx.invoked_subcommand is None:  # `git handoff` alone: the commands, like `git` alone
        from git_handoff.cli import overview

        assert isinstance(ctx.command, click.Group)
        click.echo(overview.render(ctx.command, ctx))


# Whether this invocation asked for --json, and whether its JSON document was printed:
# a negative answer (exit 1) given --json still prints one JSON object on stdout.
_json_run: dict[str, bool] = {"requested": False, "emitted": False}


def emit_json(value: Any) -> None:
    """One JSON document on stdout: indented for a person at a terminal, compact
    otherwise (Python's fast encoder only runs without indentation)."""
    indent = 2 if sys.stdout.isatty() else None
    click.echo(json.dumps(value, indent=indent, ensure_ascii=False, default=str))
    _json_run["emitted"] = True


def emit_json_text(text: str) -> None:
    """One JSON document on stdout already encoded as `emit_json` encodes it away from a
    terminal (compact)."""
    click.echo(text)
    _json_run["emitted"] = True


def _note_json(_ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
    if value:
        _json_run["requested"] = True
    return value


json_option = click.option("--json", "as_json", is_flag=True, callback=_note_json,
                           help="Print one JSON object on stdout.")


def visible(text: str, *, lines: bool = False) -> str:
    """Text that came from another clone (a fetched command, a commit's author, a file name
    in an attempt) as the terminal shows it: display.line, or with `lines` (a script a
    person reviews) display.lines."""
    return display.lines(text) if lines else display.line(text)


def writer_mark(who: str) -> str:
    """The mark of what a writer not approved here wrote last (handoff.allowedSigners): shown
    to a person, never offered to agents."""
    return f"  [unapproved writer: {visible(who)}; not offered to agents]"


def fail_line(message: str) -> None:
    click.echo(f"error: {display.line(message.splitlines()[0]) if message else 'failed'}", err=True)


def main(argv: list[str] | None = None) -> None:
    """Entry point of `git-handoff`: run the CLI and map every outcome to an exit code.
    Run as the program (not called in-process), it ends without the interpreter's
    teardown once output is flushed (git_handoff/infra/exit_fast.py)."""
    from git_handoff import cmdclient

    program = argv is None and cmdclient.started_as_program()
    if program:
        import gc

        gc.freeze()  # the imports' objects are never walked again by the collector
    try:
        _run(argv)
    except SystemExit as exc:
        if not program:
            raise
        from git_handoff.infra import exit_fast

        exit_fast.leave(exc.code)


def _run(argv: list[str] | None = None) -> None:
    _json_run.update(requested=False, emitted=False)
    _absolute_git_paths()
    try:
        _check_argv(sys.argv[1:] if argv is None else argv)
        cli.main(args=argv, prog_name="git handoff", standalone_mode=False, complete_var="_GIT_HANDOFF_COMPLETE")
    except HandoffError as exc:
        shown = failure(exc, traceback_hint=TRACEBACK_HINT)
        if _json_run["requested"] and not _json_run["emitted"]:
            emit_json(shown.payload)
        fail_line(shown.message)
        sys.exit(shown.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        fail_line("interrupted")
        sys.exit(EXIT_INTERRUPTED)
    except Interrupted as exc:
        _interrupted(exc.signum, exc.exit_code)
    except click.ClickException as exc:
        hint = ""
        if isinstance(exc, click.UsageError) and exc.ctx is not None:
            hint = f" (see `{exc.ctx.command_path} --help`)"
        _json_error(argv, {"error": Failure(EXIT_USAGE, exc.format_message() + hint, {}).line, "exit_code": EXIT_USAGE})
        fail_line(exc.format_message() + hint)
        sys.exit(EXIT_USAGE)
    except KeyboardInterrupt as exc:
        _interrupted(exc.signum if isinstance(exc, Signalled) else None, interrupt_exit_code(exc))
    except BrokenPipeError:
        sys.stderr.close()
        sys.exit(0)
    except Exception as exc:  # noqa: BLE001 - no traceback reaches a user unless asked
        if os.environ.get("GIT_HANDOFF_DEBUG"):
            traceback.print_exc()
        shown = failure(exc, traceback_hint=TRACEBACK_HINT)
        _json_error(argv, shown.payload)
        fail_line(shown.message)
        sys.exit(shown.exit_code)
    sys.exit(0)


def _interrupted(signum: int | None, code: int) -> None:
    import signal

    named = signum not in (None, signal.SIGINT)
    try:  # a terminal that hung up (SIGHUP) takes no more output
        fail_line(f"interrupted by {signal.Signals(signum).name}" if named and signum is not None else "interrupted")
    except OSError:
        pass
    sys.exit(code)


def _absolute_git_paths() -> None:
    """GIT_DIR and GIT_WORK_TREE as absolute paths (git passes `--git-dir=.git` on as it
    was written): the checks, cleanups, agents and git commands a command starts run in
    other directories, where a relative path would name another repository."""
    for var in ("GIT_DIR", "GIT_WORK_TREE"):
        value = os.environ.get(var)
        if value and not os.path.isabs(value):
            os.environ[var] = os.path.abspath(value)


def _check_argv(args: list[str]) -> None:
    """Every argument is text: bytes that are not UTF-8 (Python keeps them as lone
    surrogates) are refused before any command runs, whatever the command."""
    for n, arg in enumerate(args, 1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            shown = arg.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
            from git_handoff.core.errors import UsageError

            if "--json" in args:
                _json_run["requested"] = True
            raise UsageError(f"argument {n} ('{shown[:60]}') is not valid UTF-8 text: "
                             "git handoff takes its arguments as UTF-8") from None


def _json_error(argv: list[str] | None, payload: dict[str, object] | list[object]) -> None:
    """`--json` on exit 2 or 3 still prints `{"error", "exit_code"}` (EXIT STATUS in docs/git-handoff.md), also when
    click refused the command line before the option was seen."""
    args = sys.argv[1:] if argv is None else argv
    if _json_run["emitted"] or not (_json_run["requested"] or "--json" in args):
        return
    try:
        emit_json(payload)
    except (OSError, UnicodeError):
        pass


def get_store(session: int | None = None) -> StateStore:
    """The StateStore of the repository around the current directory, opened through the
    one door every adapter uses (ops/open_state.py): what it has to say (a notice queued
    for this clone, an interrupted rollback it finished) goes to stderr first."""
    from git_handoff.ops.open_state import open_state

    opened = open_state(session=session)
    for warning in opened.warnings:
        click.echo(f"warning: {visible(warning)}", err=True)
    return opened.store
