"""What the debugger's model says and shows after an action a person confirmed: a fork, and
a replay run in the background of a running loop (finished, failed or cancelled)."""

from __future__ import annotations

import asyncio
import contextlib

import smithers_tt as st
from smithers_tt.demo import demo_workflow
from smithers_tt.widgets import DebuggerModel
from smithers_tt.widgets._records import Message


def _research_done(db: st.Database, run_id: str) -> int:
    return max(
        f.frame_no
        for f in db.store.frames(run_id)
        if f.kind == "node_state" and f.node_id == "research" and f.state == "finished"
    )


def _replay_in_a_loop(
    db: st.Database, run_id: str, wf: st.Workflow, *, cancel: bool = False, leave: bool = False
) -> tuple[DebuggerModel, str]:
    """Confirm a replay inside a running loop, wait for it (or cancel it), return the child."""

    async def main() -> tuple[DebuggerModel, str]:
        model = DebuggerModel(db, run_id, workflow=wf)
        model.select_frame(_research_done(db, run_id))
        model.request_replay(reset=["write"])
        result = model.confirm()
        assert result is not None and result.ok and model.background is not None
        child = result.run_id
        assert model.run_id == child and model.live  # it follows the child while it runs
        if leave:
            model.switch_run(run_id)  # the person looks at the parent meanwhile
        if cancel:
            model.background.cancel()
        with contextlib.suppress(asyncio.CancelledError, st.SmithersError):
            await model.background
        await asyncio.sleep(0)  # the done callback runs on the next turn of the loop
        return model, child

    return asyncio.run(main())


def test_a_background_replay_reports_its_end_and_shows_every_frame(db: st.Database) -> None:
    wf, agents = demo_workflow(step_delay=0.01)
    run_id = db.run(wf, {"topic": "bee"}).id
    frame = _research_done(db, run_id)
    model, child = _replay_in_a_loop(db, run_id, wf)
    record = db.store.get_run(child)
    assert record.status == "finished" and agents.researcher.calls == 1  # the first run's
    assert model.frames == db.store.frames(child)  # refreshed once it ended
    assert model.frame_no == record.clock and not model.live
    assert model.message == Message(
        "success",
        f"Replayed run {run_id} from frame {frame} as run {child}: finished at frame "
        f"{record.clock}.",
    )


def test_a_background_replay_that_fails_says_why(db: st.Database) -> None:
    wf, _ = demo_workflow()
    run_id = db.run(wf, {"topic": "bee"}).id
    other = st.Workflow("demo-report")  # same name, another definition: resume refuses it
    other.task("research", agent=lambda request: {"topic": "x", "notes": []})
    model, child = _replay_in_a_loop(db, run_id, other)
    assert model.message is not None and model.message.kind == "error"
    assert model.message.text.startswith(f"Replay of run {child} failed: run {child} started")
    assert "another definition" in model.message.text
    assert model.frames == db.store.frames(child)


def test_a_cancelled_background_replay_says_so(db: st.Database) -> None:
    wf, _ = demo_workflow(step_delay=0.05)
    run_id = db.run(demo_workflow()[0], {"topic": "bee"}).id
    model, child = _replay_in_a_loop(db, run_id, wf, cancel=True)
    assert model.message == Message("error", f"Replay of run {child} was cancelled.")


def test_a_replay_ending_while_another_run_is_shown_leaves_that_run(db: st.Database) -> None:
    wf, _ = demo_workflow(step_delay=0.01)
    run_id = db.run(wf, {"topic": "bee"}).id
    model, child = _replay_in_a_loop(db, run_id, wf, leave=True)
    assert model.run_id == run_id and model.frames == db.store.frames(run_id)
    assert db.store.get_run(child).status == "finished"
    assert model.message is not None and model.message.kind == "success"
    assert f"as run {child}: finished at frame" in model.message.text


def test_a_fork_from_the_model_reports_the_new_run_and_shows_it_in_the_tree(
    db: st.Database,
) -> None:
    wf, _ = demo_workflow()
    run_id = db.run(wf, {"topic": "bee"}).id
    model = DebuggerModel(db, run_id)
    model.select_frame(7)
    events: list[str] = []
    model.on("tree", lambda: events.append("tree"))
    pending = model.request_fork(reset=["write"], reason="try again")
    assert pending is not None and pending.summary == (
        f"Fork run {run_id} at frame 7 into a new run: reset write; reason: try again."
    )
    result = model.confirm()
    assert result is not None and result.ok and result.action == "fork"
    child = db.store.get_run(result.run_id)
    assert (child.parent_run_id, child.parent_frame_no) == (run_id, 7)
    assert (result.run_id, result.frame_no) == (child.run_id, 0)
    assert result.text.startswith(
        f"Forked run {run_id} at frame 7: new run {child.run_id} (not started, frame 0)."
    )
    assert model.message == Message("success", result.text)
    assert events == ["tree"] and model.edge(child.run_id) is not None
    assert model.run_id == run_id and model.frame_no == 7  # the person stays where they were


def test_a_rewind_past_a_fork_asks_again_naming_the_fork_and_then_rewinds(
    db: st.Database,
) -> None:
    wf, _ = demo_workflow()
    run_id = db.run(wf, {"topic": "bee"}).id
    child = db.fork(run_id, 9).id
    model = DebuggerModel(db, run_id)
    model.select_frame(5)
    model.request_rewind()

    first = model.confirm()

    assert first is not None and not first.ok
    assert db.store.get_run(run_id).clock > 9  # nothing changed yet
    again = model.pending
    assert again is not None and again.action == "rewind" and again.options["force"] is True
    assert child in again.summary and "rewind anyway" in again.summary
    done = model.confirm()
    assert done is not None and done.ok
    assert db.store.get_run(run_id).clock == 5
    assert model.edge(child) is not None and model.edge(child).fork_point_rewound


def test_the_undo_button_puts_a_rewound_run_back_as_it_was(db: st.Database) -> None:
    from smithers_tt.widgets import Debugger

    wf, _ = demo_workflow()
    run_id = db.run(wf, {"topic": "bee"}).id
    frames = db.store.frames(run_id)
    db.rewind(run_id, 4, confirm=True)
    dbg = Debugger(db, run_id, live=False)
    dbg.actions.undo.click()
    assert "Undo the newest rewind" in dbg.actions.confirm_text.value
    dbg.actions.confirm.click()
    assert dbg.model.last_result.ok, dbg.model.last_result
    assert db.store.frames(run_id) == frames
    assert dbg.model.last_frame == frames[-1].frame_no
    dbg.actions.undo.click()
    dbg.actions.confirm.click()  # nothing left to undo: said, nothing changed
    assert not dbg.model.last_result.ok
    assert "no rewind to undo" in dbg.model.last_result.text


def test_undo_rewind_is_disabled_with_the_reason_as_tooltip_when_there_is_nothing_to_undo(
    db: st.Database,
) -> None:
    from smithers_tt.widgets import Debugger

    wf, _ = demo_workflow()
    run_id = db.run(wf, {"topic": "bee"}).id
    dbg = Debugger(db, run_id, live=False)
    undo = dbg.actions.undo
    assert undo.disabled
    assert undo.tooltip == (
        f"run {run_id} has no rewind to undo (never rewound, undone already, or collected "
        "by retention)"
    )
    dbg.model.select_frame(4)
    dbg.actions.rewind.click()
    dbg.actions.confirm.click()
    assert not undo.disabled
    assert undo.tooltip == "put this run back as it was before its newest rewind (asks first)"
    undo.click()
    dbg.actions.confirm.click()
    assert dbg.model.last_result.ok, dbg.model.last_result
    assert undo.disabled and "no rewind to undo" in undo.tooltip
    # New frames on top of a rewind: what it removed cannot come back, and the button says so.
    db.rewind(run_id, 4, confirm=True)
    db.resume(run_id, wf)
    later = Debugger(db, run_id, live=False).actions.undo
    assert later.disabled
    assert "written after its rewind to frame 4" in later.tooltip
    assert "cannot be restored" in later.tooltip
