"""The debugger's graph view on a LangGraph thread opened with its compiled graph: the graph's
own nodes and edges (``compiled.get_graph()``), each node coloured by its state at the selected
frame's checkpoint, and the nodes that checkpoint's super-step ran outlined."""

from __future__ import annotations

import operator
from typing import Annotated, TypedDict

import pytest

pytest.importorskip("langgraph")
pytest.importorskip("ipywidgets")

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

import smithers_tt as st
from smithers_tt.integrations.langgraph import SmithersSaver
from smithers_tt.integrations.langgraph_view import debug, supersteps

CONFIG = {"configurable": {"thread_id": "t"}}


class State(TypedDict, total=False):
    topic: str
    notes: Annotated[list[str], operator.add]


def _looping(saver: SmithersSaver):
    """research -> write, then write -> review -> write until there are three notes."""
    graph = StateGraph(State)
    graph.add_node("research", lambda s: {"notes": ["found"]})
    graph.add_node("write", lambda s: {"notes": ["draft"]})
    graph.add_node("review", lambda s: {"notes": ["more"]})
    graph.add_edge(START, "research")
    graph.add_edge("research", "write")
    graph.add_conditional_edges(
        "write", lambda s: "review" if len(s["notes"]) < 3 else END, ["review", END]
    )
    graph.add_edge("review", "write")
    return graph.compile(checkpointer=saver)


def test_the_graph_view_draws_the_compiled_graph_with_its_conditional_edges(
    db: st.Database,
) -> None:
    saver = SmithersSaver(db)
    app = _looping(saver)
    app.invoke({"topic": "bees", "notes": []}, CONFIG)
    d = debug(saver, "t", graph=app, live=False)
    try:
        drawn = d.graph.graph
        x = {n["id"]: n["x"] for n in drawn["nodes"]}
        assert set(x) == {"__start__", "research", "write", "review", "__end__"}
        assert x["__start__"] < x["research"] < x["write"] < x["review"] == x["__end__"]
        edges = {(e["from"], e["to"]): e["conditional"] for e in drawn["edges"]}
        assert edges == {
            ("__start__", "research"): False,
            ("research", "write"): False,
            ("review", "write"): False,  # closes the loop: drawn, not counted in the layers
            ("write", "review"): True,
            ("write", "__end__"): True,
        }
        assert d.graph.layout.display is None
    finally:
        d.close()


def test_each_node_has_its_state_at_the_selected_checkpoint(db: st.Database) -> None:
    saver = SmithersSaver(db)
    app = _looping(saver)
    app.invoke({"topic": "bees", "notes": []}, CONFIG)
    steps = supersteps(app, CONFIG)
    d = debug(saver, "t", graph=app, live=False)
    try:
        seen = []
        for step in steps:
            d.select_frame(step.frame_no)
            seen.append((step.step, d.graph.states, d.graph.current))
        assert seen[0] == (-1, {"__start__": "queued"}, [])  # the input: nothing ran yet
        assert seen[1] == (0, {"__start__": "finished", "research": "queued"}, ["__start__"])
        assert seen[2] == (
            1,
            {"__start__": "finished", "research": "finished", "write": "queued"},
            ["research"],
        )
        ran = {"__start__", "research", "write", "review"}
        assert seen[3][1] == {**dict.fromkeys(ran - {"review"}, "finished"), "review": "queued"}
        assert seen[4][1]["write"] == "queued" and seen[4][2] == ["review"]  # around again
        assert seen[-1] == (
            steps[-1].step,
            {**dict.fromkeys(ran, "finished"), "__end__": "finished"},
            ["write"],
        )
        d.select_frame(0)  # before the first checkpoint: nothing has a state
        assert d.graph.states == {} and d.graph.current == []
    finally:
        d.close()


def test_a_node_that_raised_is_failed_and_one_that_asks_is_paused(db: st.Database) -> None:
    def boom(state: State) -> State:
        raise RuntimeError("no answer")

    graph = StateGraph(State)
    graph.add_node("research", lambda s: {"notes": ["found"]})
    graph.add_node("boom", boom)
    graph.add_edge(START, "research")
    graph.add_edge("research", "boom")
    saver = SmithersSaver(db)
    app = graph.compile(checkpointer=saver)
    with pytest.raises(RuntimeError):
        app.invoke({"topic": "bees", "notes": []}, CONFIG)
    asking = StateGraph(State)
    asking.add_node("ask", lambda s: {"notes": [interrupt("ok?")]})
    asking.add_edge(START, "ask")
    other = {"configurable": {"thread_id": "asks"}}
    asked = asking.compile(checkpointer=saver)
    asked.invoke({"topic": "bees", "notes": []}, other)

    d = debug(saver, "t", graph=app, live=False)
    p = debug(saver, "asks", graph=asked, live=False)
    try:
        d.select_frame(supersteps(app, CONFIG)[-1].frame_no)
        assert d.graph.states["boom"] == "failed" and d.graph.current == ["research"]
        p.select_frame(supersteps(asked, other)[-1].frame_no)
        assert p.graph.states["ask"] == "paused"
    finally:
        d.close()
        p.close()


def test_a_graph_compiled_without_the_saver_is_read_through_it(db: st.Database) -> None:
    saver = SmithersSaver(db)
    app = _looping(saver)
    app.invoke({"topic": "bees", "notes": []}, CONFIG)
    bare = _looping(None)  # the same graph, compiled with no checkpointer
    d = debug(saver, "t", graph=bare, live=False)
    try:
        d.select_frame(supersteps(app, CONFIG)[2].frame_no)
        assert d.graph.states["write"] == "queued" and d.graph.current == ["research"]
    finally:
        d.close()


def test_without_the_compiled_graph_the_threads_stored_graph_is_drawn(db: st.Database) -> None:
    saver = SmithersSaver(db)
    _looping(saver).invoke({"topic": "bees", "notes": []}, CONFIG)
    d = debug(saver, "t", live=False)
    try:
        assert {n["id"] for n in d.graph.graph["nodes"]} == {"checkpoints", "values"}
    finally:
        d.close()
