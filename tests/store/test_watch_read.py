"""The run watcher's read (``Store.watch_run``) and the heartbeat, each one statement (issue 38):
on PostgreSQL one round trip each, and the watcher reads exactly what its two reads (the run's
row, then its ``breakpoints_set`` frames above a frame number) read before, on runs in every
state it can meet."""

from __future__ import annotations

import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection

import smithers_tt as st
from smithers_tt.demo import demo_workflow
from smithers_tt.errors import RunNotFound
from smithers_tt.store import Frame, RunRecord
from smithers_tt.store._frames import frame_from_row
from smithers_tt.store._records import run_from_row
from smithers_tt.store.backend import schema as S

from ._support import checkpoint

MARKS = {"before": ["b"], "after": []}


def two_reads(db: st.Database, run_id: str, after: int) -> tuple[RunRecord, list[Frame]]:
    """What ``watch_run`` was before issue 38, statement for statement: the run's row, then
    (when there is one) its ``breakpoints_set`` frames above ``after``, in one transaction."""
    f = S.frames
    frames = (
        sa.select(f)
        .where(f.c.run_id == run_id, f.c.frame_no > after, f.c.kind == "breakpoints_set")
        .order_by(f.c.frame_no)
    )

    def read(conn: Connection) -> tuple[Any, list[Any]]:
        rows = conn.execute(sa.select(S.runs).where(S.runs.c.run_id == run_id)).all()
        return rows, conn.execute(frames).all() if rows else []

    rows, found = db.engine.transaction(read, write=False)
    if not rows:
        raise RunNotFound(run_id)
    return run_from_row(rows[0]), [frame_from_row(r) for r in found]


def runs_in_every_state(db: st.Database) -> list[str]:
    """Runs the watcher can meet: running (with labels, with breakpoints from its start and
    set twice since, between publishes), cancel requested, cancelled, finished, failed,
    paused, continued, taken over by another owner, queued, and a fork by reference (of a
    finished demo run) with breakpoints of its own."""
    store = db.store
    made = []

    def new(**options: Any) -> tuple[RunRecord, Any]:
        run, fence = store.create_run("wf", {"q": 1}, **options)
        made.append(run.run_id)
        return run, fence

    new(labels={"case": "plain"})
    run, fence = new(breakpoints=MARKS, graph={"a": [], "b": ["a"]})
    key = store.start_attempt(fence, "a").key
    store.publish(fence, key, checkpoint(1))
    store.set_breakpoints(run.run_id, {"before": [], "after": ["a"]})
    store.publish(fence, key, checkpoint(2))
    store.set_breakpoints(run.run_id, MARKS)
    store.publish(fence, key, checkpoint(3))
    run, _ = new()
    store.request_cancel(run.run_id)
    run, _ = new()
    store.set_breakpoints(run.run_id, MARKS)
    store.cancel_run(run.run_id)
    _, fence = new()
    store.finish_run(fence, "finished", output={"answer": 42})
    _, fence = new()
    store.finish_run(fence, "failed", error="boom")
    _, fence = new()
    store.pause_run(fence, None, None, {"why": "asked"})
    run, fence = new()
    store.pause_run(fence, None, None, {"why": "asked"})
    store.set_breakpoints(run.run_id, MARKS)
    paused = store.get_run(run.run_id)
    go = store.continue_run(run.run_id, paused.owner_epoch, {"a": 1}, owner_id="me", claim=True)
    assert go is not None
    run, fence = new()
    store.claim_run(run.run_id, owner_id="another")
    assert not store.heartbeat(fence)
    new(status="queued", breakpoints=MARKS)

    wf, _ = demo_workflow()
    parent = db.run(wf, {"topic": "bee"})
    assert parent.status == "finished", parent.error
    child = db.fork(parent.id, 3)
    db.store.set_breakpoints(child.id, {"before": [], "after": ["research"]})
    return [*made, parent.id, child.id]


def test_the_watchers_one_statement_reads_what_its_two_reads_read(db: st.Database) -> None:
    compared = Counter()
    for run_id in runs_in_every_state(db):
        clock = db.store.get_run(run_id).clock
        for after in range(-1, clock + 2):
            new, old = db.store.watch_run(run_id, after), two_reads(db, run_id, after)
            assert new == old, (run_id, after)
            compared[bool(new[1])] += 1
            if new[0].status in ("paused", "cancelled"):
                compared[new[0].status] += 1
            compared["cancel requested"] += new[0].cancel_requested
    # The comparison met breakpoints and every state it is about.
    assert compared[True] >= 10 and compared[False] >= 10
    assert compared["paused"] and compared["cancelled"] and compared["cancel requested"]
    with pytest.raises(RunNotFound):
        db.store.watch_run("no-such-run", 0)


def _round_trips(db: st.Database, call: Callable[[], object]) -> int:
    """Round trips (Sync and simple Query messages) on every connection ``call()`` checks out
    of the engine's pool, from a libpq trace."""
    traces: list[Any] = []

    def checkout(dbapi_conn: Any, record: Any, proxy: Any) -> None:
        trace = tempfile.TemporaryFile("w+")  # noqa: SIM115 (closed below)
        traces.append(trace)
        dbapi_conn.pgconn.trace(trace.fileno())

    def checkin(dbapi_conn: Any, record: Any) -> None:
        if dbapi_conn is not None:
            dbapi_conn.pgconn.untrace()

    engine = db.engine.sa
    sa.event.listen(engine, "checkout", checkout)
    sa.event.listen(engine, "checkin", checkin)
    try:
        call()
    finally:
        sa.event.remove(engine, "checkout", checkout)
        sa.event.remove(engine, "checkin", checkin)
    sent: Counter[str] = Counter()
    for trace in traces:
        with trace:
            trace.seek(0)
            sent.update(
                line.split("\t")[3].split(" ")[0]
                for line in trace.read().splitlines()
                if line.count("\t") >= 3 and line.split("\t")[1] == "F"
            )
    return sent["Sync"] + sent["Query"]


@pytest.fixture
def pg(db: st.Database) -> Iterator[st.Database]:
    if db.engine.is_sqlite:
        pytest.skip("SQLite has no round trips")
    yield db


@pytest.mark.postgres
def test_the_watchers_read_and_heartbeat_are_one_round_trip_each(pg: st.Database) -> None:
    store = pg.store
    run, fence = store.create_run("wf")
    store.set_breakpoints(run.run_id, MARKS)
    calls = {
        "watch_run": lambda: store.watch_run(run.run_id, 0),
        "heartbeat": lambda: store.heartbeat(fence),
    }
    for call in calls.values():
        for _ in range(30):  # psycopg prepares a statement on its 6th use on a connection
            call()
    for name, call in calls.items():
        assert [_round_trips(pg, call) for _ in range(5)] == [1] * 5, name
    assert len(store.watch_run(run.run_id, 0)[1]) == 1
    # A heartbeat that finds another owner says so, in one round trip too.
    store.claim_run(run.run_id, owner_id="another")
    lost: list[bool] = []
    assert _round_trips(pg, lambda: lost.append(store.heartbeat(fence))) == 1
    assert lost == [False]
    assert store.get_run(run.run_id).owner_id == "another"


@pytest.mark.postgres
def test_a_transaction_after_a_one_statement_one_on_its_connection_is_one_transaction(
    pg: st.Database,
) -> None:
    """The connection goes back to psycopg's BEGIN: two statements of the next transaction
    on it run in one transaction (one transaction id), not each in its own."""
    store, engine = pg.store, pg.engine
    _, fence = store.create_run("wf")
    held = engine.hold()
    try:
        xid = lambda conn: conn.execute(sa.text("SELECT txid_current()")).scalar_one()  # noqa: E731
        for _ in range(2):
            engine.transaction(xid, write=False, alone=True, held=held)
            ids = engine.transaction(lambda conn: [xid(conn), xid(conn)], held=held)
            assert ids[0] == ids[1]
    finally:
        held.release()
    assert store.heartbeat(fence)
