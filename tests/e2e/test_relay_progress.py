"""`git handoff relay` shows how long it has waited for a session's ACK on one stderr
line updated in place, at a terminal only: never with --json, --quiet or piped. Driven
through real pseudo-terminals with a real agent process."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from tests.cli.test_terminal_output import run_at_terminal, text_of
from tests.e2e.test_relay import setup_tasks
from tests.support.repo import run_exe

pytestmark = pytest.mark.slow  # a whole relay of a real agent process

# acknowledges only after ~2.5 s, then does its one task
AGENT = f"sleep 2.5; {sys.executable} -m git_handoff.agents.scripted"
FRAME = re.compile(r"\r\x1b\[Krelay: session (\d+): waiting for ACK \((\d+) s of 30 s\)…")


def test_at_a_terminal_the_wait_for_the_ack_is_one_line_updated_in_place(repo: Path) -> None:
    setup_tasks(repo, 1, per_session=1)
    rc, events, _ = run_at_terminal("relay", "--agent", AGENT, "--ack-timeout", "30", cwd=repo, timeout=120)
    assert rc == 0
    err = "".join(t for _, s, t in events if s == "stderr")
    frames = [(int(n), int(seconds)) for n, seconds in FRAME.findall(err)]
    assert frames and {n for n, _ in frames} == {1}
    seconds = [s for _, s in frames]
    assert seconds == sorted(seconds) and seconds[0] == 0 and seconds[-1] >= 2  # counted up while it waited
    assert len(seconds) == len(set(seconds))  # redrawn when the count changes, not at every poll
    assert "\n" not in err.replace("\r\n", "\n").rstrip("\n")  # never a line of its own
    assert err.endswith("\r\x1b[K")  # cleared once acknowledged: nothing left on the terminal
    out = text_of(events, "stdout")
    assert "relay: session 1: acknowledged" in out and "waiting for ACK (" not in out
    assert out.splitlines()[-1].startswith("relay finished: ")


@pytest.mark.parametrize("flag", ["--json", "--quiet"])
def test_json_or_quiet_at_a_terminal_shows_no_progress(repo: Path, flag: str) -> None:
    setup_tasks(repo, 1, per_session=1)
    rc, events, _ = run_at_terminal("relay", "--agent", AGENT, "--ack-timeout", "30", flag, cwd=repo, timeout=120)
    assert rc == 0
    assert text_of(events, "stderr") == ""
    out = text_of(events, "stdout")
    if flag == "--json":
        assert json.loads(out)["sessions"] == 1
    else:
        assert out.splitlines() == [line for line in out.splitlines() if line.startswith("relay finished: ")]


def test_piped_output_has_no_progress_line(repo: Path) -> None:
    setup_tasks(repo, 1, per_session=1)
    res = run_exe("relay", "--agent", AGENT, "--ack-timeout", "30", cwd=repo)  # the real executable, piped
    assert res.rc == 0, res.err
    assert "waiting for ACK (" not in res.err and "\r" not in res.err and "\x1b" not in res.err
    assert "\r" not in res.out and "relay: session 1: acknowledged" in res.out
