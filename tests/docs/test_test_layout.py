"""The tests' layout (tests/README.md): every module of the packages under the use cases
(core, infra, state, remote) has its namesake test file, tests/<package>/test_<module>.py,
so that its tests are found where its name says (issue 43)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LOWER = ("core", "infra", "state", "remote")


def missing_namesakes(root: Path) -> list[str]:
    """`package/module` of each module of LOWER under `root`/git_handoff without
    `root`/tests/<package>/test_<module>.py."""
    missing = []
    for package in LOWER:
        for module in sorted((root / "git_handoff" / package).glob("*.py")):
            if module.stem != "__init__" and not (root / "tests" / package / f"test_{module.stem}.py").is_file():
                missing.append(f"{package}/{module.stem}")
    return missing


def test_every_module_below_the_use_cases_has_its_namesake_test_file() -> None:
    assert sum(1 for p in LOWER for _ in (ROOT / "git_handoff" / p).glob("*.py")) > 40
    assert missing_namesakes(ROOT) == []


def test_the_check_names_a_module_without_its_test_file(tmp_path: Path) -> None:
    for package in LOWER:
        (tmp_path / "git_handoff" / package).mkdir(parents=True)
        (tmp_path / "tests" / package).mkdir(parents=True)
        (tmp_path / "git_handoff" / package / "__init__.py").write_text("")
    (tmp_path / "git_handoff" / "state" / "kept.py").write_text("")
    (tmp_path / "tests" / "state" / "test_kept.py").write_text("")
    (tmp_path / "git_handoff" / "remote" / "new_module.py").write_text("")
    (tmp_path / "tests" / "ops" / "test_new_module.py").parent.mkdir()
    (tmp_path / "tests" / "ops" / "test_new_module.py").write_text("")  # in another layer's folder: not its namesake
    assert missing_namesakes(tmp_path) == ["remote/new_module"]
