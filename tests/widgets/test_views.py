"""What the debugger's views show: theme colours, the axis, time, long values, the checkpoint
list, the frame table, conversations, export and the checkpoint editor (no browser)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import smithers_tt as st
from smithers_tt import AgentCheckpoint
from smithers_tt.demo import demo_workflow
from smithers_tt.errors import InvalidArgument
from smithers_tt.testing import large_run
from smithers_tt.widgets import Debugger, DebuggerModel
from smithers_tt.widgets._diffview import render_diff
from smithers_tt.widgets._export import export_history, lineage_available
from smithers_tt.widgets._html import CSS, value_html
from smithers_tt.widgets._theme import DARK, clean_theme
from smithers_tt.widgets._timeline_figure import build_timeline


def _clean(db: st.Database) -> st.Run:
    return db.run(demo_workflow()[0], {"topic": "bee"})


CHAT = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Weather in <b>Paris</b>?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "18 C, cloudy"},
]


def _chat_run(db: st.Database) -> str:
    record, fence = db.store.create_run("chat", None)
    key = db.store.start_attempt(fence, "agent").key
    for n in (2, 4):
        db.store.publish(fence, key, AgentCheckpoint("chat.v1", 1, {"messages": CHAT[:n]}))
    edited = [*CHAT[:1], {"role": "user", "content": "Weather in Rome?"}, *CHAT[2:]]
    db.store.publish(fence, key, AgentCheckpoint("chat.v1", 1, {"messages": edited}))
    return record.run_id


# --- theme and layout -------------------------------------------------------------------


def test_the_html_follows_the_jupyterlab_theme() -> None:
    colours = re.findall(r"(?<![-\w])(color|background(?:-color)?)\s*:\s*([^;]+);", CSS)
    assert colours
    for prop, value in colours:
        fixed = "var(--jp-" in value or "rgba(" in value or value.strip() in ("inherit", "#fff")
        assert fixed, f"{prop}: {value} does not follow the theme"
    assert "#fff;" not in CSS.replace("color: #fff;", "")  # white only as text on a badge


def test_the_timeline_takes_its_colours_from_the_reported_theme(db: st.Database) -> None:
    run = _clean(db)
    dbg = Debugger(db, run.id, live=False)
    layout = dbg.timeline.figure.layout
    assert layout.paper_bgcolor == "rgba(0,0,0,0)"  # the cell shows through in any theme
    dbg.theme_probe.theme = {**DARK, "ink": "rgb(240, 240, 240)", "grid": "rgb(80, 80, 80)"}
    layout = dbg.timeline.figure.layout
    assert layout.font.color == "rgb(240, 240, 240)"
    assert layout.xaxis.gridcolor == "rgb(80, 80, 80)"
    assert layout.legend.font.size >= 12 and layout.legend.font.color == "rgb(240, 240, 240)"
    assert layout.shapes[0].line.color == "rgb(240, 240, 240)"  # the selected-frame line
    marker = next(t for t in dbg.timeline.figure.data if t.name == "checkpoint: progress")
    assert marker.marker.color == "rgb(240, 240, 240)"
    # what the browser reports is checked: no markup or script gets into the figure
    assert clean_theme({"ink": "red;}</style><script>", "light": False})["ink"] == DARK["ink"]


def test_a_one_frame_fork_has_no_negative_axis(db: st.Database) -> None:
    run = _clean(db)
    child = db.fork(run.id, 5)
    data = build_timeline(DebuggerModel(db, child.id))
    low, high = data.figure["layout"]["xaxis"]["range"]
    assert low >= -0.5 and high >= 1
    assert data.figure["layout"]["xaxis"]["tick0"] == 0
    for trace in data.figure["data"]:
        assert all(x is None or x >= -0.5 for x in trace["x"]), trace["name"]


def test_parts_wrap_instead_of_overflowing(db: st.Database) -> None:
    dbg = Debugger(db, _clean(db).id, live=False)
    assert dbg.scrubber.slider.layout.width != "420px"  # no fixed widths past a narrow cell
    for box in (dbg.inspector.widget, dbg.diff.widget, dbg.actions.widget, dbg.fork_tree.widget):
        assert box.layout.min_width == "0" and "%" not in str(box.layout.width)
    assert dbg.timeline.figure.layout.width is None  # the figure takes the cell's width


# --- time -----------------------------------------------------------------------------


def test_time_on_hover_durations_and_a_time_axis(db: st.Database) -> None:
    wf, _ = demo_workflow(flaky=True)
    run = db.run(wf, {"topic": "bee"})
    dbg = Debugger(db, run.id, live=False)
    texts = [t for tr in dbg.timeline.figure.data for t in list(tr.hovertext) if t]
    assert any(re.search(r"\d{2}:\d{2}:\d{2}\.\d{3}", t) for t in texts)  # when each frame was
    assert any("took " in t for t in texts)  # how long each attempt ran
    assert "at " in dbg.inspector.summary.value
    dbg.timeline.time_axis.value = True
    layout = dbg.timeline.figure.layout
    assert layout.xaxis.type == "date"
    frames = [tr for tr in dbg.timeline.figure.data if tr.name != "breakpoints"]
    xs = [x for tr in frames for x in tr.x if x is not None]
    assert all(isinstance(x, str) and re.match(r"\d{4}-\d\d-\d\d \d\d:", x) for x in xs)
    (gutter,) = [tr for tr in dbg.timeline.figure.data if tr.name == "breakpoints"]
    assert gutter.xaxis == "x2" and set(gutter.x) == {0, 1}  # the toggles keep their column
    dbg.timeline.click("checkpoint: progress", 1)  # a point still selects its frame
    progress = [f for f in run.frames() if f.kind == "checkpoint" and f.purpose == "progress"]
    assert dbg.model.frame_no == progress[1].frame_no
    assert isinstance(layout.shapes[0].x0, str)


# --- values and lists -------------------------------------------------------------------


def test_long_and_nested_values_open_whole() -> None:
    nested = {"plan": [{"step": i, "why": "because " * 20} for i in range(5)]}
    html = value_html(nested)
    assert "<details" in html and "<summary>" in html
    assert html.count("because") >= 100  # the whole value, not the 160-character line
    assert "&quot;step&quot;: 4" in html
    assert "<details" not in value_html("short")
    hostile = value_html({"x": "<img src=x onerror=alert(1)>" * 20})
    assert "<img" not in hostile


def test_a_checkpoint_present_on_one_side_is_added_not_changed(db: st.Database) -> None:
    run = _clean(db)
    dbg = Debugger(db, run.id, live=False)
    first = next(f for f in run.frames() if f.kind == "checkpoint" and f.node_id == "write")
    dbg.select_frame(first.frame_no)
    section = dict(dbg.model.diff().sections)["checkpoint write"]
    assert [c.op for c in section] == ["add"]
    assert ">added<" in dbg.diff.output.value and ">changed<" not in dbg.diff.output.value
    dbg.select_frame(0)  # the other way round: newest as A, frame 0 as B
    dbg.diff.previous.value = False
    dbg.diff.frame.value = dbg.model.last_frame
    out = render_diff(dbg.model.diff())
    assert ">removed<" in out and "$.payload" not in out.split("checkpoint write")[1][:400]


def test_the_checkpoint_list_is_ordered_paged_and_searchable(db: st.Database) -> None:
    run_id = large_run(db, 1_200)
    dbg = Debugger(db, run_id, live=False)
    snap = dbg.model.snapshot
    options = [k for _, k in dbg.inspector.refs.options]
    assert options == sorted(options) and len(options) == 50
    assert dbg.inspector.refs.value == dbg.model.ref_key  # on the page of the selected ref
    assert f"{len(snap.refs)} checkpoints" in dbg.inspector.page_label.value
    seen = set(options)
    dbg.inspector.turn(-1)
    earlier = [k for _, k in dbg.inspector.refs.options]
    assert earlier and max(earlier) < min(options) and not seen & set(earlier)
    dbg.inspector.search.value = "write"
    found = [k for _, k in dbg.inspector.refs.options]
    assert found and all(k[0] == "write" for k in found)
    assert "of" in dbg.inspector.page_label.value
    dbg.inspector.search.value = "no-such-thing"
    assert dbg.inspector.refs.options == ()


# --- frame table --------------------------------------------------------------------------


def test_the_frame_table_filters_searches_and_selects(db: st.Database) -> None:
    wf, _ = demo_workflow(flaky=True)
    run = db.run(wf, {"topic": "bee"})
    dbg = Debugger(db, run.id, live=False)
    table = dbg.frame_table
    assert len(table.matches.frames) == dbg.model.last_frame + 1
    table.node.value = "research"
    table.kind.value = "checkpoint"
    rows = table.matches.frames
    assert rows and all(
        dbg.model.frame(n).node_id == "research" and dbg.model.frame(n).kind == "checkpoint"
        for n in rows
    )
    table.rows.value = rows[2]  # a row selects its frame everywhere
    assert dbg.model.frame_no == rows[2] and dbg.scrubber.slider.value == rows[2]
    table.node.value = "(any)"
    table.kind.value = "(any)"
    table.text.value = "finding 3"  # text inside payloads only
    hits = table.matches.frames
    assert hits and all(dbg.model.frame(n).kind == "checkpoint" for n in hits)
    table.payloads.value = False
    assert table.matches.frames == []
    table.text.value = "timed out"  # what a frame says: the failed attempt
    assert any(dbg.model.frame(n).kind == "attempt_finished" for n in table.matches.frames)


def test_the_frame_table_of_a_10000_frame_run(db: st.Database) -> None:
    dbg = Debugger(db, large_run(db, 10_000), live=False)
    table = dbg.frame_table
    assert len(table.rows.options) == 100 and table.pages == 100
    table.kind.value = "checkpoint"
    table.purpose.value = "turn"
    assert table.matches.frames
    assert all(dbg.model.frame(n).purpose == "turn" for n in table.matches.frames)
    dbg.select_frame(7_777)  # the table follows to the selected frame's page
    table.kind.value = "(any)"
    table.purpose.value = "(any)"
    assert table.rows.value == 7_777


# --- conversations ------------------------------------------------------------------------


def test_a_chat_transcript_shows_as_messages_and_diffs_by_message(db: st.Database) -> None:
    dbg = Debugger(db, _chat_run(db), live=False)
    dbg.select_frame(dbg.model.last_frame - 1)  # the second checkpoint: four messages
    assert dbg.inspector.view.layout.display is None
    dbg.inspector.view.value = "conversation"
    shown = dbg.inspector.payload.value
    assert shown.count('class="stt-msg ') == 4
    assert "stt-role-tool" in shown and "get_weather" in shown and "call_1" in shown
    assert "&lt;b&gt;Paris&lt;/b&gt;" in shown and "<b>Paris" not in shown
    out = dbg.diff.output.value  # two messages were added since the first checkpoint
    assert "conversation agent (+2 / -0 messages)" in out
    assert out.count("stt-msg-add") == 2
    dbg.select_frame(dbg.model.last_frame)  # the user message was edited
    out = dbg.diff.output.value
    assert "conversation agent (+1 / -1 messages)" in out
    assert "Weather in Rome?" in out and "stt-msg-remove" in out


def test_the_demo_notes_are_a_conversation(db: st.Database) -> None:
    run = _clean(db)
    dbg = Debugger(db, run.id, live=False)
    research = [f for f in run.frames() if f.kind == "checkpoint" and f.node_id == "research"]
    dbg.select_frame(research[2].frame_no)
    dbg.inspector.view.value = "conversation"
    assert dbg.inspector.payload.value.count("stt-role-note") == 3
    assert "conversation research (+1 / -0 messages)" in dbg.diff.output.value


# --- export -------------------------------------------------------------------------------


def test_export_writes_the_history_as_json_lines(db: st.Database, tmp_path: Path) -> None:
    run = _clean(db)
    dbg = Debugger(db, run.id, live=False)
    target = tmp_path / "history.jsonl"
    dbg.export.path.value = str(target)
    dbg.export.jsonl.click()
    assert "wrote" in dbg.export.report.value
    lines = [json.loads(line) for line in target.read_text().splitlines()]
    assert lines[0]["type"] == "run" and lines[0]["run_id"] == run.id
    frames = lines[1:]
    assert [f["frame_no"] for f in frames] == list(range(dbg.model.last_frame + 1))
    checkpoints = [f for f in frames if f["kind"] == "checkpoint"]
    assert checkpoints and all(f["checkpoint"]["payload"] for f in checkpoints)
    assert checkpoints[0]["checkpoint"]["payload"]["notes"][0].endswith("(finding 1).")
    dbg.export.jsonl.click()  # never overwrites
    assert "already exists" in dbg.export.report.value
    with pytest.raises(InvalidArgument):
        export_history(dbg.model, tmp_path / "missing" / "x.jsonl")


@pytest.mark.skipif(not lineage_available(), reason="the lineage extra (duckdb) is not installed")
def test_export_writes_the_lineage_as_parquet(db: st.Database, tmp_path: Path) -> None:
    dbg = Debugger(db, _clean(db).id, live=False)
    dbg.export.path.value = str(tmp_path / "run.jsonl")
    dbg.export.parquet.click()
    assert "Parquet files" in dbg.export.report.value, dbg.export.report.value
    assert (tmp_path / "run-lineage" / "frames.parquet").exists()


# --- the checkpoint editor ----------------------------------------------------------------


def test_the_editor_edits_fields_previews_and_validates(db: st.Database) -> None:
    run = _clean(db)
    wf, _ = demo_workflow()
    dbg = Debugger(db, run.id, workflow=wf, live=False)
    research = [f for f in run.frames() if f.kind == "checkpoint" and f.node_id == "research"]
    dbg.select_frame(research[-1].frame_no)
    dbg.actions.edit_node.value = "research"
    editor = dbg.actions.checkpoint_editor
    assert set(editor._boxes) == {"topic", "notes", "tokens"}
    assert "unchanged" in editor.preview.value and "declared formats" in editor.preview.value
    editor.set_field("topic", '"wasp"')  # a field rewrites the raw JSON and the preview
    assert json.loads(dbg.actions.editor.value)["topic"] == "wasp"
    assert "valid" in editor.preview.value and "$.payload.topic" in editor.preview.value
    assert "wasp" in editor.preview.value and "bee" in editor.preview.value  # before / after
    editor.set_field("tokens", "many")
    assert "not valid JSON" in editor.preview.value
    editor.set_field("tokens", "7" * 5000)  # more digits than Python reads: said, not raised
    assert "field tokens holds a number of more than 4300 digits" in editor.preview.value
    dbg.actions.editor.value = '{"tokens": ' + "7" * 5000 + "}"
    assert "more than 4300 digits" in editor.preview.value
    dbg.actions.editor.value = '{"notes": [NaN]}'  # the raw text: strict JSON is checked live
    assert "not valid" in editor.preview.value and "$.payload.notes[0]" in editor.preview.value
    dbg.actions.editor.value = json.dumps({"topic": "wasp", "notes": ["x"], "tokens": 1})
    assert set(editor._boxes) == {"topic", "notes", "tokens"}
    assert json.loads(editor._boxes["notes"].value) == ["x"]  # fields follow the raw text
    dbg.actions.fork.click()
    dbg.actions.confirm.click()
    child = db.get_run(dbg.model.last_result.run_id)
    assert db.snapshot(child.id).payload("research")["topic"] == "wasp"


def test_the_editor_checks_the_agents_declared_format(db: st.Database) -> None:
    run = _clean(db)
    other = st.Workflow("demo-report")  # its research agent declares nothing
    other.task("research", agent=lambda request: {"topic": "x", "notes": []})
    dbg = Debugger(db, run.id, workflow=other, live=False)
    dbg.select_frame(max(f.frame_no for f in run.frames() if f.node_id == "research"))
    dbg.actions.edit_node.value = "research"
    assert "does not declare demo.notes v1" in dbg.actions.checkpoint_editor.preview.value
    before = len(db.runs(limit=1000))
    dbg.actions.fork.click()
    assert dbg.model.pending is None and "does not declare" in dbg.actions.report.value
    assert len(db.runs(limit=1000)) == before


# --- notebook reprs -----------------------------------------------------------------------


def test_snapshots_diffs_runs_and_timelines_show_as_escaped_html(db: st.Database) -> None:
    from ._support import HOSTILE, HOSTILE_NODE, HOSTILE_RUN, hostile_workflow

    run = db.run(hostile_workflow(), {"prompt": HOSTILE}, run_id=HOSTILE_RUN)
    child = db.fork(run.id, 3)
    views = {
        "snapshot": run.snapshot()._repr_html_(),
        "diff": st.diff(run.snapshot(2), run.snapshot())._repr_html_(),
        "run": db.get_run(child.id)._repr_html_(),
        "timeline": db.timeline(run.id)._repr_html_(),
    }
    for name, html in views.items():
        for raw in ("<img", "<script", "<svg", "<b onmouseover", "<i onclick"):
            assert raw not in html, (name, html)
    assert "&lt;img src=x onerror=alert(3)&gt;" in views["snapshot"]  # the node id, as text
    assert f"Snapshot of run {HOSTILE_RUN[:2]}" in views["snapshot"].replace("&lt;", "<")
    assert "finished" in views["snapshot"] and "checkpoint refs" in views["snapshot"]
    assert "added" in views["diff"] or "changed" in views["diff"]
    assert "forked from" in views["run"] and "@ frame 3" in views["run"]
    assert "fork tree" in views["timeline"] and child.id in views["timeline"]
    assert HOSTILE_NODE not in views["timeline"]


def test_a_fork_whose_parent_was_rewound_past_it_says_so(db: st.Database) -> None:
    run = _clean(db)
    child = db.fork(run.id, 8)
    db.rewind(run.id, 7, confirm=True, force=True)
    dbg = Debugger(db, child.id, live=False)
    assert "the parent now ends at frame 7" in dbg.header.value
    assert "rewound past this fork's frame 8" in dbg.header.value
    label = dbg.fork_tree.buttons[child.id].description
    assert "fork @ frame 8 (parent now ends at frame 7)" in label
    assert "parent now ends" not in dbg.fork_tree.buttons[run.id].description


def test_a_long_string_in_a_payload_can_be_read_whole(db: st.Database) -> None:
    record, fence = db.store.create_run("long", None)
    key = db.store.start_attempt(fence, "a").key
    text = "".join(f"word{i} " for i in range(2_000)) + "<script>x</script> THE END"
    db.store.publish(fence, key, AgentCheckpoint("long.v1", 1, {"essay": text}))
    dbg = Debugger(db, record.run_id, live=False)
    shown = dbg.inspector.payload.value
    assert "more characters: open to read all" in shown
    assert "THE END" in shown and "&lt;script&gt;x" in shown and "<script>x" not in shown


@pytest.mark.skipif(not lineage_available(), reason="the lineage extra (duckdb) is not installed")
def test_the_reason_for_a_destructive_action_is_in_the_audit(db: st.Database) -> None:
    run = _clean(db)
    dbg = Debugger(db, run.id, live=False)
    dbg.select_frame(9)
    dbg.actions.reason.value = "the notes went <b>off topic</b>"
    dbg.actions.fork.click()
    assert "reason: the notes went &lt;b&gt;off topic&lt;/b&gt;" in dbg.actions.confirm_text.value
    dbg.actions.confirm.click()
    child = dbg.model.last_result.run_id
    dbg.select_frame(5)
    dbg.actions.reason.value = "bad research after frame 5"
    dbg.actions.rewind.click()
    assert "reason: bad research after frame 5" in dbg.actions.confirm_text.value
    dbg.actions.confirm.click()  # the fork above frame 5: asked again, with force
    assert child in dbg.actions.confirm_text.value
    dbg.actions.confirm.click()
    assert dbg.model.last_result.ok, dbg.model.last_result
    db.reset(child, "write", reason="retry the draft")
    with db.lineage() as lin:
        rows = lin.sql(
            "SELECT operation, frame_no, detail_json FROM audit WHERE run_id IN (?, ?) "
            "ORDER BY created_at_ms",
            [run.id, child],
        )
    found = {(r.operation, json.loads(r.detail_json).get("reason")) for r in rows.itertuples()}
    assert ("fork", "the notes went <b>off topic</b>") in found
    assert ("rewind", "bad research after frame 5") in found
    assert ("reset", "retry the draft") in found


def test_a_confirmed_action_shows_that_it_is_under_way_then_how_long_it_took(
    db: st.Database,
) -> None:
    run = _clean(db)
    dbg = Debugger(db, run.id, live=False)
    seen: list[str] = []  # what the bar says while the action runs (its "run" event fires)
    progress = dbg.actions.progress
    dbg.model.on("run", lambda: seen.extend(bar.text.value for bar in progress.children))
    dbg.select_frame(5)
    dbg.actions.rewind.click()
    assert dbg.actions.progress.children == ()  # asking first shows no bar
    dbg.actions.confirm.click()
    assert seen and seen[0].startswith("rewinding, ") and not seen[0].endswith("done")
    (bar,) = dbg.actions.progress.children
    assert re.fullmatch(r"rewinding, \d+\.\d s done", bar.text.value)
    assert bar.bar.bar_style == "success"
    dbg.actions.fork.click()
    dbg.actions.confirm.click()
    (bar,) = dbg.actions.progress.children
    assert re.fullmatch(r"forking, \d+\.\d s done", bar.text.value)
