"""The errors every adapter maps alike (git_handoff.core.errors): each class's exit code,
the exit status of a signal, and `failure`, the one mapping to a message and `--json`."""

from __future__ import annotations

import signal

from git_handoff.core.errors import (
    EXIT_MEANINGS,
    Contention,
    GitFailure,
    InvalidState,
    Negative,
    NotInitialized,
    Signalled,
    UsageError,
    error_json,
    failure,
    interrupt_exit_code,
)


def test_each_error_carries_its_documented_exit_code() -> None:
    codes = {cls: cls("m").exit_code for cls in (UsageError, NotInitialized, InvalidState, GitFailure, Negative,
                                                  Contention)}
    assert codes == {UsageError: 2, NotInitialized: 2, InvalidState: 2, GitFailure: 2, Negative: 1, Contention: 3}
    assert set(EXIT_MEANINGS) == {0, 1, 2, 3, 130}


def test_an_interrupt_exits_128_plus_its_signal() -> None:
    assert interrupt_exit_code(Signalled(signal.SIGTERM)) == 143
    assert interrupt_exit_code(Signalled(signal.SIGHUP)) == 129
    assert interrupt_exit_code(KeyboardInterrupt()) == 130
    assert interrupt_exit_code(None) == 130


def test_failure_of_a_handoff_error_is_its_code_and_message() -> None:
    got = failure(Contention("lost the race\nretry"), traceback_hint="--debug")
    assert (got.exit_code, got.line) == (3, "lost the race")
    assert got.payload == {"error": "lost the race\nretry", "exit_code": 3}


def test_failure_of_a_negative_answer_keeps_its_own_payload() -> None:
    assert failure(Negative("none", payload={"task": None}), traceback_hint="h").payload == {"task": None}
    assert failure(Negative("none", payload="text"), traceback_hint="h").payload == error_json("none", 1)


def test_failure_of_anything_else_is_unexpected_with_the_hint() -> None:
    got = failure(ValueError("boom"), traceback_hint="run with --debug")
    assert got.exit_code == 2
    assert got.message == "unexpected ValueError: boom (run with --debug)"
    assert got.payload == {"error": got.message, "exit_code": 2}
    assert failure(UsageError(""), traceback_hint="h").line == "failed"
