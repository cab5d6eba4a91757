"""Fenced, group-committed checkpoint publication.

A publish is one unit inside a transaction:

1. advance the run's clock (an ``UPDATE`` that locks the run row) and check the fence: run
   ``running``, owner epoch matches; a takeover, cancel or finish updates the same row, so it
   either waits for this transaction or this one sees its result, never both;
2. allocate the next sequence of the attempt with one ``UPDATE ... RETURNING`` that also
   requires the attempt to be ``in_progress`` under the same epoch (this is what makes
   sequences dense and unique under any number of writers);
3. insert the content if absent; when it was there, compare the stored bytes with the new ones
   inside the database (a mismatch is corruption); on PostgreSQL the upsert locks the content
   row, so a concurrent garbage collection either ran before (and the insert recreates the row)
   or waits until this publication has committed its reference;
4. insert the immutable ref and the ``checkpoint`` frame that pins its content.

A unit that fails (fence lost, conflict, corruption) is rolled back to its savepoint and
writes nothing, not even content, while the other units of the batch commit.

**Group commit.** Publishers of one process queue their units; whoever holds the commit lock
takes everything queued and commits it in one transaction (one fsync), then the next waiting
thread does the same with what queued meanwhile. Each caller returns only after the commit
that contains its unit.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy import exc
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from smithers_tt.checkpoint import EncodedCheckpoint
from smithers_tt.errors import (
    AttemptNotFound,
    CheckpointCorrupt,
    CheckpointTooLarge,
    FenceLost,
    InvalidArgument,
    RefConflict,
    SmithersError,
    StoreError,
    TransientStoreError,
)
from smithers_tt.store import _schema as S
from smithers_tt.store._engine import Engine, _short, is_transient
from smithers_tt.store._frames import Frame, advance_clock, checkpoint_frame, insert_frame
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
    done: threading.Event = field(default_factory=threading.Event)


def insert_content(conn: Connection, encoded: EncodedCheckpoint, created_at_ms: int) -> None:
    """Store content under its hash unless present; raise if present with other bytes.

    Read-and-lock first, insert only when absent: an existing row is compared inside the
    database and, on PostgreSQL, held ``FOR KEY SHARE`` until the transaction ends, so garbage
    collection (which locks ``FOR UPDATE SKIP LOCKED``) cannot remove it before the caller's
    reference commits, and a duplicate publish writes no new row version. If a collection
    deletes the row between the read and the insert, the insert simply recreates it.
    """
    table = S.contents
    check = (
        sa.select(table.c.size_bytes, (table.c.data == encoded.data).label("same"))
        .where(table.c.content_hash == encoded.content_hash)
        .with_for_update(key_share=True)
    )
    insert = (postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert)(table)
    insert = insert.values(
        content_hash=encoded.content_hash,
        data=encoded.data,
        size_bytes=encoded.size,
        created_at_ms=created_at_ms,
    ).on_conflict_do_nothing(index_elements=[table.c.content_hash])
    for _ in range(5):  # each turn loses only to a concurrent insert or delete of this row
        same = conn.execute(check).one_or_none()
        if same is not None:
            if same.size_bytes != encoded.size or not same.same:
                raise CheckpointCorrupt(
                    f"stored content {encoded.content_hash[:12]} differs from the bytes that "
                    "hash to it; run verify() and restore the database from a backup",
                    content_hash=encoded.content_hash,
                )
            return
        if conn.execute(insert).rowcount == 1:
            return
    raise TransientStoreError(
        f"content {encoded.content_hash[:12]} kept appearing and disappearing under a "
        "concurrent collection; retry",
        content_hash=encoded.content_hash,
    )


def _publish_one(conn: Connection, unit: PublishUnit) -> tuple[CheckpointRef, Frame]:
    key = unit.key
    run = advance_clock(conn, key.run_id, unit.fence)
    if run.max_checkpoint_bytes is not None and unit.encoded.size > run.max_checkpoint_bytes:
        raise CheckpointTooLarge(
            f"checkpoint is {unit.encoded.size} bytes, above run {key.run_id}'s limit of "
            f"{run.max_checkpoint_bytes} bytes",
            size=unit.encoded.size,
            limit=run.max_checkpoint_bytes,
        )
    att = S.attempts
    where = (
        (att.c.run_id == key.run_id)
        & (att.c.node_id == key.node_id)
        & (att.c.iteration == key.iteration)
        & (att.c.attempt == key.attempt)
    )
    sequence = conn.execute(
        att.update()
        .where(where & (att.c.state == "in_progress") & (att.c.owner_epoch == unit.fence.epoch))
        .values(next_sequence=att.c.next_sequence + 1)
        .returning(att.c.next_sequence)
    ).scalar_one_or_none()
    if sequence is None:
        state = conn.execute(sa.select(att.c.state, att.c.owner_epoch).where(where)).one_or_none()
        if state is None:
            raise AttemptNotFound(f"attempt {key} does not exist; start it before publishing")
        raise FenceLost(
            f"attempt {key.node_id}#{key.attempt} is {state.state} under epoch "
            f"{state.owner_epoch}; epoch {unit.fence.epoch} can no longer publish into it; "
            "nothing was written",
            run_id=key.run_id,
        )
    created = now_ms()
    insert_content(conn, unit.encoded, created)
    ref = CheckpointRef(
        key.run_id,
        key.node_id,
        key.iteration,
        key.attempt,
        sequence - 1,
        unit.encoded.content_hash,
        unit.encoded.codec,
        unit.encoded.version,
        unit.purpose,
        unit.agent_id,
        created,
    )
    conn.execute(S.refs.insert().values(**ref_row(ref)))
    frame = insert_frame(
        conn, checkpoint_frame(ref, key.run_id, run.clock, {"size": unit.encoded.size})
    )
    return ref, frame


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
        self._max_batch = max_batch
        self._queue: list[PublishUnit] = []
        self._state = threading.Condition()
        self._committing = False
        self.batches = 0
        """How many transactions publications took (for tests and benchmarks)."""

    def publish(self, unit: PublishUnit) -> CheckpointRef:
        """Queue ``unit``, make sure a commit containing it happens, and return its ref.

        While a commit is running, callers wait for it (not for the lock of the next one): a
        caller whose unit it contained returns as soon as it ends, and one of the others takes
        everything queued meanwhile into the next commit.
        """
        with self._state:
            self._queue.append(unit)
        while True:
            with self._state:
                while self._committing and not unit.done.is_set():
                    self._state.wait()
                if unit.done.is_set():
                    break
                self._committing = True
                batch = self._queue[: self._max_batch]
                del self._queue[: self._max_batch]
            try:
                self._commit(batch)
            finally:
                with self._state:
                    self._committing = False
                    self._state.notify_all()
        if unit.error is not None:
            raise unit.error
        assert unit.result is not None
        return unit.result

    def _commit(self, batch: list[PublishUnit]) -> None:
        Outcome = tuple[tuple[CheckpointRef, Frame] | None, BaseException | None]

        def work(conn: Connection) -> list[Outcome]:
            outcomes: list[Outcome] = []
            for unit in batch:
                savepoint = conn.begin_nested()
                try:
                    done = _publish_one(conn, unit)
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
            outcomes = self._engine.transaction(work)
            self.batches += 1
        except BaseException as error:  # the whole transaction failed: every unit learns why
            outcomes = [(None, error)] * len(batch)
        for unit, (done, error) in zip(batch, outcomes, strict=True):
            if done is not None:
                unit.result, unit.frame = done
            unit.error = error
            unit.done.set()
