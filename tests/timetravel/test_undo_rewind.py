"""Undo for rewind: the run comes back exactly as it was (every snapshot equal), audited, under
the lease; refused clearly when there is nothing to undo or the run changed since."""

from __future__ import annotations

import datetime

import pytest

from smithers_tt.errors import NothingToUndo
from smithers_tt.store import now_ms
from tests.timetravel._support import count, execute, live_view
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
    assert count(db, "tt_rewound_frames") == 0 and count(db, "tt_rewinds") == 0
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


def test_undo_refuses_after_the_run_changed_and_says_what_to_do(demo: Demo) -> None:
    db, run = demo.db, demo.run
    db.rewind(run.id, 5, confirm=True)
    db.resume(run.id, demo.wf)  # new frames after the rewind
    after = run.frames()
    with pytest.raises(NothingToUndo, match="Rewind it to frame 5 first") as caught:
        db.undo_rewind(run.id)
    assert "changed after its rewind" in caught.value.message
    assert run.frames() == after
    # Doing what it says: rewind back to 5, undo that, and undo the first rewind.
    db.rewind(run.id, 5, confirm=True)
    db.undo_rewind(run.id)
    assert run.frames() == after


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
    kept = count(db, "tt_rewound_frames", "run_id = :r", r=run.id)
    assert kept > 0
    execute(db, "UPDATE tt_runs SET updated_at_ms = :t", t=now_ms() - 3 * 86_400_000)
    report = db.gc(datetime.timedelta(days=1), keep_forks=False)
    assert report.runs_deleted >= 1
    assert count(db, "tt_rewinds") == 0 and count(db, "tt_rewound_frames") == 0
    assert db.verify().ok


def test_retention_collects_only_the_kept_frames_of_the_runs_it_deletes(demo: Demo) -> None:
    db, run = demo.db, demo.run
    other = db.run(demo.wf, {"topic": "wasp"})
    frames = other.frames()
    for kept in (run, other):
        db.rewind(kept.id, 5, confirm=True)
    db.resume(run.id, demo.wf)  # finished again (retention takes ended runs); the rewind stays
    # Kept frames have no foreign key to their rewind: the prune deletes them itself.
    execute(db, "UPDATE tt_runs SET updated_at_ms = :t WHERE run_id = :r",
            t=now_ms() - 3 * 86_400_000, r=run.id)  # fmt: skip
    report = db.gc(datetime.timedelta(days=1), keep_forks=False)
    assert report.runs_deleted == 1
    assert count(db, "tt_rewinds", "run_id = :r", r=run.id) == 0
    assert count(db, "tt_rewound_frames", "run_id = :r", r=run.id) == 0
    assert count(db, "tt_rewound_frames", "run_id = :r", r=other.id) == len(frames) - 6
    db.undo_rewind(other.id)
    assert other.frames() == frames
    assert count(db, "tt_rewinds") == 0 and count(db, "tt_rewound_frames") == 0
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
