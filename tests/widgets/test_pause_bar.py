"""The debugger's breakpoints without a browser: the Paused banner (escaped question), the
answer editor, Continue / Step / Abort and the breakpoint toggles on the timeline's node rows
(before and after each node), on both backends."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import smithers_tt as st
from smithers_tt.widgets import Debugger
from smithers_tt.widgets._timeline_gutter import BREAK_ON

from ._support import HOSTILE, SCRIPT


def _flow(calls: list[str]) -> st.Workflow:
    async def pick(request: st.GenerateRequest) -> Any:
        calls.append("pick")
        return {"colour": await request.ask({"question": HOSTILE, "hint": SCRIPT})}

    async def write(request: st.GenerateRequest) -> Any:
        calls.append("write")
        return {"text": request.needs["pick"]["colour"]}

    async def check(request: st.GenerateRequest) -> Any:
        calls.append("check")
        return {"ok": True}

    wf = st.Workflow("paused-debugger")
    wf.task("pick", agent=pick)
    wf.task("write", agent=write, needs=["pick"])
    wf.task("check", agent=check, needs=["write"])
    return wf


def test_the_banner_shows_the_question_escaped_and_continue_answers_it(db: st.Database) -> None:
    calls: list[str] = []
    wf = _flow(calls)
    run = db.run(wf)
    dbg = Debugger(db, run.id, workflow=wf, live=False)
    bar = dbg.pause_bar
    assert bar.widget.layout.display is None  # shown: the run is paused
    banner = bar.banner.value
    assert "Paused" in banner and "while running" in banner and "<code>pick</code>" in banner
    assert HOSTILE not in banner and SCRIPT not in banner  # escaped, never markup
    assert "&lt;img src=x onerror=" in banner
    bar.answer.value = '"teal"'
    bar.continue_button.click()
    assert db.get_run(run.id).status == "finished"
    assert db.get_run(run.id).output["write"] == {"text": "teal"}
    assert bar.paused.layout.display == "none" and "finished" in bar.report.value
    assert bar.widget.layout.display is None  # the report is what a person sees now
    assert dbg.model.record.status == "finished"


@pytest.mark.parametrize(
    ("text", "said"),
    [("{teal", "not valid JSON"), ("7" * 5000, "a number of more than 4300 digits")],
    ids=["not-json", "5000-digits"],
)
def test_an_answer_that_cannot_be_read_writes_nothing_and_says_why(
    db: st.Database, text: str, said: str
) -> None:
    wf = _flow([])
    run = db.run(wf)
    bar = Debugger(db, run.id, workflow=wf, live=False).pause_bar
    clock = db.get_run(run.id).record.clock
    bar.answer.value = text
    bar.continue_button.click()
    assert said in bar.report.value and "nothing was written" in bar.report.value
    assert db.get_run(run.id).record.clock == clock and db.get_run(run.id).status == "paused"


def _toggle(dbg: Debugger, node_id: str, when: str) -> None:
    """Click the timeline row's toggle (as a person's click on the marker does)."""
    dbg.timeline.click("breakpoints", dbg.timeline.data.toggles.index((node_id, when)))


def _shown_on(dbg: Debugger) -> set[tuple[str, str]]:
    """The toggles the timeline draws as set (filled red)."""
    trace = next(t for t in dbg.timeline.figure.data if t.name == "breakpoints")
    return {
        toggle
        for toggle, colour in zip(dbg.timeline.data.toggles, trace.marker.color, strict=True)
        if colour == BREAK_ON
    }


def test_step_runs_one_node_and_a_timeline_toggle_pauses_before_a_node(
    db: st.Database,
) -> None:
    calls: list[str] = []
    wf = _flow(calls)
    run = db.run(wf)
    dbg = Debugger(db, run.id, workflow=wf, live=False)
    bar = dbg.pause_bar
    # every node has its row, with a toggle before and after it, even those not run yet
    assert sorted(dbg.timeline.data.toggles) == [
        (node, when) for node in ("check", "pick", "write") for when in ("after", "before")
    ]
    assert _shown_on(dbg) == set()
    bar.answer.value = '"red"'
    bar.step_button.click()  # pick finishes with the answer, then the run pauses again
    pause = bar.pause
    assert (pause.reason, pause.node_id) == ("step", "pick") and calls == ["pick", "pick"]
    assert "(step) after" in bar.banner.value
    _toggle(dbg, "check", "before")
    assert _shown_on(dbg) == {("check", "before")}
    assert db.store.pause_frames(run.id)[-1].kind == "breakpoints_set"  # written at once
    bar.answer.value = ""
    bar.continue_button.click()
    pause = bar.pause
    assert (pause.reason, pause.when, pause.node_id) == ("breakpoint", "before", "check")
    assert calls == ["pick", "pick", "write"]
    assert _shown_on(dbg) == {("check", "before")}
    _toggle(dbg, "check", "before")  # off again, and on after it
    _toggle(dbg, "check", "after")
    assert _shown_on(dbg) == {("check", "after")}
    bar.continue_button.click()
    pause = bar.pause
    assert (pause.reason, pause.when, pause.node_id) == ("breakpoint", "after", "check")
    bar.continue_button.click()
    assert db.get_run(run.id).status == "finished"
    assert calls == ["pick", "pick", "write", "check"]


def test_a_toggle_on_an_ended_run_is_held_for_the_replay_started_from_the_debugger(
    db: st.Database,
) -> None:
    calls: list[str] = []
    wf = _flow(calls)
    run = db.resume(db.run(wf).id, wf, answer="teal")
    assert run.status == "finished"
    dbg = Debugger(db, run.id, workflow=wf, live=False)
    clock = db.get_run(run.id).record.clock
    _toggle(dbg, "write", "before")
    assert _shown_on(dbg) == {("write", "before")}
    assert "kept here for a Fork or Replay" in dbg.model.message.text
    assert db.get_run(run.id).record.clock == clock  # an ended run is not written to
    pick_done = next(
        f.frame_no
        for f in run.frames()
        if f.kind == "node_state" and f.node_id == "pick" and f.state == "finished"
    )
    dbg.model.select_frame(pick_done)
    dbg.model.request_replay()
    result = dbg.model.confirm()
    assert result is not None and result.ok, result
    child = db.get_run(result.run_id)
    assert child.status == "paused"
    assert (child.pause.reason, child.pause.when, child.pause.node_id) == (
        "breakpoint",
        "before",
        "write",
    )


def test_abort_cancels_and_without_a_workflow_continue_queues(db: st.Database) -> None:
    wf = _flow([])
    aborted = db.run(wf)
    bar = Debugger(db, aborted.id, workflow=wf, live=False).pause_bar
    clock = db.get_run(aborted.id).record.clock
    bar.abort_button.click()  # asks first, as every destructive button does
    assert bar.abort_form.layout.display is None and aborted.id in bar.abort_question.value
    assert bar.continue_button.disabled and bar.abort_button.disabled
    bar.abort_keep.click()  # "Keep it paused": nothing written
    assert bar.abort_form.layout.display == "none" and not bar.continue_button.disabled
    assert db.get_run(aborted.id).status == "paused"
    assert db.get_run(aborted.id).record.clock == clock
    bar.abort_button.click()
    bar.abort_confirm.click()
    done = db.get_run(aborted.id)
    assert done.status == "cancelled"
    # the report says so, and stays in sight once the banner is gone
    assert f"aborted: cancelled at frame {done.record.clock}" in bar.report.value
    assert bar.paused.layout.display == "none"
    assert bar.widget.layout.display is None and bar.report.layout.display is None
    queued = db.run(wf)
    bar = Debugger(db, queued.id, live=False).pause_bar  # no workflow: a worker executes it
    bar.answer.value = '"blue"'
    bar.continue_button.click()
    assert db.get_run(queued.id).status == "queued" and "worker" in bar.report.value


def test_continue_inside_a_running_loop_goes_on_in_the_background(db: st.Database) -> None:
    wf = _flow([])
    run = db.run(wf)

    async def main() -> Debugger:
        dbg = Debugger(db, run.id, workflow=wf, interval=0.05)
        dbg.pause_bar.answer.value = '"lime"'
        bar = dbg.pause_bar
        assert bar.controls.layout.display is None and bar.paused.layout.display is None
        bar.continue_button.click()  # returns at once: the kernel is not blocked
        assert "follows it live" in bar.report.value
        # the run is no longer paused for the person looking: no banner, no second Continue
        # (the record still says paused until the continued run is claimed)
        assert bar.controls.layout.display == "none" and bar.paused.layout.display == "none"
        dbg.model.refresh()
        bar.update()  # a live refresh meanwhile keeps them away
        assert bar.controls.layout.display == "none"
        await dbg.pause_bar.task
        for _ in range(200):
            if not dbg.live.running:
                break
            await asyncio.sleep(0.05)
        return dbg

    dbg = asyncio.run(main())
    record = db.get_run(run.id).record
    assert record.status == "finished" and dbg.model.last_frame == record.clock
    assert "finished" in dbg.pause_bar.report.value
    assert dbg.pause_bar.controls.layout.display == "none"  # finished: nothing to continue


def test_step_in_the_background_shows_the_controls_again_at_the_next_pause(
    db: st.Database,
) -> None:
    calls: list[str] = []
    wf = _flow(calls)
    run = db.run(wf, break_before=["pick"])
    other = db.run(wf, break_before=["pick"])

    async def main() -> Debugger:
        dbg = Debugger(db, run.id, workflow=wf, interval=0.05)
        bar = dbg.pause_bar
        bar.step_button.click()
        assert bar.controls.layout.display == "none"
        dbg.model.switch_run(other.id)  # another paused run: its own controls, at once
        assert bar.controls.layout.display is None and "breakpoint" in bar.banner.value
        dbg.model.switch_run(run.id)
        await bar.task
        return dbg

    dbg = asyncio.run(main())
    bar = dbg.pause_bar
    record = db.get_run(run.id).record
    assert record.status == "paused" and calls == ["pick"]  # one node, then paused again
    assert bar.controls.layout.display is None and bar.paused.layout.display is None
    assert "Paused" in bar.banner.value and "ask" in bar.banner.value


def test_a_fork_started_from_the_debugger_gets_the_breakpoints_it_shows(db: st.Database) -> None:
    wf = _flow([])
    run = db.run(wf, break_after=["pick"])
    dbg = Debugger(db, run.id, workflow=wf, live=False)
    _toggle(dbg, "write", "before")  # written at the run's newest frame
    _toggle(dbg, "pick", "after")  # and the breakpoint after pick removed
    assert _shown_on(dbg) == {("write", "before")}
    dbg.model.select_frame(0)  # a fork there inherits frame 0's breakpoints: after pick
    dbg.model.request_fork()
    result = dbg.model.confirm()
    assert result is not None and result.ok, result
    fork = db.store.pause_frames(result.run_id)
    assert fork[0].data["breakpoints"] == {"before": [], "after": ["pick"]}  # inherited
    assert fork[-1].data == {"breakpoints": {"before": ["write"], "after": []}}  # given
    child = db.resume(result.run_id, wf)
    assert child.pause.reason == "ask"  # the fork's pick asks again (answers are not inherited)
    child = db.resume(child.id, wf, answer="teal")
    assert (child.pause.reason, child.pause.when, child.pause.node_id) == (
        "breakpoint",
        "before",
        "write",
    )


def test_a_breakpoint_pause_offers_no_answer_since_nothing_was_asked(db: st.Database) -> None:
    wf = _flow([])
    asked = db.run(wf)
    bar = Debugger(db, asked.id, workflow=wf, live=False).pause_bar
    assert bar.answer.layout.display is None  # a question: the answer editor is there
    run = db.run(wf, break_before=["pick"])
    assert run.pause.reason == "breakpoint" and run.pause.question is None
    bar = Debugger(db, run.id, workflow=wf, live=False).pause_bar
    assert bar.paused.layout.display is None and "breakpoint" in bar.banner.value
    assert bar.answer.layout.display == "none"
    assert bar.continue_button.layout.display != "none"


def test_the_report_of_one_run_goes_when_the_debugger_shows_another(db: st.Database) -> None:
    wf = _flow([])
    first, second = db.run(wf), db.run(wf)
    dbg = Debugger(db, first.id, workflow=wf, live=False)
    dbg.pause_bar.abort_button.click()
    dbg.pause_bar.abort_confirm.click()
    assert first.id in dbg.pause_bar.report.value
    dbg.model.switch_run(second.id)
    assert dbg.pause_bar.report.value == "" and dbg.pause_bar.report.layout.display == "none"
    assert dbg.pause_bar.paused.layout.display is None  # the second run's own pause


def test_on_a_read_only_store_the_paused_banner_shows_but_nothing_continues_it(
    db: st.Database,
) -> None:
    wf = _flow([])
    run = db.run(wf)
    read_only = st.connect(db.url, read_only=True)
    try:
        bar = Debugger(read_only, run.id, workflow=wf, live=False).pause_bar
        buttons = (bar.continue_button, bar.step_button, bar.abort_button)

        assert bar.widget.layout.display is None and "Paused" in bar.banner.value
        assert all(b.disabled and "read-only" in b.tooltip for b in buttons)
        bar.go("abort")  # as a click that got past the disabled button would
        assert "Nothing was done" in bar.report.value
    finally:
        read_only.close()
    assert db.get_run(run.id).status == "paused"
