"""The refs a remote sent that failed the edge (git_handoff.remote.incoming), per remote: kept
out of the remote-tracking refs, named by `sync`, shown by `status`, and remembered with
the object each pointed at so that the same bad ref is not checked again at every sync
(only a ref that changed costs a check). A private file of this clone, never synced.
"""

from __future__ import annotations

import json
from typing import TypedDict

from git_handoff.infra.fileio import atomic_write
from git_handoff.infra.gitrepo import Repo

DIR = "quarantine"
SHOWN = 5  # lines `status` shows; the rest is counted


class Held(TypedDict):
    """One quarantined ref: its name on the remote, the object it pointed at, and why."""

    ref: str
    oid: str
    why: str


def _path(repo: Repo, track: str) -> str:
    return str(repo.handoff_dir / DIR / f"{track}.json")


def read(repo: Repo, track: str) -> dict[str, Held]:
    """{remote ref: what was held} for the remote tracked as `track` (empty when none)."""
    try:
        with open(_path(repo, track), encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return {}
    if not isinstance(data, list):
        return {}
    out: dict[str, Held] = {}
    for item in data:
        if isinstance(item, dict) and all(isinstance(item.get(k), str) for k in ("ref", "oid", "why")):
            out[item["ref"]] = {"ref": item["ref"], "oid": item["oid"], "why": item["why"]}
    return out


def write(repo: Repo, track: str, held: dict[str, Held]) -> None:
    path = repo.handoff_dir / DIR / f"{track}.json"
    if not held:
        path.unlink(missing_ok=True)
        return
    path.parent.mkdir(exist_ok=True)
    atomic_write(path, json.dumps([held[ref] for ref in sorted(held)], indent=1) + "\n")


def status_lines(repo: Repo) -> list[str]:
    """Lines for `status`: the refs each remote holds that this clone keeps out."""
    folder = repo.handoff_dir / DIR
    if not folder.is_dir():
        return []
    lines: list[str] = []
    for path in sorted(folder.glob("*.json")):
        held = read(repo, path.stem)
        if not held:
            continue
        remote = path.stem
        lines.append(f"{len(held)} ref(s) on {remote} quarantined (not read; the rest of {remote} is used):")
        for item in list(held.values())[:SHOWN]:
            lines.append(f"  {shown(item['why'])}")
        if len(held) > SHOWN:
            lines.append(f"  ... and {len(held) - SHOWN} more (`git handoff sync --json` lists them)")
    return lines



def shown(text: str) -> str:
    """`text` (it names what a remote sent) on one line, its control, escape and bidi
    characters escaped (every character Python does not count printable)."""
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)
