"""The command server as `hooks install --agent NAME` turns it on (docs/command-server.md):
a repository whose agent hooks fire at every turn is where the server belongs, so
installing an agent's hooks sets `handoff.commandServer true` in the repository's own
git config, unless told not to (`--no-command-server`) or the key is already set at any
level (the user's `false` is never overridden, nor their `true` claimed). What install
set is recorded (the per-clone record of `hook_install`), and uninstall takes it back
only then, and only once no agent's hooks remain installed."""

from __future__ import annotations

import os

from git_handoff.infra.gitrepo import Repo
from git_handoff.ops.hook_payloads import CommandServerSetting

KEY = "handoff.commandServer"
TURN_OFF = f"git config {KEY} false"
TURN_ON = f"git config {KEY} true"
RECORDED = "set_command_server"  # the record's key: install set KEY in the local config
ENV = "HANDOFF_COMMAND_SERVER"  # "0" turns the server off whatever the config says


def value(repo: Repo, *, local: bool = False) -> str | None:
    """KEY as git reads it (every level, includes followed; `local`: the repository's own
    file only), normalized as a boolean; None when unset, the raw text when not a boolean."""
    scope = ("--local",) if local else ()
    proc = repo.git("config", *scope, "--type=bool", "--get", KEY, check=False)
    if proc.returncode == 0:
        return proc.stdout.decode(errors="replace").strip()
    if proc.returncode == 1:  # unset
        return None
    raw = repo.git("config", *scope, "--get", KEY, check=False)  # set, but not a boolean
    return raw.stdout.decode(errors="replace").strip() if raw.returncode == 0 else None


def turn_on(repo: Repo, record: dict[str, object], wanted: bool) -> CommandServerSetting:
    """At `hooks install --agent NAME`: set KEY true in the local config when `wanted` and
    nobody set it (recorded in `record`, which the caller saves); else leave it. The answer
    says what was done and how to turn it off."""
    before = value(repo)
    changed = wanted and before is None
    if changed:
        repo.git("config", "--local", KEY, "true")
        record[RECORDED] = True
    answer = setting(repo, record)
    answer["changed"] = "set" if changed else "kept" if before is not None else "not set"
    return answer


def undo(repo: Repo, changed: str) -> None:
    """Take back what `turn_on` did when the rest of the install failed (nothing changed)."""
    if changed == "set":
        repo.git("config", "--local", "--unset", KEY, check=False)


def turn_off(repo: Repo, record: dict[str, object], agents_left: bool) -> CommandServerSetting:
    """At `hooks uninstall --agent NAME`: unset KEY when install set it, no agent's hooks
    remain and it still says true (a value the user changed since is theirs); the record
    forgets it then, or once the user took the key over."""
    changed = False
    if record.get(RECORDED) and not agents_left:
        if value(repo, local=True) == "true":
            repo.git("config", "--local", "--unset", KEY, check=False)
            changed = True
        record.pop(RECORDED, None)
    answer = setting(repo, record)
    answer["changed"] = "unset" if changed else "kept"
    return answer


def setting(repo: Repo, record: dict[str, object]) -> CommandServerSetting:
    """Whether the repository's config turns the server on, whether install set it, the
    commands that turn it off and on, and whether this environment overrides it."""
    now = value(repo)
    on = now == "true"
    out: CommandServerSetting = {"on": on, "value": now, "set_by_install": bool(record.get(RECORDED)) and on,
                                 "turn_off": TURN_OFF, "turn_on": TURN_ON}
    env = os.environ.get(ENV)
    if env in ("0", "1"):
        out["environment"] = f"{ENV}={env}"
    return out
