"""The gate of an SQLite store in one process (``smithers_tt.store.backend._gate``): every
transaction of the store's engines holds it shared, a lineage question holds it alone.

What a user relies on: while the gate is held alone no transaction of the process is open on
that file (the scanner's closes would drop their locks), and none begins; a question waits for
the transactions open, gives up with a clear error when one stays open, never waits for its own
thread; busy writers cannot keep a question out; a thread holding a transaction may begin
more; every engine of the file (other names of it included) shares one gate.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

import smithers_tt as st
from smithers_tt.errors import InvalidArgument, TransientStoreError
from smithers_tt.store.backend import Gate, RetryPolicy, _gate, gate_of


def _store(tmp_path: Path, name: str = "gate.db") -> st.Database:
    db = st.connect(f"sqlite:///{tmp_path / name}")
    db.engine.transaction(lambda conn: conn.exec_driver_sql("CREATE TABLE probe (n INTEGER)"))
    return db


@pytest.fixture
def store(tmp_path: Path) -> Iterator[tuple[st.Database, Gate]]:
    """A store with a table ``probe``, and its gate."""
    db = _store(tmp_path)
    try:
        gate = gate_of(tmp_path / "gate.db")
        assert gate is not None
        yield db, gate
    finally:
        db.close()


def _insert(db: st.Database, n: int) -> None:
    db.engine.transaction(
        lambda conn: conn.execute(sa.text("INSERT INTO probe VALUES (:n)"), {"n": n})
    )


def _count(db: st.Database) -> int:
    return db.engine.transaction(
        lambda conn: conn.exec_driver_sql("SELECT count(*) FROM probe").scalar_one(), write=False
    )


def _ask(gate: Gate) -> str:
    with gate.alone(timeout=30):
        return "asked"


def _in_thread(work: Callable[[], object]) -> tuple[threading.Thread, list[object]]:
    done: list[object] = []
    thread = threading.Thread(target=lambda: done.append(work()), daemon=True)
    thread.start()
    return thread, done


def test_no_transaction_begins_while_the_gate_is_held_alone(
    store: tuple[st.Database, Gate],
) -> None:
    db, gate = store
    with gate.alone(timeout=5):
        writer, written = _in_thread(lambda: _insert(db, 1))
        reader, read = _in_thread(lambda: _count(db))
        writer.join(timeout=0.5)
        reader.join(timeout=0.5)
        held = (writer.is_alive(), reader.is_alive(), _count(db))  # its own thread may read
    writer.join(timeout=30)
    reader.join(timeout=30)
    assert held == (True, True, 0)
    assert (written, len(read), _count(db)) == ([None], 1, 1)


def test_a_question_waits_for_open_transactions_and_gives_up_with_a_clear_error(
    store: tuple[st.Database, Gate],
) -> None:
    db, gate = store
    opened, close = threading.Event(), threading.Event()

    def long_write() -> None:
        with db.engine.connect(write=True) as conn:
            conn.exec_driver_sql("INSERT INTO probe VALUES (1)")
            opened.set()
            close.wait(30)

    writer, _ = _in_thread(long_write)
    assert opened.wait(30)
    started = time.monotonic()
    with (
        pytest.raises(TransientStoreError, match=r"kept the store busy for 0\.3 s"),
        gate.alone(timeout=0.3),
    ):
        pass
    assert time.monotonic() - started >= 0.3
    asker, asked = _in_thread(lambda: _ask(gate))
    asker.join(timeout=0.3)
    waiting = asker.is_alive()
    close.set()
    writer.join(timeout=30)
    asker.join(timeout=30)
    assert (waiting, asked) == (True, ["asked"])


def test_a_question_from_a_thread_inside_a_transaction_is_refused(
    store: tuple[st.Database, Gate],
) -> None:
    db, gate = store
    with db.engine.connect(write=False) as conn:
        conn.exec_driver_sql("SELECT count(*) FROM probe").one()
        with (
            pytest.raises(InvalidArgument, match="end it before asking the lineage"),
            gate.alone(timeout=30),
        ):
            pass
    with db.engine.reading():
        _count(db)  # the block's shared read transaction stays open
        with pytest.raises(InvalidArgument), gate.alone(timeout=30):
            pass
    with gate.alone(timeout=1):  # nothing left open once they ended
        pass


def test_busy_writers_cannot_keep_a_question_out(store: tuple[st.Database, Gate]) -> None:
    """Four threads write back to back (their transactions overlap, so the gate is never free
    on its own); a question still gets its turn, and the writers go on after it."""
    db, gate = store
    try:
        stop = threading.Event()

        def keep_writing() -> int:
            wrote = 0
            while not stop.is_set():
                _insert(db, wrote)
                wrote += 1
            return wrote

        writers = [_in_thread(keep_writing) for _ in range(4)]
        time.sleep(0.2)
        with gate.alone(timeout=20):
            inside = _count(db)
            time.sleep(0.2)
            assert _count(db) == inside  # nobody wrote while it was held
        time.sleep(0.2)
        stop.set()
        for thread, _ in writers:
            thread.join(timeout=30)
        assert _count(db) > inside
        assert sum(done[0] for _, done in writers) == _count(db)  # type: ignore[misc]
    finally:
        stop.set()


def test_a_thread_holding_a_transaction_may_begin_more_while_a_question_waits(
    store: tuple[st.Database, Gate], monkeypatch: pytest.MonkeyPatch
) -> None:
    db, gate = store
    monkeypatch.setattr(_gate, "_GIVE_WAY_S", 60.0)  # held back, it would wait a minute
    with db.engine.connect(write=False) as conn:
        conn.exec_driver_sql("SELECT count(*) FROM probe").one()
        asker, asked = _in_thread(lambda: _ask(gate))
        time.sleep(0.2)  # the question now waits for this transaction
        started = time.monotonic()
        inner = _count(db)  # a second transaction of the same thread: not held back
        took = time.monotonic() - started
        waiting = asker.is_alive()
    asker.join(timeout=30)
    assert (inner, waiting, asked) == (0, True, ["asked"])
    assert took < 30  # it did not wait out the question's turn


def test_every_engine_of_the_file_shares_one_gate(tmp_path: Path) -> None:
    first = _store(tmp_path)
    (tmp_path / "other name.db").symlink_to(tmp_path / "gate.db")
    second = st.connect(f"sqlite:///{tmp_path / 'other name.db'}")
    try:
        gate = gate_of(tmp_path / "gate.db")
        assert gate is not None and gate is gate_of(tmp_path / "other name.db")
        with gate.alone(timeout=5):
            writer, _ = _in_thread(lambda: _insert(second, 7))
            writer.join(timeout=0.5)
            held = writer.is_alive()
        writer.join(timeout=30)
        assert (held, _count(first)) == (True, 1)
    finally:
        second.close()
        first.close()


def test_a_begin_that_fails_leaves_nothing_held(tmp_path: Path) -> None:
    """A write that cannot begin (another process's writer holds the lock past the busy
    timeout) leaves no share behind: a question afterwards does not wait for it."""
    path = tmp_path / "gate.db"
    db = _store(tmp_path)
    quick = st.connect(
        f"sqlite:///{path}", busy_timeout_ms=50, retry=RetryPolicy(attempts=2, base_delay=0.01)
    )
    try:
        gate = gate_of(path)
        assert gate is not None
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(TransientStoreError):
                _insert(quick, 1)
        finally:
            other.execute("ROLLBACK")
            other.close()
        with gate.alone(timeout=1):
            pass
    finally:
        quick.close()
        db.close()
