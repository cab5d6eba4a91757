"""A LangGraph thread read as LangGraph: super-steps mapped to the frames the debugger shows,
and diffs of channel values."""

from __future__ import annotations

import operator
from typing import Annotated, TypedDict

import pytest

pytest.importorskip("langgraph")

from langchain_core.messages import AIMessage
from langgraph.graph import START, StateGraph
from langgraph.types import interrupt

import smithers_tt as st
from smithers_tt.integrations.langgraph import SmithersSaver
from smithers_tt.integrations.langgraph_view import (
    channel_diff,
    describe_frame,
    plain,
    supersteps,
)


class State(TypedDict, total=False):
    topic: str
    notes: Annotated[list[str], operator.add]


def _app(saver: SmithersSaver):
    graph = StateGraph(State)
    graph.add_node("research", lambda s: {"notes": [f"about {s['topic']}"]})
    graph.add_node("ask", lambda s: {"notes": [interrupt("ok?")]})
    graph.add_edge(START, "research")
    graph.add_edge("research", "ask")
    return graph.compile(checkpointer=saver)


def test_supersteps_name_each_checkpoint_and_the_frame_that_holds_it(db: st.Database) -> None:
    saver = SmithersSaver(db)
    app = _app(saver)
    config = {"configurable": {"thread_id": "t"}}
    app.invoke({"topic": "bees", "notes": []}, config)
    steps = supersteps(app, config)
    assert [(s.step, s.source, s.next) for s in steps] == [
        (-1, "input", ("__start__",)),
        (0, "loop", ("research",)),
        (1, "loop", ("ask",)),
    ]
    assert steps[-1].interrupts == ("ok?",) and steps[0].parent_id is None
    assert [s.parent_id for s in steps[1:]] == [s.checkpoint_id for s in steps[:-1]]
    # the frame is the one whose snapshot shows that checkpoint
    for step in steps:
        doc = db.snapshot(saver.run_id("t"), step.frame_no).payload("checkpoints")
        assert doc["id"] == step.checkpoint_id

    (change,) = channel_diff(app, steps[1].config, steps[2].config)
    assert (change.op, change.path, change.new) == ("add", "$.notes[0]", "about bees")


def test_describe_frame_shows_a_checkpoint_as_langgraph_names_it(db: st.Database) -> None:
    saver = SmithersSaver(db)
    app = _app(saver)
    config = {"configurable": {"thread_id": "t"}}
    app.invoke({"topic": "bees" * 40, "notes": []}, config)  # a value stored by address
    last = supersteps(app, config)[-1]
    shown = describe_frame(saver, saver.run_id("t"), last.frame_no)
    assert (shown["checkpoint_id"], shown["step"], shown["source"]) == (
        last.checkpoint_id,
        1,
        "loop",
    )
    assert shown["channels"] == app.get_state(config).values  # decoded, not addresses
    assert shown["interrupts"] == ["ok?"]
    assert {w["channel"] for w in shown["writes"]} == {"__interrupt__"}
    value_frame = next(
        f.frame_no for f in db.store.frames(saver.run_id("t")) if f.node_id == "values"
    )
    assert describe_frame(saver, saver.run_id("t"), value_frame) is None


def test_plain_turns_any_channel_value_into_json() -> None:
    value = {"messages": [AIMessage("hi")], "pair": (1, 2), "odd": object}
    out = plain(value)
    assert out["messages"][0]["type"] == "ai" and out["messages"][0]["content"] == "hi"
    assert out["pair"] == [1, 2] and out["odd"] == repr(object)


# --- the debugger, read as LangGraph ---------------------------------------------------------


def _debugged(db: st.Database, topic: str = "bees"):
    pytest.importorskip("ipywidgets")
    from smithers_tt.integrations.langgraph_view import lens
    from smithers_tt.widgets import DebuggerModel

    saver = SmithersSaver(db)
    app = _app(saver)
    config = {"configurable": {"thread_id": "t"}}
    app.invoke({"topic": topic, "notes": []}, config)
    model = DebuggerModel(db, saver.run_id("t"), lens=lens(saver))
    return app, config, model, supersteps(app, config)


def _newest_checkpoint(model) -> int:
    """The frame of the thread's newest checkpoint (a value frame may come after it)."""
    return max(f.frame_no for f in model.frames if f.node_id == "checkpoints")


def test_the_debugger_titles_frames_with_their_super_step_channels_and_interrupts(
    db: st.Database,
) -> None:
    _, _, model, steps = _debugged(db)
    model.select_frame(steps[-1].frame_no)
    title = model.frame_title()
    assert title.startswith(f"super-step 1 (loop) · checkpoint {steps[-1].checkpoint_id}")
    assert "channels notes, topic" in title and 'interrupt waiting: "ok?"' in title
    # the nodes and the checkpoint list say what they are, not smithers_tt's internals
    assert model.node_label("checkpoints", 0) == "super-steps"
    assert model.node_label("values", 0) == "channel values"
    from smithers_tt.widgets import build_timeline

    assert build_timeline(model).rows == ["run", "super-steps", "channel values"]
    assert model.ref_label(model.ref) == title.split(" · channels")[0]
    # the inspector shows the decoded channels, never {"ref": hash}
    shown = model.view(model.ref)
    assert shown["channels"] == {"topic": "bees", "notes": ["about bees"]}
    assert shown["step"] == 1 and shown["interrupts"] == ["ok?"]


def test_the_debugger_diffs_channels_between_super_steps(db: st.Database) -> None:
    _, _, model, steps = _debugged(db, topic="bees" * 40)  # a value stored by address
    model.select_frame(steps[-1].frame_no)
    model.set_diff("frames", compare_frame=steps[1].frame_no)
    sections = dict(model.diff().sections)
    assert [(c.op, c.path, c.new) for c in sections["channels"]] == [
        ("add", "$.notes[0]", "about " + "bees" * 40)
    ]
    assert [(c.path, c.old, c.new) for c in sections["super-step"] if c.path == "$.step"] == [
        ("$.step", 0, 1)
    ]
    assert [c.new for c in sections["interrupts"]] == ["ok?"]
    assert not any("ref" in str(c.path) for c in sections["channels"])
    # a value stored by address is shown decoded in the inspector
    values = [r for r in model.snapshot.refs.values() if r.node_id == "values"]
    assert all(model.ref_label(r).startswith("channel value") for r in values)
    assert "bees" * 40 in [model.view(r) for r in values]


def test_the_debugger_without_a_lens_keeps_smithers_tt_terms(db: st.Database) -> None:
    pytest.importorskip("ipywidgets")
    from smithers_tt.widgets import DebuggerModel

    saver = SmithersSaver(db)
    _app(saver).invoke({"topic": "bees", "notes": []}, {"configurable": {"thread_id": "t"}})
    model = DebuggerModel(db, saver.run_id("t"))
    assert model.node_label("checkpoints", 0) == "checkpoints"
    title = model.frame_title(model.frame(_newest_checkpoint(model)))
    assert title.startswith("checkpoint of checkpoints attempt")
    assert "channels" not in dict(model.diff().sections)


def test_what_the_lens_shows_is_escaped_in_the_widgets(db: st.Database) -> None:
    pytest.importorskip("ipywidgets")
    from smithers_tt.integrations.langgraph_view import debug

    saver = SmithersSaver(db)
    _app(saver).invoke({"topic": "<b>x</b>", "notes": []}, {"configurable": {"thread_id": "t"}})
    debugger = debug(saver, "t", live=False)
    try:
        debugger.select_frame(_newest_checkpoint(debugger.model))
        html = debugger.inspector.summary.value + debugger.inspector.payload.value
        assert "super-step 1 (loop)" in html and "super-steps" in debugger.inspector.nodes.value
        assert "<b>x</b>" not in html and "&lt;b&gt;x&lt;/b&gt;" in debugger.inspector.payload.value
        assert "super-step 1 (loop)" in debugger.scrubber.label.value
        debugger.model.set_diff("frames", compare_frame=0)  # the channels from nothing
        diff = debugger.diff.output.value
        assert "channels (" in diff and "&lt;b&gt;x&lt;/b&gt;" in diff and "<b>x</b>" not in diff
    finally:
        debugger.close()


def test_the_debugger_opens_a_subgraphs_namespace_from_the_parent(db: st.Database) -> None:
    pytest.importorskip("ipywidgets")
    from smithers_tt.integrations.langgraph_view import debug

    inner = StateGraph(State)
    inner.add_node("search", lambda s: {"notes": ["found"]})
    inner.add_edge(START, "search")
    outer = StateGraph(State)
    outer.add_node("research", inner.compile())
    outer.add_edge(START, "research")
    saver = SmithersSaver(db)
    config = {"configurable": {"thread_id": "t"}}
    outer.compile(checkpointer=saver).invoke({"topic": "bees", "notes": []}, config)

    debugger = debug(saver, "t", live=False)
    try:
        (label, child), *_ = [o for o in debugger.open_related.options if o[1] is not None]
        assert label.startswith("subgraph research:")
        debugger.open_related.value = child  # as a person picking it in the menu
        assert debugger.model.run_id == child
        debugger.select_frame(_newest_checkpoint(debugger.model))
        assert debugger.model.view(debugger.model.ref)["channels"]["notes"] == ["found"]
        assert [o[0] for o in debugger.open_related.options] == ["this run", "root graph"]
    finally:
        debugger.close()


def test_an_ordinary_run_offers_nothing_to_open(db: st.Database) -> None:
    pytest.importorskip("ipywidgets")
    from smithers_tt.widgets import Debugger

    saver = SmithersSaver(db)
    _app(saver).invoke({"topic": "bees", "notes": []}, {"configurable": {"thread_id": "t"}})
    debugger = Debugger(db, saver.run_id("t"), live=False)
    try:
        assert debugger.open_related.layout.display == "none"
    finally:
        debugger.close()


def test_a_corrupt_checkpoint_keeps_the_debugger_open_and_says_so(db: st.Database) -> None:
    pytest.importorskip("ipywidgets")
    from smithers_tt.integrations.langgraph_view import debug
    from smithers_tt.store.backend import _schema as S

    saver = SmithersSaver(db)
    _app(saver).invoke({"topic": "bees", "notes": []}, {"configurable": {"thread_id": "t"}})
    docs = {
        f.content_hash for f in db.store.frames(saver.run_id("t")) if f.node_id == "checkpoints"
    }
    with db.engine.connect(write=True) as conn:  # flip the stored bytes of every document
        conn.execute(
            S.contents.update()
            .where(S.contents.c.content_hash.in_(docs))
            .values(data=b'{"codec":"x","payload":{},"version":1}')
        )
    debugger = debug(saver, "t", live=False)
    try:
        debugger.select_frame(_newest_checkpoint(debugger.model))
        assert "checkpoint of checkpoints" in debugger.scrubber.label.value
        assert "cannot read this checkpoint" in debugger.inspector.payload.value
    finally:
        debugger.close()


def test_a_langgraph_interrupt_shows_as_a_pause_in_the_debugger(db: st.Database) -> None:
    pytest.importorskip("ipywidgets")
    from langgraph.types import Command

    from smithers_tt.integrations.langgraph_view import debug

    saver = SmithersSaver(db)
    app = _app(saver)
    config = {"configurable": {"thread_id": "paused"}}
    app.invoke({"topic": "<b>bees</b>", "notes": []}, config)
    bar = debug(saver, "paused", live=False).pause_bar
    assert bar.widget.layout.display is None and bar.controls.layout.display == "none"
    assert "LangGraph interrupt" in bar.banner.value and "ok?" in bar.banner.value
    assert "Command(resume=" in bar.banner.value
    app.invoke(Command(resume="yes"), config)
    bar = debug(saver, "paused", live=False).pause_bar
    assert bar.widget.layout.display == "none"


def _config_in(note: str) -> dict:
    """The config a fork note tells a person to invoke the graph with."""
    import json

    return json.loads(note.split("with the config ", 1)[1].split(" (or graph.update_state", 1)[0])


def test_a_thread_is_branched_in_langgraph_from_the_config_the_debugger_gives(
    db: st.Database,
) -> None:
    """Fork… and Replay… would make a run no saver reads as a thread: the debugger offers
    neither on a thread, and says instead how LangGraph branches it from the selected
    frame's checkpoint; that config, invoked, goes on from that checkpoint."""
    app, config, model, steps = _debugged(db)
    runs = len(db.runs())
    model.select_frame(steps[1].frame_no)  # research next
    note = model.fork_note()
    assert note is not None and "Rewind… works here" in note
    branch = _config_in(note)
    assert branch == {
        "configurable": {
            "thread_id": "t",
            "checkpoint_ns": "",
            "checkpoint_id": steps[1].checkpoint_id,
        }
    }
    assert model.request_fork() is None and model.request_replay() is None
    assert model.message.kind == "error" and model.message.text == f"Nothing was done: {note}"
    assert len(db.runs()) == runs  # no run was made
    model.select_frame(steps[0].frame_no)  # the note follows the frame
    assert _config_in(model.fork_note())["configurable"]["checkpoint_id"] == steps[0].checkpoint_id
    model.select_frame(0)  # before the thread's first checkpoint
    assert "before the thread's first one" in model.fork_note()

    app.invoke(None, branch)  # LangGraph's branch, in the same thread: research again
    state = app.get_state(config)
    assert state.values["notes"] == ["about bees"]  # from before research: noted once
    assert state.interrupts and state.interrupts[0].value == "ok?"
    children = [
        h.config["configurable"]["checkpoint_id"]
        for h in app.get_state_history(config)
        if h.parent_config
        and h.parent_config["configurable"]["checkpoint_id"] == steps[1].checkpoint_id
    ]
    assert len(children) == 2 and steps[2].checkpoint_id in children  # the first, and the branch


def test_the_debuggers_actions_offer_no_fork_of_a_thread_and_say_why(db: st.Database) -> None:
    pytest.importorskip("ipywidgets")
    from smithers_tt.integrations.langgraph_view import debug

    saver = SmithersSaver(db)
    app = _app(saver)
    app.invoke({"topic": "<b>bees</b>", "notes": []}, {"configurable": {"thread_id": "t"}})
    d = debug(saver, "t", live=False)
    actions = d.actions
    assert actions.fork.disabled and actions.replay.disabled and not actions.rewind.disabled
    assert [p.layout.display for p in (actions.reset, actions.input, actions.edit_node)] == [
        "none"
    ] * 3
    newest = supersteps(app, {"configurable": {"thread_id": "t"}})[-1]
    shown = actions.replay_note.value
    assert "A LangGraph thread branches in LangGraph" in shown
    assert f"&quot;checkpoint_id&quot;: &quot;{newest.checkpoint_id}&quot;" in shown
    assert actions.fork.tooltip == d.model.fork_note()
