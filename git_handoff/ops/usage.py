"""A session's use of its agent CLI: where it is read, and where it is recorded.

One mechanism for every CLI: each hook call whose payload names the agent's transcript
(`transcript_path`, as Claude Code, Codex, Gemini CLI and Qwen Code send it; Copilot CLI's
`transcriptPath`) notes the (CLI,
transcript) pair in this worktree's private SOURCES_FILE, for the session open here; a
session's use is the sum, over the transcripts noted for it (a relaunch after a limit is a
new transcript), of what each CLI's module reads there (`AgentCli.usage`,
agent_cli/usage.py). `sessions.end` records it in the session record (`usage`) and adds the
session's tokens to the tasks it worked on (the task field `tokens`; its cost, where the agent
printed one, to `cost_micro_usd`); the relay reads it
while the session runs, for the budgets (ops/budgets.py).

A session's tokens are shared among the tasks it worked on (completed in it, or still
claimed by it) in equal parts, the remainder to the first: the tasks' tokens add up to the
sessions'. A session that worked on no task keeps its use to itself.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from git_handoff.agent_cli import registry
from git_handoff.agent_cli.hook_data import Event
from git_handoff.core.model import MAX_COUNT, Task
from git_handoff.infra.fileio import atomic_write
from git_handoff.infra.gitrepo import Repo
from git_handoff.state import session_records
from git_handoff.state.snapshot import StateReader
from git_handoff.state.store import StateStore, Tx

if TYPE_CHECKING:
    from git_handoff.agent_cli.usage import (
        Usage,  # the readers load it when a session's use is read
    )

SOURCES_FILE = "usage-sources.json"  # {"session": n, "sources": [[cli, transcript], ...]}
MAX_SOURCES = 64  # transcripts noted for one session at most (relaunches, compactions)


class UsageRecord(TypedDict, total=False):
    """`usage` of a session record (core/record_schemas.py checks it)."""

    input_tokens: int
    output_tokens: int
    tokens: int
    turns: int
    cost_usd: float | None
    seconds: int  # the session's wall time
    clis: list[str]  # the CLIs whose transcripts were read


def _path(repo: Repo) -> Path:
    return repo.git_dir / "handoff" / SOURCES_FILE


def _read(repo: Repo) -> dict[str, Any]:
    try:
        data = json.loads(_path(repo).read_text())
    except (OSError, ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def note(store: StateStore, event: Event) -> None:
    """Note the transcript a hook's payload named, for the session open here (if any)."""
    if not event.transcript or not event.cli:
        return
    number = session_records.current_number(store)
    if number <= 0:
        return
    data = _read(store.repo)
    sources = data.get("sources") if data.get("session") == number else None
    sources = [s for s in sources if isinstance(s, list) and len(s) == 2] if isinstance(sources, list) else []
    pair = [event.cli, event.transcript]
    if pair in sources or len(sources) >= MAX_SOURCES:
        return
    path = _path(store.repo)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps({"session": number, "sources": [*sources, pair]}) + "\n")


def sources(repo: Repo, number: int) -> list[tuple[str, str]]:
    """The (CLI, transcript) pairs noted for session `number` in this worktree."""
    data = _read(repo)
    if data.get("session") != number or not isinstance(data.get("sources"), list):
        return []
    return [(s[0], s[1]) for s in data["sources"]
            if isinstance(s, list) and len(s) == 2 and s[0] in registry.CLIS and isinstance(s[1], str)]


def of_session(repo: Repo, number: int) -> tuple[Usage | None, list[str]]:
    """Session `number`'s use as its transcripts tell it so far (None: nothing read), and
    the CLIs read."""
    total: Usage | None = None
    clis: list[str] = []
    for cli, transcript in sources(repo, number):
        found = registry.get(cli).usage(transcript)
        if found is not None:
            total = found if total is None else total + found
            if cli not in clis:
                clis.append(cli)
    return total, clis


def with_cost(used: Usage | None, cost: float | None) -> Usage | None:
    """`used` with the cost the agent's output printed (where it printed one) added to what
    its transcripts said (OpenCode's, in a session that switched between it and Claude Code)."""
    if cost is None:
        return used
    from git_handoff.agent_cli.usage import Usage  # noqa: PLC0415 - import cost: a hook loads it only to read use

    used = used or Usage()
    return dataclasses.replace(used, cost_usd=(used.cost_usd or 0.0) + cost)


def as_record(used: Usage, seconds: int | None, clis: list[str]) -> UsageRecord:
    record: UsageRecord = {"input_tokens": used.input_tokens, "output_tokens": used.output_tokens,
                           "tokens": used.tokens, "turns": used.turns, "cost_usd": used.cost_usd, "clis": clis}
    if seconds is not None:
        record["seconds"] = seconds
    return record


def worked_on(source: StateReader, number: int) -> list[Task]:
    """The tasks session `number` worked on: completed in it, or still claimed by it."""
    done = session_records.completed_ids(source, number)
    tasks = source.tasks()
    out = [tasks[t] for t in done if t in tasks]
    out += [t for t in tasks.values() if t.status == "in_progress" and t.claim.session == number and t.id not in done]
    return out


def shares(total: int, count: int) -> list[int]:
    """`total` in `count` equal parts, the remainder to the first."""
    if count <= 0:
        return []
    part, rest = divmod(total, count)
    return [part + (rest if i == 0 else 0) for i in range(count)]


COST = "cost_micro_usd"  # a task's share of its sessions' cost, in millionths of a dollar (a whole number)


def micro_usd(task: Task) -> int:
    """The millionths of a dollar charged to `task` so far (COST)."""
    micro = task.get(COST)
    return micro if isinstance(micro, int) and not isinstance(micro, bool) and micro > 0 else 0


def charge_tasks(tx: Tx, number: int, tokens: int, cost: float | None = None) -> list[str]:
    """Add a session's tokens, and its cost where its agent printed one, to the tasks it
    worked on, in equal shares; their ids."""
    tasks = worked_on(tx, number)
    micro = shares(round(cost * 1e6), len(tasks)) if cost else [0] * len(tasks)
    for task, share, paid in zip(tasks, shares(tokens, len(tasks)), micro, strict=True):
        if share or paid:
            # capped at the state's integer range: a count fetched at the cap stays one every clone reads
            new = task.evolve(tokens=min(MAX_COUNT, task.tokens + share))
            tx.put_task(new.with_extra(**{COST: min(MAX_COUNT, micro_usd(task) + paid)}) if paid else new)
    return [t.id for t in tasks]


def line(used: Usage, tasks: list[str]) -> str:
    """The log line of a session's use."""
    cost = f" cost_usd={used.cost_usd:.4f}" if used.cost_usd is not None else ""
    shared = f" tasks={','.join(tasks[:20])}" if tasks else ""
    return (f"usage tokens={used.tokens} input_tokens={used.input_tokens} output_tokens={used.output_tokens} "
            f"turns={used.turns}{cost}{shared}")

