"""Forks by reference: a fork records its parent and frame and copies nothing it inherits,
yet everything that reads it sees the parent's history up to the fork frame; it gets its own
copy (materialised) before anything changes its live state or removes what it reads."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

import smithers_tt as st
from smithers_tt.checkpoint import AgentCheckpoint
from smithers_tt.demo.agents import NOTES
from smithers_tt.errors import ForkPointRewound, InvalidArgument
from smithers_tt.timetravel import _fork, materialize
from smithers_tt.widgets import DebuggerModel
from tests.timetravel._support import (
    count,
    dump,
    live_view,
    restored_view,
    snapshot_view,
    without_status,
)
from tests.timetravel.conftest import Demo, fresh_workflow


def _rows(db: st.Database, run_id: str) -> dict[str, int]:
    return {
        table: count(db, table, "run_id = :r", r=run_id)
        for table in ("tt_frames", "tt_nodes", "tt_attempts", "tt_checkpoint_refs")
    }


def test_a_fork_writes_one_frame_and_no_live_rows_yet_reads_as_its_parent(demo: Demo) -> None:
    db, run = demo.db, demo.run
    at = demo.frame("node_state", "write", state="finished")
    parent_rows, parent_view = _rows(db, run.id), snapshot_view(run.snapshot())

    child = db.fork(run.id, at)

    assert _rows(db, child.id) == {
        "tt_frames": 1, "tt_nodes": 0, "tt_attempts": 0, "tt_checkpoint_refs": 0,
    }  # fmt: skip
    assert child.record.inherits
    expected = snapshot_view(run.snapshot(at))
    assert snapshot_view(child.snapshot(0)) == dict(expected, status="interrupted")
    # the run API shows what it inherits: nodes, attempts, refs and the newest checkpoint
    assert without_status(live_view(db, child.id)) == without_status(expected)
    assert child.checkpoint("research").payload == run.snapshot(at).payload("research")
    assert (_rows(db, run.id), snapshot_view(run.snapshot())) == (parent_rows, parent_view)
    assert db.verify().ok


def test_resuming_a_fork_materialises_it_and_runs_only_what_is_left(demo: Demo) -> None:
    db, run = demo.db, demo.run
    at = demo.frame("attempt_started", "write")
    child = db.fork(run.id, at, reset=["write"])
    zero = child.snapshot(0)

    wf, agents = fresh_workflow()
    done = db.resume(child.id, wf)

    assert done.status == "finished" and not done.record.inherits
    assert agents.researcher.calls == 0  # research was inherited, finished
    assert done.output == run.output
    assert snapshot_view(done.snapshot(0)) == snapshot_view(zero)  # frame 0 reads the same
    assert without_status(live_view(db, child.id)) == without_status(snapshot_view(done.snapshot()))
    assert db.verify().ok


def test_chains_of_forks_read_through_every_ancestor(demo: Demo) -> None:
    db, run = demo.db, demo.run
    first = db.fork(run.id, demo.frame("node_state", "research", state="finished"))
    edited = AgentCheckpoint(NOTES, 1, {"topic": "bee", "notes": ["edited"], "tokens": 1})
    second = db.fork(first.id, 0, checkpoints={"research": edited})
    third = db.fork(second.id, 0)

    assert _rows(db, second.id)["tt_frames"] == 3  # the edit's attempt and checkpoint, frame 0
    assert _rows(db, third.id)["tt_frames"] == 1
    assert third.snapshot(0).payload("research") == edited.payload
    assert snapshot_view(third.snapshot(0)) == snapshot_view(second.snapshot(0))

    views = {r.id: snapshot_view(r.snapshot(0)) for r in (first, second, third)}
    assert materialize(db.store, second.id)  # the middle one gets its own copy ...
    assert not materialize(db.store, second.id)  # (once)
    assert {r.id: snapshot_view(r.snapshot(0)) for r in (first, second, third)} == views
    wf, agents = fresh_workflow()
    assert db.resume(third.id, wf).status == "finished"  # ... and the last still resumes
    assert agents.researcher.calls == 1  # from the edited checkpoint (an edit reruns it)


def test_a_fork_by_reference_cannot_be_claimed_before_it_is_materialised(demo: Demo) -> None:
    db, run = demo.db, demo.run
    child = db.fork(run.id, demo.frame("attempt_started", "write"), reset=["write"])
    before = dump(db)
    with pytest.raises(InvalidArgument, match="fork by reference"):
        db.store.claim_run(child.id, "someone")
    assert dump(db) == before


def test_rewinding_a_parent_past_a_fork_point_refuses_or_materialises_the_fork(
    demo: Demo,
) -> None:
    db, run = demo.db, demo.run
    at = demo.frame("node_state", "write", state="finished")
    child = db.fork(run.id, at)
    views = [snapshot_view(child.snapshot(0))]
    with pytest.raises(ForkPointRewound):
        db.rewind(run.id, at - 3, confirm=True)
    assert db.get_run(child.id).record.inherits

    db.rewind(run.id, at - 3, confirm=True, force=True)

    assert not db.get_run(child.id).record.inherits
    assert [snapshot_view(child.snapshot(0))] == views
    assert without_status(live_view(db, child.id)) == restored_view(child.snapshot(0))
    assert db.resume(child.id, fresh_workflow()[0]).status == "finished"


def test_retention_that_does_not_keep_forks_materialises_them_before_their_parent_goes(
    demo: Demo,
) -> None:
    db, run = demo.db, demo.run
    # a fork waiting to resume (interrupted): retention never deletes it
    child = db.fork(run.id, demo.frame("attempt_started", "write"), reset=["write"])
    zero = snapshot_view(child.snapshot(0))
    payload = child.snapshot(0).payload("research")

    report = st.timetravel.prune_runs(db.store, older_than_ms=0, keep_forks=False)

    assert run.id in report.deleted and report.forks_materialised == 1
    assert count(db, "tt_runs", "run_id = :r", r=run.id) == 0
    assert not db.get_run(child.id).record.inherits
    assert snapshot_view(child.snapshot(0)) == zero
    assert child.snapshot(0).payload("research") == payload
    assert db.verify().ok
    assert db.resume(child.id, fresh_workflow()[0]).status == "finished"


def test_cancelling_a_fork_ends_the_attempts_it_inherited_in_progress(demo: Demo) -> None:
    db, run = demo.db, demo.run
    at = demo.frame("attempt_started", "write")  # write's attempt is in progress there
    child = db.fork(run.id, at)
    assert any(a.state == "in_progress" for a in child.attempts())

    db.cancel(child.id)

    done = db.get_run(child.id)
    assert done.status == "cancelled" and not done.record.inherits
    assert all(a.state != "in_progress" for a in done.attempts())
    assert without_status(live_view(db, child.id)) == without_status(snapshot_view(done.snapshot()))


def test_the_debugger_scrubs_a_fork_by_reference_as_it_reads_from_the_database(
    demo: Demo,
) -> None:
    db, run = demo.db, demo.run
    child = db.fork(run.id, demo.frame("attempt_started", "write"), reset=["write"])
    model = DebuggerModel(db, child.id)
    assert snapshot_view(model.snapshot_at(0)) == snapshot_view(db.snapshot(child.id, 0))
    assert model.checkpointed_nodes() == ["research"]

    db.resume(child.id, fresh_workflow()[0])  # materialised, then run to its end
    model.refresh()

    clock = db.get_run(child.id).record.clock
    assert model.last_frame == clock
    for n in range(clock + 1):
        assert snapshot_view(model.snapshot_at(n)) == snapshot_view(db.snapshot(child.id, n))


def _fork_held_open(
    db: st.Database, run_id: str, at: int, monkeypatch: pytest.MonkeyPatch
) -> tuple[threading.Thread, list[str]]:
    """Start forking ``run_id`` at ``at`` in a thread and return once the fork has read its
    parent, inside its transaction, which stays open half a second more; the thread appends
    the child's id to the list."""
    inside, made = threading.Event(), []
    real = _fork.run_level_state

    def slow_probe(*args: Any, **kwargs: Any) -> Any:
        inside.set()
        time.sleep(0.5)
        return real(*args, **kwargs)

    monkeypatch.setattr(_fork, "run_level_state", slow_probe)
    forking = threading.Thread(target=lambda: made.append(db.fork(run_id, at).id))
    forking.start()
    assert inside.wait(10)
    return forking, made


def test_a_fork_racing_a_forced_rewind_of_its_parent_stays_readable(
    demo: Demo, monkeypatch: pytest.MonkeyPatch
) -> None:
    db, run = demo.db, demo.run
    at = demo.frame("node_state", "write", state="finished")
    expected = snapshot_view(run.snapshot(at))
    forking, made = _fork_held_open(db, run.id, at, monkeypatch)
    # The parent is rewound below the fork frame while the fork is being made: it waits for
    # the fork, sees it, and gives it its own copy first.
    db.rewind(run.id, at - 3, confirm=True, force=True)
    forking.join()

    (child,) = made
    assert not db.get_run(child).record.inherits
    assert dict(snapshot_view(db.snapshot(child, 0)), status="?") == dict(expected, status="?")


def test_a_fork_racing_a_prune_of_its_parent_keeps_what_it_reads(
    demo: Demo, monkeypatch: pytest.MonkeyPatch
) -> None:
    db, run = demo.db, demo.run
    at = demo.frame("attempt_started", "write")
    expected = snapshot_view(run.snapshot(at))
    forking, made = _fork_held_open(db, run.id, at, monkeypatch)
    # The parent ended long enough ago for this prune, which keeps no forks: it waits for the
    # fork being made, and then keeps the parent the fork reads.
    st.timetravel.prune_runs(db.store, older_than_ms=0, keep_forks=False)
    forking.join()

    (child,) = made
    assert db.get_run(child).status == "interrupted"
    assert dict(snapshot_view(db.snapshot(child, 0)), status="?") == dict(expected, status="?")
    assert db.resume(child, fresh_workflow()[0]).status == "finished"
