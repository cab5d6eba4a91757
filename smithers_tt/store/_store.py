"""The checkpoint store: runs, attempts, fenced publication and verified reads.

One synchronous implementation for SQLite and PostgreSQL. The engine calls it through a
single async adapter (``asyncio.to_thread``); nothing here is written twice.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from smithers_tt._ids import check_id
from smithers_tt._labels import check_labels
from smithers_tt._model_calls import ModelCall
from smithers_tt.checkpoint import (
    AgentCheckpoint,
    EncodedCheckpoint,
    content_hash,
    size_limit,
)
from smithers_tt.errors import (
    CheckpointInvalid,
    CheckpointTooLarge,
    InvalidArgument,
    RunNotFound,
)
from smithers_tt.store._compose import on
from smithers_tt.store._frames import Frame
from smithers_tt.store._pausing import Pausing
from smithers_tt.store._records import (
    AttemptKey,
    AttemptRecord,
    CheckpointRef,
    Fence,
    RunRecord,
    new_run_id,
    now_ms,
)
from smithers_tt.store._ref_frame import check_purpose, ref_key
from smithers_tt.store._sweeps import Sweeps
from smithers_tt.store.backend import Driver, Engine, driver
from smithers_tt.store.backend import schema as S
from smithers_tt.store.ledger import (
    AttemptDeleted,
    AttemptEnded,
    AttemptStarted,
    CancelRequested,
    Change,
    Entry,
    GroupCommitter,
    Labelled,
    NewRun,
    NodeCancelled,
    NodeSet,
    Note,
    PublishUnit,
    RefPut,
    RunCancelled,
    RunEnded,
    call_changes,
    claim,
    encode_call,
    json_or_none,
    open_ends,
    touch,
    with_calls,
    write,
)
from smithers_tt.store.reads import ModelCallReads, RunReads

T = TypeVar("T")

Checkpointed = tuple[AgentCheckpoint | EncodedCheckpoint, str, str | None]
"""A checkpoint to publish with an attempt's end: (checkpoint, purpose, agent id)."""

_TERMINAL_RUN = ("finished", "failed", "cancelled")


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


def _check_node_state(state: str) -> None:
    if state not in S.NODE_STATES:
        raise InvalidArgument(f"node state must be one of {list(S.NODE_STATES)}")


class Store(Pausing):
    """Durable runs, attempts and checkpoints on one database (SQLite or PostgreSQL).

    Every state change commits a :class:`Frame`; functions in ``listeners`` are called with
    each frame this object committed, after the commit, in the calling thread.
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._committer = GroupCommitter(engine)
        self.listeners: list[Callable[[Frame], None]] = []
        self.reads = RunReads(engine)
        self.calls = ModelCallReads(engine)
        self.sweeps = Sweeps(engine)
        """What-if sweeps as stored (:class:`~smithers_tt.store._sweeps.Sweeps`)."""
        self._notices: Any = None  # made by the first watch_changes (never on SQLite)
        self._notices_lock = threading.Lock()

    def watch_changes(self, run_id: str, wake: Callable[[], None]) -> Callable[[], None] | None:
        """Call ``wake()`` soon after another writer (in any process) commits a change that
        the executor of ``run_id`` must see: a cancel, breakpoints set, a claim, takeover,
        pause, continue, release, reset or rewind; also whenever such notices may have been
        lost (so ``wake`` may come without a change). It is called from a thread of the
        store's and must be quick and thread-safe.

        Returns the function that stops it, or None when the database cannot tell (SQLite,
        a read-only store): poll the run instead. One listening connection serves every
        run of this store (PostgreSQL ``LISTEN``); it closes with the engine.
        """
        with self._notices_lock:
            notices = self._notices
            if notices is None or notices.closed:
                notices = self._notices = self.engine.backend.run_notices(self.engine)
        return None if notices is None else notices.subscribe(run_id, wake)

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

    # --- reads (store.reads.RunReads, offered here by name) -------------------------------

    get_run = on("reads", RunReads.get_run)
    get_runs = on("reads", RunReads.get_runs)
    list_runs = on("reads", RunReads.list_runs)
    list_nodes = on("reads", RunReads.list_nodes)
    get_attempt = on("reads", RunReads.get_attempt)
    list_attempts = on("reads", RunReads.list_attempts)
    frames = on("reads", RunReads.frames)
    read_content = on("reads", RunReads.read_content)
    load = on("reads", RunReads.load)
    list_refs = on("reads", RunReads.list_refs)
    newest_ref = on("reads", RunReads.newest_ref)
    iter_refs_newest_first = on("reads", RunReads.iter_refs_newest_first)
    pause_frames = on("reads", RunReads.pause_frames)
    watch_run = on("reads", RunReads.watch_run)
    resolve_run_id = on("reads", RunReads.resolve_run_id)
    short_run_ids = on("reads", RunReads.short_run_ids)
    model_calls = on("calls", ModelCallReads.model_calls)
    model_call_totals = on("calls", ModelCallReads.model_call_totals)

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
        labels: dict[str, str] | None = None,
    ) -> tuple[RunRecord, Fence]:
        """Create a run (frame 0); a ``running`` run is owned at epoch 1 by the returned fence.

        ``breakpoints`` (``{"before": [...], "after": [...]}`` node ids) are kept in frame 0,
        so that whoever executes the run pauses at them. ``labels`` (see
        :mod:`smithers_tt._labels`) are written in the same transaction."""
        if status not in ("running", "queued"):
            raise InvalidArgument(f"a new run is running or queued, not {status!r}")
        tags: dict[str, str] = check_labels(labels)  # type: ignore[assignment]  # no None
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
        changes: list[Change] = [created]
        if tags:
            changes.append(Labelled(run_id, tags))
        entry = Entry(run_id, None, changes, create=row)
        self._write(lambda db: [entry], stamp)
        return row.record(entry, stamp, tags), Fence(run_id, epoch)

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

    def cancel_run(
        self, run_id: str, model_calls: Mapping[AttemptKey, Sequence[ModelCall]] | None = None
    ) -> None:
        """Make a run ``cancelled`` now: a new epoch fences every writer, open attempts end.

        ``model_calls`` (by attempt) are the calls the cancelled owner's open attempts made
        since their last write: each attempt's are stored with its end, in this transaction.
        """

        def entries(db: Driver) -> list[Entry]:
            if db.one(db.sql.lock_run, (run_id,)) is None:
                raise RunNotFound(f"no run {run_id!r}; list runs with `smithers-tt runs`")
            changes = with_calls(open_ends(db, run_id, "cancelled"), model_calls or {})
            changes += [
                NodeCancelled(run_id, node_id, iteration, last_attempt)
                for node_id, iteration, last_attempt in db.all(db.sql.running_nodes, (run_id,))
            ]
            return [Entry(run_id, None, [*changes, RunCancelled(run_id)])]

        self._write(entries)

    def heartbeat(self, fence: Fence) -> bool:
        """Record that the owner is alive; False when it no longer owns the run.

        One statement, the fence check its WHERE clause (:func:`touch`), sent as its own
        transaction (one round trip on PostgreSQL): sent twice after a lost reply, it only
        stamps the time again, and says again whether the run is still owned."""

        def work(conn: Connection) -> list[Fence]:
            with driver(conn) as db:
                return touch(db, [fence], now_ms())

        return not self.engine.transaction(work, alone=True)

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
        model_calls: Sequence[ModelCall] = (),
    ) -> list[CheckpointRef]:
        """End an in-progress attempt as finished, failed or cancelled under the fence.

        ``discard_resume=True`` marks its checkpoints as poisoned: resume scans skip them.
        ``node_state`` (with ``output``) also records the node's end, with this attempt as its
        last, in the same transaction: a crash can never leave a finished attempt under a node
        still running, which the next owner would run again. ``checkpoints`` (checkpoint,
        purpose, agent id) are published into the attempt first, in the same transaction (an
        attempt's result checkpoint and its end are one commit). ``model_calls`` the attempt
        made since its last write are recorded with its end (or with the first of
        ``checkpoints``), in the same transaction. Returns their refs.
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
        calls = [encode_call(call) for call in model_calls]
        changes: list[Change] = [
            *call_changes(key, calls),
            *(change for unit in units for change in unit.stored()),
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

    def delete_attempt(self, key: AttemptKey) -> None:
        """Delete an attempt and its refs (content stays until garbage collection)."""
        self._write(lambda db: [Entry(key.run_id, None, [AttemptDeleted(key)])])

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
        model_calls: Sequence[ModelCall] = (),
    ) -> CheckpointRef:
        """Durably publish a checkpoint into an in-progress attempt.

        Returns only once the commit containing it is done; concurrent callers share commits.
        ``model_calls`` (the calls the attempt made since its last write) are recorded with
        the checkpoint's frame, in the same commit.

        Raises:
            FenceLost: ``fence`` no longer owns the run, or the attempt is not in progress;
                nothing was written, not even content.
            CheckpointTooLarge: above ``max_bytes`` or the run's own limit.
            CheckpointCorrupt: the stored content under this hash has other bytes.
        """
        check_purpose(purpose)
        if key.run_id != fence.run_id:
            raise InvalidArgument(f"attempt {key} is not in run {fence.run_id}")
        unit = PublishUnit(
            fence, key, self._encoded(checkpoint, max_bytes), purpose, agent_id,
            [encode_call(call) for call in model_calls],
        )  # fmt: skip
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
