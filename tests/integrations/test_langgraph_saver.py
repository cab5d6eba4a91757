"""SmithersSaver: LangGraph's conformance suite, time travel on a real graph, dedup, integrity."""

from __future__ import annotations

import asyncio
import itertools
import json
import operator
import subprocess
import sys
from typing import Annotated, TypedDict

import pytest
import sqlalchemy as sa

pytest.importorskip("langgraph.checkpoint.conformance")

from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph import END, START, StateGraph

import smithers_tt as st
from smithers_tt.errors import CheckpointCorrupt, InvalidArgument
from smithers_tt.integrations.langgraph import (
    CHECKPOINT_CODEC,
    VALUE_CODEC,
    SmithersSaver,
    thread_run_id,
)
from smithers_tt.store.backend import _schema as S

CLAIMED = {
    "put",
    "put_writes",
    "get_tuple",
    "list",
    "delete_thread",
    "delete_for_runs",
    "copy_thread",
    "prune",
}


def test_conformance_suite_passes_every_claimed_capability(db: st.Database) -> None:
    @checkpointer_test(name="SmithersSaver")
    async def factory():
        yield SmithersSaver(db)

    report = asyncio.run(validate(factory))
    detected = {name for name, result in report.results.items() if result.detected}
    assert detected == CLAIMED
    failures = {
        name: result.failures for name, result in report.results.items() if result.passed is False
    }
    assert not failures, failures
    assert report.passed_all_base()
    assert all(report.results[name].passed for name in CLAIMED)
    assert {c.value for c in ALL_CAPABILITIES} == CLAIMED  # every one LangGraph defines
    assert report.passed_all()


# --- a real graph -----------------------------------------------------------------------


class State(TypedDict):
    topic: str
    notes: Annotated[list[str], operator.add]
    count: int


def _graph(limit: int = 3):
    def research(state: State) -> dict:
        return {"notes": [f"{state['topic']} #{state['count']}"], "count": state["count"] + 1}

    def route(state: State) -> str:
        return "research" if state["count"] < limit else END

    graph = StateGraph(State)
    graph.add_node("research", research)
    graph.add_edge(START, "research")
    graph.add_conditional_edges("research", route)
    return graph


def test_graph_history_update_state_fork_and_replay(db: st.Database) -> None:
    saver = SmithersSaver(db)
    app = _graph().compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "thread-1"}}
    topic = "x" * 500  # long enough to be stored as content of its own
    final = app.invoke({"topic": topic, "notes": [], "count": 0}, config)
    assert final["count"] == 3
    assert final["notes"] == [f"{topic} #0", f"{topic} #1", f"{topic} #2"]

    history = list(app.get_state_history(config))
    assert [h.values.get("count") for h in history] == [3, 2, 1, 0, None]
    assert history[0].next == ()
    # parent links walk back through the history
    for newer, older in itertools.pairwise(history):
        assert (
            newer.parent_config["configurable"]["checkpoint_id"]
            == (older.config["configurable"]["checkpoint_id"])
        )

    # fork: edit the state at count == 1 and run on from there
    at_one = next(h for h in history if h.values.get("count") == 1)
    forked = app.update_state(at_one.config, {"topic": "edited"})
    assert app.get_state(forked).values["topic"] == "edited"
    result = app.invoke(None, forked)
    assert result["count"] == 3
    assert result["notes"][-2:] == ["edited #1", "edited #2"]
    assert result["notes"][0] == f"{topic} #0"
    # the original branch is untouched
    assert app.get_state(history[0].config).values["notes"] == final["notes"]

    # replay from an old checkpoint: re-executes from there, on a new branch
    at_two = next(h for h in history if h.values.get("count") == 2)
    replayed = app.invoke(None, at_two.config)
    assert replayed["count"] == 3 and replayed["notes"] == final["notes"]
    assert len(list(app.get_state_history(config))) > len(history)

    # the thread is a smithers_tt run with frames for every checkpoint and verified content
    run_id = saver.run_id("thread-1")
    assert run_id == thread_run_id("thread-1", "")
    assert db.store.get_run(run_id).workflow == "langgraph"
    frames = db.store.frames(run_id)
    docs = [f for f in frames if f.kind == "checkpoint" and f.codec == CHECKPOINT_CODEC]
    assert len(docs) == len(list(app.get_state_history(config)))
    values = [f for f in frames if f.kind == "checkpoint" and f.codec == VALUE_CODEC]
    assert len(values) >= 1  # the long topic, stored once however many checkpoints use it
    snap = db.snapshot(run_id)
    newest = snap.payload("checkpoints")
    assert newest["id"] == app.get_state(config).config["configurable"]["checkpoint_id"]
    assert db.verify().ok


def test_async_graph(db: st.Database) -> None:
    saver = SmithersSaver(db)
    app = _graph(2).compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "async-1"}}

    async def go():
        out = await app.ainvoke({"topic": "t", "notes": [], "count": 0}, config)
        states = [s async for s in app.aget_state_history(config)]
        return out, states

    out, states = asyncio.run(go())
    assert out["count"] == 2 and len(states) == 4


def test_unchanged_channels_and_identical_values_are_stored_once(db: st.Database) -> None:
    saver = SmithersSaver(db)
    app = _graph(4).compile(checkpointer=saver)
    big = "shared context " * 300
    for thread in ("a", "b"):
        app.invoke({"topic": big, "notes": [], "count": 0}, {"configurable": {"thread_id": thread}})
    c = S.contents

    def count_holding(text: str) -> int:
        with db.engine.connect(write=False) as conn:
            rows = conn.execute(sa.select(c.c.data)).scalars().all()
        return sum(1 for data in rows if text.encode() in bytes(data))

    # one content row holds the big topic although 2 threads x 6 checkpoints use it
    assert count_holding('"payload":{"json":' + json.dumps(big) + "}") == 1


def test_corrupt_content_is_never_handed_to_langgraph(db: st.Database) -> None:
    saver = SmithersSaver(db)
    app = _graph(1).compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "c"}}
    app.invoke({"topic": "y" * 300, "notes": [], "count": 0}, config)
    values = {
        f.content_hash
        for f in db.store.frames(saver.run_id("c"))
        if f.kind == "checkpoint" and f.codec == VALUE_CODEC
    }
    assert values
    with db.engine.connect(write=True) as conn:  # flip the stored bytes of every value
        conn.execute(
            S.contents.update()
            .where(S.contents.c.content_hash.in_(values))
            .values(data=b'{"codec":"langgraph.value","payload":{"json":"evil"},"version":1}')
        )
    with pytest.raises(CheckpointCorrupt):
        saver.get_tuple(config)
    assert not db.verify().ok


def test_delete_thread_lets_garbage_collection_free_its_content(db: st.Database) -> None:
    saver = SmithersSaver(db)
    app = _graph(2).compile(checkpointer=saver)
    app.invoke({"topic": "z" * 400, "notes": [], "count": 0}, {"configurable": {"thread_id": "d"}})
    with db.engine.connect(write=False) as conn:
        before = conn.execute(sa.select(sa.func.count()).select_from(S.contents)).scalar_one()
    assert before > 0
    saver.delete_thread("d")
    report = db.collect_garbage()
    assert report.deleted == before
    assert saver.get_tuple({"configurable": {"thread_id": "d"}}) is None
    with pytest.raises(st.RunNotFound):
        db.get_run(saver.run_id("d"))


def test_delete_thread_deletes_the_frames_its_kept_rewinds_hold(db: st.Database) -> None:
    saver = SmithersSaver(db)
    app = _graph(2).compile(checkpointer=saver)
    app.invoke({"topic": "y" * 400, "notes": [], "count": 0}, {"configurable": {"thread_id": "r"}})
    run_id = saver.run_id("r")
    db.rewind(run_id, 2, confirm=True)  # its later frames are kept for undo, pinning content
    saver.delete_thread("r")
    with db.engine.connect(write=False) as conn:
        for table in (S.rewinds, S.frame_rows):
            assert conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one() == 0
    db.collect_garbage()
    with db.engine.connect(write=False) as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(S.contents)).scalar_one() == 0


def test_delete_thread_refuses_while_a_fork_reads_it_by_reference(db: st.Database) -> None:
    saver = SmithersSaver(db)
    app = _graph(2).compile(checkpointer=saver)
    app.invoke({"topic": "fork me", "notes": [], "count": 0}, {"configurable": {"thread_id": "f"}})
    run_id = saver.run_id("f")
    child = db.fork(run_id, db.get_run(run_id).record.clock)
    snapshot = child.snapshot()
    assert snapshot.refs  # it inherits the thread's checkpoints, copying none

    with pytest.raises(InvalidArgument, match=child.id):
        saver.delete_thread("f")
    assert saver.get_tuple({"configurable": {"thread_id": "f"}}) is not None  # nothing went

    assert db.materialize(child.id)
    saver.delete_thread("f")
    db.collect_garbage()
    assert child.snapshot() == snapshot  # its own copy, and the content it pins
    for ref in child.snapshot().refs.values():
        db.store.load(ref)


def test_values_that_are_not_json_go_through_msgpack_never_pickle(db: st.Database) -> None:
    from langchain_core.messages import AIMessage, HumanMessage

    saver = SmithersSaver(db)
    config = {"configurable": {"thread_id": "m", "checkpoint_ns": ""}}
    messages = [HumanMessage("hi"), AIMessage("hello " * 40)]
    checkpoint = {
        "v": 4,
        "id": "1ef0000-0000-6000-8000-000000000001",
        "ts": "2026-01-01T00:00:00+00:00",
        "channel_values": {"messages": messages, "blob": b"\x00\x01", "pair": (1, 2)},
        "channel_versions": {"messages": 1, "blob": 1, "pair": 1},
        "versions_seen": {},
        "updated_channels": None,
    }
    stored = saver.put(config, checkpoint, {"source": "input", "step": -1}, {"messages": 1})
    back = saver.get_tuple(stored).checkpoint["channel_values"]
    assert back["messages"] == messages and back["blob"] == b"\x00\x01"
    assert back["pair"] == [1, 2]  # msgpack, like LangGraph's own savers
    with db.engine.connect(write=False) as conn:
        blobs = [bytes(d) for d in conn.execute(sa.select(S.contents.c.data)).scalars()]
    assert not any(b"pickle" in blob for blob in blobs)

    checkpoint["id"] = "1ef0000-0000-6000-8000-000000000002"
    checkpoint["channel_values"] = {"fn": lambda: None}
    checkpoint["channel_versions"] = {"fn": 1}
    with pytest.raises(Exception) as caught:
        saver.put(config, checkpoint, {"source": "loop", "step": 0}, {"fn": 1})
    assert "pickle" not in type(caught.value).__name__.lower()
    with pytest.raises(InvalidArgument):
        SmithersSaver(db, serde=JsonPlusSerializer(pickle_fallback=True))


def test_importing_smithers_tt_imports_neither_langgraph_nor_openai() -> None:
    code = (
        "import sys, smithers_tt, smithers_tt.integrations\n"
        "roots = ('langgraph', 'openai', 'langchain_core')\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in roots]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
