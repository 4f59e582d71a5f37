"""Messages for this clone's next command, shown once (git_handoff.state.notices)."""

from __future__ import annotations

from pathlib import Path

from git_handoff.infra.gitrepo import Repo
from git_handoff.state import notices


def test_notices_are_queued_in_order_and_taken_once(repo: Path) -> None:
    r = Repo.discover(repo)
    assert notices.take(r) == []
    notices.remember(r, ["claim of a lost in a sync"])
    notices.remember(r, [])
    notices.remember(r, ["second", "third"])
    assert notices.take(r) == ["claim of a lost in a sync", "second", "third"]
    assert notices.take(r) == []


def test_a_damaged_notices_file_is_dropped_not_fatal(repo: Path) -> None:
    r = Repo.discover(repo)
    path = r.handoff_dir / notices.NOTICES_FILE
    path.write_text("{not json")
    assert notices.take(r) == []
    path.write_text('{"a": 1}')
    notices.remember(r, ["kept"])  # a file that is not a list is started afresh
    assert notices.take(r) == ["kept"]
