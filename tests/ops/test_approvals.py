"""`trust` as a use case: the options read into one request (`plan`, pure), and that
request carried out on a fresh state (`trust`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from git_handoff.core.errors import UsageError
from git_handoff.infra.gitrepo import Repo
from git_handoff.ops import approvals
from git_handoff.state.store import StateStore
from tests.support.repo import run


@pytest.mark.parametrize(("options", "mode"), [
    ({}, "untrusted"),
    ({"approve_all": True}, "approve"),
    ({"ids": ("T1",)}, "approve"),
    ({"list_approved": True}, "approved"),
    ({"list_writers": True}, "writers"),
    ({"writer_keys": ("SHA256:k",)}, "approve-writers"),
    ({"list_writers": True, "writer_keys": ("SHA256:k",)}, "approve-writers"),
])
def test_plan_reads_each_mode(options: dict[str, Any], mode: str) -> None:
    assert approvals.plan(**options).mode == mode


@pytest.mark.parametrize(("options", "refusal"), [
    ({"list_approved": True, "approve_all": True}, "--approved lists"),
    ({"list_approved": True, "ids": ("T1",)}, "--approved lists"),
    ({"list_writers": True, "ids": ("T1",)}, "--writers and --writer"),
    ({"writer_keys": ("SHA256:k",), "list_approved": True}, "--writers and --writer"),
    ({"list_writers": True, "approve_all": True}, "--writers and --writer"),
])
def test_plan_refuses_options_that_do_not_go_together(options: dict[str, Any], refusal: str) -> None:
    with pytest.raises(UsageError, match=refusal):
        approvals.plan(**options)


def test_trust_on_a_fresh_state(repo: Path) -> None:
    assert run("init").rc == 0
    store = StateStore(Repo.discover())
    listed = approvals.trust(store, with_writers=True)
    assert (listed.mode, listed.commands, listed.writers) == ("untrusted", [], [])
    assert approvals.trust(store, approve_all=True).commands == []
    assert approvals.trust(store, list_approved=True).approvals == []
    with pytest.raises(UsageError, match="handoff.allowedSigners is not set"):
        approvals.trust(store, list_writers=True)
