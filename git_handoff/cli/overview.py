"""What `git handoff` alone prints: the commands by area, like `git` alone, and the
state's one-line summary when run inside an initialized repository."""

from __future__ import annotations

import click

SECTIONS: list[tuple[str, tuple[str, ...]]] = [
    ("the task graph", ("init", "add", "import", "list", "show", "edit", "rm", "rename", "reopen",
                        "status", "next", "log", "graph")),
    ("the work cycle", ("claim", "renew", "release", "checkpoint", "verify", "done", "fail", "attempts", "restore")),
    ("sessions and handoff", ("session", "decide", "blocker", "doc", "prompt", "ack")),
    ("triggers", ("hooks", "hook")),
    ("many machines", ("sync", "trust")),
    ("unattended work and watching it", ("relay", "dispatch", "serve")),
    ("more", ("demo", "completion")),
]


def summary_line() -> str:
    """`state: …` for an initialized repository, a hint otherwise; never fails."""
    from git_handoff.core import selection
    from git_handoff.core.errors import HandoffError
    from git_handoff.infra.gitrepo import Repo
    from git_handoff.state.session_records import sessions_started
    from git_handoff.state.store import StateStore

    try:
        store = StateStore(Repo.discover())
        if not store.is_initialized():
            return "Not initialized here: `git handoff init` starts a plan in this repository."
        snap = store.snapshot()
        tasks = snap.tasks()
        c = selection.counts(tasks)
        sessions = sessions_started(snap.meta())
    except HandoffError as exc:
        return f"({exc.message.splitlines()[0]})"
    return (f"state: {len(tasks)} tasks  completed={c['completed']} in_progress={c['in_progress']} "
            f"pending={c['pending']} failed={c['failed']} blocked={c['blocked']}  sessions={sessions}  "
            "(`git handoff status` for more)")


def render(group: click.Group, ctx: click.Context) -> str:
    commands = {name: group.get_command(ctx, name) for name in group.list_commands(ctx)}
    listed = {name for _, names in SECTIONS for name in names}
    sections = [(title, [n for n in names if commands.get(n) is not None]) for title, names in SECTIONS]
    others = [n for n in commands if n not in listed]
    if others:
        sections.append(("other", others))
    width = max(len(n) for n in commands) + 2
    lines = ["usage: git handoff <command> [<args>] [--json]", "",
             "Keeps long-running coding-agent work safe, inside git (refs/harness/state).", ""]
    for title, names in sections:
        if not names:
            continue
        lines.append(f"{title[0].upper()}{title[1:]}")
        for name in names:
            command = commands[name]
            assert command is not None
            lines.append(f"   {name.ljust(width)}{command.get_short_help_str(limit=80 - width)}")
        lines.append("")
    lines.append("`git handoff <command> --help` explains one command; "
                 "`git handoff --help` the protocol and exit codes.")
    lines.append(summary_line())
    return "\n".join(lines)
