"""The debugger's breakpoints without a browser: the Paused banner (escaped question), the
answer editor, Continue / Step / Abort and the per-node breakpoint toggles, on both backends."""

from __future__ import annotations

import asyncio
from typing import Any

import smithers_tt as st
from smithers_tt.widgets import Debugger

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
    assert bar.widget.layout.display == "none" and "finished" in bar.report.value
    assert dbg.model.record.status == "finished"


def test_an_answer_that_is_not_json_writes_nothing(db: st.Database) -> None:
    wf = _flow([])
    run = db.run(wf)
    bar = Debugger(db, run.id, workflow=wf, live=False).pause_bar
    clock = db.get_run(run.id).record.clock
    bar.answer.value = "{teal"
    bar.continue_button.click()
    assert "not valid JSON" in bar.report.value
    assert db.get_run(run.id).record.clock == clock and db.get_run(run.id).status == "paused"


def test_step_runs_one_node_and_a_toggled_breakpoint_pauses_before_a_node(
    db: st.Database,
) -> None:
    calls: list[str] = []
    wf = _flow(calls)
    run = db.run(wf)
    bar = Debugger(db, run.id, workflow=wf, live=False).pause_bar
    toggles = {t.node_id: t for t in bar.breakpoints.children}
    assert sorted(toggles) == ["check", "pick", "write"]
    bar.answer.value = '"red"'
    bar.step_button.click()  # pick finishes with the answer, then the run pauses again
    pause = bar.pause
    assert (pause.reason, pause.node_id) == ("step", "pick") and calls == ["pick", "pick"]
    assert "(step) after" in bar.banner.value
    toggles = {t.node_id: t for t in bar.breakpoints.children}
    toggles["check"].value = True
    bar.answer.value = ""
    bar.continue_button.click()
    pause = bar.pause
    assert (pause.reason, pause.when, pause.node_id) == ("breakpoint", "before", "check")
    assert calls == ["pick", "pick", "write"]
    assert {t.node_id: t.value for t in bar.breakpoints.children}["check"] is True
    bar.continue_button.click()
    assert db.get_run(run.id).status == "finished"


def test_abort_cancels_and_without_a_workflow_continue_queues(db: st.Database) -> None:
    wf = _flow([])
    aborted = db.run(wf)
    bar = Debugger(db, aborted.id, workflow=wf, live=False).pause_bar
    bar.abort_button.click()
    assert db.get_run(aborted.id).status == "cancelled" and "aborted" in bar.report.value
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
        dbg.pause_bar.continue_button.click()  # returns at once: the kernel is not blocked
        assert "follows it live" in dbg.pause_bar.report.value
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
