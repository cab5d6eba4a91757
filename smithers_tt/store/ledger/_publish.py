"""Fenced, group-committed checkpoint publication: the ledger applied to a batch.

A batch of units (one unit per publish, each a :class:`~smithers_tt.store.ledger._write.Change`)
commits in one transaction, written by :func:`smithers_tt.store.ledger._write.write`:

1. advance each run's clock by its number of units (one ``UPDATE ... RETURNING`` that locks
   the run row) and check every unit's fence: run ``running``, owner epoch matches; a
   takeover, cancel or finish updates the same row, so it either waits for this transaction
   or this one sees its result, never both. Each unit's frame number is one tick of the clock,
   in queue order;
2. allocate the next sequence of each unit's attempt with one ``UPDATE ... RETURNING`` that
   also requires the attempt to be ``in_progress`` under the same epoch (this is what makes
   sequences dense and unique under any number of writers);
3. insert the content unless present (``INSERT ... ON CONFLICT DO NOTHING``, sent with the
   clock's advance); when it was there, compare the stored bytes with the new ones inside
   the database (a mismatch is corruption); on PostgreSQL that comparison is in the same
   statement and locks the row ``FOR KEY SHARE``, so a concurrent garbage collection either
   ran before (and the insert recreates the row) or skips it until this publication has
   committed its reference;
4. insert the ``checkpoint`` frames that pin their content (hash, codec, version, purpose,
   agent, size) and the live refs (key and frame number only), one ``executemany`` each.

Every statement is prebuilt driver SQL with bound parameters (see
:class:`~smithers_tt.store.backend._statements.Statements`): nothing is built or compiled per
publish.

On PostgreSQL the batch is one round trip: steps 1 to 3 go as guarded guesses with step 4 and
the COMMIT (see :func:`~smithers_tt.store.ledger._write.write`); a guess found wrong aborts the
transaction, and the batch is applied again one unit at a time, asking.

A unit that fails (fence lost, conflict, corruption) writes nothing, not even content, while
the other units of the batch commit: the batch is first applied together without savepoints;
if any unit fails, that transaction is rolled back and the batch is applied again one unit
per savepoint.

**Group commit.** Writers of one process queue their units (:class:`Unit`: a publish, or a
LangGraph saver write, a :class:`WorkUnit`); whoever holds the commit lock takes everything
queued and commits it in one transaction (one fsync), then the next waiting thread does the
same with what queued meanwhile. Each caller returns only after the commit that contains its
unit. Commits go through one connection held by the committer (no pool checkout or pre-ping
per commit); a connection that fails is dropped and replaced. This is the store's one group
committer: one per database in a process, so its writers never contend with each other in the
database (SQLite's busy handler sleeps for milliseconds).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from sqlalchemy import exc
from sqlalchemy.engine import Connection

from smithers_tt.checkpoint import EncodedCheckpoint
from smithers_tt.errors import (
    AttemptNotFound,
    CheckpointTooLarge,
    FenceLost,
    SmithersError,
    StoreError,
)
from smithers_tt.store._records import AttemptKey, CheckpointRef, Fence, Frame, now_ms
from smithers_tt.store._ref_frame import ref_key
from smithers_tt.store.backend import Driver, Engine, _short, disk_failure, driver, is_transient
from smithers_tt.store.backend import schema as S
from smithers_tt.store.ledger._calls import EncodedCall, call_changes
from smithers_tt.store.ledger._content import ContentStored, store_content
from smithers_tt.store.ledger._write import Change, Entry, RunRow, Step, Write, key_tuple, write

__all__ = [
    "Driver",
    "GroupCommitter",
    "PublishUnit",
    "Unit",
    "WorkUnit",
    "driver",
    "insert_content",
]


class Unit:
    """What :class:`GroupCommitter` queues: one caller's write, and (after commit) its outcome.

    A subclass says how to apply a list of its units inside a transaction
    (:meth:`apply_all`) and which errors fail a unit alone (:attr:`isolates`); it has the
    attributes ``result``, ``error``, ``done``, ``lead`` and ``wake`` (see
    :class:`PublishUnit`).
    """

    isolates: ClassVar[tuple[type[BaseException], ...]] = (SmithersError,)
    """Errors of a unit that fail it alone (it writes nothing; the rest of its batch commits).
    A non-transient database error always does; anything else fails the whole batch."""

    result: Any
    error: BaseException | None
    done: bool
    lead: bool
    wake: threading.Event | None
    """What the caller waits on, made (by :meth:`GroupCommitter.publish`) only for a caller
    that waits: one that commits its own unit at once never needs it."""

    @classmethod
    def apply_all(cls, conn: Connection, units: Sequence[Any]) -> list[Any]:
        """Apply ``units`` (all of this class) in order inside the caller's transaction;
        return each one's result; raise on the first failure (the caller rolls back)."""
        raise NotImplementedError

    def finish(self, done: Any) -> None:
        """Keep what :meth:`apply_all` returned for this unit, once its commit succeeded."""
        self.result = done


class WorkUnit(Unit):
    """Any write: ``work(conn)`` run in the committer's transaction; its result is what it
    returns. Whatever ``work`` raises (but a transient database error) fails it alone."""

    __slots__ = ("done", "error", "lead", "result", "wake", "work")

    isolates = (Exception,)

    def __init__(self, work: Callable[[Connection], Any]) -> None:
        self.work = work
        self.result: Any = None
        self.error: BaseException | None = None
        self.done = False
        self.lead = False
        self.wake: threading.Event | None = None

    @classmethod
    def apply_all(cls, conn: Connection, units: Sequence[Any]) -> list[Any]:
        return [unit.work(conn) for unit in units]


@dataclass(eq=False)
class PublishUnit(Change, Unit):
    """One checkpoint to publish into one attempt, and (after commit) its outcome.

    As a ledger change: its sequence is allocated with the clock's advance, its size is
    checked against the run's limit, its content stored once per write, and its ref inserted
    with the frames.
    """

    fence: Fence
    key: AttemptKey
    encoded: EncodedCheckpoint
    purpose: str
    agent_id: str | None
    calls: Sequence[EncodedCall] = ()
    """Model calls the attempt made since its last write, written with this frame (by the
    changes of :func:`~._calls.call_changes`, which go before it)."""
    result: CheckpointRef | None = None
    frame: Frame | None = None
    error: BaseException | None = None
    done: bool = False
    """Set (before ``wake``) once the commit that contained this unit has ended."""
    lead: bool = False
    """Set (before ``wake``) when this unit's caller must run the next commit."""
    wake: threading.Event | None = None

    @classmethod
    def apply_all(cls, conn: Connection, units: Sequence[Any]) -> list[Any]:
        return _publish_all(conn, list(units))

    def finish(self, done: Any) -> None:
        self.result, self.frame = done

    def stored(self) -> tuple[Change, Change]:
        """This change after the one that stores its content: with the clock's advance (in
        its round trip on PostgreSQL), not by :meth:`apply` in a round trip of its own."""
        return ContentStored(self.encoded), self

    keeps_run = True

    def guess(self, w: Write) -> tuple[Step, Any] | bool | None:
        # The attempt's next sequence as the last commit that wrote it left it (and one more
        # for each earlier unit of this write into the same attempt).
        key = self.key
        known = ("seq", *key_tuple(key))
        before = w.guessed.get(known)
        if before is None:
            before = w.db.known().get(known)  # type: ignore[union-attr]  # guessing: not None
            if before is None:
                return False
        w.guessed[known] = before + 1
        params = (*key_tuple(key), self.fence.epoch, before)
        if w.sql.insert_frame_ref_if is not None:
            w.guessed[("guard", id(self))] = params  # checked with the frame (see apply)
            return None, (before + 1,)
        return (w.sql.next_sequence_if, params), (before + 1,)

    def early(self, w: Write) -> Step:
        # The sequence comes from an UPDATE that also requires the attempt to be in progress
        # under the same epoch (dense and unique sequences under any number of writers).
        key = self.key
        return (
            w.sql.next_sequence,
            (key.run_id, key.node_id, key.iteration, key.attempt, self.fence.epoch),
        )

    def check(self, run: RunRow) -> None:
        max_bytes, size = run[3], self.encoded.size
        if max_bytes is not None and size > max_bytes:
            raise CheckpointTooLarge(
                f"checkpoint is {size} bytes, above run {self.key.run_id}'s limit of "
                f"{max_bytes} bytes",
                size=size,
                limit=max_bytes,
            )

    def apply(self, w: Write, frame_no: int, early: Any) -> Frame:
        key, enc = self.key, self.encoded
        if early is None:
            state = w.db.one(
                w.sql.attempt_state, (key.run_id, key.node_id, key.iteration, key.attempt)
            )
            if state is None:
                raise AttemptNotFound(f"attempt {key} does not exist; start it before publishing")
            raise FenceLost(
                f"attempt {key.node_id}#{key.attempt} is {state[0]} under epoch "
                f"{state[1]}; epoch {self.fence.epoch} can no longer publish into it; "
                "nothing was written",
                run_id=key.run_id,
            )
        if enc.content_hash not in w.contents:  # no ContentStored went before (see stored())
            store_content(w.db, enc, w.stamp)
            w.contents.add(enc.content_hash)
        w.db.learn(("seq", *key_tuple(key)), early[0])
        stamp = w.stamp
        ref = CheckpointRef(
            key.run_id,
            key.node_id,
            key.iteration,
            key.attempt,
            early[0] - 1,
            enc.content_hash,
            enc.codec,
            enc.version,
            self.purpose,
            self.agent_id,
            stamp,
        )
        self.result = ref
        frame = Frame(
            key.run_id,
            frame_no,
            "checkpoint",
            key.node_id,
            key.iteration,
            key.attempt,
            ref.sequence,
            None,
            enc.content_hash,
            enc.codec,
            enc.version,
            self.purpose,
            self.agent_id,
            {"size": enc.size},
            stamp,
        )
        guard = w.guessed.get(("guard", id(self)))
        if guard is not None:  # the guessed sequence is checked by the frame's statement
            w.defer_frame(w.sql.insert_frame_ref_if, frame, guard)
        elif w.sql.insert_frame_ref is not None:
            w.defer_frame(w.sql.insert_frame_ref, frame)  # the ref goes with its frame
        else:
            w.defer(w.sql.insert_ref, (*ref_key(ref), frame_no))
        return frame


REF_COLUMNS = ("run_id", "node_id", "iteration", "attempt", "sequence", "frame_no")
"""The columns of ``tt_checkpoint_refs``: a ref's key and its checkpoint frame."""
# Statements.insert_ref names these columns literally; the schema is defined once, in _schema.
if tuple(S.refs.c.keys()) != REF_COLUMNS:
    raise RuntimeError("smithers_tt.store.ledger._publish is out of step with _schema; fix the SQL")


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
        store_content(db, encoded, created_at_ms)


Published = tuple[CheckpointRef, Frame]


def _publish_all(conn: Connection, units: list[PublishUnit]) -> list[Published]:
    """Publish ``units`` in order inside the caller's transaction; raise on the first failure.

    One ledger write: each run's clock advances once for all its units, runs locked in sorted
    order; sequences are allocated per unit in queue order; content is inserted once per
    distinct hash; refs and frames are inserted with one ``executemany`` each. A failure
    leaves the transaction to be rolled back: the caller then knows nothing of the batch was
    written.
    """
    with driver(conn) as db:
        entries = [
            Entry(
                u.key.run_id,
                u.fence,
                (*call_changes(u.key, u.calls), *u.stored()),
            )
            for u in units
        ]
        entries = write(db, entries, now_ms(), guess=True)
    return [(u.result, e.frames[0]) for u, e in zip(units, entries, strict=True)]  # type: ignore[misc]


class GroupCommitter:
    """Coalesces concurrent writes of one process (units) into shared transactions."""

    def __init__(self, engine: Engine, max_batch: int = 256) -> None:
        self._engine = engine
        self._connection = engine.hold()
        self._max_batch = max_batch
        self._queue: list[Unit] = []
        self._lock = threading.Lock()
        self._committing = False
        self.batches = 0
        """How many transactions the units took (for tests and benchmarks)."""

    def publish(self, unit: Unit) -> Any:
        """Queue ``unit``, make sure a commit containing it happens, and return its result
        (a :class:`PublishUnit`'s ref), or raise its error.

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
            if not lead and unit.wake is None:  # made before anyone can take it to wake it
                unit.wake = threading.Event()
        if not lead:
            wake = unit.wake
            assert wake is not None
            try:
                wake.wait()
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
        assert unit.done
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
                    successor.wake.set()  # type: ignore[union-attr]  # queued: it waits
                else:
                    self._committing = False

    def _commit(self, batch: list[Unit]) -> None:
        """Commit ``batch`` in one transaction, then tell every unit its outcome.

        First all units are applied together, with no savepoints (the common case: nothing
        fails, and the batch costs a handful of statements). If any unit fails (fence lost,
        a constraint, corruption) that transaction is rolled back whole and the batch is
        applied again unit by unit, each under its own savepoint, so the failing units write
        nothing while the others commit (a batch of one unit just takes its failure).
        """
        Outcome = tuple[Any, BaseException | None]

        def together(conn: Connection) -> list[Outcome]:
            try:
                return [(done, None) for done in _apply(conn, batch)]
            except exc.DBAPIError as error:
                if _fails_the_batch(error):
                    raise  # the whole batch is retried on a fresh transaction, or fails
                raise _UnitFailed("a unit of the batch failed") from error
            except Exception as error:
                raise _UnitFailed("a unit of the batch failed") from error

        def one_by_one(conn: Connection) -> list[Outcome]:
            outcomes: list[Outcome] = []
            for unit in batch:
                savepoint = conn.begin_nested()
                try:
                    (done,) = type(unit).apply_all(conn, [unit])
                except Exception as error:
                    failure = _failure_of(unit, error)
                    if failure is None:
                        raise  # the whole batch fails (or, if transient, is retried)
                    savepoint.rollback()
                    outcomes.append((None, failure))
                else:
                    savepoint.commit()
                    outcomes.append((done, None))
            return outcomes

        try:
            try:
                outcomes = self._engine.transaction(together, held=self._connection)
            except StoreError as failed:
                # A statement sent with the COMMIT was refused, so nothing committed: a guess
                # found wrong (see write()), or one unit's failure. One by one, under
                # savepoints, nothing is guessed and every unit learns its own outcome.
                if not _refused(failed):
                    raise
                outcomes = self._engine.transaction(one_by_one, held=self._connection)
            except _UnitFailed as failed:
                if len(batch) > 1:
                    outcomes = self._engine.transaction(one_by_one, held=self._connection)
                else:  # rolled back already: the unit's failure is its outcome
                    cause = failed.__cause__
                    assert isinstance(cause, Exception)
                    failure = _failure_of(batch[0], cause)
                    if failure is None:
                        raise cause from None
                    outcomes = [(None, failure)]
            self.batches += 1
        except BaseException as error:  # the whole transaction failed: every unit learns why
            outcomes = [(None, error)] * len(batch)
        for unit, (done, error) in zip(batch, outcomes, strict=True):
            if error is None:
                unit.finish(done)
            unit.error = error
            unit.done = True
            if unit.wake is not None:  # None: the caller that committed it, not waiting
                unit.wake.set()


def _apply(conn: Connection, batch: list[Unit]) -> list[Any]:
    """Apply ``batch`` in queue order, each run of consecutive units of one kind together
    (a run of publishes is one ledger write)."""
    results: list[Any] = []
    for kind, units in itertools.groupby(batch, key=type):
        results.extend(kind.apply_all(conn, list(units)))
    return results


def _failure_of(unit: Unit, error: Exception) -> BaseException | None:
    """What ``error`` is as the failure of ``unit`` alone, or None if it fails the batch."""
    if isinstance(error, exc.DBAPIError):
        if _fails_the_batch(error):
            return None
        # Only this unit failed (a constraint, a too-long value): the others commit.
        failure = StoreError(f"database error: {_short(error)}")
        failure.__cause__ = error
        return failure
    return error if isinstance(error, unit.isolates) else None


def _refused(error: StoreError) -> bool:
    """Whether ``error`` (raised by a transaction) is the database refusing a statement, not
    the batch's own failure: the transaction rolled back, so its units may be tried one by
    one (:meth:`GroupCommitter._commit`)."""
    cause = error.__cause__
    return (
        type(error) is StoreError
        and isinstance(cause, exc.DBAPIError)
        and not _fails_the_batch(cause)
    )


def _fails_the_batch(error: exc.DBAPIError) -> bool:
    """Whether ``error`` is no unit's own: transient (the batch is retried) or the disk's
    (the batch fails with a :class:`~smithers_tt.errors.DiskError`)."""
    return is_transient(error) or disk_failure(error) is not None


class _UnitFailed(Exception):
    """Internal, never escapes the committer: a unit of a batch applied together failed;
    apply them one by one. Not a SmithersError, so it stays out of the public error tree."""
