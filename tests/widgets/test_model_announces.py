"""What the debugger's model tells its views, and what it tells the person, for each thing a
person does: the views redraw only from these announcements (``DebuggerModel.on``), so a
missing one leaves a stale timeline, inspector or fork tree on screen, and the messages are
the only account of what an action did."""

from __future__ import annotations

import smithers_tt as st
from smithers_tt.demo import demo_workflow
from smithers_tt.widgets import DebuggerModel
from smithers_tt.widgets._records import ActionResult, Message

from ._support import Heard, audit


def _run(db: st.Database) -> str:
    wf, _ = demo_workflow()
    return db.run(wf, {"topic": "bee"}).id


def test_steps_move_by_their_sign_and_announce_the_frame_and_its_checkpoint(
    db: st.Database,
) -> None:
    model = DebuggerModel(db, _run(db))
    heard = Heard(model)
    last = model.last_frame
    model.step(-1)
    assert model.frame_no == last - 1 and heard.take() == ["frame", "ref"]
    model.step(-3)
    assert model.frame_no == last - 4
    model.step(2)
    assert model.frame_no == last - 2
    model.step(-10_000)
    assert model.frame_no == 0
    heard.take()
    model.step(-1)  # already at the first frame: nothing changes, nothing is announced
    assert model.frame_no == 0 and heard.take() == []
    model.step(1)
    assert model.frame_no == 1 and heard.take() == ["frame", "ref"]


def test_asking_then_cancelling_an_undo_says_so_and_changes_nothing(db: st.Database) -> None:
    run_id = _run(db)
    db.rewind(run_id, 4, confirm=True)
    frames = db.store.frames(run_id)
    model = DebuggerModel(db, run_id)
    heard = Heard(model)
    pending = model.request_undo_rewind("  the draft was fine  ")
    assert pending is model.pending and pending is not None
    assert (pending.action, pending.run_id, pending.frame_no) == ("undo_rewind", run_id, 4)
    assert pending.options == {"reason": "the draft was fine"}
    assert pending.summary == (
        f"Undo the newest rewind of run {run_id}: its removed frames come back and the run is "
        "as it was before it; reason: the draft was fine."
    )
    assert model.message is None and heard.take() == ["pending", "message"]
    model.cancel()
    assert model.pending is None
    assert model.message == Message("info", "Undo rewind cancelled; nothing was changed.")
    assert heard.take() == ["pending", "message"]
    assert db.store.frames(run_id) == frames
    model.cancel()  # nothing pending: nothing said
    assert heard.take() == []

    for plain in (model.request_undo_rewind("   "), model.request_undo_rewind()):
        assert plain is not None and plain.options == {}
        assert plain.summary.endswith("the run is as it was before it.")


def test_a_confirmed_undo_redraws_every_view_reports_the_frame_and_audits_the_reason(
    db: st.Database,
) -> None:
    run_id = _run(db)
    before = db.store.frames(run_id)
    db.rewind(run_id, 4, confirm=True)
    model = DebuggerModel(db, run_id)
    assert model.last_frame == 4
    heard = Heard(model)
    model.request_undo_rewind("put it back")
    heard.take()
    result = model.confirm()
    last = before[-1].frame_no
    assert result == ActionResult(
        "undo_rewind",
        True,
        f"Undid the rewind of run {run_id}: it is back at frame {last}.",
        run_id,
        last,
    )
    assert model.last_result == result
    assert model.message == Message("success", result.text)
    events = heard.take()
    assert events[0] == "pending" and events[-1] == "message"
    assert {"run", "tree", "frame", "ref", "diff"} <= set(events)
    assert model.frame_no == model.last_frame == last
    assert model.snapshot.status == "finished"
    reasons = [(op, no, detail.get("reason")) for op, no, detail in audit(db, run_id)]
    assert ("undo_rewind", last, "put it back") in reasons


def test_a_confirmed_rewind_redraws_every_view_and_cancelling_one_names_it(
    db: st.Database,
) -> None:
    run_id = _run(db)
    model = DebuggerModel(db, run_id)
    heard = Heard(model)
    model.select_frame(5)
    model.request_rewind()
    heard.take()
    model.cancel()
    assert model.message == Message("info", "Rewind cancelled; nothing was changed.")
    heard.take()
    clock = model.record.clock
    model.request_rewind()
    result = model.confirm()
    assert result is not None and result.ok
    assert result.text == f"Rewound run {run_id} to frame 5; {clock - 5} later frame(s) removed."
    assert (result.run_id, result.frame_no) == (run_id, 5)
    events = heard.take()
    assert {"run", "tree", "frame", "ref", "diff"} <= set(events)
    assert model.frame_no == model.last_frame == 5
