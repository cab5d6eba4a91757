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
    # a saver's pending writes do not say which node made them: found again from their ids
    _check(db, "t2", ["agent", "tool"])


def _fan_out(saver: Any) -> Any:
    """agent, then critic and tool in the same step (their writes in one checkpoint)."""

    def critic(state: State) -> dict[str, Any]:
        usage = {"input_tokens": 7, "output_tokens": 1, "total_tokens": 8}
        meta = {"model_name": "judge", "finish_reason": "stop"}
        return {"messages": [AIMessage("fine", usage_metadata=usage, response_metadata=meta)]}

    g = StateGraph(State)
    g.add_node("agent", _agent)
    g.add_node("tool", _tool)
    g.add_node("critic", critic)
    g.add_edge(START, "agent")
    g.add_edge("agent", "tool")
    g.add_edge("agent", "critic")
    g.add_edge(["tool", "critic"], END)
    return g.compile(checkpointer=saver)


@pytest.mark.parametrize("source", ["memory", "sqlite-file"])
def test_an_imported_threads_calls_are_under_the_nodes_that_made_them_in_a_parallel_step(
    db: st.Database, tmp_path, source: str
) -> None:
    config = {"configurable": {"thread_id": "t3"}}
    if source == "memory":
        saver = InMemorySaver()
        _fan_out(saver).invoke({"messages": [HumanMessage("go")]}, config)
        import_langgraph(saver, db)
    else:
        from langgraph.checkpoint.sqlite import SqliteSaver

        path = tmp_path / "checkpoints.sqlite"
        with SqliteSaver.from_conn_string(str(path)) as saver:
            _fan_out(saver).invoke({"messages": [HumanMessage("go")]}, config)
        import_langgraph(f"sqlite:///{path}", db)
    calls = db.get_run(thread_run_id("t3", "")).model_calls()
    by_node = dict(zip(calls["node_id"], calls["model"], strict=True))
    assert by_node == {"agent": "gpt-x", "tool": "llama", "critic": "judge"}
    # and the thread saved directly agrees with the imported one
    _fan_out(SmithersSaver(db)).invoke(
        {"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "t4"}}
    )
    direct = db.get_run(thread_run_id("t4", "")).model_calls()
    assert sorted(direct["node_id"]) == sorted(calls["node_id"])
