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
