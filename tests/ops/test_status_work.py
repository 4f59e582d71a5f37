"""`status` says where each finished task's work is (docs/many-agents.md): landed on the
target (its commit), published and waiting for the queue (its work ref), withheld (a secret
in its commits), or sent back by the queue. Real clones of a real shared remote, a real
`integrate` run; the text, the compact `--json` (stdout not a terminal) and the view the
MCP tool answers (`views.status`, the same dict as `--json` at a terminal) agree."""

from __future__ import annotations

import json

from git_handoff.infra.gitrepo import Repo
from git_handoff.ops import views
from git_handoff.state.store import StateStore
from tests.support.remotes import Clones, clones, ok, remote_url  # noqa: F401  (fixtures)
from tests.support.repo import git, run
from tests.support.work_states import four_ways, remote_tip


def test_status_text_and_json_say_where_each_tasks_work_is(clones: Clones) -> None:  # noqa: F811
    b, seen = four_ways(clones)
    shown = ok("show", "X", "--json", cwd=b)
    assert shown["integrated_commit"] == seen["landed"]

    text = run("status", cwd=b)
    assert text.rc == 0, text.err
    # each task's line without its use mark ("  used: …", tests/state/test_status_index.py), which follows
    lines = {line.split(":", 1)[0]: line.split("  used: ")[0] for line in text.out.splitlines() if line.startswith("[")}
    assert lines["[completed] X"].endswith(f"  work: landed {seen['landed'][:12]}")
    assert lines["[completed] W"].endswith("  work: waiting to land (refs/harness/work/W/1)")
    assert lines["[completed] C"].endswith("  work: withheld, a secret in its commits (git handoff show C)")
    assert lines["[pending] Y"].endswith("(1/3)  work: sent back by the integration queue (git handoff show Y)")
    assert lines["[pending] P"] == "[pending] P: plain (0/3)"  # nothing to say: nothing added
    assert "work: 1 landed, 1 waiting, 1 withheld, 1 sent back" in text.out.splitlines()
    assert text.out.splitlines()[0] == "tasks: 5  completed=3 in_progress=0 pending=2 failed=0 blocked=0"

    raw = run("status", "--json", cwd=b)
    assert raw.rc == 0, raw.err
    got = json.loads(raw.out)
    rows = {r["id"]: r for r in got["tasks"]}
    assert rows["X"]["work"] == "landed" and rows["X"]["integrated_commit"] == seen["landed"]
    assert rows["W"]["work"] == "waiting" and rows["W"]["work_ref"] == "refs/harness/work/W/1"
    assert rows["C"]["work"] == "withheld" and "work_ref" not in rows["C"]
    assert rows["Y"]["work"] == "sent_back" and rows["Y"]["status"] == "pending"
    assert set(rows["P"]) == {"id", "title", "status", "attempts", "max_attempts", "priority", "claimed_by"}
    assert got["work"] == {"landed": 1, "waiting": 1, "withheld": 1, "sent_back": 1}
    # the compact --json is the very text json.dumps gives for the view (MCP's `status`)
    view = views.status(StateStore(Repo.discover(b)))
    assert raw.out.strip() == json.dumps(view, ensure_ascii=False, default=str)


def test_landing_and_a_new_claim_move_the_marks(clones: Clones) -> None:  # noqa: F811
    """W lands at the next `integrate`; Y, claimed again, is in progress and no longer sent back."""
    b, _ = four_ways(clones)
    assert run("integrate", cwd=b).rc == 0
    ok("claim", "Y", cwd=b)
    got = ok("status", "--json", cwd=b)
    rows = {r["id"]: r for r in got["tasks"]}
    assert rows["W"]["work"] == "landed" and rows["W"]["integrated_commit"] == remote_tip(b)
    assert "work" not in rows["Y"] and rows["Y"]["status"] == "in_progress"
    assert got["work"] == {"landed": 2, "waiting": 0, "withheld": 1, "sent_back": 0}
    assert "work: 2 landed, 1 withheld" in run("status", cwd=b).out.splitlines()
    assert git("merge-base", "--is-ancestor", str(ok("show", "W", "--json", cwd=b)["completed_commit"]),
               remote_tip(b), cwd=b) == ""
