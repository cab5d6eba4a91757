"""The snapshot of a run at a frame, forks by reference included.

A fork made by reference (``tt_runs.inherits``) records its parent and fork frame and copies
nothing it inherits: its history before frame 0 is its parent's up to that frame, read there.
Its snapshot is the parent's snapshot at the fork frame, without the nodes the fork reset,
relabelled to the fork, then the fork's own frames folded on top: the edited checkpoints
(base frames below 0), frame 0 (``forked``) and everything after. Chains of forks of forks
recurse. Once materialised (:func:`smithers_tt.timetravel.materialize`) a fork restates its
parent in base frames of its own, as forks made before this existed do, and reads nothing
from its parent any more.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from smithers_tt.errors import FrameNotFound, RunNotFound
from smithers_tt.store import Frame, Store, travel
from smithers_tt.store.for_timetravel import RunState, Travel
from smithers_tt.timetravel._bulk import refs_from_rows, state_at
from smithers_tt.timetravel._snapshot import Snapshot, apply, fold

MAX_FORK_DEPTH = 1_000
"""Most forks by reference in one chain (a guard against a cycle in a corrupt store)."""


def snapshot_at(
    tx: Travel,
    run_id: str,
    frame_no: int | None = None,
    *,
    refs: bool = True,
    exact: bool = False,
) -> Snapshot:
    """The snapshot of ``run_id`` at ``frame_no`` (default: its newest frame).

    Checkpoint frames are resolved in SQL (see :mod:`smithers_tt.timetravel._bulk`); when
    that path cannot vouch for the answer, every frame is folded in Python. With
    ``refs=False`` the refs stay in the database (``snap.stored_refs``) when they can, for
    rewind and fork to copy them there; ``exact=True`` always folds every frame. A fork by
    reference folds its own frames on its parent's snapshot at the fork frame.

    Raises:
        FrameNotFound: the run has no such frame.
        SnapshotInvalid: a frame is corrupt, or the snapshot is larger than allowed.
    """
    run = tx.run_state(run_id)
    if run is None:
        raise RunNotFound(f"no run {run_id!r}")
    frame_no = checked_frame(run, frame_no)
    if run.base is not None:
        return fold_inherited(tx, run, tx.frames(run_id, frame_no), frame_no, exact=exact)
    snap = None if exact else state_at(tx, run_id, frame_no)
    if snap is None or (refs and not load_refs(tx, snap)):
        return fold(run_id, tx.frames(run_id, frame_no), frame_no)
    return snap


def checked_frame(run: RunState, frame_no: Any) -> int:
    """``frame_no`` (default: the run's newest), if the run has such a frame.

    Raises:
        FrameNotFound: it has not.
    """
    last = run.clock
    frame_no = last if frame_no is None else frame_no
    if type(frame_no) is not int or not 0 <= frame_no <= last:
        raise FrameNotFound(
            f"run {run.run_id} has frames 0 to {last}; there is no frame {frame_no!r}",
            run_id=run.run_id,
            frame_no=frame_no,
        )
    return frame_no


def load_refs(tx: Travel, snap: Snapshot) -> bool:
    """Read the refs ``snap`` left in the database (now, in this transaction); they become
    :class:`CheckpointRef` objects only if someone looks at ``snap.refs``. False when a ref
    key is bound twice (only the full fold can tell which binding is visible)."""
    stored = snap.stored_refs
    if stored is None:
        return True
    rows = tx.stored_ref_rows(stored)
    if len({row[:4] for row in rows}) != len(rows):
        return False
    run_id = snap.run_id
    snap.stored_refs = None
    snap.defer_refs(lambda: refs_from_rows(run_id, rows))
    return True


def fold_inherited(
    tx: Travel,
    run: RunState,
    frames: list[Frame],
    upto: int,
    *,
    exact: bool = False,
    depth: int = 0,
) -> Snapshot:
    """The snapshot at ``upto`` of a fork by reference, from its own ``frames`` (in order)."""
    base = inherited_base(tx, run, reset_by_fork(frames), exact=exact, depth=depth)
    return fold(run.run_id, frames, upto, base=base)


def reset_by_fork(frames: list[Frame]) -> set[str]:
    """The nodes a fork reset (its frame 0 lists them), among its ``frames``."""
    zero = next((f for f in frames if f.frame_no == 0), None)
    data = zero.data if zero is not None else None
    return set((data if isinstance(data, dict) else {}).get("reset") or ())


def inherited(store: Store, run_id: str) -> Snapshot | None:
    """What a fork by reference inherits: its parent's snapshot at the fork frame, without the
    nodes it reset, to fold its own frames on (``fold(run_id, frames, base=...)``); ``None``
    for a run whose history is all its own."""

    def read(tx: Travel) -> Snapshot | None:
        run = tx.run_state(run_id)
        if run is None:
            raise RunNotFound(f"no run {run_id!r}")
        if run.base is None:
            return None
        return inherited_base(tx, run, reset_by_fork(tx.frames(run_id, 0)))

    return travel(store.engine, read, write=False)


def inherited_base(
    tx: Travel,
    run: RunState,
    gone: set[str],
    *,
    exact: bool = False,
    refs: bool = True,
    depth: int = 0,
) -> Snapshot:
    """What a fork by reference starts from: its parent's snapshot at the fork frame, without
    the nodes in ``gone``, as the fork's own (refs name the fork's run). With ``refs=False``
    the refs of a parent with a history of its own stay in the database (``stored_refs``),
    for :func:`~._ops.materialize` to copy them there."""
    assert run.base is not None
    if depth > MAX_FORK_DEPTH:
        raise RunNotFound(f"run {run.run_id}: its forks by reference form a cycle")
    parent_id, at = run.base
    parent = tx.run_state(parent_id)
    if parent is None:  # deletion materialises forks first: a store changed behind our back
        raise RunNotFound(f"run {run.run_id} reads its history from run {parent_id}, which is gone")
    at = checked_frame(parent, at)
    if parent.base is not None:
        frames = tx.frames(parent_id, at)
        snap = fold_inherited(tx, parent, frames, at, exact=exact, depth=depth + 1)
    else:
        snap = snapshot_at(tx, parent_id, at, refs=refs, exact=exact)
    child = run.run_id
    stored = snap.stored_refs
    return Snapshot(
        child,
        -1,
        status=snap.status,
        input=snap.input,
        output=snap.output,
        error=snap.error,
        nodes={k: v for k, v in snap.nodes.items() if k[0] not in gone},
        attempts={k: v for k, v in snap.attempts.items() if k[0] not in gone},
        refs={k: replace(v, run_id=child) for k, v in snap.refs.items() if k[0] not in gone},
        stored_refs=None if stored is None else stored.without(gone),
    )


def run_level_state(run: RunState, frame_no: int, frame: Frame | None) -> Snapshot:
    """The run's status, input, output and error at ``frame_no`` (no nodes, attempts or
    refs), from ``frame``, the newest frame at or below it that changed them (one index
    probe, whatever the history's length: :meth:`Travel.run_state_at`). Equal to those
    fields of the full snapshot."""
    snap = Snapshot(run.run_id, frame_no, input=run.input)
    if frame is not None:
        apply(snap, frame)
    snap.frame_no = frame_no
    return snap
