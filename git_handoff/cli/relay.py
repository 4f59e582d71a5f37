"""`git handoff relay`: run agent sessions back to back until the work is done."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from git_handoff.cli import emit_json, get_store, json_option, numbers

if TYPE_CHECKING:
    from git_handoff.ops.payloads import RelaySummary
    from git_handoff.ops.relay import Options
    from git_handoff.remote.fleet_lock import FleetLock
    from git_handoff.state.store import StateStore


@click.command("relay")
@click.option("--agent", "agents", multiple=True, metavar="CMD",
              help="The agent command (run by the shell at the repository root); {prompt_file} is replaced "
                   "by the prompt's path, also in $HANDOFF_PROMPT_FILE; $HANDOFF_SESSION is the session number. "
                   "Repeat it for agents to switch to, in order, when one's usage limit resets later than "
                   "--switch-after [default: the values of handoff.agents].")
@click.option("--switch-after", default=None, metavar="DURATION",
              help="Switch to the next agent not itself limited when the current one's limit resets later than "
                   "this (seconds, or 90s, 30m, 2h), and back once its reset has passed "
                   "[default: handoff.switchAfter, else 1h].")
@click.option("--tmux", is_flag=True, help="Run each session in a detached tmux session handoff-<repo>-<n>.")
@click.option("--tmux-socket", default=None, metavar="NAME",
              help="The tmux socket (-L) to use [default: one per repository].")
@click.option("--ack-timeout", type=numbers.SECONDS, default=60.0, show_default=True, metavar="S",
              help="Seconds a new session has to run `git handoff ack`.")
@click.option("--session-timeout", type=numbers.SECONDS, default=None, metavar="S",
              help="End a session that runs longer than S seconds.")
@click.option("--max-launch-failures", type=numbers.RELAY_COUNT, default=3, show_default=True, metavar="N",
              help="Stop after N launches in a row that were not acknowledged.")
@click.option("--handoff-grace", type=numbers.GRACE, default=10.0, show_default=True, metavar="S",
              help="Seconds an agent may keep running after its session handed off.")
@click.option("--max-idle-sessions", type=numbers.RELAY_COUNT, default=3, show_default=True, metavar="N",
              help="Stop after N sessions in a row that completed or attempted nothing.")
@click.option("--hang-timeout", type=numbers.GRACE, default=1800.0, show_default=True, metavar="S",
              help="End a session whose agent makes no progress for S seconds (no output, commit, state change "
                   "or new process), like a crash; 0: never.")
@click.option("--limit-backoff", type=numbers.SECONDS, default=60.0, show_default=True, metavar="S",
              help="On a usage or rate limit or an API outage that printed no reset time, wait S seconds, "
                   "doubled for each limit in a row, before launching the agent again.")
@click.option("--limit-backoff-max", type=numbers.SECONDS, default=1800.0, show_default=True, metavar="S",
              help="The longest of those waits.")
@click.option("--max-limit-wait", type=numbers.SECONDS, default=None, metavar="S",
              help="The longest wait for a limit, whatever reset time the agent's CLI printed; a reset further away "
                   "is reported and the wait cut to S, the claims' leases never extended past it "
                   "[default: handoff.maxLimitWait (a duration: 90s, 30m, 24h), else 86400].")
@click.option("--fleet-lock", is_flag=True,
              help="One relay per remote, not only per clone: hold a leased lock ref "
                   "(refs/harness/locks/relay) on the remote [default: handoff.relayLock=fleet].")
@click.option("--lock-remote", default=None, metavar="REMOTE",
              help="The remote of --fleet-lock [default: handoff.remote, else origin].")
@click.option("--lock-lease", type=numbers.LOCK_LEASE, default=120, show_default=True, metavar="S",
              help="Seconds the fleet lock lasts unless renewed (a dead machine's lock expires then).")
@click.option("--integrate/--no-integrate", default=None,
              help="Land finished work on the target between sessions (`git handoff integrate`), and wait while "
                   "this clone has nothing to claim but other machines' work is on its way "
                   "[default: handoff.integrate, else on when handoff.target is set].")
@click.option("--wait-patience", type=numbers.SECONDS, default=1800.0, show_default=True, metavar="S",
              help="With --integrate: stop after waiting S seconds for other machines' work with no progress anywhere.")
@click.option("--budget", "budget", multiple=True, metavar="KEY=VALUE",
              help="A budget, repeatable: tokens, cost, time, sessions (the run's), session-tokens, session-time, "
                   "session-cost, task-tokens, task-cost, task-time; claim=release|keep (a session a budget ends) "
                   "[default: handoff.budget.*].")
@click.option("--quiet", "-q", is_flag=True, help="Print only the final line.")
@json_option
def relay_cmd(agents: tuple[str, ...], switch_after: str | None, tmux: bool, tmux_socket: str | None,
              ack_timeout: float, session_timeout: float | None,
              max_launch_failures: int, handoff_grace: float, max_idle_sessions: int, hang_timeout: float,
              limit_backoff: float, limit_backoff_max: float, max_limit_wait: float | None, fleet_lock: bool,
              lock_remote: str | None, lock_lease: int, integrate: bool | None, wait_patience: float,
              budget: tuple[str, ...], quiet: bool, as_json: bool) -> None:
    """Run agent sessions one after another until every task is completed.

    Each session: `session start` (recovery included), the handoff prompt written to a
    file, the agent launched, its ACK awaited (`git handoff ack`), then the session runs
    until it hands off or the agent exits; a handoff document is written from git facts
    when the agent left none; `session end`; the next session.

    An agent that stops on a usage limit, a rate limit or an API outage (read from
    what it printed: docs/agent-limits.md) is not a failure: the relay says what it
    waits for and until when (`status` and the dashboard show it too), keeps the
    session open and its claims renewed, and launches the agent again into the same
    session when the limit resets (else after --limit-backoff). An agent that makes
    no progress for --hang-timeout is ended like a crash; with --tmux, an agent
    whose screen waits for a person (first-run, trust, API-key or permission
    screens) stops the relay with the setting that answers it.

    \b
    Examples:
      git handoff relay --agent 'python -m git_handoff.agents.scripted'
      git handoff relay --tmux --agent 'claude "$(cat {prompt_file})"'
      git handoff relay --agent 'claude -p "$(cat {prompt_file})"' --agent 'codex exec "$(cat {prompt_file})"'

    With several agents, one whose usage limit resets later than --switch-after is
    followed, in the same session and from the same prompt, by the next one in the
    order that is not limited itself; the first comes back once its reset has
    passed. Each switch is logged (category LIMIT) and shown by `status`, `session
    show` and the dashboard; when every agent is limited the relay waits for the
    earliest reset.

    With --fleet-lock (or `git config handoff.relayLock fleet`) one relay runs per
    remote: the relay takes the ref refs/harness/locks/relay on the remote by a
    compare-and-swap push, renews its lease while it runs and deletes it at exit; a
    lock whose lease expired (a dead machine) is taken over.

    Exit 0 when every task is completed; 1 when the relay stops with work left (limits,
    launch failures), saying why; 3 when another relay runs for this repository (or,
    with --fleet-lock, anywhere on the remote: the holder and its lease expiry are
    named); 130 on Ctrl-C, 143 on SIGTERM, 129 on SIGHUP: the agent's whole process
    tree is ended, its session closed with a document and the lock released, and the
    signals that come meanwhile (git passes a Ctrl-C on a second time) are ignored
    until that is done.
    """
    # Over 60 lines only by its help text above (`git handoff relay --help`, the man page):
    # the code is the options handed to ops/relay.py.
    from git_handoff.ops import budgets, relay_agents
    from git_handoff.ops import relay as ops

    store = get_store(session=0)
    commands = relay_agents.configured(store.repo, agents)
    opts = ops.Options(agent=commands[0], agents=commands,
                       switch_after=relay_agents.switch_after(store.repo, switch_after),
                       tmux=tmux, tmux_socket=tmux_socket, ack_timeout=ack_timeout,
                       session_timeout=session_timeout, max_launch_failures=max_launch_failures,
                       handoff_grace=handoff_grace, max_idle_sessions=max_idle_sessions,
                       fleet_lock=_fleet_lock(store, fleet_lock, lock_remote, lock_lease),
                       hang_timeout=hang_timeout or None, limit_backoff=limit_backoff,
                       limit_backoff_max=max(limit_backoff, limit_backoff_max),
                       limit_wait_max=max_limit_wait or _configured_wait(store), integrate=integrate,
                       wait_patience=wait_patience, budgets=budgets.configured(store.repo, budget))
    summary = _run(store, opts, quiet=quiet, as_json=as_json)
    if as_json:
        emit_json(summary)
    else:
        click.echo(f"relay finished: {summary['reason']} in {summary['sessions']} session(s)")


def _fleet_lock(store: StateStore, fleet_lock: bool, lock_remote: str | None, lock_lease: int) -> FleetLock | None:
    """The lock on the remote that --fleet-lock (or handoff.relayLock) asks for, else None."""
    from git_handoff.remote.fleet_lock import FleetLock
    from git_handoff.remote.fleet_lock import wanted as fleet_lock_wanted

    if not fleet_lock_wanted(store.repo, fleet_lock):
        return None
    import os

    from git_handoff.state.identity import clone_id

    remote = lock_remote or store.repo.config_get("handoff.remote") or "origin"
    return FleetLock(store.repo, remote, clone_id(store.repo), os.getpid(), lease_seconds=lock_lease)


def _run(store: StateStore, opts: Options, *, quiet: bool, as_json: bool) -> RelaySummary:
    """The relay run with its lines on stdout (none with --quiet or --json) and its waiting
    line on the terminal."""
    from git_handoff.cli.progress import Progress
    from git_handoff.ops import relay as ops

    with Progress("relay", as_json=as_json or quiet) as progress:
        def say(text: str) -> None:
            if not (quiet or as_json):
                progress.clear()  # a line of its own, never over the waiting line
                click.echo(text)

        def waiting(text: str | None) -> None:
            if text is None:
                progress.clear()
            else:
                progress(text)

        return ops.run_relay(store, opts, say, waiting)


def _configured_wait(store: StateStore) -> float:
    """handoff.maxLimitWait (a duration), else a day; a value that is no duration is exit 2."""
    from git_handoff.core.errors import UsageError
    from git_handoff.core.model import parse_duration
    from git_handoff.ops.relay_wait import WAIT_CAP

    value = store.repo.config_get("handoff.maxLimitWait")
    if not value:
        return WAIT_CAP
    try:
        return float(parse_duration(value))
    except UsageError as exc:
        raise UsageError(f"handoff.maxLimitWait: {exc.message}") from None
