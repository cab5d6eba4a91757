"""The checkpoint store: runs, attempts, fenced publication and verified reads.

One synchronous implementation for SQLite and PostgreSQL. The engine calls it through a
single async adapter (``asyncio.to_thread``); nothing here is written twice.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
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
from smithers_tt.checkpoint._json import canonical_bytes
from smithers_tt.errors import (
    AttemptNotFound,
    CheckpointCorrupt,
    CheckpointInvalid,
    CheckpointMissing,
    CheckpointTooLarge,
    FenceLost,
    HistoryExhausted,
    InvalidArgument,
    RunNotFound,
)
from smithers_tt.store import _schema as S
from smithers_tt.store._engine import Engine
from smithers_tt.store._frames import (
    Frame,
    frame_from_row,
    insert_frame,
    record,
    select_frames,
)
from smithers_tt.store._publish import (
    Driver,
    GroupCommitter,
    PublishUnit,
    check_purpose,
    driver,
    fenced_clock,
    insert_frames,
    put_ref,
    ref_from_row,
)
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
    stored_json,
)

T = TypeVar("T")

HISTORY_SCAN_BOUND = 1000
"""How many refs of a node a resume scan looks at before raising HistoryExhausted."""

_TERMINAL_RUN = ("finished", "failed", "cancelled")


def _json_or_none(value: Any, **options: Any) -> str | None:
    """Canonical JSON text or None; ``options`` go to :func:`canonical_bytes`."""
    return None if value is None else canonical_bytes(value, **options).decode("utf-8")


def _run_from_row(row: Any) -> RunRecord:
    return RunRecord(
        row.run_id,
        row.workflow,
        row.workflow_hash,
        row.status,
        stored_json(row.input_json, f"tt_runs.input_json of run {row.run_id!r}"),
        stored_json(row.output_json, f"tt_runs.output_json of run {row.run_id!r}"),
        row.error,
        row.owner_epoch,
        row.owner_id,
        row.heartbeat_at_ms,
        bool(row.cancel_requested),
        row.parent_run_id,
        row.parent_frame_no,
        row.max_checkpoint_bytes,
        row.created_at_ms,
        row.updated_at_ms,
        row.clock,
        stored_json(row.graph_json, f"tt_runs.graph_json of run {row.run_id!r}"),
    )


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


def _ref_key(ref: CheckpointRef) -> tuple[str, str, int, int, int]:
    return (ref.run_id, ref.node_id, ref.iteration, ref.attempt, ref.sequence)


def _key_tuple(key: AttemptKey) -> tuple[str, str, int, int]:
    return (key.run_id, key.node_id, key.iteration, key.attempt)


def _checked(encoded: EncodedCheckpoint, max_bytes: int | None) -> EncodedCheckpoint:
    """An already encoded checkpoint, checked as :meth:`AgentCheckpoint.encode` would have:
    within the size limit, and addressed by the SHA-256 of its bytes."""
    limit = size_limit(max_bytes)
    if encoded.size > limit:
        raise CheckpointTooLarge(
            f"checkpoint {encoded.codec} v{encoded.version} is {encoded.size} bytes, above the "
            f"limit of {limit} bytes",
            size=encoded.size,
            limit=limit,
        )
    if content_hash(encoded.data) != encoded.content_hash:
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


def _node_frame(
    db: Driver,
    run_id: str,
    frame_no: int,
    stamp: int,
    node_id: str,
    iteration: int,
    state: str,
    output: Any,
    last_attempt: int | None,
) -> Frame:
    """Upsert a node's state and output; return its ``node_state`` frame (numbered by the
    caller, which checked the fence and inserts the frame)."""
    db.count(
        db.sql.put_node,
        (run_id, node_id, iteration, state, last_attempt, _json_or_none(output), stamp),
    )
    return Frame(
        run_id,
        frame_no,
        "node_state",
        node_id,
        iteration,
        last_attempt,
        state=state,
        data=None if output is None else {"output": output},
        created_at_ms=stamp,
    )


def _attempt_frame(
    db: Driver,
    fence: Fence,
    frame_no: int,
    stamp: int,
    node_id: str,
    iteration: int,
    src: CheckpointRef | None,
) -> tuple[AttemptRecord, Frame]:
    """Insert the next attempt of a node; return it and its ``attempt_started`` frame
    (numbered by the caller, which checked the fence and inserts the frame)."""
    row = db.one(db.sql.next_attempt, (fence.run_id, node_id, iteration))
    key = AttemptKey(fence.run_id, node_id, iteration, row[0] if row else 1)
    resumed = None if src is None else _ref_key(src)
    db.count(
        db.sql.insert_attempt,
        (*_key_tuple(key), fence.epoch, False, *(resumed or (None,) * 5), stamp),
    )
    frame = Frame(
        key.run_id,
        frame_no,
        "attempt_started",
        node_id,
        iteration,
        key.attempt,
        state="in_progress",
        created_at_ms=stamp,
        data=None if resumed is None else {"resumed_from": list(resumed)},
    )
    attempt = AttemptRecord(
        key, "in_progress", fence.epoch, 0, False, None, None, resumed, stamp, None
    )
    return attempt, frame


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
    ) -> tuple[RunRecord, Fence]:
        """Create a run (frame 0); a ``running`` run is owned at epoch 1 by the returned fence."""
        if status not in ("running", "queued"):
            raise InvalidArgument(f"a new run is running or queued, not {status!r}")
        if max_checkpoint_bytes is not None:
            size_limit(max_checkpoint_bytes)
        run_id = new_run_id() if run_id is None else check_id(run_id, "run_id")
        stamp = now_ms()
        epoch = 1 if status == "running" else 0
        values = {
            "run_id": run_id,
            "workflow": workflow,
            "workflow_hash": workflow_hash,
            "status": status,
            "input_json": _json_or_none(input, subject="run input"),
            "output_json": None,
            "error": None,
            "owner_epoch": epoch,
            "owner_id": owner_id,
            "heartbeat_at_ms": stamp if status == "running" else None,
            "cancel_requested": False,
            "parent_run_id": parent_run_id,
            "parent_frame_no": parent_frame_no,
            "max_checkpoint_bytes": max_checkpoint_bytes,
            "clock": 0,
            "graph_json": _json_or_none(graph),
            "created_at_ms": stamp,
            "updated_at_ms": stamp,
        }

        def work(conn: Connection, frames: list[Frame]) -> None:
            conn.execute(S.runs.insert().values(**values))
            frames.append(
                insert_frame(
                    conn,
                    Frame(
                        run_id,
                        0,
                        "run_created",
                        state=status,
                        created_at_ms=stamp,
                        data={"workflow": workflow, "input": input},
                    ),
                )
            )

        self._change(work)
        return self.get_run(run_id), Fence(run_id, epoch)

    def get_run(self, run_id: str) -> RunRecord:
        """The run with this id.

        Raises:
            RunNotFound: there is none.
        """
        rows = self._read(sa.select(S.runs).where(S.runs.c.run_id == run_id))
        if not rows:
            raise RunNotFound(f"no run {run_id!r}; list runs with `smithers-tt runs`")
        return _run_from_row(rows[0])

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
        items = [_run_from_row(row) for row in rows[:limit]]
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
            r = S.runs
            row = conn.execute(
                r.update()
                .where(r.c.run_id == run_id, r.c.status.not_in(_TERMINAL_RUN))
                .values(
                    owner_epoch=r.c.owner_epoch + 1,
                    status="running",
                    owner_id=owner_id,
                    heartbeat_at_ms=now_ms(),
                )
                .returning(r.c.owner_epoch)
            ).one_or_none()
            if row is None:
                found = self.get_run(run_id).status  # raises RunNotFound
                raise InvalidArgument(f"run {run_id} is {found}; only unfinished runs are claimed")
            frames.append(
                record(
                    conn,
                    run_id,
                    None,
                    "run_claimed",
                    state="running",
                    data={"epoch": row.owner_epoch, "owner_id": owner_id},
                )
            )
            self._end_open_attempts(conn, frames, run_id, "interrupted", row.owner_epoch)
            return Fence(run_id, row.owner_epoch)

        return self._change(work)

    def _end_open_attempts(
        self,
        conn: Connection,
        frames: list[Frame],
        run_id: str,
        state: str,
        before_epoch: int | None = None,
    ) -> None:
        a = S.attempts
        stmt = a.update().where(a.c.run_id == run_id, a.c.state == "in_progress")
        if before_epoch is not None:
            stmt = stmt.where(a.c.owner_epoch < before_epoch)
        ended = conn.execute(
            stmt.values(state=state, finished_at_ms=now_ms()).returning(
                a.c.node_id, a.c.iteration, a.c.attempt
            )
        ).all()
        for node_id, iteration, attempt in sorted(ended):
            frames.append(
                record(
                    conn,
                    run_id,
                    None,
                    "attempt_finished",
                    node_id=node_id,
                    iteration=iteration,
                    attempt=attempt,
                    state=state,
                )
            )

    def finish_run(
        self, fence: Fence, status: str, *, output: Any = None, error: str | None = None
    ) -> None:
        """End an owned run as ``finished`` or ``failed``; every later fenced write fails."""
        if status not in ("finished", "failed"):
            raise InvalidArgument(f"finish_run takes finished or failed, not {status!r}")

        def work(conn: Connection, frames: list[Frame]) -> None:
            frames.append(
                record(
                    conn,
                    fence.run_id,
                    fence,
                    f"run_{status}",
                    state=status,
                    data={"output": output, "error": error},
                )
            )
            r = S.runs
            conn.execute(
                r.update()
                .where(r.c.run_id == fence.run_id)
                .values(
                    status=status,
                    # Task id -> output: one level around outputs that may nest to the bound.
                    output_json=_json_or_none(output, subject="run output", wrapping=1),
                    error=error,
                    owner_epoch=r.c.owner_epoch + 1,
                )
            )

        self._change(work)

    def request_cancel(self, run_id: str) -> None:
        """Ask the owner of a run to cancel it; it finishes the cancellation after a grace."""

        def work(conn: Connection, frames: list[Frame]) -> None:
            frames.append(record(conn, run_id, None, "cancel_requested"))
            conn.execute(
                S.runs.update().where(S.runs.c.run_id == run_id).values(cancel_requested=True)
            )

        self._change(work)

    def cancel_run(self, run_id: str) -> None:
        """Make a run ``cancelled`` now: a new epoch fences every writer, open attempts end."""

        def work(conn: Connection, frames: list[Frame]) -> None:
            self._end_open_attempts(conn, frames, run_id, "cancelled")
            n = S.nodes
            running = conn.execute(
                n.update()
                .where(n.c.run_id == run_id, n.c.state == "running")
                .values(state="cancelled")
                .returning(n.c.node_id, n.c.iteration, n.c.last_attempt)
            ).all()
            for node_id, iteration, last_attempt in sorted(running):
                frames.append(
                    record(
                        conn,
                        run_id,
                        None,
                        "node_state",
                        node_id=node_id,
                        iteration=iteration,
                        attempt=last_attempt,
                        state="cancelled",
                    )
                )
            frames.append(record(conn, run_id, None, "run_cancelled", state="cancelled"))
            r = S.runs
            conn.execute(
                r.update()
                .where(r.c.run_id == run_id)
                .values(
                    status="cancelled",
                    cancel_requested=True,
                    owner_epoch=r.c.owner_epoch + 1,
                )
            )

        self._change(work)

    def heartbeat(self, fence: Fence) -> bool:
        """Record that the owner is alive; False when it no longer owns the run."""
        r = S.runs
        n = self.engine.transaction(
            lambda conn: (
                conn.execute(
                    r.update()
                    .where(
                        r.c.run_id == fence.run_id,
                        r.c.owner_epoch == fence.epoch,
                        r.c.status == "running",
                    )
                    .values(heartbeat_at_ms=now_ms())
                ).rowcount
            )
        )
        return bool(n)

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

        def work(conn: Connection, frames: list[Frame]) -> Frame:
            stamp = now_ms()
            with driver(conn) as db:
                frame_no = fenced_clock(db, fence, 1, stamp)
                frame = _node_frame(
                    db,
                    fence.run_id,
                    frame_no,
                    stamp,
                    node_id,
                    iteration,
                    state,
                    output,
                    last_attempt,
                )
                insert_frames(db, [frame])
            frames.append(frame)
            return frame

        return self._change(work)

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

        def work(conn: Connection, frames: list[Frame]) -> AttemptRecord:
            stamp = now_ms()
            with driver(conn) as db:
                frame_no = fenced_clock(db, fence, 1 if node_state is None else 2, stamp)
                if node_state is not None:
                    frames.append(
                        _node_frame(
                            db,
                            fence.run_id,
                            frame_no,
                            stamp,
                            node_id,
                            iteration,
                            node_state,
                            None,
                            None,
                        )
                    )
                    frame_no += 1
                attempt, frame = _attempt_frame(
                    db, fence, frame_no, stamp, node_id, iteration, resumed_from
                )
                frames.append(frame)
                insert_frames(db, frames)
            return attempt

        return self._change(work)

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
    ) -> None:
        """End an in-progress attempt as finished, failed or cancelled under the fence.

        ``discard_resume=True`` marks its checkpoints as poisoned: resume scans skip them.
        ``node_state`` (with ``output``) also records the node's end, with this attempt as its
        last, in the same transaction: a crash can never leave a finished attempt under a node
        still running, which the next owner would run again.
        """
        if state not in ("finished", "failed", "cancelled"):
            raise InvalidArgument(f"an attempt ends finished, failed or cancelled, not {state!r}")
        if node_state is not None:
            _check_node_state(node_state)
        elif output is not None:
            raise InvalidArgument("an output is recorded with a node_state")

        def work(conn: Connection, frames: list[Frame]) -> None:
            stamp = now_ms()
            with driver(conn) as db:
                frame_no = fenced_clock(db, fence, 1 if node_state is None else 2, stamp)
                ended = db.count(
                    db.sql.end_attempt,
                    (
                        state,
                        error,
                        error_code,
                        discard_resume,
                        stamp,
                        *_key_tuple(key),
                        fence.epoch,
                    ),
                )
                if not ended:
                    self.get_attempt(key)  # raises AttemptNotFound if it does not exist
                    raise FenceLost(
                        f"attempt {key} is no longer in progress under epoch {fence.epoch}",
                        run_id=key.run_id,
                    )
                frames.append(
                    Frame(
                        fence.run_id,
                        frame_no,
                        "attempt_finished",
                        key.node_id,
                        key.iteration,
                        key.attempt,
                        state=state,
                        data={
                            "error": error,
                            "error_code": error_code,
                            "discard_resume": discard_resume,
                        },
                        created_at_ms=stamp,
                    )
                )
                if node_state is not None:
                    frames.append(
                        _node_frame(
                            db,
                            fence.run_id,
                            frame_no + 1,
                            stamp,
                            key.node_id,
                            key.iteration,
                            node_state,
                            output,
                            key.attempt,
                        )
                    )
                insert_frames(db, frames)

        self._change(work)

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
        self.engine.transaction(
            lambda conn: conn.execute(S.attempts.delete().where(_attempt_where(key)))
        )

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
        if isinstance(checkpoint, EncodedCheckpoint):
            encoded = _checked(checkpoint, max_bytes)
        else:
            encoded = checkpoint.encode(max_bytes)
        unit = PublishUnit(fence, key, encoded, purpose, agent_id)
        ref = self._committer.publish(unit)
        if unit.frame is not None:
            self._emit([unit.frame])
        return ref

    def put_ref(self, ref: CheckpointRef) -> CheckpointRef:
        """Insert a ref with an explicit sequence (restores, imports); see :func:`put_ref`."""
        check_purpose(ref.purpose)
        return self.engine.transaction(lambda conn: put_ref(conn, ref))

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
        stmt = sa.select(f).where(f.c.run_id == run_id).order_by(*key).limit(limit + 1)
        for column, value in (
            (f.c.node_id, node_id),
            (f.c.iteration, iteration),
            (f.c.attempt, attempt),
        ):
            if value is not None:
                stmt = stmt.where(column == value)
        if purpose is not None:
            stmt = stmt.where(f.c.purpose == check_purpose(purpose))
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
                sa.select(f)
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
