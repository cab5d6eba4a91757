"""The store side of the LangGraph saver, used directly with plain data (no LangGraph): what a
write stores is what a read returns, pins are stored once per run, and reads verify bytes."""

from __future__ import annotations

import json
import threading
import time

import pytest

import smithers_tt as st
from smithers_tt.checkpoint import EncodedCheckpoint, canonical_envelope, content_hash, loads
from smithers_tt.errors import CheckpointCorrupt
from smithers_tt.store import Frame
from smithers_tt.store.backend import _schema as S
from smithers_tt.store.for_langgraph import (
    LANGGRAPH_DOC_NODE,
    LANGGRAPH_VALUE_NODE,
    LANGGRAPH_WORKFLOW,
    LangGraphIndexQuery,
    LangGraphRead,
    LangGraphStore,
    LangGraphWrite,
    langgraph_run_id,
)


def _encoded(codec: str, payload: object) -> EncodedCheckpoint:
    data = canonical_envelope(codec, 1, payload)
    return EncodedCheckpoint(codec, 1, data, content_hash(data))


def _put(tables: LangGraphStore, thread: str, checkpoint_id: str, values: list[str]) -> None:
    run_id = langgraph_run_id(thread)
    blobs = {b.content_hash: b for b in (_encoded("test.value", v) for v in values)}
    document = _encoded("test.doc", {"id": checkpoint_id, "values": sorted(blobs)})

    def work(tx: LangGraphWrite) -> None:
        tx.put_checkpoint(run_id, (thread, ""), checkpoint_id, document, blobs)

    tables.write(run_id, work)


def test_a_written_checkpoint_reads_back_with_its_run_frames_and_values(
    db: st.Database,
) -> None:
    heard: list[Frame] = []
    db.store.listeners.append(heard.append)
    tables = LangGraphStore(db.engine, db.store)
    _put(tables, "t1", "0001", ["a" * 100, "b" * 100])
    _put(tables, "t1", "0002", ["a" * 100, "c" * 100])  # "a" is pinned already

    run_id = langgraph_run_id("t1")
    assert db.store.get_run(run_id).workflow == LANGGRAPH_WORKFLOW
    pins = [f for f in heard if f.kind == "checkpoint"]
    values = [f for f in pins if f.node_id == LANGGRAPH_VALUE_NODE]
    docs = [f for f in pins if f.node_id == LANGGRAPH_DOC_NODE]
    assert len(values) == 3 and len(docs) == 2  # each value pinned once per run
    assert [f.frame_no for f in heard] == list(range(len(heard)))  # one clock, no gaps

    shared = _encoded("test.value", "a" * 100).content_hash
    assert sum(f.content_hash == shared for f in values) == 1

    def read(rx: LangGraphRead) -> tuple:
        rows = rx.page(LangGraphIndexQuery(thread_id="t1"), 10)
        return (
            [r.checkpoint_id for r in rows],
            rx.documents(rx.newest(run_id)),
            rx.contents({shared}),
        )

    ids, newest, contents = tables.read(read)
    assert ids == ["0002", "0001"]
    assert [(d.checkpoint_id, d.content_hash) for d in newest] == [("0002", docs[1].content_hash)]
    assert loads(newest[0].data)["payload"]["id"] == "0002"
    assert loads(contents[shared])["payload"] == "a" * 100


def test_a_fresh_process_finds_pins_in_the_database_not_its_cache(db: st.Database) -> None:
    _put(LangGraphStore(db.engine, db.store), "t2", "0001", ["x" * 100])
    heard: list[Frame] = []
    db.store.listeners.append(heard.append)
    _put(LangGraphStore(db.engine, db.store), "t2", "0002", ["x" * 100])
    assert [f.node_id for f in heard] == [LANGGRAPH_DOC_NODE]  # no second value frame


def test_reads_refuse_bytes_that_do_not_match_their_address(db: st.Database) -> None:
    tables = LangGraphStore(db.engine, db.store)
    _put(tables, "t3", "0001", [])
    run_id = langgraph_run_id("t3")
    evil = _encoded("test.doc", {"id": "0001", "values": ["evil"]}).data
    with db.engine.connect(write=True) as conn:  # other bytes under the document's address
        conn.execute(S.contents.update().values(data=evil, size_bytes=len(evil)))
    with pytest.raises(CheckpointCorrupt):
        tables.read(lambda rx: rx.documents(rx.newest(run_id)))


def test_a_writer_that_lost_the_race_to_create_a_thread_run_keeps_the_winners_run(
    db: st.Database,
) -> None:
    """Two writers may both find a thread's run missing; the one whose ledger write of the
    run comes second must write nothing (not fail, not add frames) and go on with the run
    the first one created."""
    tables = LangGraphStore(db.engine, db.store)
    _put(tables, "t1", "0001", ["a" * 100])
    run_id = langgraph_run_id("t1")
    before = db.store.frames(run_id)

    def late(tx: LangGraphWrite) -> int:
        tx._create_run(run_id, ("t1", ""), None)  # as if it had found no run
        return len(tx.frames)

    written, _ = tables.write(run_id, late)
    assert written == 0
    assert db.store.frames(run_id) == before
    _put(tables, "t1", "0002", ["b" * 100])  # the run goes on, its clock dense
    frames = db.store.frames(run_id)
    assert [f.frame_no for f in frames] == list(range(len(frames)))
    assert [f.agent_id for f in frames[1:3]] == ["langgraph", "langgraph"]


def test_two_processes_writing_one_thread_at_once_keep_its_history_dense_and_pinned_once(
    db_url: str,
) -> None:
    """Two savers (each its own database handle, committer and caches, as two processes
    have) create and write one thread at the same moment: every checkpoint and write of both
    is stored, the run's frames are numbered without gaps or repeats, and each value is
    pinned by exactly one frame, whichever saver stored it first."""
    handles = [st.connect(db_url) for _ in range(2)]
    try:
        run_id = langgraph_run_id("shared")
        start = threading.Barrier(2)
        errors: list[BaseException] = []

        def writer(n: int) -> None:
            tables = LangGraphStore(handles[n].engine, handles[n].store)
            try:
                for i in range(15):
                    start.wait(timeout=60)  # each step at the same moment in both
                    values = ["common" * 20, f"mine {n}" * 20, f"step {i}" * 20]  # both pin it
                    _put(tables, "shared", f"{i:04d}.{n}", values)
                    start.wait(timeout=60)
                    _merge_writes(tables, "shared", f"{i:04d}.0", f"task {n}")  # both, at once
            except BaseException as error:  # reported by the main thread
                errors.append(error)

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert not errors, errors
        frames = handles[0].store.frames(run_id)
        assert [f.frame_no for f in frames] == list(range(len(frames)))
        assert [f.kind for f in frames].count("run_created") == 1
        pins = [f for f in frames if f.kind == "checkpoint"]
        values = [f.content_hash for f in pins if f.node_id == LANGGRAPH_VALUE_NODE]
        assert len(values) == len(set(values)) == 1 + 2 + 15  # common, mine x2, steps
        tables = LangGraphStore(handles[0].engine, handles[0].store)
        rows = tables.read(lambda rx: rx.page(LangGraphIndexQuery(run_id=run_id), 100))
        assert len(rows) == 30
        both = {"task 0": 1, "task 1": 1}  # neither read-modify-write lost the other's
        assert [json.loads(r.writes_json or "{}") for r in rows if r.checkpoint_id[-1] == "0"] == [
            both
        ] * 15
    finally:
        for handle in handles:
            handle.close()


def _merge_writes(tables: LangGraphStore, thread: str, checkpoint_id: str, task: str) -> None:
    run_id = langgraph_run_id(thread)

    def merge(stored: str | None) -> str:
        writes = json.loads(stored) if stored else {}
        writes[task] = writes.get(task, 0) + 1
        return json.dumps(writes)

    tables.write(
        run_id, lambda tx: tx.update_writes(run_id, (thread, ""), checkpoint_id, {}, merge)
    )


def test_a_thread_deleted_and_created_again_pins_its_values_again(db: st.Database) -> None:
    """What this process knows pinned belongs to the run it saw: once another process has
    deleted the thread and created it again, this one's values get frames again."""
    tables, other = LangGraphStore(db.engine, db.store), LangGraphStore(db.engine, db.store)
    _put(tables, "t4", "0001", ["v" * 100])
    other.delete_thread("t4")  # this process's cache is not told
    time.sleep(0.005)  # another millisecond: another incarnation token
    _put(other, "t4", "0002", ["w" * 100])
    _put(tables, "t4", "0003", ["v" * 100])
    frames = db.store.frames(langgraph_run_id("t4"))
    pins = [f for f in frames if f.kind == "checkpoint" and f.node_id == LANGGRAPH_VALUE_NODE]
    assert [f.content_hash for f in pins] == [
        _encoded("test.value", value).content_hash for value in ("w" * 100, "v" * 100)
    ]
