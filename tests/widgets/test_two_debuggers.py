"""Two debuggers on one run: what one does, the other shows before it shows or does anything
else. A debugger that does not poll (the run ended, or ``live=False``) reads the run's record
again on every selection and every action; when the run's history was rewritten meanwhile (a
rewind or its undo by the other debugger, or by another process) it shows the run as it is
now and says so, and an action asked for, or confirmed, at a frame of the history that is gone
is refused with nothing done. It never shows a frame the store no longer has without saying
so."""

from __future__ import annotations

import pytest

import smithers_tt as st
from smithers_tt.demo import demo_workflow
from smithers_tt.widgets import Debugger

CHANGED = "changed in the database since it was read"


@pytest.fixture
def run(db: st.Database) -> st.Run:
    return db.run(demo_workflow()[0], {"topic": "bee"})


def _rewind(dbg: Debugger, frame_no: int) -> None:
    dbg.select_frame(frame_no)
    dbg.actions.rewind.click()
    dbg.actions.confirm.click()
    assert dbg.model.last_frame == frame_no, dbg.actions.report.value


def _undo(dbg: Debugger) -> None:
    dbg.actions.undo.click()
    dbg.actions.confirm.click()
    assert dbg.model.last_result is not None and dbg.model.last_result.ok


def assert_shows_the_store(dbg: Debugger, db: st.Database, run_id: str, frame_no: int) -> None:
    """Every part shows the run as the store has it now, at ``frame_no``."""
    last = db.store.get_run(run_id).clock
    m = dbg.model
    assert (m.last_frame, m.frame_no) == (last, frame_no)
    assert m.frames == db.store.frames(run_id)
    assert dbg.scrubber.slider.max == last and dbg.scrubber.slider.value == frame_no
    assert f"frames 0 to {last}" in dbg.header.value
    assert dbg.timeline.figure.layout.shapes[0].x0 == frame_no
    assert tuple(dbg.timeline.figure.layout.xaxis.range) == (-0.5, last + 0.5)
    assert f"Frame {frame_no} " in dbg.inspector.summary.value


@pytest.mark.parametrize("history", [False, True], ids=["opened-on-newest", "history-read"])
def test_a_selection_in_the_second_debugger_shows_a_rewind_made_by_the_first(
    db: st.Database, run: st.Run, history: bool
) -> None:
    first = Debugger(db, run.id, live=False)
    second = Debugger(db, run.id, live=False)
    old_last = second.model.last_frame
    if history:
        second.select_frame(12)
    _rewind(first, 9)
    assert second.model.last_frame == old_last  # nothing polled: not read yet
    second.select_frame(15)  # a frame that is gone: the newest there is now
    assert_shows_the_store(second, db, run.id, 9)
    assert CHANGED in second.actions.report.value
    assert "frames 0 to 9" in second.actions.report.value
    second.select_frame(4)  # nothing changed since: no message again, just the frame
    assert_shows_the_store(second, db, run.id, 4)

    _undo(first)  # the frames come back as they were: the history grew again
    second.select_frame(14)
    assert_shows_the_store(second, db, run.id, 14)
    assert second.model.last_frame == old_last
    first.close()
    second.close()


@pytest.mark.parametrize("action", ["rewind", "fork"])
@pytest.mark.parametrize("rewound", ["before-the-ask", "before-the-confirm"])
def test_an_action_at_a_frame_of_a_history_rewritten_elsewhere_does_nothing(
    db: st.Database, run: st.Run, action: str, rewound: str
) -> None:
    first = Debugger(db, run.id, live=False)
    second = Debugger(db, run.id, live=False)
    runs = len(db.runs(limit=1000))
    second.select_frame(12)
    if rewound == "before-the-ask":
        _rewind(first, 9)
    getattr(second.actions, action).click()  # at frame 12
    if rewound == "before-the-confirm":
        assert second.model.pending is not None  # asked, then the other debugger rewinds
        _rewind(first, 9)
        second.actions.confirm.click()
    assert second.model.pending is None
    report = second.actions.report.value
    assert CHANGED in report and "Nothing was done" in report
    assert db.store.get_run(run.id).clock == 9 and len(db.runs(limit=1000)) == runs
    assert_shows_the_store(second, db, run.id, 9)


def test_a_run_that_only_grew_elsewhere_is_followed_without_a_warning(
    db: st.Database, run: st.Run
) -> None:
    """New frames are no rewrite: the selection goes on, and an action asked is not refused."""
    wf, _ = demo_workflow()
    paused = db.run(wf, {"topic": "bee"}, break_before=["write"])
    second = Debugger(db, paused.id, workflow=wf, live=False)
    before = second.model.last_frame
    db.continue_run(paused.id, wf)  # another handle finishes it
    second.select_frame(3)
    assert second.model.last_frame > before and second.model.frame_no == 3
    assert second.actions.report.value == ""
    assert second.model.request_fork() is not None
