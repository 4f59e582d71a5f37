"""The dashboard: `serve`'s first page at 10,000 tasks (a real server process, a real
HTTP request) against `status --json` on the same state; and what the dashboard adds
to the import time of `git handoff status`, against the code before it (the merge
base with `main`, unpacked with `git archive`), the two run alternately.

    python bench/bench_serve.py [--quick]
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    HANDOFF,
    PY,
    ROOT,
    Row,
    feature_built,
    fresh_dir,
    median,
    ms,
    not_built,
    run_proc,
    state_copy,
    workdir,
)

FIRST_PAGE = "serve: first page, 10,000 tasks"
GRAPH_PAGE = "serve: graph page (SVG), 10,000 tasks"
IMPORTS = "status: import time with the dashboard"
# What `git handoff status` imports before it reads anything.
STATUS_IMPORTS = "import git_handoff.cli, git_handoff.cli.tasks, git_handoff.ops.tasks, git_handoff.state.store"


def _first_request(repo: Path, path: str) -> tuple[float, bytes]:
    """Start `serve`, time the first GET of `path`, stop it."""
    proc = subprocess.Popen([*HANDOFF, "serve", "--stop-after", "300s"], cwd=repo, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()
        found = re.search(r"(http://127\.0\.0\.1:\d+/)", line)
        if not found:
            raise RuntimeError(f"serve printed no URL: {line!r} "
                               f"{proc.stderr.read().decode()[-300:] if proc.stderr else ''}")
        start = time.perf_counter()
        with urllib.request.urlopen(found.group(1) + path.lstrip("/"), timeout=120) as resp:
            body = resp.read()
        return time.perf_counter() - start, body
    finally:
        proc.terminate()
        proc.wait(30)


def serve_pages(quick: bool) -> list[Row]:
    if not feature_built("serve"):
        return [not_built(FIRST_PAGE, "< 1 s")]
    repo = state_copy("serve-10k", 10000)
    repeats = 3 if quick else 7
    firsts, graphs, statuses = [], [], []
    for _ in range(repeats):
        statuses.append(run_proc([*HANDOFF, "status", "--json"], repo).seconds)
        seconds, body = _first_request(repo, "/")
        if b'data-count="total">10000<' not in body:
            raise RuntimeError("the first page does not show 10,000 tasks")
        firsts.append(seconds)
        seconds, body = _first_request(repo, "/graph")
        if body.count(b'<g class="node"') != 10000:
            raise RuntimeError("the graph page does not draw 10,000 nodes")
        graphs.append(seconds)
    first, graph, status = median(firsts), median(graphs), median(statuses)
    return [
        Row(FIRST_PAGE, ms(first), f"status --json (whole process) {ms(status)}", first / status, "< 1 s", first < 1.0),
        Row(GRAPH_PAGE, ms(graph), f"status --json (whole process) {ms(status)}", graph / status),
    ]


def status_imports(quick: bool) -> list[Row]:
    if not feature_built("serve"):
        return [not_built(IMPORTS, "<= 1.10x")]
    proc = subprocess.run(["git", "merge-base", "HEAD", "main"], cwd=ROOT, capture_output=True, text=True)
    base_rev = proc.stdout.strip()
    if proc.returncode != 0 or not base_rev:
        return [Row(IMPORTS, "n/a (no `main` to compare with)", target="<= 1.10x")]
    base = fresh_dir("before-dashboard")
    base.mkdir()
    archive = subprocess.run(["git", "archive", base_rev, "git_handoff"], cwd=ROOT, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(base)], input=archive.stdout, check=True)
    argv = [PY, "-c", STATUS_IMPORTS]
    cwd = workdir()
    ours_env, base_env = {"PYTHONPATH": str(ROOT)}, {"PYTHONPATH": str(base)}
    for env in (ours_env, base_env):
        if run_proc(argv, cwd, env=env).rc != 0:
            raise RuntimeError("importing what `status` imports failed")
    ours, before = [], []
    for _ in range(7 if quick else 31):
        ours.append(run_proc(argv, cwd, env=ours_env).seconds)
        before.append(run_proc(argv, cwd, env=base_env).seconds)
    a, b = median(ours), median(before)
    return [Row(IMPORTS, ms(a), f"before the dashboard ({base_rev[:7]}) {ms(b)}", a / b, "<= 1.10x", a / b <= 1.10)]


def main() -> None:
    from bench.run import print_table

    quick = "--quick" in sys.argv
    print_table(serve_pages(quick) + status_imports(quick))


if __name__ == "__main__":
    main()
