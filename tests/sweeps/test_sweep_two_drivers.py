"""Two processes driving the same sweep at once (two ``sweep.run(wf)`` after a crash, started
together): each variant is forked once, and no agent of any branch is called twice; both
processes end with every branch finished (each agent call is logged to a file by both). The
sweep's lease: a driver waits while another live one holds it, and takes at once the lease of
a process of this host that is gone."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import smithers_tt as st
from smithers_tt.store import now_ms
from tests.sweeps._flows import DELAY_ENV, LOG_ENV, sweep_workflow

ROOT = Path(__file__).resolve().parents[2]
VARIANTS = {f"v{i}": {"input": {"topic": f"t{i}"}} for i in range(6)}
SWEEP_ID = "sweep-two-drivers"
CHILD = """
import sys, time
import smithers_tt as st
from tests.sweeps._flows import sweep_workflow
db = st.connect(sys.argv[1])
sweep = db.get_sweep(sys.argv[2])
while time.time() < float(sys.argv[3]):  # both start at once
    time.sleep(0.001)
sweep.run(sweep_workflow()[0], concurrency=2)
print("STATUS", sorted(set(sweep.status().values())))
"""


def test_two_processes_driving_one_sweep_fork_and_run_each_branch_once(
    db: st.Database, tmp_path: Path
) -> None:
    wf, _ = sweep_workflow()
    parent = db.run(wf, {"topic": "ants"})
    frame = [f.frame_no for f in parent.frames() if f.kind == "checkpoint"][1]
    db.store.sweeps.create(SWEEP_ID, parent.id, frame, wf.name, VARIANTS)  # nothing forked yet
    log = tmp_path / "calls.log"
    env = {**os.environ, LOG_ENV: str(log), DELAY_ENV: "0.05",
           "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}  # fmt: skip
    start = str(time.time() + 4.0)  # both imported and connected by then
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, db.url, SWEEP_ID, start],
            env=env,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outs = [child.communicate(timeout=240)[0] for child in children]
    assert [child.returncode for child in children] == [0, 0], outs
    assert all("STATUS ['finished']" in out for out in outs), outs

    forks = list(db.runs(labels={"sweep": SWEEP_ID}, limit=100))
    assert sorted(r.labels["variant"] for r in forks) == sorted(VARIANTS)  # one fork each
    calls = [tuple(line.split()[:2]) for line in log.read_text().splitlines()]
    twice = sorted({c for c in calls if calls.count(c) > 1})
    assert twice == []  # no branch's agent was called twice
    assert sorted({run for run, _ in calls}) == sorted(r.id for r in forks)


def _gone_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


@pytest.mark.parametrize(
    ("where", "holds_s", "waits"),
    [
        ("elsewhere", 1.5, True),  # a live driver on another host: waited for until it runs out
        ("gone", 60.0, False),  # a driver of this host whose process is gone: taken at once
    ],
)
def test_a_driver_waits_for_a_live_lease_and_takes_a_dead_ones(
    db: st.Database, where: str, holds_s: float, waits: bool
) -> None:
    holder = "another-host:1" if where == "elsewhere" else f"{socket.gethostname()}:{_gone_pid()}"
    wf, _ = sweep_workflow()
    parent = db.run(wf, {"topic": "ants"})
    db.store.sweeps.create("sw-leased", parent.id, 4, wf.name, {"a": {}})
    assert db.store.sweeps.set_driver("sw-leased", None, f"{holder}#0", now_ms() + holds_s * 1000)
    sweep = db.get_sweep("sw-leased")
    began = time.monotonic()
    sweep.run(wf)
    took = time.monotonic() - began
    assert sweep.status() == {"a": "finished"}
    assert (took >= holds_s - 0.1) is waits, took
    assert db.get_sweep("sw-leased").record.driver is None  # released at the end


pytestmark = pytest.mark.slow
