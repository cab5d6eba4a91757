"""Fenced, group-committed checkpoint publication.

A batch of units (one unit per publish) commits in one transaction:

1. advance each run's clock by its number of units (one ``UPDATE ... RETURNING`` that locks
   the run row) and check every unit's fence: run ``running``, owner epoch matches; a
   takeover, cancel or finish updates the same row, so it either waits for this transaction
   or this one sees its result, never both. Each unit's frame number is one tick of the clock,
   in queue order;
2. allocate the next sequence of each unit's attempt with one ``UPDATE ... RETURNING`` that
   also requires the attempt to be ``in_progress`` under the same epoch (this is what makes
   sequences dense and unique under any number of writers);
3. insert the content unless present (``INSERT ... ON CONFLICT DO NOTHING``); when it was
   there, compare the stored bytes with the new ones inside the database (a mismatch is
   corruption); on PostgreSQL that comparison locks the row ``FOR KEY SHARE``, so a
   concurrent garbage collection either ran before (and the insert recreates the row) or
   skips it until this publication has committed its reference;
4. insert the immutable refs and the ``checkpoint`` frames that pin their content, one
   ``executemany`` each.

Every statement is prebuilt driver SQL with bound parameters (see :class:`_Sql`): nothing is
built or compiled per publish.

A unit that fails (fence lost, conflict, corruption) writes nothing, not even content, while
the other units of the batch commit: the batch is first applied together without savepoints;
if any unit fails, that transaction is rolled back and the batch is applied again one unit
per savepoint.

**Group commit.** Publishers of one process queue their units; whoever holds the commit lock
takes everything queued and commits it in one transaction (one fsync), then the next waiting
thread does the same with what queued meanwhile. Each caller returns only after the commit
that contains its unit. Commits go through one connection held by the committer (no pool
checkout or pre-ping per commit); a connection that fails is dropped and replaced.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy import exc
from sqlalchemy.engine import Connection

from smithers_tt.checkpoint import EncodedCheckpoint
from smithers_tt.errors import (
    AttemptNotFound,
    CheckpointCorrupt,
    CheckpointTooLarge,
    FenceLost,
    InvalidArgument,
    RefConflict,
    RunNotFound,
    SmithersError,
    StoreError,
    TransientStoreError,
)
from smithers_tt.store import _schema as S
from smithers_tt.store._engine import Engine, _short, is_transient, token_steps, wrap_driver_error
from smithers_tt.store._frames import Frame, checkpoint_frame, frame_row
from smithers_tt.store._records import AttemptKey, CheckpointRef, Fence, now_ms


@dataclass(eq=False)
class PublishUnit:
    """One checkpoint to publish into one attempt, and (after commit) its outcome."""

    fence: Fence
    key: AttemptKey
    encoded: EncodedCheckpoint
    purpose: str
    agent_id: str | None
    result: CheckpointRef | None = None
    frame: Frame | None = None
    error: BaseException | None = None
    done: bool = False
    """Set (before ``wake``) once the commit that contained this unit has ended."""
    lead: bool = False
    """Set (before ``wake``) when this unit's caller must run the next commit."""
    wake: threading.Event = field(default_factory=threading.Event)


_REF_COLUMNS = (
    "run_id",
    "node_id",
    "iteration",
    "attempt",
    "sequence",
    "content_hash",
    "codec",
    "version",
    "agent_id",
    "purpose",
    "created_at_ms",
)
_FRAME_COLUMNS = (
    "run_id",
    "frame_no",
    "kind",
    "node_id",
    "iteration",
    "attempt",
    "sequence",
    "state",
    "content_hash",
    "codec",
    "version",
    "purpose",
    "agent_id",
    "data_json",
    "created_at_ms",
)
# The statements below name these columns literally; the schema is defined once, in _schema.
if tuple(S.refs.c.keys()) != _REF_COLUMNS or tuple(S.frames.c.keys()) != _FRAME_COLUMNS:
    raise RuntimeError("smithers_tt.store._publish is out of step with _schema; fix the SQL")


class _Sql:
    """The hot path's statements, written once as driver SQL with bound parameters.

    They skip SQLAlchemy's expression building and compilation (which cost about 3 ms of
    Python per publish) and go to the driver as they are (see :class:`Driver`): ``?``
    placeholders for sqlite3, ``%s`` for psycopg. Every value is a bound parameter.
    """

    def __init__(self, dialect: str) -> None:
        pg = dialect == "postgresql"

        def q(sql: str) -> str:
            return sql.replace("?", "%s") if pg else sql

        self.advance_run = q(
            "UPDATE tt_runs SET clock = clock + ?, updated_at_ms = ? WHERE run_id = ? "
            "RETURNING status, owner_epoch, clock, max_checkpoint_bytes"
        )
        self.next_sequence = q(
            "UPDATE tt_attempts SET next_sequence = next_sequence + 1 "
            "WHERE run_id = ? AND node_id = ? AND iteration = ? AND attempt = ? "
            "AND state = 'in_progress' AND owner_epoch = ? "
            "RETURNING next_sequence"
        )
        self.attempt_state = q(
            "SELECT state, owner_epoch FROM tt_attempts "
            "WHERE run_id = ? AND node_id = ? AND iteration = ? AND attempt = ?"
        )
        self.insert_content = q(
            "INSERT INTO tt_checkpoint_contents (content_hash, data, size_bytes, created_at_ms) "
            "VALUES (?, ?, ?, ?) ON CONFLICT (content_hash) DO NOTHING"
        )
        # On PostgreSQL the existing row is locked against garbage collection (which locks
        # FOR UPDATE SKIP LOCKED) until the transaction that references it commits; SQLite
        # writers are serialised by BEGIN IMMEDIATE and need no row lock.
        if pg:
            self.check_content = q(
                "SELECT size_bytes, data = ? FROM tt_checkpoint_contents "
                "WHERE content_hash = ? FOR KEY SHARE"
            )
        else:
            self.check_content = q(
                "SELECT size_bytes, data = ? FROM tt_checkpoint_contents WHERE content_hash = ?"
            )
        self.insert_ref = q(
            "INSERT INTO tt_checkpoint_refs (run_id, node_id, iteration, attempt, sequence, "
            "content_hash, codec, version, agent_id, purpose, created_at_ms) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        )
        self.insert_frame = q(
            "INSERT INTO tt_frames (run_id, frame_no, kind, node_id, iteration, attempt, "
            "sequence, state, content_hash, codec, version, purpose, agent_id, data_json, "
            "created_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        )
        # The engine's per-task statements (Store.start_attempt, finish_attempt, set_node).
        self.next_attempt = q(
            "SELECT COALESCE(MAX(attempt), 0) + 1 FROM tt_attempts "
            "WHERE run_id = ? AND node_id = ? AND iteration = ?"
        )
        self.insert_attempt = q(
            "INSERT INTO tt_attempts (run_id, node_id, iteration, attempt, state, owner_epoch, "
            "next_sequence, discard_resume, error, error_code, resumed_run_id, resumed_node_id, "
            "resumed_iteration, resumed_attempt, resumed_sequence, started_at_ms, finished_at_ms) "
            "VALUES (?, ?, ?, ?, 'in_progress', ?, 0, ?, NULL, NULL, ?, ?, ?, ?, ?, ?, NULL)"
        )
        self.end_attempt = q(
            "UPDATE tt_attempts SET state = ?, error = ?, error_code = ?, discard_resume = ?, "
            "finished_at_ms = ? WHERE run_id = ? AND node_id = ? AND iteration = ? "
            "AND attempt = ? AND state = 'in_progress' AND owner_epoch = ?"
        )
        self.put_node = q(
            "INSERT INTO tt_nodes (run_id, node_id, iteration, state, last_attempt, output_json, "
            "updated_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (run_id, node_id, iteration) DO UPDATE SET state = excluded.state, "
            "last_attempt = excluded.last_attempt, output_json = excluded.output_json, "
            "updated_at_ms = excluded.updated_at_ms"
        )


_STATEMENTS: dict[str, _Sql] = {}


class Driver:
    """Runs the prebuilt statements on the DBAPI cursor of a SQLAlchemy connection, inside
    the transaction that connection has begun (SQLAlchemy still begins, commits, rolls back
    and makes savepoints).

    Going around ``Connection.exec_driver_sql`` saves its result-object set-up and event
    dispatch (about 30 us a statement, half of what is left of a publish on SQLite). Driver
    errors are translated the way SQLAlchemy translates them: wrapped in the matching
    :class:`sqlalchemy.exc.DBAPIError`, with ``connection_invalidated`` set (and the
    connection invalidated) when the dialect says the connection is gone, so
    :func:`~smithers_tt.store._engine.is_transient` and the retries see exactly what they see
    for any other statement.
    """

    __slots__ = ("_conn", "_cursor", "_error", "pipelines", "sql")

    def __init__(self, conn: Connection) -> None:
        name = conn.dialect.name
        sql = _STATEMENTS.get(name)
        if sql is None:
            sql = _STATEMENTS[name] = _Sql(name)
        self.sql = sql
        self._conn = conn
        self._cursor = conn.connection.cursor()
        self._error: type[Exception] = conn.dialect.loaded_dbapi.Error
        self.pipelines = name == "postgresql"
        """Whether :meth:`together` sends its statements in one round trip."""

    def close(self) -> None:
        """Close the cursor (so no statement of it stays open until the commit)."""
        with suppress(Exception):  # never hide the error that ended the transaction
            self._cursor.close()

    def one(self, statement: str, params: tuple[Any, ...]) -> tuple[Any, ...] | None:
        """Execute and return the first row (``None`` if there is none)."""
        try:
            self._cursor.execute(statement, params)
            return self._cursor.fetchone()
        except self._error as error:
            raise self._wrap(error, statement, params) from error

    def count(self, statement: str, params: tuple[Any, ...]) -> int:
        """Execute and return the number of rows it changed."""
        try:
            self._cursor.execute(statement, params)
            return self._cursor.rowcount
        except self._error as error:
            raise self._wrap(error, statement, params) from error

    def many(self, statement: str, rows: list[tuple[Any, ...]]) -> None:
        """Execute once per row of parameters (one call: the driver batches them)."""
        try:
            if len(rows) == 1:
                self._cursor.execute(statement, rows[0])
            else:
                self._cursor.executemany(statement, rows)
        except self._error as error:
            raise self._wrap(error, statement, rows) from error

    def together(self, steps: list[tuple[str, Any, bool]]) -> list[tuple[Any, ...] | None]:
        """Execute ``(statement, params, many)`` steps in order; return each one's first row.

        On PostgreSQL they go in one round trip (psycopg's pipeline mode: the server runs them
        in order, and a failure aborts the rest and surfaces here); SQLite runs them one by
        one. Use it only for statements that do not depend on each other's results.
        """
        if not self.pipelines:
            out = []
            for statement, params, many in steps:
                if many:
                    self.many(statement, params)
                    out.append(None)
                else:
                    out.append(self.one(statement, params))
            return out
        raw = self._conn.connection.dbapi_connection
        cursors = []
        statement, params = "", None
        token = token_steps(self._conn)  # the transaction's commit token rides along
        try:
            with raw.pipeline():
                for statement, params, many in steps:
                    cur = raw.cursor()
                    cursors.append(cur)
                    if many:
                        cur.executemany(statement, params)
                    else:
                        cur.execute(statement, params)
                for statement, params in token:
                    self._cursor.execute(statement, params)
            return [
                None if many or cur.description is None else cur.fetchone()
                for cur, (_, _, many) in zip(cursors, steps, strict=True)
            ]
        except self._error as error:
            raise self._wrap(error, statement, params) from error
        finally:
            for cur in cursors:
                cur.close()

    def _wrap(self, error: Exception, statement: str, params: Any) -> BaseException:
        return wrap_driver_error(self._conn, error, statement, params, self._cursor)


@contextmanager
def driver(conn: Connection) -> Iterator[Driver]:
    """The prebuilt statements on ``conn``, inside the transaction it has begun."""
    db = Driver(conn)
    try:
        yield db
    finally:
        db.close()


def _fence_lost(run_id: str, status: str, epoch: int, fence: Fence) -> FenceLost:
    return FenceLost(
        f"run {run_id} is {status} under epoch {epoch}; epoch "
        f"{fence.epoch} lost ownership and wrote nothing",
        run_id=run_id,
        epoch=fence.epoch,
    )


def fenced_clock(db: Driver, fence: Fence, ticks: int, stamp: int) -> int:
    """Advance the fenced run's clock by ``ticks`` (locking its row); return the first of the
    frame numbers they allocate. Raises FenceLost unless ``fence`` owns the running run."""
    row = db.one(db.sql.advance_run, (ticks, stamp, fence.run_id))
    if row is None:
        raise RunNotFound(f"no run {fence.run_id!r}; list runs with `smithers-tt runs`")
    status, epoch, clock, _ = row
    if status != "running" or epoch != fence.epoch:
        raise _fence_lost(fence.run_id, status, epoch, fence)
    return clock - ticks + 1


def insert_frames(db: Driver, frames: list[Frame]) -> None:
    """Insert frames whose numbers the caller allocated, in one statement."""
    db.many(db.sql.insert_frame, [_frame_values(f) for f in frames])


def _frame_values(frame: Frame) -> tuple[Any, ...]:
    row = frame_row(frame)
    return tuple(row[c] for c in _FRAME_COLUMNS)


def insert_content(conn: Connection, encoded: EncodedCheckpoint, created_at_ms: int) -> None:
    """Store content under its hash unless present; raise if present with other bytes.

    Insert first (``ON CONFLICT DO NOTHING``: new content costs one statement and writes no
    row version when it exists). When the row was already there it is compared inside the
    database and, on PostgreSQL, held ``FOR KEY SHARE`` until the transaction ends, so garbage
    collection (which locks ``FOR UPDATE SKIP LOCKED``) cannot remove it before the caller's
    reference commits. If a collection deletes the row between the insert and the read, the
    loop inserts it again.
    """
    with driver(conn) as db:
        _insert_content(db, encoded, created_at_ms)


def _insert_content(db: Driver, encoded: EncodedCheckpoint, created_at_ms: int) -> None:
    sql = db.sql
    digest, data = encoded.content_hash, encoded.data
    for _ in range(5):  # each turn loses only to a concurrent insert or delete of this row
        if db.count(sql.insert_content, (digest, data, len(data), created_at_ms)) == 1:
            return
        same = db.one(sql.check_content, (data, digest))
        if same is not None:
            if same[0] != len(data) or not same[1]:
                raise CheckpointCorrupt(
                    f"stored content {digest[:12]} differs from the bytes that "
                    "hash to it; run verify() and restore the database from a backup",
                    content_hash=digest,
                )
            return
    raise TransientStoreError(
        f"content {digest[:12]} kept appearing and disappearing under a "
        "concurrent collection; retry",
        content_hash=digest,
    )


Published = tuple[CheckpointRef, Frame]


def _publish_all(conn: Connection, units: list[PublishUnit]) -> list[Published]:
    """Publish ``units`` in order inside the caller's transaction; raise on the first failure.

    Each run's clock advances once for all its units (one ``UPDATE ... RETURNING`` that also
    locks the run row and reads the owner epoch for the fence check); runs are locked in
    sorted order so two batches never deadlock on them. Sequences are allocated per unit in
    queue order; content is inserted once per distinct hash; refs and frames are inserted
    with one ``executemany`` each. A failure leaves the transaction to be rolled back: the
    caller then knows nothing of the batch was written.
    """
    with driver(conn) as db:
        return _apply(db, units)


def _apply(db: Driver, units: list[PublishUnit]) -> list[Published]:
    sql = db.sql
    stamp = now_ms()
    by_run: dict[str, list[int]] = {}
    for i, unit in enumerate(units):
        by_run.setdefault(unit.key.run_id, []).append(i)
    runs = sorted(by_run)
    # The runs' clocks and the attempts' sequences do not depend on each other: on PostgreSQL
    # they go in one round trip. Runs first, in sorted order, then attempts (the lock order
    # of every other writer). If a fence fails, the caller rolls all of it back.
    steps: list[tuple[str, Any, bool]] = [
        (sql.advance_run, (len(by_run[run_id]), stamp, run_id), False) for run_id in runs
    ]
    steps += [
        (
            sql.next_sequence,
            (u.key.run_id, u.key.node_id, u.key.iteration, u.key.attempt, u.fence.epoch),
            False,
        )
        for u in units
    ]
    rows = db.together(steps)
    frame_nos = [0] * len(units)
    for run_id, row in zip(runs, rows, strict=False):
        members = by_run[run_id]
        if row is None:
            raise RunNotFound(f"no run {run_id!r}; list runs with `smithers-tt runs`")
        status, epoch, clock, max_bytes = row
        first = clock - len(members) + 1
        for offset, i in enumerate(members):
            unit = units[i]
            if status != "running" or epoch != unit.fence.epoch:
                raise _fence_lost(run_id, status, epoch, unit.fence)
            if max_bytes is not None and unit.encoded.size > max_bytes:
                raise CheckpointTooLarge(
                    f"checkpoint is {unit.encoded.size} bytes, above run {run_id}'s limit of "
                    f"{max_bytes} bytes",
                    size=unit.encoded.size,
                    limit=max_bytes,
                )
            frame_nos[i] = first + offset
    sequences = []
    for unit, row in zip(units, rows[len(runs) :], strict=True):
        if row is None:
            key = unit.key
            where = (key.run_id, key.node_id, key.iteration, key.attempt)
            state = db.one(sql.attempt_state, where)
            if state is None:
                raise AttemptNotFound(f"attempt {key} does not exist; start it before publishing")
            raise FenceLost(
                f"attempt {key.node_id}#{key.attempt} is {state[0]} under epoch "
                f"{state[1]}; epoch {unit.fence.epoch} can no longer publish into it; "
                "nothing was written",
                run_id=key.run_id,
            )
        sequences.append(row[0] - 1)
    stored: set[str] = set()
    for unit in units:
        if unit.encoded.content_hash not in stored:
            _insert_content(db, unit.encoded, stamp)
            stored.add(unit.encoded.content_hash)
    done: list[Published] = []
    ref_rows, frame_rows = [], []
    for unit, sequence, frame_no in zip(units, sequences, frame_nos, strict=True):
        key, enc = unit.key, unit.encoded
        ref = CheckpointRef(
            key.run_id,
            key.node_id,
            key.iteration,
            key.attempt,
            sequence,
            enc.content_hash,
            enc.codec,
            enc.version,
            unit.purpose,
            unit.agent_id,
            stamp,
        )
        frame = checkpoint_frame(ref, key.run_id, frame_no, {"size": enc.size})
        row = ref_row(ref)
        ref_rows.append(tuple(row[c] for c in _REF_COLUMNS))
        frame_rows.append(_frame_values(frame))
        done.append((ref, frame))
    db.together([(sql.insert_ref, ref_rows, True), (sql.insert_frame, frame_rows, True)])
    return done


def ref_row(ref: CheckpointRef) -> dict[str, Any]:
    """The column values of a ref."""
    return {
        "run_id": ref.run_id,
        "node_id": ref.node_id,
        "iteration": ref.iteration,
        "attempt": ref.attempt,
        "sequence": ref.sequence,
        "content_hash": ref.content_hash,
        "codec": ref.codec,
        "version": ref.version,
        "agent_id": ref.agent_id,
        "purpose": ref.purpose,
        "created_at_ms": ref.created_at_ms,
    }


def check_purpose(purpose: str) -> str:
    """Validate a ref purpose."""
    if purpose not in S.PURPOSES:
        raise InvalidArgument(f"purpose must be one of {list(S.PURPOSES)}, got {purpose!r}")
    return purpose


def put_ref(conn: Connection, ref: CheckpointRef) -> CheckpointRef:
    """Insert a ref with an explicit sequence; identical re-insertion is a no-op.

    Raises:
        RefConflict: the same key already points at other content, codec, version or purpose.
    """
    refs = S.refs
    key_cols = (refs.c.run_id, refs.c.node_id, refs.c.iteration, refs.c.attempt, refs.c.sequence)
    key_vals = (ref.run_id, ref.node_id, ref.iteration, ref.attempt, ref.sequence)
    where = sa.and_(*(c == v for c, v in zip(key_cols, key_vals, strict=True)))
    existing = conn.execute(sa.select(refs).where(where)).one_or_none()
    if existing is None:
        # Keep the attempt's allocator past every stored sequence: a later publish into this
        # attempt must not be handed the sequence of a restored ref (a duplicate key forever).
        att = S.attempts
        conn.execute(
            att.update()
            .where(
                att.c.run_id == ref.run_id,
                att.c.node_id == ref.node_id,
                att.c.iteration == ref.iteration,
                att.c.attempt == ref.attempt,
                att.c.next_sequence <= ref.sequence,
            )
            .values(next_sequence=ref.sequence + 1)
        )
        conn.execute(refs.insert().values(**ref_row(ref)))
        return ref
    same = (existing.content_hash, existing.codec, existing.version, existing.purpose) == (
        ref.content_hash,
        ref.codec,
        ref.version,
        ref.purpose,
    )
    if not same:
        raise RefConflict(
            f"checkpoint ref {ref.node_id}#{ref.attempt}.{ref.sequence} of run {ref.run_id} "
            f"already points at {existing.content_hash[:12]} ({existing.codec} "
            f"v{existing.version}, {existing.purpose}); refs are immutable",
        )
    return ref_from_row(existing)


def ref_from_row(row: Any) -> CheckpointRef:
    """Build a :class:`CheckpointRef` from a row of ``tt_checkpoint_refs``."""
    return CheckpointRef(
        row.run_id,
        row.node_id,
        row.iteration,
        row.attempt,
        row.sequence,
        row.content_hash,
        row.codec,
        row.version,
        row.purpose,
        row.agent_id,
        row.created_at_ms,
    )


class GroupCommitter:
    """Coalesces concurrent publications of one process into shared transactions."""

    def __init__(self, engine: Engine, max_batch: int = 256) -> None:
        self._engine = engine
        self._connection = engine.hold()
        self._max_batch = max_batch
        self._queue: list[PublishUnit] = []
        self._lock = threading.Lock()
        self._committing = False
        self.batches = 0
        """How many transactions publications took (for tests and benchmarks)."""

    def publish(self, unit: PublishUnit) -> CheckpointRef:
        """Queue ``unit``, make sure a commit containing it happens, and return its ref.

        While a commit is running, callers wait, each on its own unit: when the commit ends,
        exactly the callers whose units it contained are woken, plus the caller of the oldest
        unit still queued, which runs the next commit with everything queued meanwhile. (No
        thundering herd: 16 publishers waiting on one condition cost more than the commit.)
        Invariant: the queue is empty whenever nobody is committing.
        """
        with self._lock:
            self._queue.append(unit)
            lead = not self._committing
            self._committing = True
        if not lead:
            try:
                unit.wake.wait()
            except BaseException:  # interrupted while waiting (KeyboardInterrupt)
                with self._lock:
                    if not unit.lead and unit in self._queue:
                        self._queue.remove(unit)  # withdrawn: nobody waits on this caller
                        raise
                if unit.lead:  # the others wait for this caller to commit: do it, then stop
                    self._lead()
                raise
            lead = unit.lead
        if lead:
            self._lead()
        if unit.error is not None:
            raise unit.error
        assert unit.done and unit.result is not None
        return unit.result

    def _lead(self) -> None:
        """Commit the oldest queued units (the caller's among them), then hand over."""
        with self._lock:
            batch = self._queue[: self._max_batch]
            del self._queue[: self._max_batch]
        try:
            self._commit(batch)
        finally:
            with self._lock:
                if self._queue:
                    successor = self._queue[0]
                    successor.lead = True
                    successor.wake.set()
                else:
                    self._committing = False

    def _commit(self, batch: list[PublishUnit]) -> None:
        """Commit ``batch`` in one transaction, then tell every unit its outcome.

        First all units are applied together, with no savepoints (the common case: nothing
        fails, and the batch costs a handful of statements). If any unit fails (fence lost,
        a constraint, corruption) that transaction is rolled back whole and the batch is
        applied again unit by unit, each under its own savepoint, so the failing units write
        nothing while the others commit.
        """
        Outcome = tuple[Published | None, BaseException | None]

        def together(conn: Connection) -> list[Outcome]:
            try:
                return [(done, None) for done in _publish_all(conn, batch)]
            except exc.DBAPIError as error:
                if is_transient(error):
                    raise  # the whole batch is retried on a fresh transaction
                raise _UnitFailed("a unit of the batch failed") from error
            except SmithersError as error:
                raise _UnitFailed("a unit of the batch failed") from error

        def one_by_one(conn: Connection) -> list[Outcome]:
            outcomes: list[Outcome] = []
            for unit in batch:
                savepoint = conn.begin_nested()
                try:
                    (done,) = _publish_all(conn, [unit])
                except SmithersError as error:
                    savepoint.rollback()
                    outcomes.append((None, error))
                except exc.DBAPIError as error:
                    if is_transient(error):
                        raise  # the whole batch is retried on a fresh transaction
                    # Only this unit failed (a constraint, a too-long value): the others commit.
                    savepoint.rollback()
                    failure = StoreError(f"database error: {_short(error)}")
                    failure.__cause__ = error
                    outcomes.append((None, failure))
                else:
                    savepoint.commit()
                    outcomes.append((done, None))
            return outcomes

        try:
            try:
                outcomes = self._engine.transaction(together, held=self._connection)
            except _UnitFailed:
                outcomes = self._engine.transaction(one_by_one, held=self._connection)
            self.batches += 1
        except BaseException as error:  # the whole transaction failed: every unit learns why
            outcomes = [(None, error)] * len(batch)
        for unit, (done, error) in zip(batch, outcomes, strict=True):
            if done is not None:
                unit.result, unit.frame = done
            unit.error = error
            unit.done = True
            unit.wake.set()


class _UnitFailed(Exception):
    """Internal, never escapes the committer: a unit of a batch applied together failed;
    apply them one by one. Not a SmithersError, so it stays out of the public error tree."""
