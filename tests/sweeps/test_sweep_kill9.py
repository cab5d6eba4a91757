"""kill -9 of the process running a sweep: a re-run makes the forks it had not made and runs
only the branches that had not ended; no branch that finished before the kill is called
again (its agents' calls are logged to a file each write of which survives the kill)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import smithers_tt as st
from tests.sweeps._flows import DELAY_ENV, LOG_ENV, sweep_workflow

ROOT = Path(__file__).resolve().parents[2]
VARIANTS = {f"v{i}": {"input": {"topic": f"t{i}"}} for i in range(6)}
SWEEP_ID = "sweep-kill9"
CHILD = """
import smithers_tt as st
from tests.sweeps._flows import sweep_workflow
from tests.sweeps.test_sweep_kill9 import SWEEP_ID, VARIANTS
import sys
db = st.connect(sys.argv[1])
db.sweep(sys.argv[2], int(sys.argv[3]), VARIANTS, workflow=sweep_workflow()[0],
         sweep_id=SWEEP_ID, concurrency=2)
"""


def _calls(log: Path) -> list[tuple[str, str]]:
    if not log.exists():
        return []
    return [tuple(line.split()[:2]) for line in log.read_text().splitlines()]  # type: ignore[misc]


def _wait(check, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.02)
    raise AssertionError("timed out waiting for the sweeping process")


def test_a_sweep_killed_with_sigkill_finishes_only_its_missing_branches_on_a_rerun(
    db: st.Database, tmp_path: Path
) -> None:
    wf, _ = sweep_workflow()
    parent = db.run(wf, {"topic": "ants"})
    frame = [f.frame_no for f in parent.frames() if f.kind == "checkpoint"][1]
    log = tmp_path / "calls.log"
    env = {**os.environ, LOG_ENV: str(log), DELAY_ENV: "0.05",
           "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}  # fmt: skip
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, db.url, parent.id, str(frame)], env=env, cwd=ROOT
    )
    try:

        def two_finished() -> bool:
            ended = [r for r in db.runs(labels={"sweep": SWEEP_ID}) if r.status == "finished"]
            return len(ended) >= 2

        _wait(two_finished)
        os.kill(child.pid, signal.SIGKILL)
    finally:
        assert child.wait(timeout=30) == -signal.SIGKILL
    before = {r.id: r.status for r in db.runs(labels={"sweep": SWEEP_ID})}
    finished = {run_id for run_id, status in before.items() if status == "finished"}
    calls_before = _calls(log)
    assert 2 <= len(finished) < len(VARIANTS)  # killed in the middle of the sweep

    os.environ[LOG_ENV] = str(log)
    try:
        wf, _ = sweep_workflow()
        sweep = db.sweep(parent.id, frame, VARIANTS, workflow=wf, sweep_id=SWEEP_ID)
    finally:
        del os.environ[LOG_ENV]

    assert sweep.status() == dict.fromkeys(VARIANTS, "finished")
    branches = {r.id for r in sweep.branches().values() if r is not None}
    assert before.keys() <= branches and len(branches) == len(VARIANTS)  # no fork made twice
    after = _calls(log)[len(calls_before) :]
    assert not [c for c in after if c[0] in finished]  # no finished branch ran again
    # Every branch's act ran to its end exactly once, across both processes.
    acts = [run for run, node in _calls(log) if node == "act"]
    assert sorted(set(acts)) == sorted(branches)
    assert all(acts.count(run) == 1 for run in finished)
    for name, run in sweep.branches().items():
        assert run is not None and run.output["act"]["answer"] == f"t{name[1:]} after 3 steps"


pytestmark = pytest.mark.slow
