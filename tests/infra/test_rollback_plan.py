"""The decisions of rollback.restore_picture, taken before anything is touched: what
it writes, removes and stages, when it refuses, and which files it may remove."""

from __future__ import annotations

from pathlib import Path

from git_handoff.infra import rollback

CHANGES = [("M", "a.txt"), ("D", "gone.txt"), ("A", "new/b.txt")]


def test_the_plan_writes_what_the_attempt_changed_and_removes_what_it_dropped() -> None:
    plan = rollback._restore_plan(CHANGES, None)
    assert plan == rollback._RestorePlan(written=["a.txt", "new/b.txt"], dropped=["gone.txt"], staged=[])


def test_with_an_index_the_plan_stages_every_path_either_side_touched_sorted() -> None:
    plan = rollback._restore_plan(CHANGES, [("M", "staged.txt"), ("M", "a.txt")])
    assert plan.staged == ["a.txt", "gone.txt", "new/b.txt", "staged.txt"]
    assert rollback._restore_plan(CHANGES, []).staged == ["a.txt", "gone.txt", "new/b.txt"]


def test_uncommitted_changes_in_the_way_refuse_unless_forced_naming_three() -> None:
    touched = rollback._overwritten(CHANGES, {"new/b.txt", "a.txt", "other"})
    assert touched == ["a.txt", "new/b.txt"]
    assert rollback._overwrite_refusal(touched, force=False) == (
        "uncommitted changes would be overwritten (a.txt, new/b.txt): commit or stash them, or --force")
    assert rollback._overwrite_refusal(touched, force=True) is None
    assert rollback._overwrite_refusal([], force=False) is None
    many = rollback._overwrite_refusal(["1", "2", "3", "4"], force=False)
    assert many is not None and many.startswith("uncommitted changes would be overwritten (1, 2, 3...): ")


def test_only_a_file_is_removable_never_a_directory_or_what_is_absent(tmp_path: Path) -> None:
    assert rollback._a_file(("0" * 40, False))
    assert not rollback._a_file(("0" * 40, True))
    assert not rollback._a_file(None)
    (tmp_path / "d").mkdir()
    (tmp_path / "f").write_text("x")
    (tmp_path / "l").symlink_to("nowhere")
    assert not rollback._unlink_file(tmp_path / "d") and (tmp_path / "d").is_dir()
    assert not rollback._unlink_file(tmp_path / "absent")
    assert rollback._unlink_file(tmp_path / "f") and not (tmp_path / "f").exists()
    assert rollback._unlink_file(tmp_path / "l") and not (tmp_path / "l").is_symlink()
