"""Find the hook templates: installed as package data (git_handoff.hooks_templates),
or in the source tree's top-level hooks-templates/ when running from a checkout."""

from __future__ import annotations

from pathlib import Path


def template_text(name: str) -> str:
    """The text of hooks-templates/<name>."""
    try:
        from importlib.resources import files

        resource = files("git_handoff.hooks_templates").joinpath(name)
        if resource.is_file():
            return resource.read_text()
    except ModuleNotFoundError:
        pass
    source = Path(__file__).resolve().parents[2] / "hooks-templates" / name
    try:
        return source.read_text()
    except FileNotFoundError:
        raise FileNotFoundError(f"hook template {name!r} is missing from this installation") from None
