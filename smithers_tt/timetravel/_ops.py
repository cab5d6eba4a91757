"""Rewind, its undo, and reset: each one transaction under the run's lease (forks are
:mod:`._fork`'s, the lease :mod:`._lease`'s).

Every operation reads the run's frames, folds them into the snapshot it needs, checks that
snapshot is whole (all content stored, sizes within the ceiling, every ref owned by an
attempt) and only then changes anything, with a bounded number of statements per thousand
rows. A rewind of the last few frames of a long history, and its undo, read and change only
what those frames touched instead (:mod:`._delta`), and so does a rewind of many frames of a
long history, with the checkpoint frames left in SQL (:mod:`._wide`), which keeps the live
rows it changes so that its undo puts them back without reading a frame; a rewind
further back in a shorter history keeps the live rows at or below its cut and takes away the
rest (:func:`._materialize.cut_live_state`). A crash in the middle leaves the transaction
uncommitted: the run is untouched.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from smithers_tt._ids import owner_id
from smithers_tt.errors import ConfirmationRequired, ForkPointRewound, NothingToUndo
from smithers_tt.store import Store, travel
from smithers_tt.store.for_timetravel import Travel
from smithers_tt.timetravel import _delta, _wide
from smithers_tt.timetravel._at import load_refs, snapshot_at
from smithers_tt.timetravel._fork import check_nodes, expand, materialize_in
from smithers_tt.timetravel._lease import (
    Lease,
    acquire_lease,
    check_lease,
    leased,
    transaction,
    why,
)
from smithers_tt.timetravel._materialize import check_contents, cut_live_state, replace_live_state
from smithers_tt.timetravel._snapshot import LaterSnapshot, Snapshot
from smithers_tt.timetravel._undo import refusal


def _live_status(status: str) -> str:
    return "interrupted" if status in ("running", "cancelled") else status


def rewind(
    store: Store,
    run_id: str,
    frame_no: int,
    *,
    confirm: bool = False,
    force: bool = False,
    reason: str | None = None,
) -> Snapshot:
    """Put a run back to frame ``frame_no`` in place; return the restored snapshot.

    Restores exactly the nodes, attempts and refs visible at that frame, removes every frame,
    attempt and ref above it (including attempt numbers reused after a reset), fences any
    owner with a new epoch and records an audit row (with ``reason``, why, when given). Other
    runs and shared content are untouched. Runs forked at a frame above ``frame_no`` keep
    working (their base frames restate the parent's state) but their fork point is gone:
    that takes ``force=True``, and the fork tree shows it (:attr:`ForkEdge.fork_point_rewound`).

    Raises:
        ConfirmationRequired: ``confirm`` is not True (nothing changes).
        ForkPointRewound: runs were forked above ``frame_no`` and ``force`` is not True.
        LeaseBusy: another operation or a live process holds the run.
        FrameNotFound, SnapshotInvalid, CheckpointMissing: nothing changes.
    """
    if confirm is not True:
        raise ConfirmationRequired(
            f"rewinding run {run_id} to frame {frame_no} deletes everything after it; "
            "pass confirm=True to do it"
        )
    lease = acquire_lease(store, run_id, "rewind", force=force)
    return leased(
        store,
        lease,
        lambda: transaction(
            store,
            lambda tx, exact: _rewind(
                tx, run_id, frame_no, lease, exact, reason, force, later=_later(store)
            ),
        ),
    )


def _later(store: Store) -> Callable[[str, int], Snapshot]:
    """A snapshot of a run at a frame that reads its frames on first access, in a
    transaction of its own (a :class:`LaterSnapshot`)."""

    def snapshot(run_id: str, frame_no: int) -> Snapshot:
        return LaterSnapshot(
            run_id,
            frame_no,
            lambda: travel(store.engine, lambda tx: snapshot_at(tx, run_id, frame_no), write=False),
        )

    return snapshot


def _cut_forks(tx: Travel, run_id: str, frame_no: int, force: bool, exact: bool) -> None:
    """Before a rewind of ``run_id`` to ``frame_no``: raise :class:`ForkPointRewound` when
    runs were forked from it above ``frame_no`` (the rewind would remove their fork point);
    with ``force``, materialise those that read their history from it instead."""
    cut = [row for row in tx.fork_children([run_id]) if (row[2] or 0) > frame_no]
    if not cut:
        return
    if force:
        names = {row[0] for row in cut}
        for child in tx.inheriting_children([run_id]):
            if child in names:
                materialize_in(tx, child, exact=exact)
        return
    names = [row[0] for row in cut]
    shown = ", ".join(f"{row[0]} (at frame {row[2]})" for row in cut[:10])
    more = f" and {len(cut) - 10} more" if len(cut) > 10 else ""
    raise ForkPointRewound(
        f"rewinding run {run_id} to frame {frame_no} removes the frame {len(cut)} run(s) "
        f"were forked at: {shown}{more}. They keep working (they restate their parent's "
        "state); pass force=True (--force) to rewind anyway; nothing was changed",
        run_id=run_id,
        frame_no=frame_no,
        children=names[:100],
    )


def _rewind(
    tx: Travel,
    run_id: str,
    frame_no: int,
    lease: Lease,
    exact: bool,
    reason: str | None = None,
    force: bool = False,
    later: Callable[[str, int], Snapshot] | None = None,
) -> Snapshot:
    """Rewind inside the transaction: see :func:`rewind`.

    When the frames above ``frame_no`` are few next to the history (and ``later`` builds the
    snapshot to return), only the rows they touched change (:mod:`._delta`). Otherwise the
    snapshot at ``frame_no`` is folded from the whole history (which checks every frame) and
    the live rows are put back to it: by taking away what first appears above the cut when
    no reset lies above it (:func:`cut_live_state`, which checks the rows it keeps), else by
    a full replace. The snapshot returned is read from the frames on first access, by
    ``later``, unless only the full fold could tell it.
    """
    run = check_lease(tx, lease)
    materialize_in(tx, run_id, exact=exact)  # a fork by reference gets its own rows first
    tail = None if exact or later is None else _delta.tail_of(tx, run_id, frame_no, run.clock)
    if tail is not None and later is not None:
        _cut_forks(tx, run_id, frame_no, force, exact)
        delta = _delta.rewound(tx, run_id, frame_no, tail)
        _delta.write(tx, run_id, frame_no, delta, rewind=True)
        end = delta.snap if tail.run_level else None
        _set_back(tx, run, frame_no, end, reason)
        return later(run_id, frame_no)
    wide = None if exact or later is None else _wide.tail_of(tx, run_id, frame_no, run.clock)
    if wide is not None and later is not None:  # half a long run: no fold below the cut
        _cut_forks(tx, run_id, frame_no, force, exact)
        kept_as = tx.new_rewind_id()
        at_cut = _wide.rewind(tx, run_id, frame_no, wide, kept_as)
        end = at_cut if wide.run_level else None
        _set_back(tx, run, frame_no, end, reason, kept_as)
        return later(run_id, frame_no)
    snap = snapshot_at(tx, run_id, frame_no, refs=False, exact=exact)
    _cut_forks(tx, run_id, frame_no, force, exact)
    check_contents(tx, snap)
    if not cut_live_state(tx, snap, run_id, run.clock):
        replace_live_state(tx, snap, run_id)
    tx.rewind_run(
        run_id,
        clock=frame_no,
        status=_live_status(snap.status),
        output=snap.output,
        error=snap.error,
    )
    tx.audit(run_id, "rewind", frame_no, owner_id(), {"from_frame": run.clock, **why(reason)})
    if later is not None and snap.stored_refs is not None:
        return later(run_id, frame_no)  # its refs are read only if someone looks
    load_refs(tx, snap)  # what this returns: the refs now live
    return snap


def _set_back(
    tx: Travel,
    run: Any,
    frame_no: int,
    end: Snapshot | None,
    reason: str | None,
    kept_as: str | None = None,
) -> None:
    """Set the run row of a rewind that changed only what it touched back to ``frame_no``
    (with ``end``'s ending when a frame above the cut set it, else the stored one) and
    audit it."""
    tx.rewind_run(
        run.run_id,
        clock=frame_no,
        status=_live_status(run.status if end is None else end.status),
        output=None if end is None else end.output,
        error=None if end is None else end.error,
        kept_ending=end is None,
        kept_as=kept_as,
    )
    tx.audit(run.run_id, "rewind", frame_no, owner_id(), {"from_frame": run.clock, **why(reason)})


def undo_rewind(
    store: Store, run_id: str, *, force: bool = False, reason: str | None = None
) -> Snapshot:
    """Undo the newest rewind of ``run_id``: its frames come back as they were, the run gets
    back its clock, output and error (a run that was ``running`` comes back ``interrupted``)
    and the live state is put back to what the frames show (the rows a rewind of many frames
    kept, written back as they were; else changing only what the frames touch, where
    :mod:`._delta` answers; else from the full fold); return the restored snapshot.
    Under the run's lease like a rewind, one transaction, audited (``undo_rewind``). Calling
    it again undoes the rewind before that one. Once frames are written on top of a rewind,
    neither it nor any rewind before it can be undone (what they removed followed a history
    that is gone): :func:`~smithers_tt.store.collect_garbage` releases them.

    Raises:
        NothingToUndo: no rewind of the run is kept (never rewound, undone already, or
            collected by retention), or new frames were written after it; the message is
            :func:`undo_refusal`'s.
        LeaseBusy: another operation or a live process holds the run.
    """
    lease = acquire_lease(store, run_id, "undo_rewind", force=force)

    def work(tx: Travel, exact: bool) -> Snapshot:
        run = check_lease(tx, lease)
        kept = tx.kept_rewinds(run_id)
        why = refusal(run_id, run.clock, kept)
        if why is not None:
            raise NothingToUndo(f"{why}; nothing was changed", run_id=run_id)
        kept = kept[0]
        if kept.kept_rows and not exact:  # the rows it changed, as they were: no fold
            tx.restore_kept(run_id, kept.rewind_id)
            tx.undo_rewind(kept, _live_status(kept.status))  # releases the kept rows
            _audit_undo(tx, run_id, kept, reason)
            return later(run_id, kept.from_clock)
        tx.undo_rewind(kept, _live_status(kept.status))
        tail = None if exact else _delta.tail_of(tx, run_id, kept.to_frame, kept.from_clock)
        if tail is not None:  # only what the frames put back touched changes
            _delta.write(
                tx,
                run_id,
                kept.to_frame,
                _delta.undone(tx, run_id, kept.to_frame, tail),
                rewind=False,
            )
            _audit_undo(tx, run_id, kept, reason)
            return later(run_id, kept.from_clock)
        snap = snapshot_at(tx, run_id, kept.from_clock, refs=False, exact=exact)
        check_contents(tx, snap)
        replace_live_state(tx, snap, run_id)
        load_refs(tx, snap)
        _audit_undo(tx, run_id, kept, reason)
        return snap

    later = _later(store)
    return leased(store, lease, lambda: transaction(store, work))


def _audit_undo(tx: Travel, run_id: str, kept: Any, reason: str | None) -> None:
    tx.audit(
        run_id,
        "undo_rewind",
        kept.from_clock,
        owner_id(),
        {"from_frame": kept.to_frame, **why(reason)},
    )


def reset(
    store: Store,
    run_id: str,
    node_id: str,
    *,
    dependents: bool = False,
    force: bool = False,
    reason: str | None = None,
) -> list[str]:
    """Retry a node from scratch: its attempts and refs leave the live state (frames keep
    them), its next attempt is number 1 and can never see their checkpoints. With
    ``dependents``, the tasks that need it (from the workflow graph) are reset too.
    Returns the reset node ids; the run becomes ``interrupted`` so ``resume`` runs them.
    """
    lease = acquire_lease(store, run_id, "reset", force=force)

    def work(tx: Travel) -> list[str]:
        run = check_lease(tx, lease)
        materialize_in(tx, run_id)  # a fork by reference gets its own rows first
        snap = snapshot_at(tx, run_id, refs=False)
        check_nodes(run, {node_id}, snap)
        gone = sorted(expand(run.graph, {node_id}, dependents))
        tx.reset_nodes(run_id, node_id, gone)
        tx.audit(run_id, "reset", run.clock + 1, owner_id(), {"nodes": gone, **why(reason)})
        return gone

    return leased(store, lease, lambda: travel(store.engine, work))
