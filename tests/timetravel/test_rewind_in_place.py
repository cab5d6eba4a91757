"""A rewind keeps its cut in place: the frames above it stay stored, hidden by the run's
clock (``tt_frames`` is a view of ``tt_frame_rows`` at or below it), until an undo shows them
again or the run's next frame drops them. What a user relies on: the history reads as cut,
undo gives back exactly what was cut, and once the history goes on no cut frame is ever seen
again, whichever write comes first and however many frames follow."""

from __future__ import annotations

import pytest

import smithers_tt as st
from smithers_tt import AgentCheckpoint
from smithers_tt.errors import NothingToUndo
from smithers_tt.store.reads._newest import seen_node_ids
from tests.timetravel._support import count, hidden


def _published(db: st.Database, checkpoints: int) -> str:
    """A run with one attempt that published ``checkpoints`` checkpoints (1..n)."""
    store = db.store
    record, fence = store.create_run("in-place")
    key = store.start_attempt(fence, "n").key
    for n in range(checkpoints):
        store.publish(fence, key, AgentCheckpoint("c", 1, {"n": n + 1}))
    return record.run_id


def _shape(frames: list) -> list[tuple]:
    return [(f.frame_no, f.kind, f.node_id, f.sequence, f.content_hash) for f in frames]


@pytest.mark.parametrize("then", [1, 5, 40], ids=["one", "some", "past_the_old_end"])
def test_a_cut_frame_is_never_seen_again_once_the_history_goes_on(
    db: st.Database, then: int
) -> None:
    store = db.store
    run_id = _published(db, 20)
    before = store.frames(run_id)
    cut = 6
    db.rewind(run_id, cut, confirm=True, force=True)  # its owner is this test
    assert _shape(store.frames(run_id)) == _shape(before[: cut + 1])
    assert hidden(db, run_id) == len(before) - cut - 1  # kept in place, not copied
    assert count(db, "tt_runs", "run_id = :r AND hides = :t", r=run_id, t=True) == 1

    fence = store.claim_run(run_id)  # the first frame on top drops what the rewind hid
    assert hidden(db, run_id) == 0
    key = store.start_attempt(fence, "n").key
    for n in range(then):
        store.publish(fence, key, AgentCheckpoint("c", 1, {"again": n}))

    after = store.frames(run_id)
    assert _shape(after[: cut + 1]) == _shape(before[: cut + 1])
    assert [f.frame_no for f in after] == list(range(len(after)))  # dense, nothing between
    # The claim (which ends the attempt the rewind left open), a new attempt, its checkpoints.
    kinds = ["run_claimed", "attempt_finished", "attempt_started"] + ["checkpoint"] * then
    assert [f.kind for f in after[cut + 1 :]] == kinds
    written = [f.content_hash for f in after[cut + 1 :] if f.kind == "checkpoint"]
    assert written == [
        AgentCheckpoint("c", 1, {"again": n}).encode().content_hash for n in range(then)
    ]
    assert db.get_run(run_id).record.clock == len(after) - 1
    assert count(db, "tt_runs", "run_id = :r AND hides IS NULL", r=run_id) == 1
    with pytest.raises(NothingToUndo):
        db.undo_rewind(run_id, force=True)  # its owner is this test
    assert db.verify().ok


def test_rewinds_stacked_in_place_undo_one_by_one_to_exactly_what_each_cut(
    db: st.Database,
) -> None:
    store = db.store
    run_id = _published(db, 12)
    whole = _shape(store.frames(run_id))
    db.rewind(run_id, 10, confirm=True, force=True)
    at_10 = _shape(store.frames(run_id))
    db.rewind(run_id, 4, confirm=True, force=True)
    db.rewind(run_id, 2, confirm=True, force=True)
    assert _shape(store.frames(run_id)) == whole[:3]
    assert hidden(db, run_id) == len(whole) - 3
    marked = "run_id = :r AND hides = :t"
    db.undo_rewind(run_id)
    assert _shape(store.frames(run_id)) == whole[:5]
    assert count(db, "tt_runs", marked, r=run_id, t=True) == 1  # frames still above
    db.undo_rewind(run_id)
    assert _shape(store.frames(run_id)) == at_10
    assert count(db, "tt_runs", marked, r=run_id, t=True) == 1
    db.undo_rewind(run_id)
    assert _shape(store.frames(run_id)) == whole
    assert hidden(db, run_id) == 0 and count(db, "tt_rewinds") == 0
    # nothing left above the clock: unmarked, the next frame has nothing to delete
    assert count(db, "tt_runs", "run_id = :r AND hides IS NULL", r=run_id) == 1
    fence = store.claim_run(run_id)
    store.start_attempt(fence, "n")
    assert _shape(store.frames(run_id))[: len(whole)] == whole
    assert db.verify().ok


def test_a_fork_of_a_rewound_run_never_inherits_a_hidden_frame(db: st.Database) -> None:
    store = db.store
    run_id = _published(db, 10)
    db.rewind(run_id, 5, confirm=True, force=True)
    child = db.fork(run_id, 5)  # by reference: it reads its parent's history up to 5
    snapshot = child.snapshot()
    assert [f.frame_no for f in store.frames(run_id)] == list(range(6))
    db.undo_rewind(run_id)  # the parent's cut frames shown again: the fork still reads 0-5
    assert child.snapshot() == snapshot


def test_a_node_whose_every_frame_a_rewind_hid_is_not_seen_until_undone(db: st.Database) -> None:
    store = db.store
    record, fence = store.create_run("in-place")
    for node in ("first", "second"):
        key = store.start_attempt(fence, node).key
        store.publish(fence, key, AgentCheckpoint("c", 1, {"node": node}))
    before_second = (
        next(f.frame_no for f in store.frames(record.run_id) if f.node_id == "second") - 1
    )
    assert seen_node_ids(db.engine, record.run_id) == ["first", "second"]
    db.rewind(record.run_id, before_second, confirm=True, force=True)
    assert seen_node_ids(db.engine, record.run_id) == ["first"]
    db.undo_rewind(record.run_id, force=True)
    assert seen_node_ids(db.engine, record.run_id) == ["first", "second"]
    assert seen_node_ids(db.engine, "no-such-run") == []
