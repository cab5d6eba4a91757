"""Undo for rewind: the run comes back exactly as it was (every snapshot equal), audited, under
the lease; refused clearly when there is nothing to undo or the run changed since."""

from __future__ import annotations

import datetime

import pytest

import smithers_tt as st
from smithers_tt import AgentCheckpoint
from smithers_tt.errors import NothingToUndo
from smithers_tt.store import now_ms
from tests.timetravel._support import count, execute, hidden, live_view
from tests.timetravel.conftest import Demo, fresh_workflow


def _every_snapshot(demo: Demo) -> list[dict]:
    db, run = demo.db, demo.run
    clock = db.get_run(run.id).record.clock
    return [
        {"refs": s.refs, "nodes": s.nodes, "attempts": s.attempts, "status": s.status}
        for s in (db.snapshot(run.id, n) for n in range(clock + 1))
    ]


def test_undo_puts_the_run_back_exactly_as_it_was(demo: Demo) -> None:
    db, run = demo.db, demo.run
    record = db.get_run(run.id).record
    frames, snaps, live = run.frames(), _every_snapshot(demo), live_view(db, run.id)

    db.rewind(run.id, 4, confirm=True)
    assert db.get_run(run.id).record.clock == 4
    restored = db.undo_rewind(run.id, reason="too far")

    after = db.get_run(run.id).record
    assert restored.frame_no == record.clock
    assert (after.clock, after.status, after.output, after.error) == (
        record.clock,
        record.status,
        record.output,
        record.error,
    )
    assert run.frames() == frames
    assert _every_snapshot(demo) == snaps
    assert live_view(db, run.id) == live
    assert count(db, "tt_audit", "run_id = :r AND operation = 'undo_rewind'", r=run.id) == 1
    assert hidden(db) == 0 and count(db, "tt_rewinds") == 0
    assert db.verify().ok


def test_undo_undoes_the_newest_rewind_first_then_the_one_before(demo: Demo) -> None:
    db, run = demo.db, demo.run
    frames = run.frames()
    db.rewind(run.id, 10, confirm=True)
    at_10 = run.frames()
    db.rewind(run.id, 3, confirm=True)
    db.undo_rewind(run.id)
    assert run.frames() == at_10
    db.undo_rewind(run.id)
    assert run.frames() == frames
    with pytest.raises(NothingToUndo, match="no rewind to undo"):
        db.undo_rewind(run.id)


def test_undo_after_new_frames_says_plainly_the_rewound_history_cannot_be_restored(
    demo: Demo,
) -> None:
    db, run = demo.db, demo.run
    db.rewind(run.id, 5, confirm=True)
    db.resume(run.id, demo.wf)  # new frames after the rewind
    after = run.frames()
    clock = after[-1].frame_no
    with pytest.raises(NothingToUndo) as caught:
        db.undo_rewind(run.id)
    assert caught.value.message == (
        f"run {run.id} has new frames (6 to {clock}) written after its rewind to frame 5: the "
        "frames that rewind removed (and those of any rewind before it) followed a history "
        "that is gone, so they cannot be restored; `smithers-tt gc` releases what they keep; "
        "nothing was changed"
    )
    assert run.frames() == after
    # A rewind back to 5 can be undone (it brings the new frames back); the first cannot.
    db.rewind(run.id, 5, confirm=True)
    db.undo_rewind(run.id)
    assert run.frames() == after
    with pytest.raises(NothingToUndo, match="cannot be restored"):
        db.undo_rewind(run.id)


def _content(db: st.Database, run_id: str, frame_no: int) -> str:
    (frame,) = [f for f in db.store.frames(run_id, after=-1) if f.frame_no == frame_no]
    assert frame.kind == "checkpoint" and frame.content_hash is not None
    return frame.content_hash


def test_gc_releases_a_rewind_no_undo_can_reach_and_the_content_only_it_kept(
    demo: Demo,
) -> None:
    db, run = demo.db, demo.run
    store = db.store
    record, fence = store.create_run("lonely")
    key = store.start_attempt(fence, "n").key
    store.publish(fence, key, AgentCheckpoint("c", 1, {"kept": "by every frame"}))
    store.publish(fence, key, AgentCheckpoint("c", 1, {"kept": "by the rewind only"}))
    gone = _content(db, record.run_id, 3)
    db.rewind(record.run_id, 2, confirm=True, force=True)  # its owner is this test
    fence = store.claim_run(record.run_id)
    key = store.start_attempt(fence, "n").key
    store.publish(fence, key, AgentCheckpoint("c", 1, {"written": "after the rewind"}))
    # Another run's stack of two rewinds, which undo can still reach, stays.
    frames = run.frames()
    db.rewind(run.id, 10, confirm=True)
    db.rewind(run.id, 3, confirm=True)

    report = db.gc()

    assert count(db, "tt_checkpoint_contents", "content_hash = :h", h=gone) == 0
    assert report.content.rewinds_released == 1
    assert count(db, "tt_rewinds", "run_id = :r", r=record.run_id) == 0
    assert hidden(db, record.run_id) == 0
    assert db.verify().ok
    db.undo_rewind(run.id)
    db.undo_rewind(run.id)
    assert run.frames() == frames


def test_a_kept_rewind_pins_its_content_until_it_is_undone(demo: Demo) -> None:
    db, run = demo.db, demo.run
    snaps = _every_snapshot(demo)
    db.rewind(run.id, 2, confirm=True)
    db.gc()
    db.undo_rewind(run.id)
    assert _every_snapshot(demo) == snaps
    assert db.verify().ok


def test_retention_collects_the_kept_rewinds_with_their_run(demo: Demo) -> None:
    db, run = demo.db, demo.run
    db.rewind(run.id, 5, confirm=True)
    db.resume(run.id, demo.wf)  # finished again; the rewind stays kept
    assert count(db, "tt_rewinds", "run_id = :r", r=run.id) == 1
    assert hidden(db, run.id) == 0  # the resume's first frame dropped what the rewind hid
    execute(db, "UPDATE tt_runs SET updated_at_ms = :t", t=now_ms() - 3 * 86_400_000)
    report = db.gc(datetime.timedelta(days=1), keep_forks=False)
    assert report.runs_deleted >= 1
    assert count(db, "tt_rewinds") == 0 and hidden(db) == 0
    assert db.verify().ok


def test_retention_collects_only_the_kept_frames_of_the_runs_it_deletes(demo: Demo) -> None:
    db, run = demo.db, demo.run
    other = db.run(demo.wf, {"topic": "wasp"})
    frames = other.frames()
    for kept in (run, other):
        db.rewind(kept.id, 5, confirm=True)
    db.resume(run.id, demo.wf)  # finished again (retention takes ended runs); the rewind stays
    # The prune deletes the run's frames, hidden ones too; the other run's stay hidden.
    execute(db, "UPDATE tt_runs SET updated_at_ms = :t WHERE run_id = :r",
            t=now_ms() - 3 * 86_400_000, r=run.id)  # fmt: skip
    report = db.gc(datetime.timedelta(days=1), keep_forks=False)
    assert report.runs_deleted == 1
    assert count(db, "tt_rewinds", "run_id = :r", r=run.id) == 0
    assert count(db, "tt_frame_rows", "run_id = :r", r=run.id) == 0
    assert hidden(db, other.id) == len(frames) - 6
    db.undo_rewind(other.id)
    assert other.frames() == frames
    assert count(db, "tt_rewinds") == 0 and hidden(db) == 0
    assert db.verify().ok


def test_resume_that_loses_a_race_to_undo_returns_the_finished_run(demo: Demo) -> None:
    """The undo lands between the resume's read of the run and its claim: the resume then
    finds a finished run, which it returns as it is (as for any run that already ended)."""
    db, run = demo.db, demo.run
    finished = db.get_run(run.id).record
    db.rewind(run.id, 5, confirm=True)
    read = db.store.get_run

    def read_then_undo(run_id: str):  # the resume reads the rewound run; then the undo wins
        record = read(run_id)
        db.store.get_run = read
        db.undo_rewind(run_id)
        return record

    db.store.get_run = read_then_undo
    wf, agents = fresh_workflow()
    again = db.resume(run.id, wf)

    assert (again.status, again.output) == ("finished", finished.output)
    assert (agents.researcher.calls, agents.writer.calls, agents.reviewer.calls) == (0, 0, 0)
    assert db.get_run(run.id).record.clock == finished.clock
