"""``frame_rows``: a run's frames read in bulk as named tuples, for the debugger to open long
runs without making a ``Frame`` per frame. They must say exactly what ``Store.frames`` says."""

from __future__ import annotations

import smithers_tt as st
from smithers_tt import AgentCheckpoint
from smithers_tt.demo import demo_workflow
from smithers_tt.store import Frame
from smithers_tt.store.for_widgets import FrameRow, frame_rows


def test_frame_rows_are_the_frames_the_store_reads_field_by_field(db: st.Database) -> None:
    wf, _ = demo_workflow(flaky=True)
    run_id = db.run(wf, {"topic": "bee"}).id
    db.reset(run_id, "research", dependents=True)  # a reset frame in the history
    db.resume(run_id, wf)
    frames = db.store.frames(run_id)
    edited = AgentCheckpoint("demo.notes", 1, {"notes": ["edited by a person"]})
    fork_at = next(f.frame_no for f in frames if f.kind == "checkpoint")
    child = db.fork(run_id, fork_at, checkpoints={frames[fork_at].node_id: edited}).id
    for run in (run_id, child):
        expected = db.store.frames(run)
        rows = frame_rows(db.store.engine, run)
        assert rows == [tuple(getattr(f, n) for n in Frame.__slots__) for f in expected]
        assert all(type(r) is FrameRow for r in rows)
        assert [r.frame() for r in rows] == expected
        assert [r.checkpoint_ref() for r in rows if r.kind == "checkpoint"] == [
            f.checkpoint_ref() for f in expected if f.kind == "checkpoint"
        ]
    assert frame_rows(db.store.engine, child)[0].frame_no < 0  # the edit, below frame 0
    assert {f.kind for f in frames} >= {"reset", "checkpoint", "attempt_finished", "node_state"}
    last = frames[-1].frame_no
    for after, upto in ((None, 3), (3, None), (3, 9), (last, None), (-5, 0)):
        assert [r.frame() for r in frame_rows(db.store.engine, run_id, after=after, upto=upto)] == (
            db.store.frames(run_id, after=after, upto=upto)
        )
    assert frame_rows(db.store.engine, "no-such-run") == []
