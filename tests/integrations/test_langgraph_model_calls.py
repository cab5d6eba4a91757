"""A LangGraph thread saved (or imported) through SmithersSaver gets its model calls from the
AI messages its nodes write: tokens from ``usage_metadata`` (else the provider's
``response_metadata.token_usage``), model and finish reason from ``response_metadata``; a
message with neither is no call. Both backends."""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

import pytest

pytest.importorskip("langgraph")
pytest.importorskip("pandas")

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph, add_messages
from langgraph.types import Send

import smithers_tt as st
from smithers_tt.checkpoint import loads
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


# --- messages written again, Send tasks, and the order LangGraph saves in -------------------


class Plan(TypedDict):
    topics: list
    messages: Annotated[list, add_messages]


def _reply(text: str, tokens: int, message_id: str | None) -> AIMessage:
    """A chat model's reply (LangChain's chat models give each an id)."""
    usage = {"input_tokens": tokens, "output_tokens": 1, "total_tokens": tokens + 1}
    meta = {"model_name": "gpt-x", "finish_reason": "stop"}
    return AIMessage(text, id=message_id, usage_metadata=usage, response_metadata=meta)


def _planner(saver: Any, *, interrupt: bool = False) -> Any:
    """plan sends one ``write`` per topic; ``write`` calls a model; ``sub`` is a subgraph
    whose node calls a model, and whose output (its state) holds every message so far;
    ``echo`` returns the whole message list again."""

    def plan(state: Plan) -> dict[str, Any]:
        return {"topics": ["a", "bb", "ccc"]}

    def fan(state: Plan) -> list[Send]:
        return [Send("write", {"topics": [t], "messages": []}) for t in state["topics"]]

    def write(state: Plan) -> dict[str, Any]:
        topic = state["topics"][0]
        return {"messages": [_reply(f"on {topic}", 10 + len(topic), f"run-write-{topic}")]}

    def inner(state: Plan) -> dict[str, Any]:
        return {"messages": [_reply("inside", 99, "run-inner-1")]}

    def echo(state: Plan) -> dict[str, Any]:
        return {"messages": list(state["messages"])}

    sub = StateGraph(Plan)
    sub.add_node("inner", inner)
    sub.add_edge(START, "inner")
    sub.add_edge("inner", END)
    g = StateGraph(Plan)
    g.add_node("plan", plan)
    g.add_node("write", write)
    g.add_node("sub", sub.compile())
    g.add_node("echo", echo)
    g.add_edge(START, "plan")
    g.add_conditional_edges("plan", fan, ["write"])
    g.add_edge("write", "sub")
    g.add_edge("sub", "echo")
    g.add_edge("echo", END)
    return g.compile(checkpointer=saver, interrupt_before=["echo"] if interrupt else None)


def _checkpoint_at(db: st.Database, run: Any, frame_no: int) -> str:
    """The id of the LangGraph checkpoint whose document is frame ``frame_no`` of ``run``."""
    frame = next(f for f in run.frames() if f.frame_no == frame_no)
    return loads(db.store.read_content(frame.content_hash))["payload"]["id"]


def _every_call(db: st.Database, thread: str) -> list[tuple[str, str, int, int]]:
    """(namespace's node, node, prompt tokens, step of the checkpoint the call is numbered
    with) of every call of a thread, over its namespaces."""
    saver = SmithersSaver(db)
    step_of = {
        (t.config["configurable"]["checkpoint_ns"], t.config["configurable"]["checkpoint_id"]): t
        for t in saver.list({"configurable": {"thread_id": thread}})
    }
    found = []
    for ns in sorted({ns for ns, _ in step_of}):
        run = db.get_run(thread_run_id(thread, ns))
        calls = run.model_calls()
        for node, tokens, frame_no in zip(
            calls["node_id"], calls["prompt_tokens"], calls["frame_no"], strict=True
        ):
            step = step_of[ns, _checkpoint_at(db, run, frame_no)].metadata["step"]
            found.append((ns.split(":")[0], node, int(tokens), step))
    return sorted(found)


EXPECTED = [
    ("", "write", 11, 2),
    ("", "write", 12, 2),
    ("", "write", 13, 2),
    ("sub", "inner", 99, 1),
]
"""Each model call once, under the node that made it, numbered with the checkpoint its step
made: one per send (not under the send's index), the subgraph's in the subgraph's run, none
for the messages the subgraph's input, ``sub`` and ``echo`` write again."""


@pytest.mark.parametrize("durability", ["sync", "async"])
def test_each_call_is_recorded_once_under_the_node_that_made_it(
    db: st.Database, durability: str
) -> None:
    app = _planner(SmithersSaver(db))
    config = {"configurable": {"thread_id": "p1"}}
    app.invoke({"topics": [], "messages": []}, config, durability=durability)
    assert _every_call(db, "p1") == EXPECTED


def test_a_thread_resumed_by_another_saver_records_no_call_twice(db: st.Database) -> None:
    """Interrupted before ``echo``, then resumed through a new saver (nothing of the thread
    in its memory): the store tells ``echo``'s messages from calls."""
    config = {"configurable": {"thread_id": "p2"}}
    _planner(SmithersSaver(db), interrupt=True).invoke({"topics": [], "messages": []}, config)
    before = _every_call(db, "p2")
    _planner(SmithersSaver(db), interrupt=True).invoke(None, config)
    assert before == _every_call(db, "p2") == EXPECTED


def test_an_imported_thread_records_each_call_once_under_the_node_that_made_it(
    db: st.Database,
) -> None:
    """The import stores a checkpoint's writes before it, namespace by namespace: the same
    calls as saved directly, ``Send`` tasks found by their ids."""
    source = InMemorySaver()
    _planner(source).invoke({"topics": [], "messages": []}, {"configurable": {"thread_id": "p3"}})
    import_langgraph(source, db)
    assert _every_call(db, "p3") == EXPECTED


def _reply_writes(message: AIMessage) -> list[tuple[str, Any]]:
    return [("messages", [message])]


@pytest.mark.parametrize("writes_first", [True, False])
def test_a_steps_calls_are_numbered_with_the_checkpoint_it_made_whichever_is_saved_first(
    db: st.Database, writes_first: bool
) -> None:
    """LangGraph saves a step's checkpoint and its tasks' writes in the background, in either
    order: the calls are the same, and hidden until the checkpoint they belong to is stored."""
    saver = SmithersSaver(db)
    conf = {"configurable": {"thread_id": "t5", "checkpoint_ns": ""}}
    first = empty_checkpoint()
    saver.put(conf, first, {"step": 0}, {})
    parent = {"configurable": {**conf["configurable"], "checkpoint_id": first["id"]}}
    child = empty_checkpoint()
    reply = _reply("hi", 5, "run-1")
    path = "~__pregel_pull, agent"
    if writes_first:
        saver.put_writes(parent, _reply_writes(reply), "task-1", path)
        # waiting for its step's checkpoint: seen at the newest frame only
        waiting = db.get_run(thread_run_id("t5", ""))
        newest = waiting.model_calls()
        assert newest["node_id"].tolist() == ["agent"]
        assert newest["frame_no"].tolist() == [waiting.frames()[-1].frame_no]
        assert waiting.model_calls(frame_no=waiting.frames()[-1].frame_no - 1).empty
        saver.put(parent, child, {"step": 1}, {})
    else:
        saver.put(parent, child, {"step": 1}, {})
        saver.put_writes(parent, _reply_writes(reply), "task-1", path)
    # written again by a later task (a node returning the whole list): still one call
    later = {"configurable": {**conf["configurable"], "checkpoint_id": child["id"]}}
    saver.put_writes(later, _reply_writes(reply), "task-2", "~__pregel_pull, echo")
    saver.put(later, empty_checkpoint(), {"step": 2}, {})
    run = db.get_run(thread_run_id("t5", ""))
    calls = run.model_calls()
    assert calls["node_id"].tolist() == ["agent"] and calls["prompt_tokens"].tolist() == [5]
    assert _checkpoint_at(db, run, calls["frame_no"][0]) == child["id"]


@pytest.mark.parametrize("writes_first", [True, False])
def test_a_send_tasks_call_is_under_its_sends_node_whichever_is_saved_first(
    db: st.Database, writes_first: bool
) -> None:
    """A ``Send`` task's path names the index of its send among its input checkpoint's,
    which may be stored after the task's writes: its call is under that send's node."""
    saver = SmithersSaver(db)
    conf = {"configurable": {"thread_id": "t8", "checkpoint_ns": ""}}
    sending = empty_checkpoint()
    sending["channel_values"]["__pregel_tasks"] = [Send("plan", {}), Send("write", {})]
    at = {"configurable": {**conf["configurable"], "checkpoint_id": sending["id"]}}
    writes = _reply_writes(_reply("sent", 6, "run-sent"))
    path = "~__pregel_push, 0000000001, 0000000000"
    if writes_first:
        saver.put_writes(at, writes, "task-1", path)
    saver.put(conf, sending, {"step": 1}, {})
    if not writes_first:
        saver.put_writes(at, writes, "task-1", path)
    saver.put(at, empty_checkpoint(), {"step": 2}, {})
    calls = db.get_run(thread_run_id("t8", "")).model_calls()
    assert calls["node_id"].tolist() == ["write"]


def test_a_message_without_an_id_is_a_call_each_time_it_is_written(db: st.Database) -> None:
    """A channel whose reducer gives messages no id (not ``add_messages``): nothing tells the
    same message written twice from two calls, so both count (as before ids were used)."""

    class Log(TypedDict):
        log: Annotated[list, operator.add]

    def ask(state: Log) -> dict[str, Any]:
        return {"log": [_reply("answer", 3, None)]}

    def copy(state: Log) -> dict[str, Any]:
        return {"log": list(state["log"])}

    g = StateGraph(Log)
    g.add_node("ask", ask)
    g.add_node("copy", copy)
    g.add_edge(START, "ask")
    g.add_edge("ask", "copy")
    g.add_edge("copy", END)
    g.compile(checkpointer=SmithersSaver(db)).invoke(
        {"log": []}, {"configurable": {"thread_id": "t6"}}
    )
    calls = db.get_run(thread_run_id("t6", "")).model_calls()
    assert sorted(calls["node_id"]) == ["ask", "copy"]


def test_a_call_written_after_a_rewind_cut_its_steps_checkpoint_waits_for_the_next_one(
    db: st.Database,
) -> None:
    """A smithers_tt rewind cuts the checkpoint a step made (and hides its call): the message
    written again from the kept input checkpoint (the same id) is a call of the new history,
    numbered with the checkpoint stored next, not the cut one's frame (whose number the run
    gives again)."""
    saver = SmithersSaver(db)
    conf = {"configurable": {"thread_id": "t7", "checkpoint_ns": ""}}
    first = empty_checkpoint()
    saver.put(conf, first, {"step": 0}, {})
    parent = {"configurable": {**conf["configurable"], "checkpoint_id": first["id"]}}
    reply = _reply_writes(_reply("late", 4, "run-late"))
    saver.put_writes(parent, reply, "t", "~__pregel_pull, agent")
    saver.put(parent, empty_checkpoint(), {"step": 1}, {})
    run_id = thread_run_id("t7", "")
    assert len(db.get_run(run_id).model_calls()) == 1
    db.rewind(run_id, db.get_run(run_id).record.clock - 1, confirm=True)
    assert db.get_run(run_id).model_calls().empty
    saver.put_writes(parent, reply, "t-again", "~__pregel_pull, agent")
    waiting = db.get_run(run_id)  # waits for its step's checkpoint, seen at the newest frame
    assert waiting.model_calls()["frame_no"].tolist() == [waiting.record.clock]
    again = empty_checkpoint()
    saver.put(parent, again, {"step": 1}, {})
    run = db.get_run(run_id)
    calls = run.model_calls()
    assert calls["node_id"].tolist() == ["agent"]
    assert _checkpoint_at(db, run, calls["frame_no"][0]) == again["id"]


def test_the_calls_of_a_step_that_failed_are_seen_and_counted_at_the_newest_frame(
    db: st.Database,
) -> None:
    """A step whose task failed makes no checkpoint; the model call its other task made was
    made all the same: the run's newest view shows it and counts its tokens."""

    def broken(state: State) -> dict[str, Any]:
        raise RuntimeError("the tool broke")

    def critic(state: State) -> dict[str, Any]:
        return {"messages": [_reply("fine", 7, "run-critic-1")]}

    g = StateGraph(State)
    g.add_node("critic", critic)
    g.add_node("broken", broken)
    g.add_edge(START, "critic")
    g.add_edge(START, "broken")
    g.add_edge(["critic", "broken"], END)
    app = g.compile(checkpointer=SmithersSaver(db))
    with pytest.raises(RuntimeError, match="the tool broke"):
        app.invoke({"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "t9"}})
    run = db.get_run(thread_run_id("t9", ""))
    calls = run.model_calls({"gpt-x": {"input": 1.0, "output": 2.0}})
    assert calls["node_id"].tolist() == ["critic"]
    assert calls["prompt_tokens"].tolist() == [7]
    assert calls["frame_no"].tolist() == [run.frames()[-1].frame_no]
    assert calls["cost"][0] == pytest.approx((7 * 1.0 + 1 * 2.0) / 1e6)
