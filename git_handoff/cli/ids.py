"""Completing task ids for the shell (`git handoff show <TAB>`): the ids in the state,
read like any command reads them; nothing at all where there is no state."""

from __future__ import annotations

from typing import Any

import click


def complete_task_id(_ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[Any]:
    # imported only when a shell asks: every command's module imports this one
    from click.shell_completion import CompletionItem

    from git_handoff.core.errors import HandoffError
    from git_handoff.infra.gitrepo import Repo
    from git_handoff.state.store import StateStore

    try:
        store = StateStore(Repo.discover())
        if not store.is_initialized():
            return []
        tasks = store.snapshot().tasks()
    except HandoffError:
        return []
    return [CompletionItem(t.id, help=t.title[:60]) for t in tasks.values() if t.id.startswith(incomplete)]
