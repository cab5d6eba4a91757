"""SmithersSaver's prune (PostgresSaver 3.2's strategies) and its DeltaChannel history."""

from __future__ import annotations

import operator
from typing import Annotated, TypedDict

import pytest

pytest.importorskip("langgraph.checkpoint.conformance")

from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

import smithers_tt as st
from smithers_tt.errors import InvalidArgument
from smithers_tt.integrations.langgraph import SmithersSaver


class State(TypedDict, total=False):
    query: str
    docs: Annotated[list[str], operator.add]
    answer: str


def _graph():
    sub = StateGraph(State)
    sub.add_node("lookup", lambda s: {"docs": [f"sub:{s['query']}" + "." * 300]})
    sub.add_edge(START, "lookup")

    def ask(state: State) -> dict:
        return {"answer": f"{interrupt('approve?')}: {len(state['docs'])} docs"}

    graph = StateGraph(State)
    graph.add_node("rewrite", lambda s: {"query": f"q({s['query']})"})
    graph.add_node("archive", sub.compile())
    graph.add_node("ask", ask)
    graph.add_edge(START, "rewrite")
    graph.add_edge("rewrite", "archive")
    graph.add_edge("archive", "ask")
    return graph


def _cfg(thread: str) -> dict:
    return {"configurable": {"thread_id": thread}}


def _namespaces(saver: SmithersSaver, thread: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for t in saver.list(_cfg(thread)):
        ns = t.config["configurable"]["checkpoint_ns"]
        out[ns] = out.get(ns, 0) + 1
    return out


def test_prune_keep_latest_keeps_what_the_thread_needs_to_continue(db: st.Database) -> None:
    saver = SmithersSaver(db)
    app = _graph().compile(checkpointer=saver)
    for thread in ("pruned", "other"):
        app.invoke({"query": thread, "docs": []}, _cfg(thread))
    before = app.get_state(_cfg("pruned"))
    other = list(saver.list(_cfg("other")))
    assert _namespaces(saver, "pruned")[""] == 4
    assert any(":" in ns for ns in _namespaces(saver, "pruned"))  # the subgraph call

    saver.prune(["pruned"], strategy="keep_latest")

    # one checkpoint, no parent: the finished subgraph call went with its root checkpoint
    assert _namespaces(saver, "pruned") == {"": 1}
    (kept,) = saver.list(_cfg("pruned"))
    assert kept.parent_config is None
    after = app.get_state(_cfg("pruned"))
    assert (after.values, after.next, after.interrupts) == (
        before.values,
        before.next,
        before.interrupts,
    )
    assert after.config == before.config
    # the thread continues from its kept checkpoint (the interrupt's pending writes kept)
    done = app.invoke(Command(resume="ok"), _cfg("pruned"))
    assert done["answer"] == "ok: 1 docs"
    # other threads are untouched, and the pruned history's content is freed
    assert list(saver.list(_cfg("other"))) == other
    assert db.collect_garbage().deleted > 0
    assert db.verify().ok


def test_prune_delete_removes_the_threads(db: st.Database) -> None:
    saver = SmithersSaver(db)
    app = _graph().compile(checkpointer=saver)
    app.invoke({"query": "x", "docs": []}, _cfg("gone"))
    saver.prune(["gone"], strategy="delete")
    assert list(saver.list(_cfg("gone"))) == []
    with pytest.raises(st.RunNotFound):
        db.get_run(saver.run_id("gone"))


def test_prune_refuses_bad_arguments(db: st.Database) -> None:
    saver = SmithersSaver(db)
    with pytest.raises(InvalidArgument, match="not a str"):
        saver.prune("thread-1")
    with pytest.raises(InvalidArgument, match="unknown prune strategy"):
        saver.prune(["thread-1"], strategy="everything")


def _extend(state: list | None, writes: list[list[str]]) -> list[str]:
    return [*(state or []), *(x for w in writes for x in w)]


class Log(TypedDict):
    log: Annotated[list[str], DeltaChannel(_extend, snapshot_frequency=3)]
    n: int


def _delta_graph(limit: int = 7):
    graph = StateGraph(Log)
    graph.add_node("step", lambda s: {"log": [f"s{s['n']}"], "n": s["n"] + 1})
    graph.add_edge(START, "step")
    graph.add_conditional_edges("step", lambda s: "step" if s["n"] < limit else END)
    return graph


def test_delta_channel_history_answers_as_the_generic_walker_in_one_read(
    db: st.Database, monkeypatch
) -> None:
    saver = SmithersSaver(db)
    app = _delta_graph().compile(checkpointer=saver)
    config = _cfg("delta")
    assert app.invoke({"log": [], "n": 0}, config)["log"] == [f"s{k}" for k in range(7)]
    # a fork: its ancestors are the checkpoints on its own path only
    at_three = next(h for h in app.get_state_history(config) if h.values.get("n") == 3)
    forked = app.update_state(at_three.config, {"log": ["edited"]})
    assert app.invoke(None, forked)["log"] == ["s0", "s1", "s2", "edited", "s3", "s4", "s5", "s6"]

    history = list(app.get_state_history(config))
    assert len(history) > 10
    for state in history:
        for channels in (["log"], ["log", "n"], ["missing"]):
            fast = saver.get_delta_channel_history(config=state.config, channels=channels)
            generic = BaseCheckpointSaver.get_delta_channel_history(
                saver, config=state.config, channels=channels
            )
            assert fast == generic

    # whatever the depth, one read transaction (the generic walker: one per ancestor)
    reads = []
    transaction = saver.engine.transaction
    monkeypatch.setattr(
        saver.engine, "transaction", lambda *a, **k: reads.append(1) or transaction(*a, **k)
    )
    deepest = saver.get_delta_channel_history(config=history[0].config, channels=["log"])
    assert deepest["log"]["writes"] and len(reads) == 1
    monkeypatch.undo()

    unknown = {**config["configurable"], "checkpoint_id": "0" * 36}
    assert saver.get_delta_channel_history(config={"configurable": unknown}, channels=["log"]) == {
        "log": {"writes": []}
    }


def test_prune_keep_latest_refuses_delta_channel_threads_and_prunes_nothing(
    db: st.Database,
) -> None:
    saver = SmithersSaver(db)
    _graph().compile(checkpointer=saver).invoke({"query": "x", "docs": []}, _cfg("plain"))
    _delta_graph(3).compile(checkpointer=saver).invoke({"log": [], "n": 0}, _cfg("delta"))
    counts = {t: len(list(saver.list(_cfg(t)))) for t in ("plain", "delta")}
    with pytest.raises(InvalidArgument, match="DeltaChannel"):
        saver.prune(["plain", "delta"], strategy="keep_latest")
    assert {t: len(list(saver.list(_cfg(t)))) for t in ("plain", "delta")} == counts
