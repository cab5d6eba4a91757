"""Rewind: put a run back to frame N in place, exactly, atomically, under the run's lease."""

from __future__ import annotations

import threading
import time

import pytest

import smithers_tt as st
import smithers_tt.timetravel._snapshot as snapshot_module
from smithers_tt.checkpoint import AgentCheckpoint
from smithers_tt.demo.agents import NOTES
from smithers_tt.errors import (
    CheckpointMissing,
    ConfirmationRequired,
    FrameNotFound,
    LeaseBusy,
    SnapshotInvalid,
)
from smithers_tt.timetravel import acquire_lease, materialize, release_lease
from tests.timetravel._support import (
    build_bulk_run,
    compact_snapshot,
    compact_state,
    count,
    dump,
    execute,
    live_view,
    record_requests,
    restored_view,
    without_status,
)
from tests.timetravel.conftest import Demo, fresh_workflow


def test_rewind_restores_exactly_frame_n_when_a_reset_reused_attempt_numbers(demo: Demo) -> None:
    db, run = demo.db, demo.run
    n = demo.frame("attempt_finished", "research", attempt=1)  # attempt 1 failed: refs 0 and 1
    at_n = run.snapshot(n)
    assert sorted(k for k in at_n.refs) == [("research", 0, 1, 0), ("research", 0, 1, 1)]
    db.reset(run.id, "research", dependents=True)
    # The rerun reuses attempt number 1 and publishes more (and other) sequences into it.
    fence = db.store.claim_run(run.id)
    key = db.store.start_attempt(fence, "research").key
    assert key.attempt == 1
    for step in range(5):
        db.store.publish(
            fence, key, AgentCheckpoint(NOTES, 1, {"topic": "x", "notes": [], "tokens": step})
        )
    db.store.finish_attempt(fence, key, "failed", error="again")
    db.store.finish_run(fence, "failed", error="gave up")
    assert len(run.checkpoints("research")) == 5

    restored = db.rewind(run.id, n, confirm=True)

    assert restored.frame_no == n
    live = live_view(db, run.id)
    assert without_status(live) == restored_view(at_n)
    assert sorted(live["refs"]) == [("research", 0, 1, 0), ("research", 0, 1, 1)]
    for key4, ref in live["refs"].items():
        assert ref.content_hash == at_n.refs[key4].content_hash
    (attempt,) = run.attempts()
    assert (attempt.key.attempt, attempt.state, attempt.next_sequence) == (1, "failed", 2)
    record = run.refresh().record
    assert (record.clock, record.status, record.output, record.error) == (
        n,
        "interrupted",
        None,
        None,
    )
    assert count(db, "tt_frames", "run_id = :r", r=run.id) == n + 1

    # Resuming continues from exactly the state frame n showed.
    wf, _ = fresh_workflow()
    seen = record_requests(wf, "research")
    assert db.resume(run.id, wf).status == "finished"
    assert seen[0].attempt == 2
    assert seen[0].resume_checkpoint.payload == at_n.payload("research")
    assert run.attempts("research")[1].resumed_from == (run.id, "research", 0, 1, 1)


def test_rewind_removes_everything_after_the_frame_and_leaves_other_runs_untouched(
    demo: Demo,
) -> None:
    db, run = demo.db, demo.run
    other = db.run(fresh_workflow()[0], {"topic": "ant"})
    other_before = dump(db, other.id)
    contents_before = dump(db)["tt_checkpoint_contents"]
    n = demo.frame("attempt_started", "write")
    at_n = run.snapshot(n)

    db.rewind(run.id, n, confirm=True)

    assert without_status(live_view(db, run.id)) == restored_view(at_n)
    assert not [k for k in live_view(db, run.id)["attempts"] if k[0] == "review"]
    assert [f.frame_no for f in run.frames()] == list(range(n + 1))
    assert run.refresh().record.clock == n
    assert dump(db, other.id) == other_before
    assert dump(db)["tt_checkpoint_contents"] == contents_before  # shared content stays
    assert count(db, "tt_audit", "run_id = :r AND operation = 'rewind'", r=run.id) == 1
    # The rewound run goes on from frame n: its next frame is n + 1.
    wf, agents = fresh_workflow()
    assert db.resume(run.id, wf).status == "finished"
    assert agents.researcher.calls == 0 and agents.writer.calls >= 1
    assert run.frames()[n + 1].kind == "run_claimed"
    assert run.refresh().output == demo.run.output


def test_rewind_refuses_without_confirmation(demo: Demo) -> None:
    before = dump(demo.db)
    for confirm in (False, "yes", 1):
        with pytest.raises(ConfirmationRequired):
            demo.db.rewind(demo.run.id, 3, confirm=confirm)
    assert dump(demo.db) == before


def test_rewind_refuses_when_a_live_process_executes_the_run(db: st.Database) -> None:
    _, fence = db.store.create_run("live", graph={"n": []})  # running, fresh heartbeat
    key = db.store.start_attempt(fence, "n").key
    db.store.publish(fence, key, AgentCheckpoint("c", 1, {"a": 1}))
    before = dump(db)
    with pytest.raises(LeaseBusy, match="being executed"):
        db.rewind(fence.run_id, 1, confirm=True)
    with pytest.raises(LeaseBusy):
        db.reset(fence.run_id, "n")
    assert dump(db) == before
    # The owner is fenced out once someone forces the rewind (its process is gone).
    db.rewind(fence.run_id, 1, confirm=True, force=True)
    with pytest.raises(st.FenceLost):
        db.store.publish(fence, key, AgentCheckpoint("c", 1, {"a": 2}))


def test_rewind_refuses_while_another_operation_holds_the_lease_until_it_expires(
    demo: Demo,
) -> None:
    db, run = demo.db, demo.run
    lease = acquire_lease(db.store, run.id, "test", lease_ms=400)
    before = dump(db)
    with pytest.raises(LeaseBusy, match="time-travel lease"):
        db.rewind(run.id, 3, confirm=True, force=True)  # force never overrides a lease
    assert dump(db) == before
    time.sleep(0.5)
    db.rewind(run.id, 3, confirm=True)  # the holder died: its lease expired
    release_lease(db.store, lease)  # a late release does not free someone else's lease
    assert run.refresh().record.clock == 3


def test_rewind_lets_exactly_one_of_two_concurrent_rewinds_win(
    db_url: str, db: st.Database
) -> None:
    run_id = build_bulk_run(db, nodes=20, refs_per_node=100)
    clock = db.store.get_run(run_id).clock
    targets = {"a": clock // 2, "b": clock // 4}
    expected = {
        name: compact_snapshot(db.snapshot(run_id, n), clock=n, frames=(n + 1, n))
        for name, n in targets.items()
    }
    dbs = {name: st.connect(db_url) for name in targets}
    barrier = threading.Barrier(len(targets))
    outcome: dict[str, object] = {}

    def rewind(name: str) -> None:
        barrier.wait()
        try:
            dbs[name].rewind(run_id, targets[name], confirm=True)
            outcome[name] = "won"
        except Exception as error:
            outcome[name] = error

    threads = [threading.Thread(target=rewind, args=(name,)) for name in targets]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    finally:
        for d in dbs.values():
            d.close()
    winners = [name for name, result in outcome.items() if result == "won"]
    losers = [result for result in outcome.values() if result != "won"]
    assert len(winners) == 1, outcome
    assert len(losers) == 1 and isinstance(losers[0], LeaseBusy), outcome
    assert compact_state(db, run_id) == expected[winners[0]]
    assert count(db, "tt_audit", "run_id = :r", r=run_id) == 1


def test_rewind_raises_frame_not_found_for_frames_the_run_does_not_have(demo: Demo) -> None:
    db, run = demo.db, demo.run
    child = db.fork(run.id, 5)
    before = dump(db)
    last = run.record.clock
    for run_id, frame in [
        (run.id, last + 1),
        (run.id, -1),
        (run.id, "3"),
        (run.id, True),
        (child.id, -1),  # a fork's base frames are not frames one can rewind to
    ]:
        with pytest.raises(FrameNotFound):
            db.rewind(run_id, frame, confirm=True)
    assert dump(db) == before  # nothing changed, and no lease stayed behind
    db.rewind(run.id, last - 1, confirm=True)


CORRUPTIONS = {
    "data_not_an_object": "UPDATE tt_frame_rows SET data_json = '[1]' "
    "WHERE run_id = :r AND kind = 'attempt_started'",
    "data_not_json": "UPDATE tt_frame_rows SET data_json = '{\"broken' "
    "WHERE run_id = :r AND kind = 'attempt_finished'",
    "content_hash_not_sha256": "UPDATE tt_frame_rows SET content_hash = 'abc' "
    "WHERE run_id = :r AND kind = 'checkpoint' AND sequence = 0",
    "node_missing": "UPDATE tt_frame_rows SET node_id = NULL "
    "WHERE run_id = :r AND kind = 'checkpoint'",
    "frame_missing": "DELETE FROM tt_frame_rows WHERE run_id = :r AND frame_no = 4",
    "attempt_renumbered": "UPDATE tt_frame_rows SET attempt = 7 WHERE run_id = :r AND frame_no = 2",
    "content_oversized": "UPDATE tt_checkpoint_contents SET size_bytes = 20000000 "
    "WHERE content_hash IN (SELECT content_hash FROM tt_frames WHERE run_id = :r)",
}


@pytest.mark.parametrize("corruption", sorted(CORRUPTIONS))
def test_rewind_refuses_corrupt_frames_before_changing_anything(
    demo: Demo, corruption: str
) -> None:
    db, run = demo.db, demo.run
    assert run.frames()[2].kind == "attempt_started" and run.frames()[4].kind == "checkpoint"
    n = demo.frame("node_state", "research", state="finished")
    execute(db, CORRUPTIONS[corruption], r=run.id)
    before = dump(db)
    with pytest.raises(SnapshotInvalid, match=r"nothing was changed"):
        db.rewind(run.id, n, confirm=True)
    assert dump(db) == before
    # A fork by reference reads nothing of its parent's history, so it is made; giving it
    # its own copy (what resuming it does first) meets the corruption and changes nothing.
    child = db.fork(run.id, n)
    forked = dump(db)
    with pytest.raises(SnapshotInvalid):
        materialize(db.store, child.id)
    assert dump(db) == forked


def test_rewind_refuses_snapshots_larger_than_the_bound(
    demo: Demo, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(snapshot_module, "MAX_SNAPSHOT_ROWS", 5)
    before = dump(demo.db)
    with pytest.raises(SnapshotInvalid, match="refuses snapshots this large"):
        demo.db.rewind(demo.run.id, demo.run.record.clock - 1, confirm=True)
    assert dump(demo.db) == before


def test_rewind_refuses_when_content_a_frame_pins_is_missing(demo: Demo) -> None:
    db, run = demo.db, demo.run
    n = demo.frame("node_state", "research", state="finished")
    gone = run.snapshot(n).refs["research", 0, 1, 0].content_hash
    db.reset(run.id, "research", dependents=True)  # no live ref holds it any more
    execute(db, "DELETE FROM tt_checkpoint_contents WHERE content_hash = :h", h=gone)
    before = dump(db)
    with pytest.raises(CheckpointMissing, match="nothing was changed") as error:
        db.rewind(run.id, n, confirm=True)
    assert error.value.details["missing"] == [gone]
    assert dump(db) == before


def test_rewind_restores_content_collected_from_live_refs(demo: Demo) -> None:
    db, run = demo.db, demo.run
    n = demo.frame("node_state", "research", state="finished")
    at_n = run.snapshot(n)
    db.reset(run.id, "research", dependents=True)
    assert not run.checkpoints()
    db.collect_garbage()  # frames still pin the content no live ref holds
    restored = db.rewind(run.id, n, confirm=True)
    refs = run.checkpoints()
    assert {(r.node_id, r.attempt, r.sequence): r.content_hash for r in refs} == {
        (k[0], k[2], k[3]): r.content_hash for k, r in at_n.refs.items()
    }
    for ref in refs:
        assert db.store.load(ref) == restored.loader(
            at_n.refs[ref.node_id, 0, ref.attempt, ref.sequence]
        )
    assert restored.payload("research") == at_n.payload("research")
    assert db.verify().ok
    assert db.resume(run.id, fresh_workflow()[0]).status == "finished"


def test_rewind_survives_a_rewind_of_a_fork(demo: Demo) -> None:
    db, run = demo.db, demo.run
    child = db.fork(run.id, demo.frame("attempt_started", "write"))
    wf, _ = fresh_workflow()
    assert db.resume(child.id, wf).status == "finished"
    at_1 = child.snapshot(1)
    db.rewind(child.id, 1, confirm=True)
    assert without_status(live_view(db, child.id)) == restored_view(at_1)
    assert child.snapshot(0).refs == at_1.refs
    assert db.resume(child.id, fresh_workflow()[0]).status == "finished"
    assert child.refresh().output == run.output
