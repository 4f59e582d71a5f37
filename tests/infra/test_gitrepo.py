"""The repository's objects (git_handoff.infra.gitrepo.Repo): blobs, trees built and
compared, commits and their history, as git itself reads them."""

from __future__ import annotations

from pathlib import Path

from git_handoff.infra.gitrepo import Repo
from tests.support.repo import git


def test_blobs_written_in_process_and_in_bulk_are_what_git_reads(repo: Path) -> None:
    r = Repo.discover(repo)
    one = r.write_blob(b"one\n")
    many = r.write_blobs([f"blob {n}\n".encode() for n in range(300)])
    assert git("cat-file", "-p", one, cwd=repo) == "one"
    assert git("cat-file", "-p", many[299], cwd=repo) == "blob 299"
    assert r.read_blob(many[5]) == b"blob 5\n" and r.has_object(many[0])
    assert not r.has_object("0" * 40)
    assert r.object_kind(one) == ("blob", 4) and r.object_kind("0" * 40) is None
    assert r.small_blob(one, 10) == ("blob", 4, b"one\n")
    assert r.small_blob(one, 2) == ("blob", 4, None)


def test_update_tree_sets_and_removes_paths_and_tree_diff_sees_it(repo: Path) -> None:
    r = Repo.discover(repo)
    a, b = r.write_blob(b"a"), r.write_blob(b"b")
    first = r.update_tree(None, {"tasks/x/a.json": a, "meta.json": b})
    assert r.tree_lookup(first, "tasks/x/a.json") == (a, False)
    tasks, x = r.tree_lookup(first, "tasks"), r.tree_lookup(first, "tasks/x")
    assert tasks is not None and x is not None
    assert tasks[1] is True and r.tree_lookup(first, "nope") is None
    assert r.tree_mode(first, "meta.json") == 0o100644
    assert r.tree_files(x[0], ".json") == [("a.json", b"a")]
    second = r.update_tree(first, {"tasks/x/a.json": None, "tasks/y/b.json": b})
    assert r.tree_lookup(second, "tasks/x") is None  # an emptied directory goes
    assert r.tree_diff(first, second) == {"tasks/x/a.json": (a, None), "tasks/y/b.json": (None, b)}
    assert r.tree_diff(None, first) == {"tasks/x/a.json": (None, a), "meta.json": (None, b)}
    assert sorted(name for name, _, _ in r.tree_entries(second)) == ["meta.json", "tasks"]


def test_commits_and_their_history(repo: Path) -> None:
    r = Repo.discover(repo)
    root = r.head()
    assert root is not None
    tree = r.commit_tree(root)
    c1 = r.create_commit(tree, [root], "one")
    c2 = r.create_commit(tree, [c1], "two\n\nbody")
    side = r.create_commit(tree, [root], "side")
    message, parents, _when, _author = r.commit_info(c2)
    assert message.startswith("two") and parents == [c1] and r.commit_parents(c1) == [root]
    assert r.is_ancestor(root, c2) and not r.is_ancestor(c2, root)
    assert r.merge_base(c2, side) == root and r.merge_base_many([c2, side]) == root
    assert r.commits_not_in(c2, root) == [c2, c1]
    assert r.count_commits(c2) == 3 and r.count_commits(c2, side) == 2
    assert list(r.walk(c2)) == [c2, c1, root] and list(r.walk(c2, limit=1)) == [c2]
    assert r.commits_between(root, c2) == [c2, c1] and r.commits_between(root, c2, limit=1) == [c2]
    assert r.resolve_commit("HEAD") == root and r.resolve_commit("no-such-rev") is None
    assert git("cat-file", "-t", c2, cwd=repo) == "commit"


def test_commit_chain_and_fast_import_commit_write_the_files_given(repo: Path) -> None:
    r = Repo.discover(repo)
    root = r.head()
    assert root is not None
    links = r.commit_chain(root, [([], {"a.txt": b"A\n"}, "add a"), ([], {"a.txt": None, "b.txt": b"B\n"}, "swap")])
    head = links[-1]
    assert r.commit_parents(links[1]) == [links[0]] and r.commit_parents(links[0]) == [root]
    assert git("show", f"{head}:b.txt", cwd=repo) == "B"
    assert git("log", "--format=%s", f"{root}..{head}", cwd=repo).splitlines() == ["swap", "add a"]
    assert r.tree_lookup(r.commit_tree(head), "a.txt") is None
    blob = r.write_blob(b"kept\n")
    made = r.fast_import_commit([head], [(b"dir/with space.txt", "100644", blob), (b"b.txt", "100644", None)],
                                "fast")
    assert git("show", f"{made}:dir/with space.txt", cwd=repo) == "kept"
    assert r.commit_parents(made) == [head] and r.tree_lookup(r.commit_tree(made), "b.txt") is None
