"""`git handoff hook EVENT`: the one entry point every installed hook calls.

It finds the agent CLI whose hooks include EVENT (agent_cli/registry.py: `claude-*`
Claude Code, `codex-*` Codex CLI, `gemini-*` Gemini CLI, `qwen-*` Qwen Code, `copilot-*` Copilot
CLI, `opencode-*` OpenCode), lets the event core decide, and returns (stdout, stderr) for the caller
to print. It never raises for bad input: an empty, malformed or non-object payload is read as `{}`,
and a repository that is not initialized (or no repository) gives no output at all.
"""

from __future__ import annotations

import dataclasses

from git_handoff.agent_cli import registry
from git_handoff.agent_cli.hook_data import Event, Outcome
from git_handoff.core import decoding, display
from git_handoff.core.errors import HandoffError, UsageError
from git_handoff.ops import hook_decisions

EVENTS: tuple[str, ...] = ("post-commit", *(hook for cli in registry.CLIS.values() for hook in cli.HOOKS))


def parse_payload(text: str | None) -> tuple[dict[str, object], str]:
    """The agent's JSON payload, and a warning when it had to be set aside. A payload that
    is not a JSON object, or nests deeper than decoding.MAX_JSON_DEPTH, is handled as an
    empty one: a hook never fails its caller, so it does its work without the payload's
    fields (the agent keeps running; the warning goes to stderr)."""
    if not text or not text.strip():
        return {}, ""
    try:
        data = decoding.load_json_text(text, "hook payload")
    except UsageError as exc:
        return {}, f"git handoff hook: {exc.message.splitlines()[0][:300]}; the payload was ignored"
    return (data, "") if isinstance(data, dict) else ({}, "")


def run(hook: str, stdin_text: str | None) -> tuple[str, str]:
    """Handle one hook call; (what to print on stdout, a warning for stderr)."""
    if hook == "post-commit":
        try:
            opened = hook_decisions.find_state(Event(kind="post-commit"))
        except HandoffError as exc:
            return "", f"git handoff hook: {display.line(exc.message)}"
        if opened is None:
            return "", ""
        hook_decisions.post_commit(opened.store)
        return "", hook_decisions.with_warnings(Outcome(), opened.warnings).warning or ""
    adapter = registry.hook_owner(hook)
    if adapter is None:
        return "", ""
    payload, ignored = parse_payload(stdin_text)
    event = dataclasses.replace(adapter.event(hook, payload), cli=adapter.NAME)
    if event.set_aside:
        ignored = (f"git handoff hook: payload field(s) {', '.join(event.set_aside)} ignored: not one line "
                   "of text within its length cap")
    outcome = hook_decisions.handle(event)
    # one line on stderr, whatever was set aside and whatever the core warns of
    warned = "; ".join(" ".join(w.split()) for w in (ignored, outcome.warning or "") if w)
    return adapter.render(hook, outcome), warned
