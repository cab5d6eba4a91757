"""The persistence of time travel: one transaction handle with the statements rewind, fork,
reset, leases, audit and the fork tree need.

:func:`travel` runs ``work(tx)`` in one transaction of the engine (retried whole on transient
failures, with the commit-token check of :meth:`Engine.transaction` for lost COMMIT replies);
``tx`` is a :class:`Travel`. The decisions (what a snapshot is, which nodes a reset takes,
what a fork starts from, whether a lease may be taken) are made in
:mod:`smithers_tt.timetravel`, which passes plain data down and gets plain data back.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from smithers_tt._labels import check_labels, merged_labels
from smithers_tt.errors import StoreCorrupt
from smithers_tt.store._compose import on
from smithers_tt.store._frames import frame_from_row, select_frames
from smithers_tt.store._records import Frame, RunRecord, now_ms, stored_json
from smithers_tt.store.backend import RUN_STATE_COLUMNS, Engine, dialect_of, driver
from smithers_tt.store.backend import schema as S
from smithers_tt.store.ledger import (
    AUDIT_COLUMNS,
    AttemptRow,
    CutStatements,
    Entry,
    Forked,
    ForkRows,
    KeptRewind,
    Labelled,
    LiveWrites,
    NodesReset,
    RewindUndone,
    Rewound,
    audit_row,
    fork_row,
    kept_rewinds,
    new_rewind_id,
    write,
)
from smithers_tt.store.reads import TravelReads, corrupt_frame, labels_of

T = TypeVar("T")

ForkEdgeRow = tuple[str, str | None, int | None, str, str, int, int]
"""``(run_id, parent_run_id, parent_frame_no, status, workflow, created_at_ms, clock)`` of a
run."""


@dataclass(frozen=True, slots=True)
class RunState:
    """What time travel reads of a run row: ownership, lease, clock and how it was made."""

    run_id: str
    workflow: str
    workflow_hash: str | None
    status: str
    owner_id: str | None
    owner_epoch: int
    heartbeat_at_ms: int | None
    lease_owner: str | None
    lease_until_ms: int | None
    clock: int
    max_checkpoint_bytes: int | None
    graph_json: str | None
    input_json: str | None
    parent_run_id: str | None
    parent_frame_no: int | None
    inherits: bool | None

    @property
    def input(self) -> Any:
        """The run's input (as its ``run_created`` or ``forked`` frame holds it)."""
        return stored_json(self.input_json, f"tt_runs.input_json of run {self.run_id!r}")

    @property
    def base(self) -> tuple[str, int] | None:
        """``(parent_run_id, parent_frame_no)`` of a fork by reference not materialised: its
        history before frame 0 is its parent's up to that frame. ``None`` for a run whose
        history is all its own (a fork that restates its parent in base frames included)."""
        if not self.inherits or self.parent_run_id is None or self.parent_frame_no is None:
            return None
        return self.parent_run_id, self.parent_frame_no

    @property
    def graph(self) -> dict[str, list[str]] | None:
        """The workflow graph stored with the run (task ids and the tasks each needs).

        Raises:
            StoreCorrupt: the stored graph is not JSON.
        """
        return stored_json(self.graph_json, f"tt_runs.graph_json of run {self.run_id!r}")


if tuple(RunState.__dataclass_fields__) != RUN_STATE_COLUMNS:  # Statements.run_state's
    raise RuntimeError("smithers_tt.store._travel.RunState is out of step with _dialect")
_RUN_STATE = tuple(S.runs.c[name] for name in RUN_STATE_COLUMNS)

_EDGE = (
    S.runs.c.run_id,
    S.runs.c.parent_run_id,
    S.runs.c.parent_frame_no,
    S.runs.c.status,
    S.runs.c.workflow,
    S.runs.c.created_at_ms,
    S.runs.c.clock,
)


class Travel:
    """The statements of one time-travel transaction (see :func:`travel`), composed of parts
    from the store's rooms, each on the same connection:

    * :attr:`reads` (:class:`~.reads._travel.TravelReads`): frames, the state at frame N with
      its refs left in SQL, live rows by key;
    * :attr:`live` (:class:`~.ledger._live.LiveWrites`): live state replaced in bulk,
      content, base frames of a fork, audit rows;
    * :attr:`rewinds` (:class:`~.ledger._cut.CutStatements`): a rewind's writes by key,
      keeping the rows at or below its cut;

    and the run row read and changed here (its changes through the ledger). The parts'
    methods are offered on the handle by name, below, so callers hold one object.
    """

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self.reads = TravelReads(conn)
        self.live = LiveWrites(conn)
        self.rewinds = CutStatements(conn)

    content_sizes = on("reads", TravelReads.content_sizes)
    frames = on("reads", TravelReads.frames)
    frame_span = on("reads", TravelReads.frame_span)
    other_frames = on("reads", TravelReads.other_frames)
    other_frame_keys = on("reads", TravelReads.other_frame_keys)
    checkpoint_groups = on("reads", TravelReads.checkpoint_groups)
    stored_ref_rows = on("reads", TravelReads.stored_ref_rows)
    newest_stored_ref = on("reads", TravelReads.newest_stored_ref)
    first_frame_no = on("reads", TravelReads.first_frame_no)
    frames_after = on("reads", TravelReads.frames_after)
    node_history = on("reads", TravelReads.node_history)
    tail_checkpoints = on("reads", TravelReads.tail_checkpoints)
    nodes_seen = on("reads", TravelReads.nodes_seen)
    live_by_key = on("reads", TravelReads.live_by_key)
    live_rows = on("reads", TravelReads.live_rows)
    insert_content = on("live", LiveWrites.insert_content)
    audit = on("live", LiveWrites.audit)
    replace_live_state = on("live", LiveWrites.replace_live_state)
    write_base_frames = on("live", LiveWrites.write_base_frames)
    base_frames = on("live", LiveWrites.base_frames)
    fork_rows = on("live", LiveWrites.fork_rows)
    fork_rows_read = on("live", LiveWrites.fork_rows_read)
    write_delta = on("rewinds", CutStatements.write_delta)
    write_wide = on("rewinds", CutStatements.write_wide)
    restore_kept = on("rewinds", CutStatements.restore_kept)
    reset_after = on("rewinds", CutStatements.reset_after)
    cut_live_state = on("rewinds", CutStatements.cut_live_state)

    @staticmethod
    def new_rewind_id() -> str:
        """A fresh id for the rewind being made (to keep its live rows under)."""
        return new_rewind_id()

    def clock(self, run_id: str) -> int | None:
        """The run's clock (its newest frame number), or ``None`` when there is no such run."""
        r = S.runs
        return self._conn.execute(
            sa.select(r.c.clock).where(r.c.run_id == run_id)
        ).scalar_one_or_none()

    def run_state(self, run_id: str, *, lock: bool = False) -> RunState | None:
        """The run row, or ``None``; with ``lock``, held (``FOR UPDATE``) until the end."""
        stmt = sa.select(*_RUN_STATE).where(S.runs.c.run_id == run_id)
        if lock:
            stmt = stmt.with_for_update()
        row = self._conn.execute(stmt).one_or_none()
        return None if row is None else RunState(*row)

    def run_state_at(self, run_id: str, frame_no: int) -> tuple[RunState | None, Frame | None]:
        """The run row, held (``FOR UPDATE``) until the end, and the newest frame at or below
        ``frame_no`` that set its status, output or error (as :meth:`run_level_frame`): both
        in one round trip on PostgreSQL. ``(None, None)`` when there is no such run.

        Raises:
            SnapshotInvalid: the frame's data is not JSON at all.
        """
        with driver(self._conn) as db:
            run, frame = db.together(
                [
                    (db.sql.run_state, (run_id,), False),
                    (db.sql.run_level_frame, (run_id, frame_no), False),
                ]
            )
        if run is None:
            return None, None
        return RunState(*run), None if frame is None else _run_level(run_id, frame)

    def run_level_frame(
        self, run_id: str, frame_no: int, kinds: Sequence[str] | None = None
    ) -> Frame | None:
        """The newest frame at or below ``frame_no`` that set the run's status, output or
        error (of ``kinds``, a subset of ``RUN_LEVEL_KINDS``, when given): one probe of the
        partial index ``tt_frames_run_level``, however long the history. ``None`` if none.

        Raises:
            SnapshotInvalid: the frame's data is not JSON at all.
        """
        f = S.frames
        stmt = select_frames(run_id, None, frame_no).where(S.RUN_LEVEL_WHERE)
        if kinds is not None:
            stmt = stmt.where(f.c.kind.in_(sorted(kinds)))
        row = self._conn.execute(
            stmt.order_by(None).order_by(f.c.frame_no.desc()).limit(1)
        ).one_or_none()
        return None if row is None else _run_level(run_id, row)

    def set_inherits(self, run_id: str, inherits: bool) -> None:
        """Mark the run as reading its history before frame 0 from its parent (or not)."""
        r = S.runs
        self._conn.execute(r.update().where(r.c.run_id == run_id).values(inherits=inherits or None))

    def materialize(self, fork: ForkRows) -> None:
        """Write what materialising a fork by reference writes (``fork``, from
        :meth:`fork_rows`: its base frames and live nodes, attempts and refs, see
        :meth:`LiveWrites.materialize`) and mark the run as reading nothing from its parent.

        Raises:
            Refold: the refs copied are not the refs restated (redo with the full fold).
        """
        self.live.materialize(fork)
        self.set_inherits(fork.run_id, False)

    def inheriting_runs(self) -> list[str]:
        """Every fork by reference not materialised yet, by id."""
        r = S.runs
        rows = self._conn.execute(
            sa.select(r.c.run_id).where(r.c.inherits.is_(True)).order_by(r.c.run_id)
        )
        return [row[0] for row in rows]

    def inheriting_children(self, run_ids: Sequence[str]) -> list[str]:
        """Runs forked by reference (not materialised) from any of ``run_ids``, by id."""
        r = S.runs
        rows = self._conn.execute(
            sa.select(r.c.run_id)
            .where(r.c.parent_run_id.in_(run_ids), r.c.inherits.is_(True))
            .order_by(r.c.run_id)
        )
        return [row[0] for row in rows]

    def take_lease(self, run_id: str, token: str, until_ms: int) -> None:
        """Write ``token`` as the run's lease holder until ``until_ms``."""
        r = S.runs
        self._conn.execute(
            r.update()
            .where(r.c.run_id == run_id)
            .values(lease_owner=token, lease_until_ms=until_ms)
        )

    def release_lease(self, run_id: str, token: str) -> None:
        """Clear the run's lease if ``token`` still holds it."""
        r = S.runs
        self._conn.execute(
            r.update()
            .where(r.c.run_id == run_id, r.c.lease_owner == token)
            .values(lease_owner=None, lease_until_ms=None)
        )

    def rewind_run(
        self,
        run_id: str,
        *,
        clock: int,
        status: str,
        output: Any = None,
        error: str | None = None,
        kept_ending: bool = False,
        kept_as: str | None = None,
    ) -> None:
        """Delete the run's frames above ``clock`` and put the run row back to ``clock`` with
        this ending (with ``kept_ending``, its stored output and error stay), fencing every
        owner with a new epoch and clearing cancel request and lease, through the ledger (the
        end of a rewind; see :class:`~._ledger_travel.Rewound`). ``kept_as``: the id
        :meth:`write_wide` kept the live rows it changed under (the rewind's id)."""
        change = Rewound(
            self._conn, run_id, clock=clock, status=status, output=output, error=error,
            kept_ending=kept_ending, kept_as=kept_as,
        )  # fmt: skip
        with driver(self._conn) as db:
            write(db, [Entry(run_id, None, [change])], now_ms())

    def kept_rewinds(self, run_id: str) -> list[KeptRewind]:
        """The rewinds of the run still kept for undo, newest first."""
        return kept_rewinds(self._conn, run_id)

    def undo_rewind(self, kept: KeptRewind, status: str) -> None:
        """Put back what ``kept`` removed through the ledger (frames, clock, output, error;
        the run ends ``status``), fencing every owner and clearing cancel request and lease
        (see :class:`~._ledger_travel.RewindUndone`); the live state is the caller's."""
        change = RewindUndone(self._conn, kept, status)
        with driver(self._conn) as db:
            write(db, [Entry(kept.run_id, None, [change])], now_ms())

    def fork_run(
        self,
        parent: RunState,
        child_id: str,
        parent_frame_no: int,
        *,
        status: str,
        input: Any,
        output: Any,
        error: str | None,
        first: Frame,
        project: Callable[[], Any] | None,
        actor: str | None,
        detail: dict[str, Any],
        inherits: bool = False,
        labels: Mapping[str, str | None] | None = None,
    ) -> RunRecord:
        """Create the run of a fork of ``parent`` at ``parent_frame_no`` through the ledger:
        its row (clock 0, unowned, the parent's workflow, graph and checkpoint ceiling), the
        base frames and live state ``project`` writes (if any), then ``first`` (frame 0),
        stamped ``first.created_at_ms``, with the parent's audit row of the fork (by
        ``actor``, with ``detail``). With ``inherits`` the fork is by reference: its history
        before frame 0 is read from the parent (``project`` writes only what the fork
        changes, such as edited checkpoints). The child carries its parent's labels with
        ``labels`` over them (checked; a ``None`` value drops one), written with its row.
        Returns the child's run as it now reads."""
        inherited = labels_of(self._conn, [parent.run_id]).get(parent.run_id, {})
        tags = merged_labels(inherited, check_labels(labels, removals=True))
        create = fork_row(
            parent, child_id, parent_frame_no, status=status, input=input, output=output,
            error=error, inherits=inherits,
        )  # fmt: skip
        stamp = first.created_at_ms
        audit = audit_row(parent.run_id, "fork", parent_frame_no, actor, detail, stamp)
        forked = Forked(first, project, tuple(audit[name] for name in AUDIT_COLUMNS))
        changes = [forked, Labelled(child_id, tags)] if tags else [forked]
        entry = Entry(child_id, None, changes, create=create)
        with driver(self._conn) as db:
            write(db, [entry], stamp)
        return create.record(entry, stamp, tags)

    def reset_nodes(self, run_id: str, node_id: str, nodes: Sequence[str]) -> list[AttemptRow]:
        """Reset ``nodes`` (named after ``node_id``, the one asked for) through the ledger:
        their live refs, attempts and node rows go, the run becomes ``interrupted`` (a new
        epoch, no cancel request, no lease) and a ``reset`` frame records it, with no fence
        (the caller holds the run's lease). Returns the attempts removed as ``(node_id,
        iteration, attempt, state)``, in key order."""
        change = NodesReset(self._conn, run_id, node_id, nodes)
        with driver(self._conn) as db:
            write(db, [Entry(run_id, None, [change])], now_ms())
        return change.removed

    def fork_edge(self, run_id: str) -> ForkEdgeRow | None:
        """The run's place in its fork tree, or ``None`` when there is no such run."""
        row = self._conn.execute(sa.select(*_EDGE).where(S.runs.c.run_id == run_id)).one_or_none()
        return None if row is None else tuple(row)  # type: ignore[return-value]

    def frame_stamps(self, keys: Sequence[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """``created_at_ms`` of the frames ``(run_id, frame_no)`` in ``keys`` that exist."""
        f = S.frames
        found: dict[tuple[str, int], int] = {}
        keys = sorted(set(keys))
        for start in range(0, len(keys), 500):
            rows = self._conn.execute(
                sa.select(f.c.run_id, f.c.frame_no, f.c.created_at_ms).where(
                    sa.tuple_(f.c.run_id, f.c.frame_no).in_(keys[start : start + 500])
                )
            )
            found.update(((run_id, frame_no), stamp) for run_id, frame_no, stamp in rows)
        return found

    def fork_children(self, run_ids: Sequence[str]) -> list[ForkEdgeRow]:
        """The runs forked directly from any of ``run_ids``, by run id."""
        r = S.runs
        rows = self._conn.execute(
            sa.select(*_EDGE).where(r.c.parent_run_id.in_(run_ids)).order_by(r.c.run_id)
        ).all()
        return [tuple(row) for row in rows]  # type: ignore[misc]


def _run_level(run_id: str, row: Any) -> Frame:
    """A run-level frame read by :meth:`Travel.run_level_frame`, or :class:`SnapshotInvalid`
    naming it if its data is not JSON."""
    try:
        return frame_from_row(row)
    except StoreCorrupt as error:
        raise corrupt_frame(run_id, row[1], row[2], error.__cause__) from error


def travel(
    engine: Engine,
    work: Callable[[Travel], T],
    *,
    write: bool = True,
    roomy_memory: bool = False,
) -> T:
    """Run ``work(tx)`` in one transaction of ``engine`` (see :meth:`Engine.transaction`:
    retried whole on transient failures, never after a COMMIT that was carried out).

    With ``roomy_memory`` the connection gets more memory for the transaction (a larger
    SQLite page cache, PostgreSQL ``work_mem``): what a rewind or fork of a large run needs.
    """

    def go(conn: Connection) -> T:
        with dialect_of(conn).roomy(conn) if roomy_memory else nullcontext():
            return work(Travel(conn))

    return engine.transaction(go, write=write)
