"""A LangGraph thread saved (or imported) through SmithersSaver gets its model calls from the
AI messages its nodes write: tokens from ``usage_metadata`` (else the provider's
``response_metadata.token_usage``), model and finish reason from ``response_metadata``; a
message with neither is no call. Both backends."""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

import pytest

pytest.importorskip("langgraph")
pytest.importorskip("pandas")

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph, add_messages

import smithers_tt as st
from smithers_tt.integrations.langgraph import SmithersSaver, thread_run_id
from smithers_tt.integrations.langgraph_import import import_langgraph


class State(TypedDict):
    messages: Annotated[list, add_messages]


def _agent(state: State) -> dict[str, Any]:
    usage = {
        "input_tokens": 12,
        "output_tokens": 5,
        "total_tokens": 17,
        "input_token_details": {"cache_read": 4},
        "output_token_details": {"reasoning": 2},
    }
    meta = {"model_name": "gpt-x", "finish_reason": "stop"}
    return {"messages": [AIMessage("planned", usage_metadata=usage, response_metadata=meta)]}


def _tool(state: State) -> dict[str, Any]:
    # a provider reporting usage only in its own shape, and a message that is no model's
    meta = {"model": "llama", "done_reason": "stop", "token_usage": {"prompt_tokens": 30}}
    return {"messages": [AIMessage("done", response_metadata=meta), AIMessage("a note")]}


def _graph(saver: Any) -> Any:
    g = StateGraph(State)
    g.add_node("agent", _agent)
    g.add_node("tool", _tool)
    g.add_edge(START, "agent")
    g.add_edge("agent", "tool")
    g.add_edge("tool", END)
    return g.compile(checkpointer=saver)


def _check(db: st.Database, thread: str, nodes: list[str]) -> None:
    run = db.get_run(thread_run_id(thread, ""))
    calls = run.model_calls({"gpt-x": {"input": 1.0, "output": 2.0, "cached_input": 0.5}})
    assert calls["node_id"].tolist() == nodes
    assert calls["model"].tolist() == ["gpt-x", "llama"]
    assert calls["finish_reason"].tolist() == ["stop", "stop"]
    assert calls["prompt_tokens"].tolist() == [12, 30]
    assert calls["completion_tokens"].tolist()[0] == 5 and calls["completion_tokens"].isna()[1]
    assert (calls["cached_tokens"][0], calls["reasoning_tokens"][0]) == (4, 2)
    assert calls["cost"][0] == pytest.approx((8 * 1.0 + 4 * 0.5 + 5 * 2.0) / 1e6)
    assert calls["cost"].isna()[1]  # llama has no price
    # each rode with the checkpoint its step made
    frames = {f.frame_no: f for f in run.frames()}
    assert all(frames[n].kind == "checkpoint" for n in calls["frame_no"])


def test_a_thread_saved_through_the_saver_records_its_nodes_model_calls(
    db: st.Database,
) -> None:
    app = _graph(SmithersSaver(db))
    app.invoke({"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "t1"}})
    _check(db, "t1", ["agent", "tool"])


def test_a_thread_imported_from_another_saver_gets_its_model_calls(db: st.Database) -> None:
    source = InMemorySaver()
    _graph(source).invoke({"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "t2"}})
    import_langgraph(source, db)
    # a saver's pending writes do not say which node made them: the thread's pseudo-node
    _check(db, "t2", ["langgraph", "langgraph"])
