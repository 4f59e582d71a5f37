"""`trust`: what came from elsewhere, listed or approved - the commands other clones put in
the state (state/trust.py) and the writers handoff.allowedSigners does not list
(state/writers.py). `plan` reads the options into one request (pure: it refuses a mix of
them) that `trust` carries out."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from git_handoff.core.errors import UsageError
from git_handoff.ops.history import ensure_history
from git_handoff.state import trust as commands
from git_handoff.state import writers

if TYPE_CHECKING:
    from git_handoff.state.store import StateStore
    from git_handoff.state.trust import Approval, Untrusted
    from git_handoff.state.writers import PendingWriter

# what `trust` was asked: list the untrusted commands, approve some, list the approvals;
# list the writers waiting for approval, approve writers by key
Mode = Literal["untrusted", "approve", "approved", "writers", "approve-writers"]


@dataclass(frozen=True)
class TrustRequest:
    """The options of `trust`, read: what to do, and the task IDs or keys it is done to."""

    mode: Mode
    ids: tuple[str, ...] = ()
    approve_all: bool = False
    keys: tuple[str, ...] = ()


@dataclass(frozen=True)
class TrustAnswer:
    """What `trust` found or did, by its mode: `commands` the untrusted commands listed
    ("untrusted") or approved ("approve"); `approvals` this clone's approvals ("approved");
    `writers` the writers waiting for an approval ("writers", and for "untrusted" asked
    `with_writers`); `keys` the writers' keys approved ("approve-writers")."""

    mode: Mode
    commands: list[Untrusted] = field(default_factory=list)
    approvals: list[Approval] = field(default_factory=list)
    writers: list[PendingWriter] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)


def plan(*, ids: tuple[str, ...] = (), approve_all: bool = False, list_approved: bool = False,
         list_writers: bool = False, writer_keys: tuple[str, ...] = ()) -> TrustRequest:
    """The request the options make; UsageError for options that do not go together."""
    if list_writers or writer_keys:
        if ids or approve_all or list_approved:
            raise UsageError("--writers and --writer take no task IDs, --all or --approved")
        return TrustRequest("approve-writers", keys=writer_keys) if writer_keys else TrustRequest("writers")
    if list_approved:
        if ids or approve_all:
            raise UsageError("--approved lists; it takes no task IDs and no --all")
        return TrustRequest("approved")
    if not ids and not approve_all:
        return TrustRequest("untrusted")
    return TrustRequest("approve", ids=ids, approve_all=approve_all)


def trust(store: StateStore, *, ids: tuple[str, ...] = (), approve_all: bool = False, list_approved: bool = False,
          list_writers: bool = False, writer_keys: tuple[str, ...] = (), with_writers: bool = False) -> TrustAnswer:
    """`trust` with these options (`plan`), carried out on this clone. `with_writers`: a
    listing of the untrusted commands also names the writers waiting for an approval (what
    its text closes with)."""
    request = plan(ids=ids, approve_all=approve_all, list_approved=list_approved, list_writers=list_writers,
                   writer_keys=writer_keys)
    mode = request.mode
    if mode == "approve-writers":
        return TrustAnswer(mode, keys=writers.approve_keys(store.repo, request.keys))
    if mode == "writers":
        if not writers.enabled(store.repo):
            raise UsageError("handoff.allowedSigners is not set: every writer's tasks are offered (see "
                             "docs/allowed-signers.md)")
        return TrustAnswer(mode, writers=writers.pending_writers(store.repo))
    if mode == "approved":
        return TrustAnswer(mode, approvals=commands.approved(store.repo))
    if mode == "approve":
        return TrustAnswer(mode, commands=commands.approve(store, request.ids, approve_all=request.approve_all))
    ensure_history(store)  # where each command came from may lie below a shallow join's cut
    listed = commands.untrusted(store)
    return TrustAnswer(mode, commands=listed, writers=writers.pending_writers(store.repo) if with_writers else [])
