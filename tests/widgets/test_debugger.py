"""The notebook debugger without a browser: widgets and controller driven from Python, on
SQLite and PostgreSQL (the ``db`` fixture)."""

from __future__ import annotations

import asyncio
import html
import json
import subprocess
import sys

import pytest

import smithers_tt as st
from smithers_tt import AgentCheckpoint
from smithers_tt.demo import demo_workflow
from smithers_tt.demo.agents import NOTES
from smithers_tt.testing import large_run
from smithers_tt.timetravel import Change
from smithers_tt.widgets import Debugger, DebuggerModel
from smithers_tt.widgets._control import REPLAY_NEEDS_WORKFLOW
from smithers_tt.widgets._diffview import render_diff
from smithers_tt.widgets._records import DiffResult
from smithers_tt.widgets._timeline_figure import LATER_ATTEMPT, build_timeline

from ._support import (
    HOSTILE,
    HOSTILE_NODE,
    HOSTILE_RUN,
    SCRIPT,
    figure_texts,
    fork_labels,
    hostile_workflow,
    html_values,
    walk,
)


def _clean(db: st.Database) -> st.Run:
    wf, _ = demo_workflow()
    return db.run(wf, {"topic": "bee"})


def _research_done(run: st.Run) -> int:
    return max(
        f.frame_no
        for f in run.frames()
        if f.kind == "node_state" and f.node_id == "research" and f.state == "finished"
    )


def _run_count(db: st.Database) -> int:
    return len(db.runs(limit=1000))


# --- selection --------------------------------------------------------------------------


def test_clicking_a_point_selects_the_frame_everywhere(db: st.Database) -> None:
    run = _clean(db)
    dbg = Debugger(db, run.id)
    assert dbg.model.frame_no == run.refresh().record.clock  # opens at the newest frame
    checkpoint_frames = [f.frame_no for f in run.frames() if f.kind == "checkpoint"]
    progress = [
        f.frame_no for f in run.frames() if f.kind == "checkpoint" and f.purpose == "progress"
    ]

    dbg.timeline.click("checkpoint: progress", 2)  # the third progress checkpoint
    n = progress[2]
    assert dbg.model.frame_no == n
    assert dbg.scrubber.slider.value == n
    assert f"Frame {n} " in dbg.inspector.summary.value
    assert dbg.timeline.figure.layout.shapes[0].x0 == n
    # the inspector shows the checkpoint this frame published, and its payload
    assert dbg.model.ref_key == ("research", 0, 1, 2)
    assert dbg.inspector.refs.value == ("research", 0, 1, 2)
    assert "notes" in dbg.inspector.payload.value
    assert "(finding 3)" in dbg.inspector.payload.value
    # the diff compares with the previous frame: one note was added
    diff = dbg.diff.output.value
    assert f"frame {n - 1} → B: run {run.id} frame {n}" in diff
    assert "checkpoint research" in diff
    assert "$.payload.notes[2]" in diff

    dbg.scrubber.slider.value = checkpoint_frames[0]  # the slider drives the same selection
    assert dbg.model.frame_no == checkpoint_frames[0]
    assert "checkpoint research" in dbg.diff.output.value  # the first one: all of it is new
    assert "(finding 1)" in dbg.diff.output.value
    dbg.scrubber.prev.click()
    assert dbg.model.frame_no == checkpoint_frames[0] - 1
    dbg.scrubber.next_checkpoint.click()
    assert dbg.model.frame_no == checkpoint_frames[0]
    dbg.scrubber.last.click()
    assert dbg.model.frame_no == dbg.model.last_frame
    dbg.scrubber.first.click()
    assert dbg.model.frame_no == 0
    assert "no node has started" in dbg.inspector.nodes.value


def test_selecting_a_ref_shows_its_payload_and_diff_pairs(db: st.Database) -> None:
    run = _clean(db)
    dbg = Debugger(db, run.id)
    refs = [key for _, key in dbg.inspector.refs.options]
    assert ("write", 0, 1, 0) in refs and ("review", 0, 1, 0) in refs
    label = dict((k, v) for v, k in dbg.inspector.refs.options)[("write", 0, 1, 0)]
    assert "demo.draft v1" in label and " B · " in label  # codec, version, size, hash
    dbg.inspector.refs.value = ("write", 0, 1, 0)
    assert dbg.model.ref_key == ("write", 0, 1, 0)
    assert "What we know about the bee" in dbg.inspector.payload.value
    assert "<details" in dbg.inspector.payload.value

    # compare two frames chosen by hand
    dbg.diff.previous.value = False
    dbg.diff.frame.value = 0
    assert dbg.model.compare_frame == 0
    assert "frame 0 → B" in dbg.diff.output.value
    assert "outputs" in dbg.diff.output.value


def test_diff_of_attempts_and_of_a_fork(db: st.Database) -> None:
    wf, _ = demo_workflow(flaky=True)
    flaky = db.run(wf, {"topic": "bee"})
    dbg = Debugger(db, flaky.id)
    dbg.diff.mode.value = "attempts"
    out = dbg.diff.output.value
    assert "research attempt #1 → B: research attempt #2" in out
    assert "failed" in out and "ConnectionError" in out
    assert "$.payload.notes[2]" in out  # the second attempt gathered the rest

    clean = _clean(db)
    frame = _research_done(clean)
    snap = db.snapshot(clean.id, frame)
    notes = dict(snap.payload("research"))
    notes["notes"] = ["a note written by a person", *notes["notes"][1:]]
    child = db.fork(clean.id, frame, checkpoints={"research": AgentCheckpoint(NOTES, 1, notes)})
    dbg = Debugger(db, child.id)
    dbg.diff.mode.value = "runs"
    assert dbg.diff.run.value == clean.id  # the parent, at the fork frame
    out = dbg.diff.output.value
    shown = db.store.short_run_ids([clean.id, child.id])
    assert f">A: run {shown[clean.id]} frame {frame} → B: run {shown[child.id]} frame 0<" in out
    assert f'title="A: run {clean.id} frame {frame} → B: run {child.id} frame 0"' in out
    assert "$.payload.notes[0]" in out and "a note written by a person" in out


def test_long_strings_diff_as_text() -> None:
    old = "the quick brown fox jumps over the lazy dog " * 5
    new = old.replace("lazy", "sleepy", 1)
    html = render_diff(
        DiffResult("a", "b", [("checkpoint x", [Change("change", "$.s", old, new)])])
    )
    assert "<del>lazy</del>" in html and "<ins>sleepy</ins>" in html
    many = [Change("add", f"$[{i}]", None, i) for i in range(500)]
    html = render_diff(DiffResult("a", "b", [("big", many)]))
    assert "… and 300 more changes" in html


# --- actions ------------------------------------------------------------------------------


def test_fork_writes_the_edited_checkpoint(db: st.Database) -> None:
    run = _clean(db)
    frame = _research_done(run)
    dbg = Debugger(db, run.id)
    dbg.select_frame(frame)
    dbg.actions.edit_node.value = "research"
    payload = json.loads(dbg.actions.editor.value)
    assert payload == db.snapshot(run.id, frame).payload("research")
    payload["notes"][0] = "Edited in the debugger: bees dance."
    dbg.actions.editor.value = json.dumps(payload)
    before = _run_count(db)

    dbg.actions.fork.click()  # asks first: nothing is written yet
    assert dbg.model.pending is not None and dbg.model.pending.action == "fork"
    assert dbg.actions.confirm_box.layout.display is None
    assert "edited checkpoint of research" in dbg.actions.confirm_text.value
    assert _run_count(db) == before

    dbg.actions.confirm.click()
    result = dbg.model.last_result
    assert result is not None and result.ok, result
    assert dbg.actions.confirm_box.layout.display == "none"
    child = db.get_run(result.run_id)
    assert child.record.parent_run_id == run.id and child.record.parent_frame_no == frame
    assert f"new run {child.id}" in dbg.actions.report.value
    snap = db.snapshot(child.id)
    ref = snap.newest_ref("research")
    assert ref is not None and (ref.codec, ref.version) == (NOTES, 1)
    assert snap.payload("research")["notes"][0] == "Edited in the debugger: bees dance."
    assert child.id in dbg.fork_tree.buttons  # the tree shows the new run

    dbg.fork_tree.buttons[child.id].click()  # and switches to it
    assert dbg.model.run_id == child.id
    assert child.id in dbg.header.value


def test_fork_refuses_invalid_input_before_writing(db: st.Database) -> None:
    run = _clean(db)
    dbg = Debugger(db, run.id)
    dbg.select_frame(_research_done(run))
    before = _run_count(db)
    dbg.actions.edit_node.value = "research"

    dbg.actions.editor.value = "{not json"
    dbg.actions.fork.click()
    assert dbg.model.pending is None
    assert "is not valid JSON" in dbg.actions.report.value

    dbg.actions.editor.value = '{"notes": [NaN]}'  # json.loads accepts NaN; the contract not
    dbg.actions.fork.click()
    assert dbg.model.pending is None
    assert "Cannot fork" in dbg.actions.report.value and "$.payload.notes[0]" in (
        dbg.actions.report.value
    )

    dbg.actions.edit_node.value = "(no edit)"
    dbg.actions.input.value = "[1, 2"
    dbg.actions.fork.click()
    assert "input override is not valid JSON" in dbg.actions.report.value
    assert "Traceback" not in dbg.actions.report.value
    assert _run_count(db) == before

    dbg.actions.input.value = '{"topic": "wasp"}'
    dbg.actions.reset.value = ("write",)
    dbg.actions.fork.click()
    dbg.actions.cancel.click()
    assert "cancelled; nothing was changed" in dbg.actions.report.value
    assert _run_count(db) == before
    dbg.actions.fork.click()
    dbg.actions.confirm.click()
    child = db.get_run(dbg.model.last_result.run_id)
    assert child.input == {"topic": "wasp"}
    assert "write" not in {k[0] for k in db.snapshot(child.id).nodes}


def test_rewind_only_after_confirmation(db: st.Database) -> None:
    run = _clean(db)
    last = run.refresh().record.clock
    dbg = Debugger(db, run.id)
    dbg.select_frame(9)

    dbg.actions.rewind.click()
    assert dbg.model.pending is not None and dbg.model.pending.action == "rewind"
    assert f"frames 10 to {last} are deleted" in dbg.actions.confirm_text.value
    assert db.get_run(run.id).record.clock == last  # nothing yet
    dbg.actions.cancel.click()
    assert db.get_run(run.id).record.clock == last
    assert len(db.get_run(run.id).frames()) == last + 1

    dbg.actions.rewind.click()
    dbg.actions.confirm.click()
    assert dbg.model.last_result.ok, dbg.model.last_result
    record = db.get_run(run.id).record
    assert record.clock == 9 and record.status == "interrupted"
    assert dbg.model.last_frame == 9 and dbg.model.frame_no == 9
    assert dbg.scrubber.slider.max == 9
    assert f"Rewound run {run.id} to frame 9" in dbg.actions.report.value
    dbg.actions.rewind.click()  # at the newest frame there is nothing to rewind
    assert dbg.model.pending is None and "nothing to rewind" in dbg.actions.report.value


def test_expected_errors_are_reported_in_plain_words(db: st.Database) -> None:
    # a run that looks executed right now by a live process: rewind must refuse
    record, fence = db.store.create_run("busy", {"x": 1}, owner_id="worker:1")
    db.store.set_node(fence, "a", 0, "running")
    dbg = Debugger(db, record.run_id, live=False)
    dbg.select_frame(0)
    dbg.actions.rewind.click()
    dbg.actions.confirm.click()
    report = dbg.actions.report.value
    assert not dbg.model.last_result.ok
    assert "Rewind failed: run" in report and "being executed by worker:1" in report
    assert "Traceback" not in report
    assert db.get_run(record.run_id).record.clock == 1
    assert dbg.actions.progress.children == ()  # no green "done" bar over a failure


def test_switching_runs_drops_the_report_and_bar_of_the_run_shown_before(
    db: st.Database,
) -> None:
    run = _clean(db)
    child = db.fork(run.id, 3)
    dbg = Debugger(db, run.id, live=False)
    dbg.select_frame(5)
    dbg.actions.rewind.click()
    dbg.actions.confirm.click()
    assert "Rewound run" in dbg.actions.report.value
    (bar,) = dbg.actions.progress.children
    assert bar.bar.bar_style == "success" and "done" in bar.text.value
    dbg.fork_tree.open(child.id)
    assert dbg.model.run_id == child.id
    assert dbg.actions.report.value == "" and dbg.actions.progress.children == ()
    dbg.actions.fork.click()
    dbg.actions.confirm.click()  # work of the run shown: its report and its bar
    assert "Forked" in dbg.actions.report.value
    assert dbg.actions.progress.children and "done" in dbg.actions.progress.children[0].text.value


def test_replay_needs_the_workflow(db: st.Database) -> None:
    run = _clean(db)
    dbg = Debugger(db, run.id)
    assert dbg.actions.replay.disabled
    assert "Replay needs the workflow" in dbg.actions.replay_note.value
    before = _run_count(db)
    assert dbg.model.request_replay() is None
    assert dbg.model.message.text == REPLAY_NEEDS_WORKFLOW
    assert _run_count(db) == before

    wf, agents = demo_workflow()
    dbg = Debugger(db, run.id, workflow=wf)
    assert not dbg.actions.replay.disabled and dbg.actions.replay_note.value == ""
    dbg.select_frame(_research_done(run))
    dbg.actions.reset.value = ("write",)
    dbg.actions.replay.click()
    assert "agents are called again" in dbg.actions.confirm_text.value
    dbg.actions.confirm.click()
    result = dbg.model.last_result
    assert result.ok, result
    assert agents.writer.calls == 1 and agents.reviewer.calls == 1 and agents.researcher.calls == 0
    child = db.get_run(result.run_id)
    assert child.status == "finished" and child.record.parent_run_id == run.id
    assert dbg.model.run_id == child.id  # the debugger follows the replay
    assert "finished at frame" in dbg.actions.report.value

    other = st.Workflow("demo-report")  # same name, another definition
    other.task("research", agent=lambda request: {"topic": "x", "notes": []})
    dbg = Debugger(db, run.id, workflow=other)
    dbg.select_frame(_research_done(run))
    dbg.actions.replay.click()
    dbg.actions.confirm.click()
    report = dbg.actions.report.value
    assert not dbg.model.last_result.ok
    assert "executing it failed" in report and "another definition" in report
    assert "Traceback" not in report
    assert dbg.model.last_result.run_id in dbg.fork_tree.buttons  # the fork is not hidden


# --- safety -----------------------------------------------------------------------------


def _assert_escaped(dbg: Debugger) -> list[str]:
    values = html_values(dbg)
    for value in values:
        for raw in ("<img", "<script", "<svg", "<b onmouseover", "<i onclick"):
            assert raw not in value, value
    for text in figure_texts(dbg.timeline.figure):
        for raw in ("<img", "<script", "<svg", "<b onmouseover", "<i onclick"):
            assert raw not in text, text
    return values


def test_hostile_strings_are_escaped_everywhere(db: st.Database) -> None:
    wf = hostile_workflow()
    run = db.run(wf, {"prompt": HOSTILE}, run_id=HOSTILE_RUN)
    assert run.status == "finished"
    child = db.fork(run.id, 3)  # a fork: its id and its parent's show in the tree and notes
    dbg = Debugger(db, run.id)
    seen: list[str] = []
    for n in range(dbg.model.last_frame + 1):
        dbg.select_frame(n)
        for mode in ("frames", "attempts", "runs"):
            dbg.diff.mode.value = mode
            seen += _assert_escaped(dbg)
    for key in dict((k, v) for v, k in dbg.inspector.refs.options):
        dbg.inspector.refs.value = key
        seen += _assert_escaped(dbg)
        dbg.inspector.view.value = "conversation"  # the notes as messages
        seen += _assert_escaped(dbg)
        dbg.inspector.view.value = "tree"
    dbg.frame_table.text.value = "<img"  # search results, and the theme probe's report
    dbg.theme_probe.theme = {"light": False, "ink": HOSTILE, "font": SCRIPT, "name": HOSTILE}
    seen += _assert_escaped(dbg)
    dbg.actions.edit_node.value = HOSTILE_NODE
    seen += _assert_escaped(dbg)  # field labels are the payload's (hostile) keys
    dbg.actions.editor.value = json.dumps({"notes": [HOSTILE]})
    seen += _assert_escaped(dbg)  # the preview of the edit
    dbg.actions.fork.click()
    seen += _assert_escaped(dbg)
    dbg.actions.confirm.click()
    seen += _assert_escaped(dbg)
    dbg.fork_tree.buttons[child.id].click()
    seen += _assert_escaped(dbg)
    joined = "\n".join(seen)
    assert "&lt;img src=x onerror=&quot;window.__pwned=1&quot;&gt;" in joined  # payload
    assert html.escape(SCRIPT) in joined
    assert "&lt;img src=x onerror=alert(3)&gt;" in joined  # node id
    assert "x&lt;svg onload=alert(4)&gt;" in joined  # codec
    assert "&lt;b onmouseover=alert(5)&gt;run&lt;/b&gt;" in joined  # run id
    assert "&lt;i onclick=alert(6)&gt;agent&lt;/i&gt;" in joined  # agent id
    assert "the model answered &lt;img" in joined  # error
    hover = "\n".join(figure_texts(dbg.timeline.figure))
    assert "&lt;img" in hover


# --- scale and live --------------------------------------------------------------------


def test_a_10000_frame_run_opens(db: st.Database) -> None:
    run_id = large_run(db, 10_000)
    dbg = Debugger(db, run_id)  # how fast: ./dev bench widgets (no timing in unit tests)
    assert dbg.model.last_frame == 9_999
    data = dbg.timeline.data
    assert data.aggregated
    assert {t.type for t in dbg.timeline.figure.data} == {"scattergl"}
    assert sum(len(t.x) for t in dbg.timeline.figure.data) < 10_000
    dbg.select_frame(5_000)
    assert "Frame 5000 " in dbg.inspector.summary.value
    assert len(dbg.inspector.refs.options) == 50  # one page of the checkpoint list
    dbg.timeline.click("checkpoint: progress", 10)
    assert dbg.model.frame_no != 5_000
    dbg.diff.mode.value = "attempts"
    assert "attempt #1 → B:" in dbg.diff.output.value


def test_small_timeline_marks_states_retries_and_forks(db: st.Database) -> None:
    wf, _ = demo_workflow(flaky=True, invalid_first_draft=True)
    run = db.run(wf, {"topic": "bee"})
    child = db.fork(run.id, 5)
    data = build_timeline(DebuggerModel(db, run.id))
    names = {t["name"] for t in data.figure["data"]}
    assert {"attempt: failed", "attempt: finished", LATER_ATTEMPT} <= names
    assert "checkpoint: schema-correction" in names
    assert all(t["type"] == "scatter" for t in data.figure["data"])
    assert data.rows == ["run", "research", "write", "review"]
    assert fork_labels(data.figure)[child.id] == "fork → <id>"
    child_data = build_timeline(DebuggerModel(db, child.id))
    assert "attempt: inherited" in {t["name"] for t in child_data.figure["data"]}
    assert fork_labels(child_data.figure)[run.id] == "fork of <id> @ 5"


def test_live_refresh_follows_a_running_run(db: st.Database) -> None:
    wf, _ = demo_workflow(step_delay=0.05)
    run_id = "live-run-1"

    async def main() -> Debugger:
        task = asyncio.create_task(db.arun(wf, {"topic": "ant"}, run_id=run_id))
        while True:  # the run exists once its first frame commits
            try:
                db.store.get_run(run_id)
                break
            except st.RunNotFound:
                await asyncio.sleep(0.01)
        dbg = Debugger(db, run_id, interval=0.05)
        assert dbg.live.running and "<b>live</b>" in dbg.header.value
        first = dbg.model.last_frame
        await task
        for _ in range(200):
            if not dbg.live.running:
                break
            await asyncio.sleep(0.05)
        assert not dbg.live.running  # it stops by itself when the run ends
        assert dbg.live.polls > 0 and dbg.model.last_frame > first
        return dbg

    dbg = asyncio.run(main())
    record = db.store.get_run(run_id)
    assert record.status == "finished"
    assert dbg.model.last_frame == record.clock
    assert dbg.model.frame_no == record.clock  # it followed the newest frame
    assert dbg.scrubber.slider.max == record.clock
    assert "<b>live</b>" not in dbg.header.value


def test_replay_inside_a_running_loop_runs_in_the_background(db: st.Database) -> None:
    run = _clean(db)
    wf, agents = demo_workflow(step_delay=0.02)

    async def main() -> Debugger:
        dbg = Debugger(db, run.id, workflow=wf, interval=0.05)
        dbg.select_frame(_research_done(run))
        dbg.actions.reset.value = ("write",)
        dbg.actions.replay.click()
        dbg.actions.confirm.click()  # returns at once: the kernel is not blocked
        child_id = dbg.model.last_result.run_id
        assert dbg.model.run_id == child_id and "follows it live" in dbg.actions.report.value
        assert dbg.live.running
        await dbg.model.background
        for _ in range(200):
            if not dbg.live.running:
                break
            await asyncio.sleep(0.05)
        return dbg

    dbg = asyncio.run(main())
    record = db.store.get_run(dbg.model.run_id)
    assert record.status == "finished" and record.parent_run_id == run.id
    assert agents.writer.calls == 1 and agents.researcher.calls == 0
    assert dbg.model.last_frame == record.clock
    assert f"as run {record.run_id}: finished at frame {record.clock}" in dbg.actions.report.value


def test_refresh_sees_another_writer(db: st.Database) -> None:
    record, fence = db.store.create_run("outside", None)
    dbg = Debugger(db, record.run_id, live=False)  # no loop here: refresh by hand
    assert dbg.model.last_frame == 0
    db.store.set_node(fence, "a", 0, "running")
    db.store.set_node(fence, "a", 0, "finished", output={"ok": True})
    dbg.refresh_button.click()
    assert dbg.model.last_frame == 2 and dbg.model.frame_no == 2
    assert "&quot;ok&quot;" in dbg.inspector.nodes.value


def test_show_more_renders_more_of_a_large_payload(db: st.Database) -> None:
    record, fence = db.store.create_run("big", None)
    key = db.store.start_attempt(fence, "a").key
    payload = {"items": [{"i": i, "text": f"item {i}"} for i in range(3000)]}
    db.store.publish(fence, key, AgentCheckpoint("big.state", 1, payload))
    dbg = Debugger(db, record.run_id, live=False)
    assert dbg.inspector.more.layout.display is None
    first = len(dbg.inspector.payload.value)
    assert "more not shown" in dbg.inspector.payload.value
    dbg.inspector.more.click()
    assert len(dbg.inspector.payload.value) > 3 * first


def test_core_import_stays_light_and_db_debug_opens_the_debugger(db: st.Database) -> None:
    code = (
        "import sys, smithers_tt\n"
        "heavy = [m for m in sys.modules if m.split('.')[0] in "
        "('ipywidgets', 'plotly', 'anywidget', 'pandas', 'duckdb')]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    run = _clean(db)
    dbg = db.debug(run.id, live=False)
    assert isinstance(dbg, Debugger) and dbg.model.run_id == run.id
    assert any(w is dbg.timeline.figure for w in walk(dbg))


def test_unknown_run_raises_before_building(db: st.Database) -> None:
    with pytest.raises(st.RunNotFound):
        Debugger(db, "no-such-run")
