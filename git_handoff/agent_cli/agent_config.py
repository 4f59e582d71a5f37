"""Merging git handoff's hooks into an agent CLI's own JSON configuration, keeping every
user entry: Codex CLI's `.codex/hooks.json` and Gemini CLI's `.gemini/settings.json`
share Claude Code's shape (`hooks`: event -> [{matcher?, hooks: [handler]}]).

Codex runs a hook from a project's `.codex/hooks.json` only when (1) the project is
trusted and (2) that handler's definition is trusted: `$CODEX_HOME/config.toml` holds
`[hooks.state."<hooks.json>:<event>:<group>:<handler>"] trusted_hash = "sha256:…"`,
the sha256 of the handler's normalized identity (sorted-key compact JSON of
`{event_name, matcher?, hooks: [{type, command, timeout, async}]}`). `codex exec` has
no way to approve a hook, so an untrusted one is silently skipped. Installing our
handlers is the user's approval of exactly those commands, so install records their
trust (and uninstall removes it); trusting the *project* stays the user's decision.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from git_handoff.core.errors import UsageError
from git_handoff.infra.fileio import atomic_write

CODEX_HOOK_TIMEOUT = 600  # seconds: Codex's default, part of the trusted identity


@dataclass(frozen=True)
class Spec:
    agent: str
    label: str
    relpath: str
    prefix: str
    entries: dict[str, tuple[str | None, str]]  # event -> (matcher, command)
    named: bool = False  # give each handler a "name" (Gemini CLI's /hooks enable|disable use it)
    timeouts: tuple[tuple[str, int], ...] = ()  # event -> the handler's "timeout", where one is set
    plugin: str | None = None  # relpath holds this template whole instead (plugin_file.py)


def handler_name(command: str) -> str:
    return "git-handoff-" + command.rsplit(" ", 1)[-1].split("-", 1)[-1]


def load_object(path: Path) -> dict[str, Any]:
    """An agent CLI's JSON settings file as its object ({} when absent); anything else is
    refused with the file left as it is."""
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text() or "{}")
    except (ValueError, UnicodeDecodeError, OSError) as exc:
        raise UsageError(f"{path} is not valid JSON ({exc}); fix it first, nothing was changed") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path} must hold a JSON object; nothing was changed")
    return data


def load(path: Path, spec: Spec) -> dict[str, Any]:
    """The file's JSON object ({} when absent); anything unusable is refused unchanged."""
    data = load_object(path)
    hooks = data.get("hooks")
    if hooks is not None and not isinstance(hooks, dict):
        raise UsageError(f"{path}: \"hooks\" must be an object; nothing was changed")
    for event in spec.entries:
        if hooks and event in hooks and not isinstance(hooks[event], list):
            raise UsageError(f"{path}: hooks.{event} must be a list; nothing was changed")
    return data


def write(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def _ours(handler: Any, spec: Spec) -> bool:
    """Our handler: the plain command, or one ending with it (the fast client's form)."""
    if not isinstance(handler, dict):
        return False
    command = str(handler.get("command", ""))
    return command.startswith(spec.prefix) or f"; exec {spec.prefix}" in command


def remove_others(data: dict[str, Any], spec: Spec) -> list[str]:
    """Take out our handlers whose command is not the one `spec` installs (the other form,
    another version), so that merging adds the wanted one instead of a second."""
    return remove(data, spec, keep=frozenset(command for _, command in spec.entries.values()))


def _groups(data: dict[str, Any], event: str) -> list[Any]:
    hooks = data.get("hooks")
    groups = hooks.get(event) if isinstance(hooks, dict) else None
    return groups if isinstance(groups, list) else []


def _handlers(group: Any) -> list[Any]:
    handlers = group.get("hooks") if isinstance(group, dict) else None
    return handlers if isinstance(handlers, list) else []


def present(data: dict[str, Any], spec: Spec) -> dict[str, bool]:
    """Per event: is our handler there?"""
    return {event: any(_ours(h, spec) and h.get("command") == command
                       for g in _groups(data, event) for h in _handlers(g))
            for event, (_, command) in spec.entries.items()}


def has_ours(data: dict[str, Any], spec: Spec) -> bool:
    """Every event holds a handler of ours (of this version or another)."""
    return all(any(_ours(h, spec) for g in _groups(data, event) for h in _handlers(g)) for event in spec.entries)


def merge(data: dict[str, Any], spec: Spec) -> list[str]:
    """Add our handler to every event that lacks it (a group of its own, appended after
    the user's); returns the events added."""
    have = present(data, spec)
    hooks = data.setdefault("hooks", {})
    added = []
    for event, (matcher, command) in spec.entries.items():
        if have[event]:
            continue
        handler: dict[str, Any] = {"type": "command", "command": command}
        timeout = dict(spec.timeouts).get(event)
        if timeout is not None:
            handler["timeout"] = timeout
        if spec.named:
            handler = {"name": handler_name(command), **handler}
        group: dict[str, Any] = {"hooks": [handler]}
        if matcher:
            group = {"matcher": matcher, **group}
        hooks.setdefault(event, []).append(group)
        added.append(event)
    return added


def remove(data: dict[str, Any], spec: Spec, keep: frozenset[str] = frozenset()) -> list[str]:
    """Take out every handler of ours but those running a command in `keep` (emptied
    groups and events go too, nothing else); returns the events touched."""
    hooks = data.get("hooks")
    removed: set[str] = set()
    if not isinstance(hooks, dict):
        return []
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        kept_groups = []
        for group in groups:
            handlers = _handlers(group)
            kept = [h for h in handlers if not _ours(h, spec) or h.get("command") in keep]
            if len(kept) != len(handlers):
                removed.add(event)
                if not kept:
                    continue
                group = {**group, "hooks": kept}
            kept_groups.append(group)
        if kept_groups:
            hooks[event] = kept_groups
        elif event in removed:
            del hooks[event]
    if not hooks and removed:
        del data["hooks"]
    return sorted(removed)


# -- Codex hook trust ----------------------------------------------------------------------


def codex_home() -> Path:
    raw = os.environ.get("CODEX_HOME", "").strip()
    return Path(raw).resolve() if raw else Path.home() / ".codex"


def _snake(event: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in event).lstrip("_")


def codex_identity_hash(event: str, matcher: str | None, handler: dict[str, Any]) -> str:
    timeout = handler.get("timeout", handler.get("timeoutSec"))
    identity: dict[str, Any] = {
        "event_name": _snake(event),
        "hooks": [{"type": "command", "command": handler.get("command"),
                   "timeout": max(1, int(timeout)) if isinstance(timeout, int) else CODEX_HOOK_TIMEOUT,
                   "async": handler.get("async") is True}],
    }
    if matcher is not None:
        identity["matcher"] = matcher
    if handler.get("statusMessage") is not None:
        identity["hooks"][0]["statusMessage"] = handler["statusMessage"]
    blob = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(blob.encode()).hexdigest()


def codex_trust_entries(hooks_path: Path, data: dict[str, Any], spec: Spec) -> dict[str, str]:
    """The hooks.state key -> trusted_hash of each of our handlers where it now sits."""
    out = {}
    for event in spec.entries:
        for gi, group in enumerate(_groups(data, event)):
            matcher = group.get("matcher") if isinstance(group, dict) else None
            for hi, handler in enumerate(_handlers(group)):
                if _ours(handler, spec):
                    key = f"{hooks_path}:{_snake(event)}:{gi}:{hi}"
                    out[key] = codex_identity_hash(event, matcher if isinstance(matcher, str) else None, handler)
    return out


def _our_hashes(spec: Spec) -> set[str]:
    timeouts = dict(spec.timeouts)
    return {codex_identity_hash(event, matcher, {"command": command, "timeout": timeouts.get(event)})
            for event, (matcher, command) in spec.entries.items()}


def _load_toml(path: Path) -> Any:
    import tomlkit

    if not path.exists():
        return tomlkit.document()
    try:
        return tomlkit.parse(path.read_text())
    except (OSError, UnicodeDecodeError, tomlkit.exceptions.ParseError) as exc:
        raise UsageError(f"{path} is not valid TOML ({exc}); fix it first, nothing was changed") from None


def _state_table(doc: Any, create: bool) -> Any:
    import tomlkit

    hooks = doc.get("hooks")
    if hooks is None and create:
        hooks = doc["hooks"] = tomlkit.table(is_super_table=True)
    if not isinstance(hooks, dict):
        return None
    state = hooks.get("state")
    if state is None and create:
        state = hooks["state"] = tomlkit.table(is_super_table=True)
    return state if isinstance(state, dict) else None


def check_codex_config(path: Path) -> Any:
    """Parse $CODEX_HOME/config.toml before anything is written (refused unchanged if bad)."""
    doc = _load_toml(path)
    hooks = doc.get("hooks")
    if hooks is not None and (not isinstance(hooks, dict) or not isinstance(hooks.get("state", {}), dict)):
        raise UsageError(f"{path}: [hooks] / [hooks.state] must be tables; nothing was changed")
    return doc


def _drop_ours(state: Any, hooks_path: Path, spec: Spec, keep: dict[str, str] | None = None) -> int:
    """Remove our trust entries for this hooks.json, except those in `keep` as they are."""
    ours = _our_hashes(spec)
    keep = keep or {}
    dropped = 0
    for key in [k for k in state if str(k).startswith(f"{hooks_path}:")]:
        entry = state[key]
        digest = entry.get("trusted_hash") if isinstance(entry, dict) else None
        if digest in ours and keep.get(str(key)) != digest:
            del state[key]
            dropped += 1
    return dropped


def codex_trust(config_path: Path, doc: Any, hooks_path: Path, data: dict[str, Any], spec: Spec) -> int:
    """Record trust for our handlers at their current positions (stale entries of ours
    go); the file is rewritten only when something changed."""
    import tomlkit

    entries = codex_trust_entries(hooks_path, data, spec)
    state = _state_table(doc, create=True)
    changed = _drop_ours(state, hooks_path, spec, keep=entries)
    for key, digest in entries.items():
        current = state.get(key)
        if isinstance(current, dict) and current.get("trusted_hash") == digest:
            continue
        entry = tomlkit.table()
        entry["trusted_hash"] = digest
        state[key] = entry
        changed += 1
    if changed or not config_path.exists():
        _write_toml(config_path, doc)
    return len(entries)


def codex_untrust(config_path: Path, hooks_path: Path, spec: Spec) -> int:
    if not config_path.exists():
        return 0
    doc = check_codex_config(config_path)
    state = _state_table(doc, create=False)
    if state is None:
        return 0
    dropped = _drop_ours(state, hooks_path, spec)
    if dropped:
        hooks = doc["hooks"]
        if not state:
            del hooks["state"]
        if not hooks:
            del doc["hooks"]
        _write_toml(config_path, doc)
    return dropped


def _write_toml(path: Path, doc: Any) -> None:
    import tomlkit

    path.parent.mkdir(parents=True, exist_ok=True)
    text = tomlkit.dumps(doc).rstrip()
    atomic_write(path, text + "\n" if text else "")  # no trail of blank lines from removed tables


def codex_status(config_path: Path, hooks_path: Path, data: dict[str, Any], spec: Spec,
                 project: Path) -> dict[str, Any]:
    """Is each of our handlers trusted as it stands, is the project trusted, are hooks on?"""
    try:
        doc = _load_toml(config_path)
    except UsageError:
        return {"trusted": False, "project_trusted": False, "hooks_feature": None}
    state = _state_table(doc, create=False) or {}
    entries = codex_trust_entries(hooks_path, data, spec)
    trusted = bool(entries) and all(
        isinstance(state.get(key), dict) and state[key].get("trusted_hash") == digest
        for key, digest in entries.items())
    projects = doc.get("projects")
    record = projects.get(str(project)) if isinstance(projects, dict) else None
    features = doc.get("features")
    feature = None
    if isinstance(features, dict):
        for name in ("hooks", "codex_hooks"):  # codex_hooks: the older name of the flag
            if isinstance(features.get(name), bool):
                feature = bool(features[name])
    return {"trusted": trusted,
            "project_trusted": isinstance(record, dict) and record.get("trust_level") == "trusted",
            "hooks_feature": feature}
