"""The changes time travel and bulk writes make to a run, written through the ledger.

Each is a :class:`~smithers_tt.store.ledger._write.Change`:
:func:`~smithers_tt.store.ledger._write.write` advances the run's clock once (or inserts a new
run), checks the fence, applies the change's projection and inserts its frame, exactly as for
the engine's changes. What is particular to
time travel is the projection: set-based statements on the transaction's SQLAlchemy
connection (``INSERT ... SELECT`` copies, multi-row inserts), given to the change as a
callable so the rows never pass through Python one by one.

A rewind takes frames *away* (:class:`Rewound`): it adds none (it is frameless), and its
projection deletes the later frames and sets the clock back to the frame it keeps, after the
ledger locked the run row like any other change's; so no other module writes a run's clock.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from smithers_tt.checkpoint import canonical_bytes
from smithers_tt.errors import InvalidArgument
from smithers_tt.store._records import Frame
from smithers_tt.store.backend import Dialect
from smithers_tt.store.backend import schema as S
from smithers_tt.store.ledger._kept import drop_kept_rows
from smithers_tt.store.ledger._write import Change, NewRun, Write, json_or_none, notify

AttemptRow = tuple[str, int, int, str]
"""``(node_id, iteration, attempt, state)`` of a live attempt."""


class NodesReset(Change):
    """Nodes leave the live state (their refs, attempts and node rows; the frames keep them)
    and the run becomes ``interrupted``: no output or error, a new epoch fencing every owner,
    no cancel request, no lease. The frame (``reset``) names the nodes and the attempts
    removed, which :attr:`removed` holds after the write."""

    __slots__ = ("conn", "node_id", "nodes", "removed", "run_id")

    def __init__(self, conn: Connection, run_id: str, node_id: str, nodes: Sequence[str]):
        self.conn, self.run_id, self.node_id, self.nodes = conn, run_id, node_id, list(nodes)
        self.removed: list[AttemptRow] = []

    def apply(self, w: Write, frame_no: int, early: Any) -> Frame:
        conn, run_id, nodes = self.conn, self.run_id, self.nodes
        notify(w, run_id)  # its owner, if any, is fenced out
        a = S.attempts
        self.removed = [
            tuple(row)  # type: ignore[misc]
            for row in conn.execute(
                sa.select(a.c.node_id, a.c.iteration, a.c.attempt, a.c.state)
                .where(a.c.run_id == run_id, a.c.node_id.in_(nodes))
                .order_by(a.c.node_id, a.c.iteration, a.c.attempt)
            )
        ]
        for table in (S.refs, S.attempts, S.nodes):
            conn.execute(table.delete().where(table.c.run_id == run_id, table.c.node_id.in_(nodes)))
        r = S.runs
        conn.execute(
            r.update()
            .where(r.c.run_id == run_id)
            .values(
                status="interrupted",
                output_json=None,
                error=None,
                cancel_requested=False,
                owner_epoch=r.c.owner_epoch + 1,
                lease_owner=None,
                lease_until_ms=None,
            )
        )
        return Frame(
            run_id, frame_no, "reset", node_id=self.node_id, state="interrupted",
            data={"nodes": nodes, "removed": [list(row) for row in self.removed]},
            created_at_ms=w.stamp,
        )  # fmt: skip


class Forked(Change):
    """Frame 0 of a fork (``frame``, a ``forked`` frame): its projection writes the base
    frames (numbered below 0) that restate the parent's snapshot and the live state they
    fold to (``project``, set-based; ``None`` for a fork by reference that changes nothing
    of what it inherits), and the audit row ``audit`` (values of
    :attr:`Statements.insert_audit`), which goes with the frame's insert. The run row is the
    entry's ``create``."""

    __slots__ = ("audit", "executes", "frame", "project")

    def __init__(
        self,
        frame: Frame,
        project: Callable[[], Any] | None,
        audit: tuple[Any, ...] | None = None,
    ) -> None:
        self.frame, self.project, self.audit = frame, project, audit
        self.executes = project is not None

    def apply(self, w: Write, frame_no: int, early: Any) -> Frame:
        if frame_no != self.frame.frame_no:
            raise InvalidArgument(f"a fork's first frame is 0, not {self.frame.frame_no}")
        if self.project is not None:
            self.project()
        if self.audit is not None:
            w.defer(w.sql.insert_audit, self.audit)
        return self.frame


def fork_row(
    parent: Any,
    child_id: str,
    parent_frame_no: int,
    *,
    status: str,
    input: Any,
    output: Any,
    error: str | None,
    inherits: bool,
) -> NewRun:
    """The ``create`` of a fork's :class:`~smithers_tt.store.ledger._write.Entry`: the run row of a
    fork of ``parent`` (a run state) at ``parent_frame_no``: unowned, the parent's workflow,
    graph and checkpoint ceiling; ``output`` and ``error`` are those of a fork that keeps its
    parent's ending; ``inherits`` marks a fork by reference (its history before frame 0 is
    read from its parent)."""
    return NewRun(
        child_id, parent.workflow, parent.workflow_hash, status, json_or_none(input),
        0, None, None, False, parent.run_id, parent_frame_no, parent.max_checkpoint_bytes,
        parent.graph_json,
        # A run's output maps task ids to outputs: one level that is not theirs.
        output_json=json_or_none(output, wrapping=1), error=error, inherits=inherits or None,
    )  # fmt: skip


class Restated(Change):
    """A frame written as it was computed elsewhere (a bulk history): no projection; its
    number must be the one the clock gives it."""

    __slots__ = ("frame",)

    def __init__(self, frame: Frame) -> None:
        self.frame = frame

    def apply(self, w: Write, frame_no: int, early: Any) -> Frame:
        if frame_no != self.frame.frame_no:
            raise InvalidArgument(
                f"frame {self.frame.frame_no} of run {self.frame.run_id} would be frame "
                f"{frame_no}: a history must be numbered densely from the run's clock + 1"
            )
        return self.frame


class HistoryEnded(Restated):
    """The last frame of a bulk history: the run ends ``status`` with ``output`` (a new epoch
    fences its creator) and ``project`` writes the live state the history folds to."""

    __slots__ = ("conn", "output", "project", "status")

    def __init__(
        self, conn: Connection, frame: Frame, status: str, output: Any, project: Callable[[], Any]
    ) -> None:
        super().__init__(frame)
        self.conn, self.status, self.output, self.project = conn, status, output, project

    def apply(self, w: Write, frame_no: int, early: Any) -> Frame:
        frame = super().apply(w, frame_no, early)
        r = S.runs
        self.conn.execute(
            r.update()
            .where(r.c.run_id == frame.run_id)
            .values(
                status=self.status,
                # Always JSON, ``null`` too: what a run the engine ended stores.
                output_json=canonical_bytes(self.output).decode(),
                owner_epoch=r.c.owner_epoch + 1,
            )
        )
        self.project()
        return frame


class Rewound(Change):
    """The run's history goes back to frame ``clock``: its clock is set to ``clock`` (which
    hides the later frames, kept where they are for undo: the run's next frame deletes them)
    with this ending (with ``kept_ending``, the stored output and
    error stay), every owner is fenced with a new epoch, and cancel request and lease are
    cleared (the live state is the caller's projection, written before). Frameless: the audit
    row records the rewind. ``kept_as``: the id the live rows it changed were kept under
    (:func:`keep`)."""

    __slots__ = (
        "clock", "conn", "error", "kept_as", "kept_ending", "output", "run_id", "status",
    )  # fmt: skip

    ticks = 0

    def __init__(
        self,
        conn: Connection,
        run_id: str,
        *,
        clock: int,
        status: str,
        output: Any,
        error: str | None,
        kept_ending: bool = False,
        kept_as: str | None = None,
    ) -> None:
        self.conn, self.run_id, self.clock = conn, run_id, clock
        self.status, self.output, self.error = status, output, error
        self.kept_ending, self.kept_as = kept_ending, kept_as

    def apply(self, w: Write, frame_no: int, early: Any) -> None:
        run_id, conn = self.run_id, self.conn
        notify(w, run_id)  # its owner, if any, is fenced out
        keep(conn, run_id, self.clock, w.stamp, self.kept_as)
        if self.kept_ending:  # no frame above the clock set them: they stay as stored
            output_json, error = S.runs.c.output_json, S.runs.c.error
        else:  # a run's output maps task ids to outputs: one level that is not theirs
            output_json, error = json_or_none(self.output, wrapping=1), self.error
        set_history_end(
            conn, run_id, self.clock, self.status, output_json, error, w.stamp, hides=True
        )


def new_rewind_id() -> str:
    """A fresh id for a kept rewind (hex: no waiting model call's mark is)."""
    return secrets.token_hex(12)


def keep(conn: Connection, run_id: str, clock: int, stamp: int, kept_as: str | None = None) -> None:
    """Keep what a rewind of ``run_id`` to ``clock`` removes, for undo: the run row's clock
    and ending (``tt_rewinds``; the frames above ``clock`` stay where they are, hidden by the
    clock the caller sets); the model calls written with those frames stay in place, marked
    with the rewind (hidden from every read until undone). ``kept_as`` is the id the rewind
    kept the live rows it changed under (``tt_rewinds.kept_rows``), if it did."""
    rewind_id = new_rewind_id() if kept_as is None else kept_as
    r, rw = S.runs, S.rewinds
    conn.execute(
        rw.insert().from_select(
            [c.name for c in rw.c],
            sa.select(
                sa.literal(rewind_id, S.ID), r.c.run_id, r.c.clock,
                sa.literal(clock, sa.BigInteger), r.c.status, r.c.output_json, r.c.error,
                sa.literal(stamp, sa.BigInteger),
                sa.literal(True if kept_as is not None else None, sa.Boolean),
            ).where(r.c.run_id == run_id),
        )
    )  # fmt: skip
    m = S.model_calls
    conn.execute(
        m.update()
        .where(m.c.run_id == run_id, m.c.frame_no > clock, m.c.rewind_id.is_(None))
        .values(rewind_id=rewind_id)
    )
    t = S.lg_threads
    if conn.execute(sa.select(t.c.run_id).where(t.c.run_id == run_id)).first() is not None:
        # A LangGraph thread: a step's checkpoint cut, its tasks' later calls wait for the
        # next one (the numbers above the cut are given again).
        lg = S.lg_checkpoints
        conn.execute(
            lg.update()
            .where(lg.c.run_id == run_id, lg.c.child_frame_no > clock)
            .values(child_frame_no=None)
        )


@dataclass(frozen=True, slots=True)
class KeptRewind:
    """What the newest kept rewind of a run removed: its clock and ending before."""

    rewind_id: str
    run_id: str
    from_clock: int
    to_frame: int
    status: str
    output_json: str | None
    error: str | None
    created_at_ms: int
    kept_rows: bool | None = None
    """The live rows the rewind changed are kept (``tt_rewound_*``): its undo writes them
    back (``restore_kept``) instead of folding its frames."""


NEWEST_FIRST = (S.rewinds.c.created_at_ms.desc(), S.rewinds.c.from_clock.asc())
"""The order of a run's kept rewinds, newest first (of two kept in the same millisecond, the
later rewound from the lower clock)."""


def kept_rewinds(conn: Connection, run_id: str) -> list[KeptRewind]:
    """The rewinds of ``run_id`` still kept, newest first."""
    rw = S.rewinds
    rows = conn.execute(sa.select(*rw.c).where(rw.c.run_id == run_id).order_by(*NEWEST_FIRST))
    return [KeptRewind(*row) for row in rows]


def undoable(clock: int, kept: Sequence[KeptRewind]) -> list[KeptRewind]:
    """Of a run's ``kept`` rewinds (newest first), those undo can still reach, newest first.

    Undo takes the newest back when the run stands at the frame it rewound to (``clock``),
    which puts the run back at that rewind's clock, where the one before is taken back if it
    rewound to that frame, and so on. Frames written on top of a rewind end the chain: what
    that rewind and every one before it removed followed a history that is gone, so it can
    never be put back (garbage collection releases it).
    """
    reach: list[KeptRewind] = []
    for rewind in kept:
        if rewind.to_frame != clock:
            break
        reach.append(rewind)
        clock = rewind.from_clock
    return reach


def release_rewinds(conn: Connection, rewind_ids: Sequence[str]) -> None:
    """Delete kept rewinds and the model calls of the frames they cut (no foreign key ties
    those: see :mod:`._schema`). Their frames are not theirs to delete: an undo shows them
    again, and the run's next frame deletes every frame above its clock."""
    rw, m = S.rewinds, S.model_calls
    for part in Dialect.chunks(list(rewind_ids), 1):
        conn.execute(m.delete().where(m.c.rewind_id.in_(list(part))))
        drop_kept_rows(conn, part)
        conn.execute(rw.delete().where(rw.c.rewind_id.in_(list(part))))


class RewindUndone(Change):
    """A kept rewind is undone: its frames are seen again as they were (the run's clock goes
    back up over them), the run
    row gets back its clock, output and error (``status``, decided by the caller), every
    owner is fenced with a new epoch, cancel request and lease are cleared, and the kept rows
    go. Frameless (the audit row records it); the live state is the caller's projection,
    written after (it folds the frames put back)."""

    __slots__ = ("conn", "kept", "status")

    ticks = 0

    def __init__(self, conn: Connection, kept: KeptRewind, status: str) -> None:
        self.conn, self.kept, self.status = conn, kept, status

    def apply(self, w: Write, frame_no: int, early: Any) -> None:
        conn, kept = self.conn, self.kept
        notify(w, kept.run_id)  # its owner, if any, is fenced out
        m = S.model_calls  # the calls of the frames put back are seen again
        conn.execute(m.update().where(m.c.rewind_id == kept.rewind_id).values(rewind_id=None))
        f = S.frame_rows  # no frame left above the clock: the mark goes (no delete to come)
        above = conn.execute(
            sa.select(f.c.frame_no)
            .where(f.c.run_id == kept.run_id, f.c.frame_no > kept.from_clock)
            .limit(1)
        ).first()
        set_history_end(  # the stored output text, as it was
            conn, kept.run_id, kept.from_clock, self.status, kept.output_json, kept.error,
            w.stamp, hides=False if above is None else None,
        )  # fmt: skip
        release_rewinds(conn, [kept.rewind_id])


def delete_runs(
    conn: Connection,
    run_ids: Sequence[str],
    *conditions: sa.ColumnElement[bool],
    returning: Sequence[sa.ColumnElement[Any]] = (),
) -> list[sa.Row[Any]]:
    """Delete the runs ``run_ids`` that meet ``conditions`` (checked by the deleting
    statement), with everything under them: the rows of every table that cascades from
    ``tt_runs`` (their rewinds included), and the frames their kept rewinds hold, which no
    foreign key ties to a run or a rewind (see :mod:`._schema`). The caller holds the run rows
    locked, so no rewind of them is kept or undone meanwhile. Returns one row per deleted
    run: its ``run_id``, then the ``returning`` columns of ``tt_runs``."""
    r, rw = S.runs, S.rewinds
    ids = list(run_ids)
    kept = conn.execute(sa.select(rw.c.rewind_id, rw.c.run_id).where(rw.c.run_id.in_(ids))).all()
    gone = conn.execute(
        r.delete().where(r.c.run_id.in_(ids), *conditions).returning(r.c.run_id, *returning)
    ).all()
    deleted = {row[0] for row in gone}
    release_rewinds(conn, [rewind_id for rewind_id, run_id in kept if run_id in deleted])
    return gone


def set_history_end(
    conn: Connection,
    run_id: str,
    clock: int,
    status: str,
    output_json: str | None,
    error: str | None,
    stamp: int,
    *,
    hides: bool | None = None,
) -> None:
    """Put the run row at the end of a history that was cut or restored: its clock at
    ``clock`` with this ending, every owner fenced by a new epoch, no cancel request, no
    lease (what a rewind and its undo both leave); ``hides`` True (a cut) marks it as holding
    frames above its clock (see ``tt_runs.hides``), False unmarks it, None leaves the mark."""
    r = S.runs
    conn.execute(
        r.update()
        .where(r.c.run_id == run_id)
        .values(
            clock=clock,
            status=status,
            output_json=output_json,
            error=error,
            owner_epoch=r.c.owner_epoch + 1,
            cancel_requested=False,
            lease_owner=None,
            lease_until_ms=None,
            updated_at_ms=stamp,
            **({} if hides is None else {"hides": True if hides else None}),
        )
    )
