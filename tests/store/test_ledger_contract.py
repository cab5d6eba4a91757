"""The ledger's contract: every change to a run commits exactly the frame that records it
(kind, key, state, data and stamp, read back as written) and its projection into the live
tables, and the history folds to what the live tables hold. Refusals name their cause and
write nothing."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import sqlalchemy as sa

import smithers_tt as st
from smithers_tt.errors import (
    AttemptNotFound,
    CheckpointInvalid,
    FenceLost,
    RunNotFound,
    StoreCorrupt,
)
from smithers_tt.store import AttemptKey, Fence, Frame, Store, release_run
from smithers_tt.store._frames import FRAME_COLUMNS, frame_values
from smithers_tt.store._records import now_ms
from smithers_tt.store.backend import _schema as S
from smithers_tt.timetravel import fold

from ._support import checkpoint, count, execute


def _frames(store: Store, run_id: str) -> list[Frame]:
    """The run's frames without their stamps (checked on their own)."""
    return [dataclasses.replace(f, created_at_ms=0) for f in store.frames(run_id)]


@dataclasses.dataclass
class Lives:
    """Three runs that went through every change: one finished by a second owner, one
    cancelled, one released; and the wall clock around them."""

    finished: str
    cancelled: str
    released: str
    size: int
    content_hash: str
    started_ms: int
    ended_ms: int


@pytest.fixture
def lives(store: Store) -> Lives:
    started = now_ms()
    _, fence = store.create_run("wf", {"q": 1}, run_id="finished")
    first = store.start_attempt(fence, "n", 1, node_state="running").key
    encoded = checkpoint(1).encode()
    ref = store.publish(fence, first, encoded, purpose="turn", agent_id="agent")
    store.finish_attempt(fence, first, "failed", error="boom", error_code="E1", discard_resume=True)
    second = store.start_attempt(fence, "n", 1, resumed_from=ref).key
    store.finish_attempt(fence, second, "finished", node_state="finished", output={"answer": 42})
    store.set_node(fence, "m", 0, "running")
    store.request_cancel("finished")
    store.start_attempt(fence, "m")
    owner = store.claim_run("finished", "owner-2")
    store.finish_run(owner, "finished", output={"task": [1, 2]})

    _, doomed = store.create_run("wf", run_id="cancelled")
    open_key = store.start_attempt(doomed, "m").key
    store.set_node(doomed, "m", 0, "running", output={"partial": True}, last_attempt=1)
    store.set_node(doomed, "k", 0, "running")
    assert open_key.attempt == 1
    store.cancel_run("cancelled")

    _, leaving = store.create_run("wf", run_id="released")
    store.start_attempt(leaving, "m", 3)
    assert release_run(store, leaving)
    return Lives(
        "finished", "cancelled", "released", encoded.size, encoded.content_hash, started, now_ms()
    )


def test_every_change_commits_the_frame_that_records_it(store: Store, lives: Lives) -> None:
    def f(no: int, kind: str, *key: Any, **fields: Any) -> Frame:
        return Frame("finished", no, kind, *key, **fields)

    ended = {"discard_resume": False, "error": None, "error_code": None}
    assert _frames(store, lives.finished) == [
        f(0, "run_created", state="running", data={"input": {"q": 1}, "workflow": "wf"}),
        f(1, "node_state", "n", 1, state="running"),
        f(2, "attempt_started", "n", 1, 1, state="in_progress"),
        f(
            3,
            "checkpoint",
            "n",
            1,
            1,
            0,
            content_hash=lives.content_hash,
            codec="test",
            version=1,
            purpose="turn",
            agent_id="agent",
            data={"size": lives.size},
        ),
        f(
            4,
            "attempt_finished",
            "n",
            1,
            1,
            state="failed",
            data={"discard_resume": True, "error": "boom", "error_code": "E1"},
        ),
        f(
            5,
            "attempt_started",
            "n",
            1,
            2,
            state="in_progress",
            data={"resumed_from": ["finished", "n", 1, 1, 0]},
        ),
        f(6, "attempt_finished", "n", 1, 2, state="finished", data=ended),
        f(7, "node_state", "n", 1, 2, state="finished", data={"output": {"answer": 42}}),
        f(8, "node_state", "m", 0, state="running"),
        f(9, "cancel_requested"),
        f(10, "attempt_started", "m", 0, 1, state="in_progress"),
        f(11, "run_claimed", state="running", data={"epoch": 2, "owner_id": "owner-2"}),
        f(12, "attempt_finished", "m", 0, 1, state="interrupted"),  # no detail: imposed
        f(13, "run_finished", state="finished", data={"error": None, "output": {"task": [1, 2]}}),
    ]

    def c(no: int, kind: str, *key: Any, **fields: Any) -> Frame:
        return Frame("cancelled", no, kind, *key, **fields)

    assert _frames(store, lives.cancelled) == [
        c(0, "run_created", state="running", data={"input": None, "workflow": "wf"}),
        c(1, "attempt_started", "m", 0, 1, state="in_progress"),
        c(2, "node_state", "m", 0, 1, state="running", data={"output": {"partial": True}}),
        c(3, "node_state", "k", 0, state="running"),
        c(4, "attempt_finished", "m", 0, 1, state="cancelled"),
        c(5, "node_state", "k", 0, state="cancelled"),
        # the cancel keeps the node's output, and its frame says so (as the live row does)
        c(6, "node_state", "m", 0, 1, state="cancelled", data={"output": {"partial": True}}),
        c(7, "run_cancelled", state="cancelled"),
    ]

    def r(no: int, kind: str, *key: Any, **fields: Any) -> Frame:
        return Frame("released", no, kind, *key, **fields)

    assert _frames(store, lives.released) == [
        r(0, "run_created", state="running", data={"input": None, "workflow": "wf"}),
        r(1, "attempt_started", "m", 3, 1, state="in_progress"),
        r(2, "run_released", state="queued"),
        r(3, "attempt_finished", "m", 3, 1, state="interrupted"),
    ]
    for run_id in (lives.finished, lives.cancelled, lives.released):
        stamps = [frame.created_at_ms for frame in store.frames(run_id)]
        assert all(lives.started_ms <= stamp <= lives.ended_ms for stamp in stamps), stamps
        assert stamps == sorted(stamps)


def test_the_history_folds_to_what_the_live_tables_hold(
    db: st.Database, store: Store, lives: Lives
) -> None:
    for run_id in (lives.finished, lives.cancelled, lives.released):
        run = store.get_run(run_id)
        folded = fold(run_id, store.frames(run_id))
        assert (folded.status, folded.output, folded.error) == (run.status, run.output, run.error)
        assert folded.frame_no == run.clock
        nodes = {
            (n.node_id, n.iteration): (n.state, n.last_attempt, n.output)
            for n in store.list_nodes(run_id)
        }
        assert nodes == {k: (n.state, n.last_attempt, n.output) for k, n in folded.nodes.items()}
        attempts = {
            (a.key.node_id, a.key.iteration, a.key.attempt): (
                a.state, a.error, a.error_code, a.discard_resume, a.resumed_from,
            )
            for a in store.list_attempts(run_id)
        }  # fmt: skip
        assert attempts == {
            k: (a.state, a.error, a.error_code, a.discard_resume, a.resumed_from)
            for k, a in folded.attempts.items()
        }
        assert db.snapshot(run_id).refs == folded.refs

    finished = store.get_run(lives.finished)
    assert (finished.status, finished.output, finished.owner_id) == (
        "finished",
        {"task": [1, 2]},
        "owner-2",
    )
    cancelled = store.get_run(lives.cancelled)
    assert (cancelled.status, cancelled.cancel_requested) == ("cancelled", True)
    assert [
        (n.node_id, n.state, n.last_attempt, n.output) for n in store.list_nodes("cancelled")
    ] == [
        ("k", "cancelled", None, None),
        ("m", "cancelled", 1, {"partial": True}),
    ]
    assert store.get_run(lives.released).status == "queued"


def _nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def test_a_run_output_may_nest_as_deep_as_a_payload_under_each_task(
    store: Store, fence: Fence
) -> None:
    """The run output maps task ids to outputs; each output may nest as deep as a checkpoint
    payload (256 levels), one level more is refused before anything is written."""
    clock = store.get_run(fence.run_id).clock

    with pytest.raises(CheckpointInvalid, match=r"^run output is not strict JSON: nesting"):
        store.finish_run(fence, "finished", output={"task": _nested(257)})

    assert store.get_run(fence.run_id).clock == clock
    assert store.get_run(fence.run_id).status == "running"
    store.finish_run(fence, "finished", output={"task": _nested(256)})
    run = store.get_run(fence.run_id)
    assert (run.status, run.output) == ("finished", {"task": _nested(256)})
    assert store.frames(fence.run_id)[-1].data == {"output": run.output, "error": None}


def test_a_failed_run_records_its_error_in_the_run_and_its_frame(
    store: Store, fence: Fence
) -> None:
    store.finish_run(fence, "failed", error="it broke")

    run = store.get_run(fence.run_id)
    assert (run.status, run.output, run.error) == ("failed", None, "it broke")
    last = store.frames(fence.run_id)[-1]
    assert (last.kind, last.state, last.data) == (
        "run_failed",
        "failed",
        {"output": None, "error": "it broke"},
    )


def test_ending_an_attempt_that_does_not_exist_raises_attempt_not_found_and_writes_nothing(
    db: st.Database, store: Store, fence: Fence, attempt: AttemptKey
) -> None:
    missing = dataclasses.replace(attempt, attempt=7)
    clock = store.get_run(fence.run_id).clock

    with pytest.raises(AttemptNotFound, match=r"^no attempt "):
        store.finish_attempt(fence, missing, "failed")

    assert store.get_run(fence.run_id).clock == clock
    assert store.get_attempt(attempt).state == "in_progress"


def test_ending_an_attempt_twice_raises_fence_lost_naming_it_and_writes_nothing(
    db: st.Database, store: Store, fence: Fence, attempt: AttemptKey
) -> None:
    store.finish_attempt(fence, attempt, "failed", error="first")
    clock = store.get_run(fence.run_id).clock
    frames = count(db, "tt_frames", run_id=fence.run_id)

    with pytest.raises(FenceLost) as lost:
        store.finish_attempt(fence, attempt, "finished", node_state="finished", output=1)

    assert str(lost.value) == (
        f"attempt {attempt} is no longer in progress under epoch {fence.epoch}"
    )
    assert lost.value.details == {"run_id": fence.run_id}
    assert store.get_run(fence.run_id).clock == clock
    assert count(db, "tt_frames", run_id=fence.run_id) == frames
    record = store.get_attempt(attempt)
    assert (record.state, record.error) == ("failed", "first")
    assert store.list_nodes(fence.run_id) == []


def test_start_attempt_returns_the_attempt_as_stored(store: Store, fence: Fence) -> None:
    first = store.start_attempt(fence, "n", 2)
    ref = store.publish(fence, first.key, checkpoint(1))
    store.finish_attempt(fence, first.key, "failed")

    second = store.start_attempt(fence, "n", 2, resumed_from=ref)

    assert second == store.get_attempt(second.key)
    assert (second.key.attempt, second.state, second.owner_epoch) == (2, "in_progress", fence.epoch)
    assert (second.next_sequence, second.discard_resume, second.error) == (0, False, None)
    assert second.resumed_from == (fence.run_id, "n", 2, 1, 0)
    assert second.started_at_ms >= first.started_at_ms > 0
    assert second.finished_at_ms is None


def test_cancelling_a_run_whose_running_node_has_a_damaged_output_names_the_row(
    db: st.Database, store: Store, fence: Fence
) -> None:
    store.set_node(fence, "m", 4, "running", output={"partial": 1})
    execute(db, "UPDATE tt_nodes SET output_json = '{damaged' WHERE node_id = 'm'")
    clock = store.get_run(fence.run_id).clock

    with pytest.raises(StoreCorrupt) as damaged:
        store.cancel_run(fence.run_id)

    where = f"tt_nodes.output_json of node 'm' (iteration 4) of run {fence.run_id!r}"
    assert str(damaged.value).startswith(f"{where} is damaged: it is not JSON")
    assert store.get_run(fence.run_id).status == "running"
    assert store.get_run(fence.run_id).clock == clock


def test_a_checkpoint_frame_reads_back_with_all_its_data_or_none(
    store: Store, fence: Fence, attempt: AttemptKey
) -> None:
    """A checkpoint frame keeps its data whole when it holds more than the content's size
    (an edited checkpoint), and reads back without data when it was written without (a
    LangGraph document's frame)."""
    ref = store.publish(fence, attempt, checkpoint(1))
    clock = store.get_run(fence.run_id).clock
    size = checkpoint(1).encode().size

    def frame(n: int, data: Any) -> Frame:
        return Frame(
            fence.run_id, clock + 1 + n, "checkpoint", "node", 0, 1, n + 1, None,
            ref.content_hash, "test", 1, "progress", None, data, 7,
        )  # fmt: skip

    written = [frame(0, {"size": size, "edited": True}), frame(1, None), frame(2, {"size": size})]
    rows = [dict(zip(FRAME_COLUMNS, frame_values(f), strict=True)) for f in written]
    run = S.runs.update().where(S.runs.c.run_id == fence.run_id).values(clock=clock + 3)

    def written_by_hand(conn: sa.Connection) -> None:  # frames and the clock that shows them
        conn.execute(S.frame_rows.insert(), rows)
        conn.execute(run)

    store.engine.transaction(written_by_hand)

    assert store.frames(fence.run_id, after=clock) == written


def test_a_write_to_a_run_that_does_not_exist_raises_run_not_found(
    db: st.Database, store: Store
) -> None:
    with pytest.raises(RunNotFound) as missing:
        store.set_node(Fence("ghost", 1), "n", 0, "running")

    assert str(missing.value) == "no run 'ghost'; list runs with `smithers-tt runs`"
    assert count(db, "tt_nodes") == 0


def query(db: st.Database, sql: str, **params: Any) -> list[tuple[Any, ...]]:
    """Rows of raw SQL, as tuples."""
    return db.engine.transaction(
        lambda conn: [tuple(r) for r in conn.execute(sa.text(sql), params)], write=False
    )


def test_the_tables_hold_what_the_schema_documents_for_sql_readers(
    db: st.Database, store: Store, fence: Fence, attempt: AttemptKey
) -> None:
    """What SQL readers (the lineage views, ad-hoc queries) see: a checkpoint frame's size in
    ``size_bytes`` with ``data_json`` NULL, other data as JSON, and SQL NULL (not JSON null)
    where there is no data, output or error."""
    encoded = checkpoint(1).encode()
    store.publish(fence, attempt, encoded)
    store.set_node(fence, "n", 0, "running")
    store.finish_run(fence, "finished")

    rows = query(
        db,
        "SELECT kind, data_json, size_bytes FROM tt_frames WHERE run_id = :r ORDER BY frame_no",
        r=fence.run_id,
    )
    assert rows[2:] == [
        ("checkpoint", None, encoded.size),
        ("node_state", None, None),
        ("run_finished", '{"error":null,"output":null}', None),
    ]
    assert query(db, "SELECT output_json FROM tt_nodes") == [(None,)]
    assert query(db, "SELECT output_json, error FROM tt_runs") == [(None, None)]
