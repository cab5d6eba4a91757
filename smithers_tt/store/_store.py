"""The checkpoint store: runs, attempts, fenced publication and verified reads.

One synchronous implementation for SQLite and PostgreSQL. The engine calls it through a
single async adapter (``asyncio.to_thread``); nothing here is written twice.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from smithers_tt._ids import check_id
from smithers_tt.checkpoint import (
    AgentCheckpoint,
    EncodedCheckpoint,
    content_hash,
    loads,
    size_limit,
)
from smithers_tt.errors import (
    AttemptNotFound,
    CheckpointCorrupt,
    CheckpointInvalid,
    CheckpointMissing,
    CheckpointTooLarge,
    HistoryExhausted,
    InvalidArgument,
    RefConflict,
    RunNotFound,
)
from smithers_tt.store._frames import Frame, checkpoint_frame, frame_from_row, select_frames
from smithers_tt.store._records import (
    AttemptKey,
    AttemptRecord,
    CheckpointRef,
    Fence,
    NodeRecord,
    Page,
    RunRecord,
    check_limit,
    decode_cursor,
    encode_cursor,
    new_run_id,
    now_ms,
    run_from_row,
    stored_json,
)
from smithers_tt.store.backend import Driver, Engine, driver
from smithers_tt.store.backend import schema as S
from smithers_tt.store.ledger import (
    PAUSE_KINDS,
    AttemptEnded,
    AttemptStarted,
    BreakpointsSet,
    CancelRequested,
    Change,
    CheckpointEdited,
    EditEnded,
    Entry,
    GroupCommitter,
    NewRun,
    NodeCancelled,
    NodeSet,
    Note,
    PublishUnit,
    RunCancelled,
    RunClaimed,
    RunContinued,
    RunEnded,
    RunPaused,
    Write,
    check_purpose,
    json_or_none,
    key_tuple,
    ref_from_row,
    ref_key,
    select_refs,
    touch,
    write,
)

T = TypeVar("T")

Checkpointed = tuple[AgentCheckpoint | EncodedCheckpoint, str, str | None]
"""A checkpoint to publish with an attempt's end: (checkpoint, purpose, agent id)."""

HISTORY_SCAN_BOUND = 1000
"""How many refs of a node a resume scan looks at before raising HistoryExhausted."""

_TERMINAL_RUN = ("finished", "failed", "cancelled")


def _attempt_from_row(row: Any) -> AttemptRecord:
    resumed = None
    if row.resumed_run_id is not None:
        resumed = (
            row.resumed_run_id,
            row.resumed_node_id,
            row.resumed_iteration,
            row.resumed_attempt,
            row.resumed_sequence,
        )
    return AttemptRecord(
        AttemptKey(row.run_id, row.node_id, row.iteration, row.attempt),
        row.state,
        row.owner_epoch,
        row.next_sequence,
        bool(row.discard_resume),
        row.error,
        row.error_code,
        resumed,
        row.started_at_ms,
        row.finished_at_ms,
    )


def _checked(encoded: EncodedCheckpoint, max_bytes: int | None) -> EncodedCheckpoint:
    """An already encoded checkpoint, checked as :meth:`AgentCheckpoint.encode` would have:
    within the size limit, and addressed by the SHA-256 of its bytes. One that ``encode``
    made is not hashed again (a publish hashes its bytes once)."""
    if encoded.verified and max_bytes is None:
        return encoded  # encode() checked it against the 16 MiB ceiling or a lower limit
    limit = size_limit(max_bytes)
    if encoded.size > limit:
        raise CheckpointTooLarge(
            f"checkpoint {encoded.codec} v{encoded.version} is {encoded.size} bytes, above the "
            f"limit of {limit} bytes",
            size=encoded.size,
            limit=limit,
        )
    if not encoded.verified and content_hash(encoded.data) != encoded.content_hash:
        raise CheckpointInvalid(
            f"encoded checkpoint claims address {encoded.content_hash[:12]} but its bytes hash "
            "to another; encode checkpoints with AgentCheckpoint.encode()",
            path="$",
        )
    return encoded


def _attempt_where(key: AttemptKey) -> sa.ColumnElement[bool]:
    a = S.attempts
    return (
        (a.c.run_id == key.run_id)
        & (a.c.node_id == key.node_id)
        & (a.c.iteration == key.iteration)
        & (a.c.attempt == key.attempt)
    )


def _check_node_state(state: str) -> None:
    if state not in S.NODE_STATES:
        raise InvalidArgument(f"node state must be one of {list(S.NODE_STATES)}")


def _open_ends(
    db: Driver, run_id: str, state: str, before_epoch: int | None = None
) -> list[Change]:
    """End, as ``state``, the attempts of a run left in progress (by epochs before
    ``before_epoch``); the caller has locked the run row, so none can start meanwhile."""
    return [
        AttemptEnded(AttemptKey(run_id, node, iteration, attempt), state, epoch, detail=False)
        for node, iteration, attempt, epoch in db.all(db.sql.open_attempts, (run_id,))
        if before_epoch is None or epoch < before_epoch
    ]


def claim(
    db: Driver, run_id: str, epoch: int, owner_id: str | None, data: dict[str, Any]
) -> list[Frame]:
    """Make ``owner_id`` the owner of a locked run under the new ``epoch``; attempts left in
    progress by earlier epochs become ``interrupted``. Returns the frames written."""
    changes: list[Change] = [RunClaimed(run_id, epoch, owner_id, data)]
    changes += _open_ends(db, run_id, "interrupted", epoch)
    (entry,) = write(db, [Entry(run_id, None, changes)], now_ms())
    return entry.frames


class AttemptDeleted(Change):
    """An attempt and its refs are deleted (frameless: what remains of it is its frames)."""

    __slots__ = ("key",)

    ticks = 0

    def __init__(self, key: AttemptKey) -> None:
        self.key = key

    def apply(self, w: Write, frame_no: int, early: Any) -> None:
        w.db.count(w.sql.delete_attempt, key_tuple(self.key))


class RefPut(Change):
    """A ref with an explicit sequence (a restore, an import); identical re-insertion is a
    no-op (``existing``: what the key holds now, as :attr:`Statements.get_ref` reads it).

    A new ref writes a ``checkpoint`` frame of its own, stamped with the ref's
    ``created_at_ms``: the frame holds its hash, codec, version, purpose and agent, the ref row
    points at it (as a publish's does), and the content must be stored already.

    Raises:
        RefConflict: the same key already points at other content, codec, version or purpose.
        CheckpointMissing: no content is stored under the ref's hash.
    """

    __slots__ = ("existing", "ref", "result", "ticks")

    def __init__(self, ref: CheckpointRef, existing: Any) -> None:
        self.ref, self.existing = ref, existing
        self.ticks = 0 if existing is not None else 1
        self.result: CheckpointRef | None = None

    def apply(self, w: Write, frame_no: int, early: Any) -> Frame | None:
        ref, db, existing = self.ref, w.db, self.existing
        key = ref_key(ref)
        if existing is None:
            size = db.one(w.sql.content_size, (ref.content_hash,))
            if size is None:
                raise CheckpointMissing(
                    f"no checkpoint content {ref.content_hash[:12]} is stored; store it "
                    "before restoring a ref to it"
                )
            # Keep the attempt's allocator past every stored sequence: a later publish into
            # this attempt must not be handed the sequence of a restored ref (a duplicate key
            # forever).
            db.count(w.sql.sequence_past, (ref.sequence + 1, *key[:4], ref.sequence))
            w.defer(w.sql.insert_ref, (*key, frame_no))
            self.result = ref
            return checkpoint_frame(ref, ref.run_id, frame_no, {"size": size[0]})
        if tuple(existing[:4]) != (ref.content_hash, ref.codec, ref.version, ref.purpose):
            raise RefConflict(
                f"checkpoint ref {ref.node_id}#{ref.attempt}.{ref.sequence} of run "
                f"{ref.run_id} already points at {existing[0][:12]} ({existing[1]} "
                f"v{existing[2]}, {existing[3]}); refs are immutable",
            )
        self.result = CheckpointRef(*key, *existing)
        return None


class Store:
    """Durable runs, attempts and checkpoints on one database (SQLite or PostgreSQL).

    Every state change commits a :class:`Frame`; functions in ``listeners`` are called with
    each frame this object committed, after the commit, in the calling thread.
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._committer = GroupCommitter(engine)
        self.listeners: list[Callable[[Frame], None]] = []

    def _emit(self, frames: list[Frame]) -> None:
        for frame in frames:
            for listener in list(self.listeners):
                listener(frame)

    def _change(self, work: Callable[[Connection, list[Frame]], T]) -> T:
        """Run ``work(conn, frames)`` in a write transaction, then emit the frames it made."""
        frames: list[Frame] = []

        def tx(conn: Connection) -> T:
            frames.clear()  # a retried transaction starts over
            return work(conn, frames)

        result = self.engine.transaction(tx)
        self._emit(frames)
        return result

    def _write(
        self, entries: Callable[[Driver], list[Entry]], stamp: int | None = None
    ) -> list[Frame]:
        """Write the ledger entries ``entries(db)`` makes, in one write transaction (retried
        whole), then emit their frames; return the frames."""

        def work(conn: Connection, frames: list[Frame]) -> list[Frame]:
            with driver(conn) as db:
                done = write(db, entries(db), now_ms() if stamp is None else stamp)
            frames += [f for entry in done for f in entry.frames]
            return frames

        return self._change(work)

    def _read(self, stmt: sa.Executable) -> list[Any]:
        return self.engine.transaction(lambda conn: conn.execute(stmt).all(), write=False)

    # --- runs ----------------------------------------------------------------------------

    def create_run(
        self,
        workflow: str,
        input: Any = None,
        *,
        workflow_hash: str | None = None,
        owner_id: str | None = None,
        status: str = "running",
        max_checkpoint_bytes: int | None = None,
        parent_run_id: str | None = None,
        parent_frame_no: int | None = None,
        run_id: str | None = None,
        graph: dict[str, list[str]] | None = None,
        breakpoints: dict[str, list[str]] | None = None,
    ) -> tuple[RunRecord, Fence]:
        """Create a run (frame 0); a ``running`` run is owned at epoch 1 by the returned fence.

        ``breakpoints`` (``{"before": [...], "after": [...]}`` node ids) are kept in frame 0,
        so that whoever executes the run pauses at them."""
        if status not in ("running", "queued"):
            raise InvalidArgument(f"a new run is running or queued, not {status!r}")
        if max_checkpoint_bytes is not None:
            size_limit(max_checkpoint_bytes)
        run_id = new_run_id() if run_id is None else check_id(run_id, "run_id")
        stamp = now_ms()
        epoch = 1 if status == "running" else 0
        row = NewRun(
            run_id,
            workflow,
            workflow_hash,
            status,
            json_or_none(input, subject="run input"),
            epoch,
            owner_id,
            stamp if status == "running" else None,
            False,
            parent_run_id,
            parent_frame_no,
            max_checkpoint_bytes,
            json_or_none(graph),
        )
        data = {"workflow": workflow, "input": input}
        if breakpoints:
            data["breakpoints"] = breakpoints
        created = Note(run_id, "run_created", state=status, data=data)
        entry = Entry(run_id, None, [created], create=row)
        self._write(lambda db: [entry], stamp)
        return row.record(entry, stamp), Fence(run_id, epoch)

    def get_run(self, run_id: str) -> RunRecord:
        """The run with this id.

        Raises:
            RunNotFound: there is none.
        """
        rows = self._read(sa.select(S.runs).where(S.runs.c.run_id == run_id))
        if not rows:
            raise RunNotFound(f"no run {run_id!r}; list runs with `smithers-tt runs`")
        return run_from_row(rows[0])

    def list_runs(
        self, *, limit: int = 100, cursor: str | None = None, status: str | None = None
    ) -> Page[RunRecord]:
        """Runs oldest first, a page at a time."""
        check_limit(limit)
        r = S.runs
        stmt = sa.select(r).order_by(r.c.run_id).limit(limit + 1)
        if status is not None:
            stmt = stmt.where(r.c.status == status)
        if cursor is not None:
            (after,) = decode_cursor("runs", cursor, (str,))
            stmt = stmt.where(r.c.run_id > after)
        rows = self._read(stmt)
        items = [run_from_row(row) for row in rows[:limit]]
        more = len(rows) > limit
        return Page(items, encode_cursor("runs", [items[-1].run_id]) if more else None)

    def claim_run(self, run_id: str, owner_id: str | None = None) -> Fence:
        """Take ownership of a run under a new epoch; the previous owner is fenced out.

        Attempts left ``in_progress`` by earlier epochs become ``interrupted``.

        Raises:
            RunNotFound: no such run.
            InvalidArgument: the run already ended (finished, failed or cancelled).
        """

        def work(conn: Connection, frames: list[Frame]) -> Fence:
            with driver(conn) as db:
                row = db.one(db.sql.lock_run, (run_id,))
                if row is None:
                    raise RunNotFound(f"no run {run_id!r}; list runs with `smithers-tt runs`")
                if row[0] in _TERMINAL_RUN:
                    raise InvalidArgument(
                        f"run {run_id} is {row[0]}; only unfinished runs are claimed"
                    )
                if row[4]:
                    raise InvalidArgument(
                        f"run {run_id} is a fork by reference that reads its parent's "
                        "history and has no live state yet; resume it with db.resume (which "
                        "materialises it first) or call smithers_tt.timetravel.materialize"
                    )
                if row[0] == "paused":
                    raise InvalidArgument(
                        f"run {run_id} is paused; continue it (db.resume(run_id, wf, "
                        f"answer=...) or `smithers-tt continue {run_id}`) instead of claiming it"
                    )
                epoch = row[1] + 1
                data = {"epoch": epoch, "owner_id": owner_id}
                frames += claim(db, run_id, epoch, owner_id, data)
            return Fence(run_id, epoch)

        return self._change(work)

    def finish_run(
        self, fence: Fence, status: str, *, output: Any = None, error: str | None = None
    ) -> None:
        """End an owned run as ``finished`` or ``failed``; every later fenced write fails."""
        if status not in ("finished", "failed"):
            raise InvalidArgument(f"finish_run takes finished or failed, not {status!r}")

        self._write(
            lambda db: [Entry(fence.run_id, fence, [RunEnded(fence.run_id, status, output, error)])]
        )

    def request_cancel(self, run_id: str) -> None:
        """Ask the owner of a run to cancel it; it finishes the cancellation after a grace."""

        self._write(lambda db: [Entry(run_id, None, [CancelRequested(run_id)])])

    def cancel_run(self, run_id: str) -> None:
        """Make a run ``cancelled`` now: a new epoch fences every writer, open attempts end."""

        def entries(db: Driver) -> list[Entry]:
            if db.one(db.sql.lock_run, (run_id,)) is None:
                raise RunNotFound(f"no run {run_id!r}; list runs with `smithers-tt runs`")
            changes = _open_ends(db, run_id, "cancelled")
            changes += [
                NodeCancelled(run_id, node_id, iteration, last_attempt)
                for node_id, iteration, last_attempt in db.all(db.sql.running_nodes, (run_id,))
            ]
            return [Entry(run_id, None, [*changes, RunCancelled(run_id)])]

        self._write(entries)

    def heartbeat(self, fence: Fence) -> bool:
        """Record that the owner is alive; False when it no longer owns the run."""

        def work(conn: Connection) -> list[Fence]:
            with driver(conn) as db:
                return touch(db, [fence], now_ms())

        return not self.engine.transaction(work)

    # --- nodes and attempts --------------------------------------------------------------

    def set_node(
        self,
        fence: Fence,
        node_id: str,
        iteration: int,
        state: str,
        *,
        output: Any = None,
        last_attempt: int | None = None,
    ) -> Frame:
        """Record a node's state (and output) under the owner's fence."""
        _check_node_state(state)

        change = NodeSet(fence.run_id, node_id, iteration, state, output, last_attempt)
        (frame,) = self._write(lambda db: [Entry(fence.run_id, fence, [change])])
        return frame

    def list_nodes(self, run_id: str) -> list[NodeRecord]:
        """Every node of a run with its state, last attempt and output."""
        n = S.nodes
        rows = self._read(
            sa.select(n).where(n.c.run_id == run_id).order_by(n.c.node_id, n.c.iteration)
        )
        return [
            NodeRecord(
                r.run_id,
                r.node_id,
                r.iteration,
                r.state,
                r.last_attempt,
                stored_json(
                    r.output_json,
                    f"tt_nodes.output_json of node {r.node_id!r} (iteration {r.iteration}) of "
                    f"run {r.run_id!r}",
                ),
            )
            for r in rows
        ]

    def start_attempt(
        self,
        fence: Fence,
        node_id: str,
        iteration: int = 0,
        *,
        resumed_from: CheckpointRef | None = None,
        node_state: str | None = None,
    ) -> AttemptRecord:
        """Open the next attempt (numbered from 1) of a node under the owner's fence.

        ``node_state`` also records the node's state first (``running`` when its first attempt
        starts), in the same transaction: two frames, one commit.
        """
        if type(iteration) is not int or iteration < 0:
            raise InvalidArgument(f"iteration must be an int >= 0, got {iteration!r}")
        if node_state is not None:
            _check_node_state(node_state)

        changes: list[Change] = []
        if node_state is not None:
            changes.append(NodeSet(fence.run_id, node_id, iteration, node_state))
        started = AttemptStarted(
            fence, node_id, iteration, None if resumed_from is None else ref_key(resumed_from)
        )
        changes.append(started)
        self._write(lambda db: [Entry(fence.run_id, fence, changes)])
        assert started.attempt is not None
        return started.attempt

    def finish_attempt(
        self,
        fence: Fence,
        key: AttemptKey,
        state: str,
        *,
        error: str | None = None,
        error_code: str | None = None,
        discard_resume: bool = False,
        node_state: str | None = None,
        output: Any = None,
        checkpoints: Sequence[Checkpointed] = (),
    ) -> list[CheckpointRef]:
        """End an in-progress attempt as finished, failed or cancelled under the fence.

        ``discard_resume=True`` marks its checkpoints as poisoned: resume scans skip them.
        ``node_state`` (with ``output``) also records the node's end, with this attempt as its
        last, in the same transaction: a crash can never leave a finished attempt under a node
        still running, which the next owner would run again. ``checkpoints`` (checkpoint,
        purpose, agent id) are published into the attempt first, in the same transaction (an
        attempt's result checkpoint and its end are one commit). Returns their refs.
        """
        if state not in ("finished", "failed", "cancelled"):
            raise InvalidArgument(f"an attempt ends finished, failed or cancelled, not {state!r}")
        if node_state is not None:
            _check_node_state(node_state)
        elif output is not None:
            raise InvalidArgument("an output is recorded with a node_state")

        units = [
            PublishUnit(fence, key, self._encoded(c, None), check_purpose(purpose), agent_id)
            for c, purpose, agent_id in checkpoints
        ]
        changes: list[Change] = [
            *units,
            AttemptEnded(
                key,
                state,
                fence.epoch,
                error=error,
                error_code=error_code,
                discard=discard_resume,
            ),
        ]
        if node_state is not None:
            changes.append(
                NodeSet(key.run_id, key.node_id, key.iteration, node_state, output, key.attempt)
            )
        self._write(lambda db: [Entry(fence.run_id, fence, changes)])
        return [u.result for u in units if u.result is not None]

    def get_attempt(self, key: AttemptKey) -> AttemptRecord:
        """The attempt with this key.

        Raises:
            AttemptNotFound: there is none.
        """
        rows = self._read(sa.select(S.attempts).where(_attempt_where(key)))
        if not rows:
            raise AttemptNotFound(f"no attempt {key}")
        return _attempt_from_row(rows[0])

    def list_attempts(self, run_id: str, node_id: str | None = None) -> list[AttemptRecord]:
        """Attempts of a run (optionally one node), in key order."""
        a = S.attempts
        stmt = sa.select(a).where(a.c.run_id == run_id)
        if node_id is not None:
            stmt = stmt.where(a.c.node_id == node_id)
        rows = self._read(stmt.order_by(a.c.node_id, a.c.iteration, a.c.attempt))
        return [_attempt_from_row(r) for r in rows]

    def delete_attempt(self, key: AttemptKey) -> None:
        """Delete an attempt and its refs (content stays until garbage collection)."""
        self._write(lambda db: [Entry(key.run_id, None, [AttemptDeleted(key)])])

    # --- frames --------------------------------------------------------------------------

    def frames(
        self, run_id: str, *, after: int | None = None, upto: int | None = None
    ) -> list[Frame]:
        """Frames of a run in order, optionally only ``after < frame_no <= upto``."""
        return [frame_from_row(r) for r in self._read(select_frames(run_id, after, upto))]

    # --- publication ---------------------------------------------------------------------

    def publish(
        self,
        fence: Fence,
        key: AttemptKey,
        checkpoint: AgentCheckpoint | EncodedCheckpoint,
        *,
        purpose: str = "progress",
        agent_id: str | None = None,
        max_bytes: int | None = None,
    ) -> CheckpointRef:
        """Durably publish a checkpoint into an in-progress attempt.

        Returns only once the commit containing it is done; concurrent callers share commits.

        Raises:
            FenceLost: ``fence`` no longer owns the run, or the attempt is not in progress;
                nothing was written, not even content.
            CheckpointTooLarge: above ``max_bytes`` or the run's own limit.
            CheckpointCorrupt: the stored content under this hash has other bytes.
        """
        check_purpose(purpose)
        if key.run_id != fence.run_id:
            raise InvalidArgument(f"attempt {key} is not in run {fence.run_id}")
        unit = PublishUnit(fence, key, self._encoded(checkpoint, max_bytes), purpose, agent_id)
        ref = self._committer.publish(unit)
        if unit.frame is not None:
            self._emit([unit.frame])
        return ref

    @staticmethod
    def _encoded(
        checkpoint: AgentCheckpoint | EncodedCheckpoint, max_bytes: int | None
    ) -> EncodedCheckpoint:
        if isinstance(checkpoint, EncodedCheckpoint):
            return _checked(checkpoint, max_bytes)
        return checkpoint.encode(max_bytes)

    def put_ref(self, ref: CheckpointRef) -> CheckpointRef:
        """Insert a ref with an explicit sequence (restores, imports); identical re-insertion is a
        no-op, a ref pointing elsewhere raises :class:`RefConflict` (see ``RefPut``)."""
        check_purpose(ref.purpose)
        changes: list[RefPut] = []

        def entries(db: Driver) -> list[Entry]:
            changes[:] = [RefPut(ref, db.one(db.sql.get_ref, ref_key(ref)))]
            return [Entry(ref.run_id, None, changes)]

        self._write(entries)
        result = changes[0].result
        assert result is not None
        return result

    @property
    def commit_batches(self) -> int:
        """How many transactions publications have used so far in this process."""
        return self._committer.batches

    # --- reads ---------------------------------------------------------------------------

    def read_content(self, content_hash_: str) -> bytes:
        """The canonical bytes stored under a hash, verified against hash and size.

        Raises:
            CheckpointMissing: nothing is stored under this hash.
            CheckpointCorrupt: the bytes do not hash to their address or have the wrong size.
        """
        c = S.contents
        row = self.engine.transaction(
            lambda conn: conn.execute(
                sa.select(c.c.data, c.c.size_bytes).where(c.c.content_hash == content_hash_)
            ).one_or_none(),
            write=False,
        )
        if row is None:
            raise CheckpointMissing(f"no checkpoint content {content_hash_[:12]} is stored")
        data = bytes(row.data)
        if len(data) != row.size_bytes or content_hash(data) != content_hash_:
            raise CheckpointCorrupt(
                f"checkpoint content {content_hash_[:12]} failed its integrity check "
                f"({len(data)} bytes, recorded {row.size_bytes}); it is never handed to an "
                "agent; run verify() and restore from a backup",
                content_hash=content_hash_,
            )
        return data

    def load(self, ref: CheckpointRef) -> AgentCheckpoint:
        """The verified checkpoint a ref points at, as a fresh object."""
        data = self.read_content(ref.content_hash)
        checkpoint = AgentCheckpoint.from_json(loads(data))
        if (checkpoint.codec, checkpoint.version) != (ref.codec, ref.version):
            raise CheckpointCorrupt(
                f"ref says {ref.codec} v{ref.version} but content {ref.short_hash} holds "
                f"{checkpoint.codec} v{checkpoint.version}",
                content_hash=ref.content_hash,
            )
        return checkpoint

    def list_refs(
        self,
        run_id: str,
        *,
        node_id: str | None = None,
        iteration: int | None = None,
        attempt: int | None = None,
        purpose: str | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> Page[CheckpointRef]:
        """Refs of a run in (node, iteration, attempt, sequence) order, a page at a time."""
        check_limit(limit)
        f = S.refs
        key = (f.c.node_id, f.c.iteration, f.c.attempt, f.c.sequence)
        stmt = select_refs(purpose).where(f.c.run_id == run_id).order_by(*key).limit(limit + 1)
        for column, value in (
            (f.c.node_id, node_id),
            (f.c.iteration, iteration),
            (f.c.attempt, attempt),
        ):
            if value is not None:
                stmt = stmt.where(column == value)
        if cursor is not None:
            after = decode_cursor("refs", cursor, (str, int, int, int))
            stmt = stmt.where(sa.tuple_(*key) > sa.tuple_(*after))
        rows = self.engine.transaction(lambda conn: conn.execute(stmt).all(), write=False)
        items = [ref_from_row(r) for r in rows[:limit]]
        nxt = None
        if len(rows) > limit:
            last = items[-1]
            nxt = encode_cursor("refs", [last.node_id, last.iteration, last.attempt, last.sequence])
        return Page(items, nxt)

    def newest_ref(
        self,
        run_id: str,
        node_id: str,
        iteration: int = 0,
        *,
        before: tuple[int, int] | None = None,
    ) -> CheckpointRef | None:
        """The newest ref of a node, optionally strictly before ``(attempt, sequence)``."""
        for ref in self.iter_refs_newest_first(
            run_id, node_id, iteration, before=before, page=1, bound=1
        ):
            return ref
        return None

    def iter_refs_newest_first(
        self,
        run_id: str,
        node_id: str,
        iteration: int = 0,
        *,
        before: tuple[int, int] | None = None,
        page: int = 100,
        bound: int = HISTORY_SCAN_BOUND,
        skip_discarded: bool = False,
    ) -> Iterator[CheckpointRef]:
        """Refs of a node newest first, in pages; stops with HistoryExhausted past ``bound``.

        ``skip_discarded`` leaves out refs of attempts that asked to discard their state.
        """
        f, a = S.refs, S.attempts
        seen = 0
        cursor = before
        while True:
            stmt = (
                select_refs()
                .where(f.c.run_id == run_id, f.c.node_id == node_id, f.c.iteration == iteration)
                .order_by(f.c.attempt.desc(), f.c.sequence.desc())
                .limit(page)
            )
            if cursor is not None:
                stmt = stmt.where(sa.tuple_(f.c.attempt, f.c.sequence) < sa.tuple_(*cursor))
            if skip_discarded:
                stmt = stmt.join(
                    a,
                    (a.c.run_id == f.c.run_id)
                    & (a.c.node_id == f.c.node_id)
                    & (a.c.iteration == f.c.iteration)
                    & (a.c.attempt == f.c.attempt),
                ).where(~a.c.discard_resume)
            rows = self.engine.transaction(lambda conn, s=stmt: conn.execute(s).all(), write=False)
            for row in rows:
                if seen >= bound:
                    raise HistoryExhausted(
                        f"scanned {bound} checkpoint refs of {node_id}[{iteration}] in run "
                        f"{run_id} without finding a usable one; refusing to start fresh "
                        "silently: reset the node to start over",
                        bound=bound,
                    )
                seen += 1
                yield ref_from_row(row)
            if len(rows) < page:
                return
            cursor = (rows[-1].attempt, rows[-1].sequence)

    # --- pauses (breakpoints and questions to a person) ----------------------------------

    def pause_run(
        self, fence: Fence, node_id: str | None, iteration: int | None, data: dict[str, Any]
    ) -> Frame:
        """Pause an owned run durably (frame ``run_paused`` with ``data``: why, and what it
        asks): no owner, a new epoch fencing ``fence``, attempts left in progress end
        ``interrupted``. Continue it with :meth:`continue_run`.

        Raises:
            FenceLost: ``fence`` no longer owns the run; nothing was written.
        """

        def work(conn: Connection, frames: list[Frame]) -> Frame:
            with driver(conn) as db:
                if db.one(db.sql.lock_run, (fence.run_id,)) is None:
                    raise RunNotFound(f"no run {fence.run_id!r}")
                # Locked: no attempt starts meanwhile; the ledger checks the fence first.
                changes = _open_ends(db, fence.run_id, "interrupted")
                changes.append(RunPaused(fence.run_id, node_id, iteration, data))
                (entry,) = write(db, [Entry(fence.run_id, fence, changes)], now_ms())
            frames += entry.frames
            return entry.frames[-1]

        return self._change(work)

    def continue_run(
        self,
        run_id: str,
        epoch: int,
        data: dict[str, Any],
        *,
        owner_id: str | None = None,
        claim: bool = False,
        edits: Sequence[tuple[str, int, EncodedCheckpoint, str | None]] = (),
        skips: Sequence[tuple[str, int, Any]] = (),
        abort: bool = False,
    ) -> Fence | None:
        """Take a run out of a pause seen under ``epoch``, in one transaction: frame
        ``run_continued`` (with ``data``), then the ``edits`` (node, iteration, checkpoint,
        agent id: each in an attempt of its own that its next attempt resumes from), the
        ``skips`` (node, iteration, output: the node is ``finished`` with that output), and
        either a cancel (``abort``), a claim by ``owner_id`` (``claim``: returns its fence),
        or nothing more (the run waits ``queued`` for a worker; returns None).

        Raises:
            ConcurrencyError: the run is no longer paused under ``epoch``; nothing was written.
        """

        def work(conn: Connection, frames: list[Frame]) -> Fence | None:
            with driver(conn) as db:
                if db.one(db.sql.lock_run, (run_id,)) is None:
                    raise RunNotFound(f"no run {run_id!r}; list runs with `smithers-tt runs`")
                changes: list[Change] = [RunContinued(run_id, epoch, data)]
                fence = Fence(run_id, epoch + 2)
                if claim and not abort:
                    claimed = {"epoch": fence.epoch, "owner_id": owner_id}
                    changes.append(RunClaimed(run_id, fence.epoch, owner_id, claimed))
                for node_id, iteration, encoded, agent_id in edits:
                    started = AttemptStarted(Fence(run_id, epoch + 1), node_id, iteration)
                    changes += [started, CheckpointEdited(started, encoded, agent_id)]
                    changes.append(EditEnded(started))
                for node_id, iteration, output in skips:
                    changes.append(NodeSet(run_id, node_id, iteration, "finished", output))
                if abort:
                    changes += [
                        NodeCancelled(run_id, node_id, iteration, last_attempt)
                        for node_id, iteration, last_attempt in db.all(
                            db.sql.running_nodes, (run_id,)
                        )
                    ]
                    changes.append(RunCancelled(run_id))
                (entry,) = write(db, [Entry(run_id, None, changes)], now_ms())
            frames += entry.frames
            return fence if claim and not abort else None

        return self._change(work)

    def pause_frames(self, run_id: str) -> list[Frame]:
        """The frames that say where a run paused and how it went on (``run_paused``,
        ``run_continued``) and its breakpoints (frame 0, ``breakpoints_set``), in order.

        A fork starts with the breakpoints its parent had at the fork point: a frame
        ``breakpoints_set`` numbered -1 (not stored: read from the parent's history, data
        ``{"breakpoints": ..., "inherited_from": [parent, frame]}``) comes first when the
        parent had any (and still exists). What the parent passed and was answered is not
        inherited.
        """
        f = S.frames
        stmt = (
            sa.select(f)
            .where(f.c.run_id == run_id, f.c.kind.in_(PAUSE_KINDS))
            .order_by(f.c.frame_no)
        )
        own = [frame_from_row(r) for r in self._read(stmt)]
        run = self.get_run(run_id)
        if run.parent_run_id is None or run.parent_frame_no is None:
            return own
        try:
            parent = self.pause_frames(run.parent_run_id)
        except RunNotFound:  # the parent was deleted: the fork keeps only its own
            return own
        marks = [
            p
            for p in parent
            if p.frame_no <= run.parent_frame_no
            and isinstance(p.data, dict)
            and "breakpoints" in p.data
        ]
        if not marks:
            return own
        data = {
            "breakpoints": marks[-1].data["breakpoints"],
            "inherited_from": [run.parent_run_id, run.parent_frame_no],
        }
        return [Frame(run_id, -1, "breakpoints_set", data=data), *own]

    def set_breakpoints(self, run_id: str, marks: dict[str, list[str]]) -> Frame:
        """Replace a run's breakpoints (``{"before": [...], "after": [...]}`` node ids) now,
        with frame ``breakpoints_set``: a queued or paused run uses them when it goes on, a
        running one at its next node (its executor reads them as it goes).

        Raises:
            RunNotFound: there is no such run.
            InvalidArgument: the run ended; nothing was written.
        """

        def work(conn: Connection, frames: list[Frame]) -> Frame:
            with driver(conn) as db:
                (entry,) = write(
                    db, [Entry(run_id, None, [BreakpointsSet(run_id, marks)])], now_ms()
                )
            frames += entry.frames
            return entry.frames[-1]

        return self._change(work)

    def watch_run(self, run_id: str, after: int) -> tuple[RunRecord, list[Frame]]:
        """The run, and its ``breakpoints_set`` frames numbered above ``after`` (in order),
        in one read: what a running executor polls. The run is read first, so every such
        frame up to its ``clock`` is among them.

        Raises:
            RunNotFound: there is none.
        """
        f = S.frames
        frames = (
            sa.select(f)
            .where(f.c.run_id == run_id, f.c.frame_no > after, f.c.kind == "breakpoints_set")
            .order_by(f.c.frame_no)
        )

        def read(conn: Connection) -> tuple[Any, list[Any]]:
            rows = conn.execute(sa.select(S.runs).where(S.runs.c.run_id == run_id)).all()
            return rows, conn.execute(frames).all() if rows else []

        rows, found = self.engine.transaction(read, write=False)
        if not rows:
            raise RunNotFound(f"no run {run_id!r}; list runs with `smithers-tt runs`")
        return run_from_row(rows[0]), [frame_from_row(r) for r in found]
