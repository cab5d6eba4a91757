"""kill -9 in the middle of a rewind, a fork, the materialisation of a fork by reference or an
undo: afterwards it either happened whole or not at all, and the run can be rewound again once
the dead holder's lease has expired."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import smithers_tt as st
from smithers_tt.errors import LeaseBusy
from smithers_tt.timetravel import materialize
from tests.timetravel._support import (
    build_bulk_run,
    compact_snapshot,
    compact_state,
    count,
    hidden,
)

LEASE_MS = 1500
"""The lease a killed child leaves behind holds this long (instead of the default 60 s)."""

CHILD = textwrap.dedent(
    """
    import sys

    import smithers_tt as st
    from smithers_tt.timetravel import _fork, _lease, _ops

    url, op, run_id, frame_no, lease_ms = sys.argv[1:]
    _lease.LEASE_MS = int(lease_ms)
    # what each operation calls first inside its transaction
    name = {"fork": "run_level_state", "materialize": "inherited_base"}.get(op, "snapshot_at")
    module = _fork if op in ("fork", "materialize") else _ops
    real = getattr(module, name)

    def spy(*args, **kwargs):
        print("working", flush=True)  # inside the operation's transaction now
        return real(*args, **kwargs)

    setattr(module, name, spy)
    db = st.connect(url)
    print("ready", flush=True)
    if op == "rewind":
        db.rewind(run_id, int(frame_no), confirm=True)
    elif op == "undo":
        db.undo_rewind(run_id)
    elif op == "materialize":
        _fork.materialize(db.store, run_id)
    else:
        db.fork(run_id, int(frame_no))
    print("done", flush=True)
    """
)


def _kill_during(
    tmp_path: Path, db_url: str, op: str, run_id: str, frame_no: int, wait_for: str, delay: float
) -> bool:
    """Start ``op`` in a child process, SIGKILL it ``delay`` seconds after it printed
    ``wait_for``; return whether it had finished anyway."""
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    child = subprocess.Popen(
        [sys.executable, str(script), db_url, op, run_id, str(frame_no), str(LEASE_MS)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        while True:
            line = child.stdout.readline()
            assert line, f"the child died early: {child.stderr.read()}"
            if line.strip() == wait_for:
                break
        time.sleep(delay)
        child.send_signal(signal.SIGKILL)
        child.wait(30)
        rest = child.stdout.read()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        child.stdout.close()
        child.stderr.close()
    return "done" in rest


def _await_lease(db: st.Database, run_id: str, attempt: callable) -> None:
    """Run ``attempt`` until the lease a dead child left behind has expired (a few seconds)."""
    deadline = time.monotonic() + LEASE_MS / 1000 + 20
    while True:
        try:
            attempt()
            return
        except LeaseBusy:
            assert time.monotonic() < deadline, "the dead child's lease never expired"
            time.sleep(0.02)


@pytest.mark.slow
def test_rewind_and_fork_happen_whole_or_not_at_all_when_killed_with_sigkill(
    db_url: str, db: st.Database, tmp_path: Path
) -> None:
    rng = random.Random()
    run_id = build_bulk_run(db, nodes=100, refs_per_node=100)  # 10,000 refs
    clock = db.store.get_run(run_id).clock
    target = clock // 2
    at = db.snapshot(run_id, target)
    before = compact_state(db, run_id)

    # A fork killed at a random moment inside its transaction (or just after it).
    delay = rng.uniform(0.0, 1.5)
    finished = _kill_during(tmp_path, db_url, "fork", run_id, target, "working", delay)
    children = [r for r in db.runs(limit=1000) if r.record.parent_run_id == run_id]
    assert len(children) <= 1 and (len(children) == 1 or not finished)
    forks = count(db, "tt_audit", "run_id = :r AND operation = 'fork'", r=run_id)
    assert forks == len(children)
    if children:  # the fork happened: all of it (its frame 0; it reads the rest from run_id)
        assert count(db, "tt_frames", "run_id = :r", r=children[0].id) == 1
    for table in ("tt_frames", "tt_attempts", "tt_checkpoint_refs", "tt_nodes"):
        orphans = count(db, table, "run_id NOT IN (SELECT run_id FROM tt_runs)")
        assert orphans == 0, f"{table}: rows of a half-made fork (delay {delay:.2f} s)"
    assert compact_state(db, run_id) == before  # a fork never changes its parent
    child = children[0].id if children else db.fork(run_id, target).id
    assert db.snapshot(child, 0).refs.keys() == at.refs.keys()

    # Its materialisation (its own copy of all it inherits) killed at a random moment.
    copied = len(at.nodes) + len(at.attempts) + len(at.refs) + 1
    whole = dict(compact_snapshot(at, clock=0, frames=(copied, 0)), status="interrupted")
    inheriting = compact_state(db, child)
    delay = rng.uniform(0.0, 1.5)
    finished = _kill_during(tmp_path, db_url, "materialize", child, 0, "working", delay)
    state = compact_state(db, child)
    assert state in (inheriting, whole), f"half a materialisation (delay {delay:.2f} s)"
    assert db.store.get_run(child).inherits == (state == inheriting)
    assert state == whole or not finished
    materialize(db.store, child)  # done now if the kill came first
    assert compact_state(db, child) == whole

    # A rewind killed at a random moment inside its transaction (or just after it).
    after = compact_snapshot(at, clock=target, frames=(target + 1, target))
    delay = rng.uniform(0.0, 1.5)
    finished = _kill_during(tmp_path, db_url, "rewind", run_id, target, "working", delay)
    state = compact_state(db, run_id)
    assert state in (before, after), f"half a rewind (delay {delay:.2f} s)"
    assert state == after or not finished
    rewinds = 1 if state == after else 0
    assert count(db, "tt_audit", "run_id = :r AND operation = 'rewind'", r=run_id) == rewinds

    # The dead child's lease (if it left one) expires, and the run can be rewound again.
    later = target // 2
    # (force: the fork above may have happened, and its fork point is above ``later``)
    _await_lease(db, run_id, lambda: db.rewind(run_id, later, confirm=True, force=True))
    assert compact_state(db, run_id) == compact_snapshot(
        db.snapshot(run_id, later), clock=later, frames=(later + 1, later)
    )
    assert db.verify().ok


@pytest.mark.slow
def test_an_undo_of_a_large_rewind_happens_whole_or_not_at_all_when_killed_with_sigkill(
    db_url: str, db: st.Database, tmp_path: Path
) -> None:
    rng = random.Random()
    run_id = build_bulk_run(db, nodes=100, refs_per_node=100)  # 10,000 refs
    clock = db.store.get_run(run_id).clock
    target = clock // 2
    before = compact_state(db, run_id)
    frames = db.store.frames(run_id)
    db.rewind(run_id, target, confirm=True)
    rewound = compact_state(db, run_id)

    delay = rng.uniform(0.0, 1.5)
    finished = _kill_during(tmp_path, db_url, "undo", run_id, target, "working", delay)
    state = compact_state(db, run_id)
    assert state in (rewound, before), f"half an undo (delay {delay:.2f} s)"
    assert state == before or not finished
    undone = count(db, "tt_audit", "run_id = :r AND operation = 'undo_rewind'", r=run_id)
    assert undone == (1 if state == before else 0)

    if state == rewound:  # the dead child's lease expires, and the undo can be done again
        _await_lease(db, run_id, lambda: db.undo_rewind(run_id))
    assert compact_state(db, run_id) == before
    assert db.store.frames(run_id) == frames
    assert hidden(db) == 0
    assert db.verify().ok
