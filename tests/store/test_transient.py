"""Transient failures are retried inside the store; the rest surface as typed errors.

The failures are real: a write lock held by another connection (SQLite's database lock, a
PostgreSQL row lock with a short ``lock_timeout``) and backend connections terminated by the
server.
"""

from __future__ import annotations

import dataclasses
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from urllib.parse import quote

import pytest
import sqlalchemy as sa

import smithers_tt as st
from smithers_tt.errors import CheckpointMissing, SmithersError, StoreError, TransientStoreError
from smithers_tt.store import AttemptKey, CheckpointRef, Fence, RetryPolicy

from ._support import checkpoint, refs_of


def impatient_url(url: str) -> str:
    """The same database, with PostgreSQL giving up on a lock after 20 ms."""
    if not url.startswith("postgresql"):
        return url
    parsed = sa.make_url(url)
    options = f"{parsed.query.get('options', '')} -clock_timeout=20".strip()
    base = parsed.set(query={k: v for k, v in parsed.query.items() if k != "options"})
    rendered = base.render_as_string(hide_password=False)
    return f"{rendered}{'&' if '?' in rendered else '?'}options={quote(options)}"


@dataclasses.dataclass
class Impatient:
    """A database that waits at most 20 ms for a lock before the store retries."""

    db: st.Database
    fence: Fence
    key: AttemptKey


def open_impatient(db_url: str, retry: RetryPolicy | None = None) -> Impatient:
    db = st.connect(impatient_url(db_url), busy_timeout_ms=20, retry=retry)
    _, fence = db.store.create_run("wf")
    return Impatient(db, fence, db.store.start_attempt(fence, "node").key)


@pytest.fixture
def patient_budget(db_url: str) -> Iterator[Impatient]:
    """Default retry policy: about 5 s of backoff in total."""
    opened = open_impatient(db_url)
    yield opened
    opened.db.close()


@pytest.fixture
def short_budget(db_url: str) -> Iterator[Impatient]:
    """Three tries, 10 ms apart: a lock held for a second outlasts them."""
    opened = open_impatient(db_url, RetryPolicy(attempts=3, base_delay=0.01))
    yield opened
    opened.db.close()


class WriteLock:
    """Another connection holding the lock a publish needs: SQLite's write lock
    (``BEGIN IMMEDIATE``), or on PostgreSQL the run's row (``SELECT ... FOR UPDATE``)."""

    def __init__(self, db: st.Database, run_id: str) -> None:
        self.db, self.run_id = db, run_id
        self._release: Callable[[], None] | None = None

    def hold(self) -> None:
        if self.db.engine.is_sqlite:
            raw = sqlite3.connect(
                self.db.engine.sa.url.database, isolation_level=None, check_same_thread=False
            )
            raw.execute("BEGIN IMMEDIATE")

            def release() -> None:
                raw.execute("ROLLBACK")
                raw.close()

        else:
            engine = sa.create_engine(self.db.url)
            conn = engine.connect()
            conn.execute(
                sa.text("SELECT run_id FROM tt_runs WHERE run_id = :r FOR UPDATE"),
                {"r": self.run_id},
            )

            def release() -> None:
                conn.rollback()
                conn.close()
                engine.dispose()

        self._release = release

    def release(self) -> None:
        if self._release is not None:
            release, self._release = self._release, None
            release()


@pytest.fixture
def lock_for() -> Iterator[Callable[[Impatient], WriteLock]]:
    made: list[WriteLock] = []

    def make(target: Impatient) -> WriteLock:
        made.append(WriteLock(target.db, target.fence.run_id))
        return made[-1]

    yield make
    for lock in made:
        lock.release()


def test_publish_succeeds_when_a_write_lock_is_released_within_the_retry_budget(
    patient_budget: Impatient, lock_for
) -> None:
    target = patient_budget
    lock = lock_for(target)
    lock.hold()
    threading.Timer(0.3, lock.release).start()
    started = time.monotonic()

    ref = target.db.store.publish(target.fence, target.key, checkpoint("waited"))

    assert time.monotonic() - started >= 0.25  # it did wait for the lock, through retries
    assert ref.sequence == 0
    assert target.db.store.load(ref) == checkpoint("waited")


def test_publish_raises_transient_store_error_when_a_write_lock_outlasts_the_retries(
    short_budget: Impatient, lock_for
) -> None:
    target = short_budget
    lock = lock_for(target)
    lock.hold()

    with pytest.raises(TransientStoreError) as caught:
        target.db.store.publish(target.fence, target.key, checkpoint("blocked"))
    lock.release()

    error = caught.value
    assert isinstance(error, SmithersError)
    assert error.retryable
    assert error.details["tries"] == 3
    assert isinstance(error.__cause__, sa.exc.OperationalError)
    assert "lock" in str(error.__cause__).lower()  # database is locked / lock timeout
    assert target.db.store.publish(target.fence, target.key, checkpoint("later")).sequence == 0


def test_put_ref_raises_store_error_when_the_database_refuses_it(
    db: st.Database, store, fence: Fence, attempt: AttemptKey
) -> None:
    ref = store.publish(fence, attempt, checkpoint(1))
    dangling = dataclasses.replace(ref, attempt=9)  # no such attempt: its foreign key fails
    clock = store.get_run(fence.run_id).clock

    with pytest.raises(StoreError) as caught:
        store.put_ref(dangling)

    assert type(caught.value) is StoreError
    assert not caught.value.retryable
    assert isinstance(caught.value.__cause__, sa.exc.IntegrityError)
    assert refs_of(db, fence.run_id) == [ref]
    assert store.get_run(fence.run_id).clock == clock  # nor its frame


def test_put_ref_of_content_that_is_not_stored_raises_checkpoint_missing(
    db: st.Database, store, fence: Fence, attempt: AttemptKey
) -> None:
    ref = store.publish(fence, attempt, checkpoint(1))
    dangling = dataclasses.replace(ref, sequence=1, content_hash="e" * 64)  # no such content

    with pytest.raises(CheckpointMissing, match="store it before restoring a ref"):
        store.put_ref(dangling)

    assert refs_of(db, fence.run_id) == [ref]


# --- PostgreSQL: connections the server terminates ----------------------------------------


@pytest.fixture
def pg(pg_schema_url: str) -> Iterator[st.Database]:
    database = st.connect(pg_schema_url)
    yield database
    database.close()


@pytest.fixture
def admin(pg_schema_url: str) -> Iterator[sa.Connection]:
    engine = sa.create_engine(pg_schema_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        yield conn
    engine.dispose()


def idle_backend_pids(db: st.Database) -> set[int]:
    """The server pids of every idle connection of the store: those in its pool and the one
    the publication committer holds between commits."""
    conns = [db.engine.sa.connect() for _ in range(db.engine.sa.pool.checkedin())]
    try:
        pids = {c.execute(sa.text("SELECT pg_backend_pid()")).scalar_one() for c in conns}
    finally:
        for c in conns:
            c.close()
    for held in db.engine._held:
        if held._conn is not None:
            pids.add(held._conn.connection.driver_connection.info.backend_pid)
    return pids


def terminate(admin: sa.Connection, pids: set[int]) -> None:
    for pid in pids:
        assert admin.execute(sa.text("SELECT pg_terminate_backend(:p)"), {"p": pid}).scalar()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        alive = admin.execute(
            sa.text("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(:p)"),
            {"p": list(pids)},
        ).scalar_one()
        if not alive:
            return
        time.sleep(0.01)
    raise AssertionError(f"backends {pids} were not terminated")


@pytest.mark.postgres
def test_publish_succeeds_on_a_fresh_connection_when_the_pooled_ones_were_terminated(
    pg: st.Database, admin: sa.Connection
) -> None:
    store = pg.store
    _, fence = store.create_run("wf")
    key = store.start_attempt(fence, "node").key
    first = store.publish(fence, key, checkpoint(1))
    killed = idle_backend_pids(pg)
    assert killed

    terminate(admin, killed)
    second = store.publish(fence, key, checkpoint(2))

    assert second.sequence == first.sequence + 1
    assert store.load(second) == checkpoint(2)
    assert idle_backend_pids(pg).isdisjoint(killed)


@pytest.mark.postgres
def test_publish_is_retried_whole_when_its_connection_is_terminated_mid_transaction(
    pg: st.Database, admin: sa.Connection, pg_schema_url: str
) -> None:
    store = pg.store
    _, fence = store.create_run("wf")
    key = store.start_attempt(fence, "node").key
    locker = sa.create_engine(pg_schema_url)
    holder = locker.connect()
    holder_pid = holder.execute(sa.text("SELECT pg_backend_pid()")).scalar_one()
    holder.execute(
        sa.text("SELECT 1 FROM tt_runs WHERE run_id = :r FOR UPDATE"), {"r": fence.run_id}
    )
    outcome: list[CheckpointRef | BaseException] = []

    def publish() -> None:
        try:
            outcome.append(store.publish(fence, key, checkpoint("survivor")))
        except BaseException as error:  # reported by the assertion below
            outcome.append(error)

    publisher = threading.Thread(target=publish)
    publisher.start()
    try:
        blocked: set[int] = set()
        deadline = time.monotonic() + 10
        while not blocked and time.monotonic() < deadline:
            blocked = set(
                admin.execute(
                    sa.text(
                        "SELECT pid FROM pg_stat_activity WHERE :h = ANY(pg_blocking_pids(pid))"
                    ),
                    {"h": holder_pid},
                ).scalars()
            )
            time.sleep(0.01)
        assert len(blocked) == 1, "the publish never waited on the held row lock"
        terminate(admin, blocked)
    finally:
        holder.rollback()
        holder.close()
        locker.dispose()
        publisher.join(timeout=30)

    assert len(outcome) == 1 and isinstance(outcome[0], CheckpointRef), outcome
    ref = outcome[0]
    assert ref.sequence == 0
    assert refs_of(pg, fence.run_id) == [ref]
    assert [f.kind for f in store.frames(fence.run_id)].count("checkpoint") == 1
