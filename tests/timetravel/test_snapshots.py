"""Snapshots: what every frame made visible, decided by the logical clock, stored by change."""

from __future__ import annotations

import pytest

import smithers_tt as st
import smithers_tt.store._store as store_module
import smithers_tt.store.ledger._publish as publish_module
from smithers_tt.checkpoint import AgentCheckpoint
from tests.timetravel._support import (
    TOPIC,
    capture_live,
    check_joint_frame,
    count,
    fast_commits,
    joint_frames,
    live_view,
    snapshot_view,
)
from tests.timetravel.conftest import Demo, fresh_workflow


def test_snapshot_matches_live_state_at_every_frame(db: st.Database) -> None:
    wf, _ = fresh_workflow()
    seen, stop = capture_live(db)
    try:
        run = db.run(wf, TOPIC)
    finally:
        stop()
    last = run.refresh().record.clock
    assert sorted(seen) == list(range(last + 1))
    assert last > 20  # retry, schema correction and task fork all made frames
    frames = {f.frame_no: f for f in run.frames()}
    joint = joint_frames(frames)
    # research, write and review each started with their node and ended with it (their
    # result checkpoints commit with those ends)
    starts_and_ends = [joint[n] for n in joint if frames[n].kind != "checkpoint"]
    assert sorted(starts_and_ends) == ["attempts"] * 3 + ["nodes"] * 3
    for n in range(last + 1):
        snap = run.snapshot(n)
        assert snap.frame_no == n
        if n in joint:
            check_joint_frame(snap, run.snapshot(n - 1), seen[n], joint[n])
            continue
        assert snapshot_view(snap) == seen[n], f"frame {n}"
        for node_id in {k[0] for k in snap.refs}:
            newest = max((k for k in seen[n]["refs"] if k[0] == node_id), key=lambda k: k[2:])
            live_ref = seen[n]["refs"][newest]
            assert snap.payload(node_id) == db.store.load(live_ref).payload
    assert run.snapshot().frame_no == last
    assert run.snapshot().outputs() == run.output


def test_snapshot_matches_live_state_at_every_frame_when_a_reset_node_reran(demo: Demo) -> None:
    db, run = demo.db, demo.run
    db.reset(run.id, "research", dependents=True)
    after_reset = run.refresh().record.clock
    assert snapshot_view(run.snapshot(after_reset)) == live_view(db, run.id)
    wf, _ = fresh_workflow()
    seen, stop = capture_live(db)
    try:
        db.resume(run.id, wf)
    finally:
        stop()
    last = run.refresh().record.clock
    assert sorted(seen) == list(range(after_reset + 1, last + 1))
    joint = joint_frames({f.frame_no: f for f in run.frames()})
    assert joint.keys() & set(seen)
    for n, live in seen.items():
        if n in joint:
            check_joint_frame(run.snapshot(n), run.snapshot(n - 1), live, joint[n])
            continue
        assert snapshot_view(run.snapshot(n)) == live, f"frame {n}"
    # The rerun reused attempt numbers 1 and 2 of research; each frame still tells them apart.
    before = run.snapshot(after_reset - 1)
    final = run.snapshot(last)
    assert ("research", 0, 1) in before.attempts and ("research", 0, 1) in final.attempts
    assert before.attempts["research", 0, 1].started_at_ms <= (
        final.attempts["research", 0, 1].started_at_ms
    )
    assert not run.snapshot(after_reset).attempts


def _one_attempt(db: st.Database) -> tuple[st.Database, object, object]:
    _, fence = db.store.create_run("clock", graph={"n": []})
    attempt = db.store.start_attempt(fence, "n")
    return fence, attempt.key


def test_snapshot_splits_checkpoints_by_frame_when_they_share_a_millisecond(
    db: st.Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    for module in (publish_module, store_module):
        monkeypatch.setattr(module, "now_ms", lambda: 1_700_000_000_000)
    fence, key = _one_attempt(db)
    first = db.store.publish(fence, key, AgentCheckpoint("c", 1, {"step": 1}))
    second = db.store.publish(fence, key, AgentCheckpoint("c", 1, {"step": 2}))
    assert first.created_at_ms == second.created_at_ms
    frames = db.store.frames(fence.run_id, after=-1)
    assert len({f.created_at_ms for f in frames}) == 1
    n = next(f.frame_no for f in frames if f.kind == "checkpoint" and f.sequence == 0)
    at_n = db.snapshot(fence.run_id, n)
    at_next = db.snapshot(fence.run_id, n + 1)
    assert [k[3] for k in at_n.refs] == [0]
    assert at_n.payload("n") == {"step": 1}
    assert sorted(k[3] for k in at_next.refs) == [0, 1]
    assert at_next.payload("n") == {"step": 2}


def test_snapshot_follows_the_logical_clock_when_the_wall_clock_goes_backwards(
    db: st.Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    ticks = iter(range(1_800_000_000_000, 0, -1_000))
    for module in (publish_module, store_module):
        monkeypatch.setattr(module, "now_ms", lambda: next(ticks))
    fence, key = _one_attempt(db)
    for step in range(3):
        db.store.publish(fence, key, AgentCheckpoint("c", 1, {"step": step}))
    frames = db.store.frames(fence.run_id, after=-1)
    stamps = [f.created_at_ms for f in frames]
    assert stamps == sorted(stamps, reverse=True)  # every frame is "older" than the one before
    for f in frames:
        if f.kind == "checkpoint":
            snap = db.snapshot(fence.run_id, f.frame_no)
            assert snap.payload("n") == {"step": f.sequence}
            assert sorted(k[3] for k in snap.refs) == list(range(f.sequence + 1))


def test_frames_storage_grows_with_changes_not_with_run_size(db: st.Database) -> None:
    fast_commits(db)  # 2,000 transactions: durability is not what this test is about
    nodes, steps = 200, 6
    _, fence = db.store.create_run("wide", graph={f"n{i:03d}": [] for i in range(nodes)})
    finished_at: dict[int, int] = {}
    for i in range(nodes):
        node = f"n{i:03d}"
        db.store.set_node(fence, node, 0, "running")
        key = db.store.start_attempt(fence, node).key
        for step in range(steps):
            db.store.publish(fence, key, AgentCheckpoint("c", 1, {"node": i, "step": step}))
        db.store.finish_attempt(fence, key, "finished")
        frame = db.store.set_node(fence, node, 0, "finished", output={"i": i}, last_attempt=1)
        finished_at[i] = frame.frame_no
    clock = db.store.get_run(fence.run_id).clock
    assert clock == nodes * (steps + 4)  # 2,000 changes
    # One row per change: not one copy of the whole run state per frame.
    assert count(db, "tt_frames", "run_id = :r", r=fence.run_id) == clock + 1
    assert count(db, "tt_checkpoint_refs", "run_id = :r", r=fence.run_id) == nodes * steps
    middle = db.snapshot(fence.run_id, finished_at[99])
    assert len(middle.nodes) == 100 and len(middle.refs) == 100 * steps
    assert {n.state for n in middle.nodes.values()} == {"finished"}
    assert middle.payload("n099") == {"node": 99, "step": steps - 1}
    assert db.snapshot(fence.run_id, finished_at[99] - 1).nodes["n099", 0].state == "running"
    assert len(db.snapshot(fence.run_id).refs) == nodes * steps
