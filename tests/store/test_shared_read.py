"""``Engine.reading``: the read transactions a thread runs inside the block share one
transaction (what the debugger opens a run with: about 30 reads, each a transaction of its
own before), and see what they would have seen alone: a write of the same thread inside the
block is seen by the reads after it, a failed read runs again alone with the usual error, and
other threads read as ever."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import sqlalchemy as sa

import smithers_tt as st
from smithers_tt.errors import StoreError


@contextmanager
def begins(db: st.Database) -> Iterator[list[int]]:
    """The transactions begun on the database's engine inside the block (by any thread)."""
    seen = [0]

    def begun(conn: sa.Connection) -> None:
        seen[0] += 1

    sa.event.listen(db.engine.sa, "begin", begun)
    try:
        yield seen
    finally:
        sa.event.remove(db.engine.sa, "begin", begun)


def _runs(db: st.Database) -> int:
    return db.engine.transaction(
        lambda conn: conn.exec_driver_sql("SELECT COUNT(*) FROM tt_runs").scalar_one(),
        write=False,
    )


def test_reads_in_a_block_share_one_transaction(db: st.Database) -> None:
    run_id = db.store.create_run("wf")[0].run_id
    with begins(db) as alone:
        answers = [_runs(db), db.store.get_run(run_id).workflow, _runs(db)]
    with begins(db) as shared, db.engine.reading():
        assert [_runs(db), db.store.get_run(run_id).workflow, _runs(db)] == answers
        with db.engine.reading():  # nested: the outer block's transaction
            assert _runs(db) == 1
    assert alone[0] >= 3
    assert shared[0] == 1
    with begins(db) as after:
        assert _runs(db) == 1
    assert after[0] == 1  # the block ended: a transaction of its own again


def test_a_write_inside_the_block_is_seen_by_the_reads_after_it(db: st.Database) -> None:
    with db.engine.reading():
        assert _runs(db) == 0  # SQLite's snapshot starts here
        db.store.create_run("wf")
        assert _runs(db) == 1


def test_a_failed_read_runs_again_alone_and_the_block_reads_on(db: st.Database) -> None:
    db.store.create_run("wf")

    def broken(conn: sa.Connection) -> object:
        return conn.exec_driver_sql("SELECT * FROM tt_no_such_table").all()

    with pytest.raises(StoreError) as outside:
        db.engine.transaction(broken, write=False)
    with begins(db) as shared, db.engine.reading():
        assert _runs(db) == 1
        with pytest.raises(StoreError) as inside:
            db.engine.transaction(broken, write=False)
        # PostgreSQL aborts a transaction at its first error: the reads after it must not
        # land in that one
        assert _runs(db) == 1
    assert type(inside.value) is type(outside.value)
    assert "tt_no_such_table" in str(inside.value)
    assert shared[0] == 3  # the shared one, the failed read alone, the read after it alone


def test_other_threads_read_in_transactions_of_their_own(db: st.Database) -> None:
    got: list[int] = []
    with db.engine.reading():
        assert _runs(db) == 0
        db.store.create_run("wf")  # ends the shared transaction; the next read starts one
        assert _runs(db) == 1
        thread = threading.Thread(target=lambda: got.append(_runs(db)))
        with begins(db) as other:
            thread.start()
            thread.join()
    assert got == [1]
    assert other[0] == 1
