"""A live lineage over a SQLite store drops the POSIX locks of the store's own connections.

DuckDB's ``sqlite_scanner`` carries its own SQLite. When its connection to the store closes
(after every bind and every query) it unlocks the whole database file (``F_UNLCK`` of offset 0,
length 0) and closes its descriptors of the file and of ``-shm``; POSIX record locks belong to
the (process, file) pair, so that removes the locks every connection of the store's
:class:`~smithers_tt.Database` in this process holds: the shared lock on the database file that
says "this store is in use", a read transaction's read mark, the WAL write lock. Python's SQLite
still believes it holds them, and other processes no longer see them:

* a worker process closing its last connection believes it is the store's last user: it
  checkpoints, deletes the WAL and unlinks ``-shm``; this process goes on with the old WAL
  index while the next worker makes a new one, and what each commits is invisible to, and
  overwritten by, the other;
* another process takes the WAL write lock while this process's write transaction holds it,
  and one of the two commits is lost;
* another process checkpoints the WAL over pages a read transaction of this process still
  reads ("database disk image is malformed").

The lineage marks the store in use with a lock no close in this process drops
(:func:`smithers_tt.lineage._walindex.pin_store`), and holds the store's gate alone while it
asks (:mod:`smithers_tt.store.backend._gate`): no transaction of this process is open while
DuckDB's SQLite may close the file, and none begins.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

import smithers_tt as st
from smithers_tt.demo import demo_workflow

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"),
    reason="the lineage marks the store in use with open-file-description locks: Linux only",
)

_WORKER = textwrap.dedent(
    """
    import sys
    import smithers_tt as st
    from smithers_tt.demo import demo_workflow

    db = st.connect(sys.argv[1])
    db.run(demo_workflow()[0], {"topic": sys.argv[2]})
    print("ran", flush=True)
    if sys.argv[3] == "stay":  # a long-lived worker: keeps its connections until told
        sys.stdin.read()
    db.close()
    """
)


def _worker(url: str, topic: str, stay: bool) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", _WORKER, url, topic, "stay" if stay else "exit"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def test_a_worker_exiting_after_a_lineage_query_loses_no_run(tmp_path: Path) -> None:
    """The notebook: a Database, one lineage question (then closed); a worker runs a workflow
    and exits, another stays up and runs one; the notebook runs one. Every run is kept."""
    url = f"sqlite:///{tmp_path / 'smithers.db'}"
    db = st.connect(url)
    try:
        db.run(demo_workflow()[0], {"topic": "notebook 1"})
        with db.lineage(reader="scanner") as lin:
            assert len(lin.sql("SELECT * FROM runs")) == 1
        first = _worker(url, "worker 1", stay=False)
        assert first.communicate(timeout=120)[0].strip() == "ran"
        second = _worker(url, "worker 2", stay=True)
        try:
            assert second.stdout is not None and second.stdout.readline().strip() == "ran"
            db.run(demo_workflow()[0], {"topic": "notebook 2"})
            seen_live = len(db.store.list_runs(limit=100).items)
        finally:
            second.communicate(timeout=120)
    finally:
        db.close()
    again = st.connect(url)
    try:
        kept = len(again.store.list_runs(limit=100).items)
    finally:
        again.close()
    assert (seen_live, kept) == (4, 4)


def _other_process(script: str, path: Path) -> str:
    """Run ``script`` (SQLite through Python's own sqlite3) in another process; what it
    printed."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout.strip()


def _ask_in_a_thread(lin: st.Lineage) -> tuple[threading.Thread, list[int]]:
    """A lineage question in another thread; the number of runs it answered, once it has."""
    answers: list[int] = []
    ask = threading.Thread(target=lambda: answers.append(len(lin.sql("SELECT * FROM runs"))))
    ask.start()
    return ask, answers


def test_a_write_transaction_keeps_its_lock_through_a_lineage_question(tmp_path: Path) -> None:
    """A write transaction of the Database is open while a lineage question is asked in
    another thread: the question waits for it to end, and meanwhile another process cannot
    write (no commit is lost); both see the answer and the rows they expect."""
    path = tmp_path / "smithers.db"
    db = st.connect(f"sqlite:///{path}")
    try:
        db.run(demo_workflow()[0], {"topic": "one"})
        db.engine.transaction(lambda conn: conn.exec_driver_sql("CREATE TABLE probe (who TEXT)"))
        with db.lineage(reader="scanner") as lin:
            with db.engine.connect(write=True) as conn:  # BEGIN IMMEDIATE: the write lock
                conn.exec_driver_sql("INSERT INTO probe VALUES ('this')")
                ask, answers = _ask_in_a_thread(lin)
                ask.join(timeout=1.0)
                waited = ask.is_alive()
                other = _other_process(
                    """
                    import sqlite3, sys
                    c = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=0.5)
                    try:
                        c.execute("BEGIN IMMEDIATE")
                        c.execute("INSERT INTO probe VALUES ('other')")
                        c.execute("COMMIT")
                        print("committed")
                    except sqlite3.OperationalError as error:
                        print(error)
                    """,
                    path,
                )
            ask.join(timeout=60)
        rows = db.engine.transaction(
            lambda conn: conn.exec_driver_sql("SELECT who FROM probe ORDER BY who").all(),
            write=False,
        )
    finally:
        db.close()
    assert (waited, answers, other) == (True, [1], "database is locked")
    assert [who for (who,) in rows] == ["this"]


def test_a_read_transaction_keeps_its_snapshot_through_a_lineage_question(
    tmp_path: Path,
) -> None:
    """A read transaction of the Database is open while a lineage question is asked in
    another thread: another process that writes and then checkpoints the WAL cannot move
    pages out from under the reader (its checkpoint reports the reader busy), and the
    reader's next read sees the snapshot it began with."""
    path = tmp_path / "smithers.db"
    db = st.connect(f"sqlite:///{path}")
    try:
        db.run(demo_workflow()[0], {"topic": "one"})
        db.engine.transaction(
            lambda conn: conn.exec_driver_sql(
                "CREATE TABLE probe AS WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL "
                "SELECT n + 1 FROM s WHERE n < 2000) SELECT n, hex(randomblob(100)) AS pad FROM s"
            )
        )
        read = "SELECT count(*), sum(n), sum(length(pad)) FROM probe"
        with db.lineage(reader="scanner") as lin:
            with db.engine.connect(write=False) as conn:  # BEGIN; the first read takes a mark
                before = conn.exec_driver_sql(read).one()
                ask, answers = _ask_in_a_thread(lin)
                ask.join(timeout=1.0)
                waited = ask.is_alive()
                busy = _other_process(
                    """
                    import sqlite3, sys
                    c = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=5)
                    c.execute("UPDATE probe SET n = n + 1000000, pad = hex(randomblob(100))")
                    print(c.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0])
                    """,
                    path,
                )
                after = conn.exec_driver_sql(read).one()
            ask.join(timeout=60)
    finally:
        db.close()
    assert (waited, answers, busy) == (True, [1], "1")
    assert after == before


def test_the_in_use_mark_of_a_deleted_store_is_let_go(tmp_path: Path) -> None:
    """The mark lasts as long as the process, but not past its store: a store deleted (a
    notebook's scratch store, a test's) keeps no descriptor open here once another lineage
    opens."""

    def held(path: Path) -> bool:
        targets = []
        for fd in os.listdir("/proc/self/fd"):
            with contextlib.suppress(OSError):  # the listing's own descriptor, closed since
                targets.append(os.readlink(f"/proc/self/fd/{fd}"))
        return any(target.startswith(str(path)) for target in targets)

    first = tmp_path / "first.db"
    for path in (first, tmp_path / "second.db"):
        db = st.connect(f"sqlite:///{path}")
        with db.lineage(reader="scanner") as lin:
            assert len(lin.sql("SELECT * FROM runs")) == 0
        db.close()
        assert held(path)  # marked in use for this process's life
        if path == first:
            for leftover in tmp_path.glob("first.db*"):
                leftover.unlink()
    assert not held(first)
