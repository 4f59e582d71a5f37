"""The few errors git handoff raises, each carrying its exit code (EXIT STATUS in docs/git-handoff.md).

Exit codes are decided here and nowhere else; the CLI only reads `.exit_code`.
"""

from __future__ import annotations

from typing import TypedDict

EXIT_OK = 0
EXIT_NEGATIVE = 1
EXIT_USAGE = 2
EXIT_CONTENTION = 3
EXIT_INTERRUPTED = 130


class Signalled(KeyboardInterrupt):
    """A terminating signal arrived (Ctrl-C's SIGINT, SIGTERM, SIGHUP): a KeyboardInterrupt
    that says which, so that the exit status can too (128 + the signal's number: 130,
    143, 129), as a shell reports a process the signal ended."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def interrupt_exit_code(exc: BaseException | None) -> int:
    """The exit status of an interrupted command: 128 + the signal's number (Ctrl-C: 130)."""
    return 128 + exc.signum if isinstance(exc, Signalled) else EXIT_INTERRUPTED


class HandoffError(Exception):
    """Base class: bad input or usage; nothing was changed (exit 2)."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class UsageError(HandoffError):
    """Bad input, unknown task, illegal transition (exit 2)."""


class NotARepository(HandoffError):
    """Not inside a git repository (exit 2)."""


class NotInitialized(HandoffError):
    """The repository has no refs/harness/state (exit 2)."""


class InvalidState(HandoffError):
    """The stored state cannot be read: corrupt or written by a newer format (exit 2)."""


class Negative(HandoffError):
    """A normal negative answer: nothing eligible, validation failed, limit reached (exit 1)."""

    exit_code = EXIT_NEGATIVE

    def __init__(self, message: str, payload: object = None) -> None:
        super().__init__(message)
        self.payload = payload


class Contention(HandoffError):
    """Lock or compare-and-swap lost after retries, remote rejected (exit 3). Safe to retry."""

    exit_code = EXIT_CONTENTION


class GitFailure(HandoffError):
    """A git command failed in a way the user must look at (exit 2)."""

# What each exit code means, in the words `--help` and the MCP tool results use.
EXIT_MEANINGS: dict[int, str] = {
    EXIT_OK: "done",
    EXIT_NEGATIVE: "a normal negative answer (nothing eligible, validation failed, limit reached)",
    EXIT_USAGE: "bad input or usage, not initialized or invalid state; nothing was changed",
    EXIT_CONTENTION: "contention (lock or compare-and-swap lost, remote rejected); nothing was changed, safe to retry",
    EXIT_INTERRUPTED: "interrupted",
}


class ErrorJson(TypedDict):
    """The `--json` of a command that failed (exit 2 or 3, or a negative answer without
    a payload of its own)."""

    error: str
    exit_code: int


class Failure:
    """What an adapter reports for an exception: the exit code, the message (its first
    line is the `error: ...` line) and the `--json` document (docs/git-handoff.md, EXIT
    STATUS: a negative answer's own payload, else `{"error", "exit_code"}`)."""

    __slots__ = ("exit_code", "message", "payload")

    def __init__(self, exit_code: int, message: str, payload: dict[str, object] | list[object]) -> None:
        self.exit_code = exit_code
        self.message = message
        self.payload = payload

    @property
    def line(self) -> str:
        """The message's first line: what follows `error: ` (`failed` for an empty message)."""
        return self.message.splitlines()[0] if self.message else "failed"


def failure(exc: Exception, *, traceback_hint: str) -> Failure:
    """The one mapping from an exception to what the CLI and the MCP tools report. A
    HandoffError carries its exit code; anything else is unexpected (exit 2), its message
    ending with `traceback_hint`, how this adapter shows the traceback."""
    if isinstance(exc, HandoffError):
        payload = exc.payload if isinstance(exc, Negative) else None
        if not isinstance(payload, (dict, list)):
            payload = error_json(exc.message, exc.exit_code)
        return Failure(exc.exit_code, exc.message, payload)
    message = f"unexpected {type(exc).__name__}: {exc} ({traceback_hint})"
    return Failure(EXIT_USAGE, message, error_json(message.splitlines()[0], EXIT_USAGE))


def error_json(message: str, exit_code: int) -> dict[str, object]:
    """ErrorJson, as the mapping Failure.payload holds."""
    answer: ErrorJson = {"error": message, "exit_code": exit_code}
    return dict(answer)
