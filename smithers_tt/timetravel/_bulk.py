"""The state at frame N with set-based SQL for the refs: what makes large rewinds and forks fast.

:func:`smithers_tt.timetravel._snapshot.fold` is the definition of a snapshot. Folding every
frame in Python costs seconds for 100,000 refs, and then each ref is a Python object written
back row by row. Here the *checkpoint* frames (nearly all frames of a large run) never leave
the database:

* the other frames (attempts, nodes, run status, resets: a small part of a large run) are
  folded in Python with the very same :func:`~smithers_tt.timetravel._snapshot.apply`;
* a ref is visible at frame N exactly when its checkpoint frame is at or below N and after the
  last ``reset`` frame (at or below N) that names its node; resets are read from the fold, so
  this is a ``frame_no`` range per node, a plain ``WHERE`` clause over ``tt_frames``;
* two aggregate queries check, for every checkpoint frame, what ``fold`` and
  ``check_contents`` check for it (fields present, SHA-256 long, ``data`` a JSON object, an
  attempt visible for its ref);
* rewind and fork then copy the visible refs with one ``INSERT ... SELECT`` that joins their
  content (stored, within the ceiling) and skips a ref key bound twice; when it writes fewer
  rows than there are visible refs, the operation raises :class:`Refold` and its caller
  runs it again from the start with the full fold (which names the missing content, or
  takes the last binding of a key as ``fold`` does).

Whenever one of those checks finds anything unusual, :func:`state_at` returns ``None`` and the
caller folds every frame in Python instead, which raises the precise error (or, for the rare
shapes only the fold handles, such as a ref key published twice, gives the exact answer).
The set-based path therefore answers only where it provably agrees with ``fold``.

The statements live in the store (:class:`smithers_tt.store.for_timetravel.Travel`); what is
decided from their answers is here.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from smithers_tt.store import CheckpointRef
from smithers_tt.store.for_timetravel import StoredRefs, Travel
from smithers_tt.timetravel import _snapshot
from smithers_tt.timetravel._snapshot import RefKey, Snapshot, apply


def refs_from_rows(run_id: str, rows: list[tuple[Any, ...]]) -> dict[RefKey, CheckpointRef]:
    """``{(node, iteration, attempt, sequence): CheckpointRef}`` from
    :meth:`Travel.stored_ref_rows`."""
    return {(r[0], r[1], r[2], r[3]): CheckpointRef(run_id, *r) for r in rows}


class _Row:
    """A frame other than a checkpoint as :func:`apply` reads it (attributes of
    :class:`Frame`), made cheaply."""

    __slots__ = (
        "attempt",
        "created_at_ms",
        "data",
        "frame_no",
        "iteration",
        "kind",
        "node_id",
        "run_id",
        "state",
    )


def other_frames(tx: Travel, run_id: str, upto: int) -> Iterator[_Row]:
    """The frames of ``run_id`` at or below ``upto`` except checkpoints, in order, as
    :func:`apply` reads them (see :meth:`Travel.other_frames`)."""
    for row in tx.other_frames(run_id, upto):
        frame = _Row()
        (
            frame.frame_no,
            frame.kind,
            frame.node_id,
            frame.iteration,
            frame.attempt,
            frame.state,
            frame.data,
            frame.created_at_ms,
        ) = row
        frame.run_id = run_id
        yield frame


def _fold_other_frames(tx: Travel, snap: Snapshot, upto: int) -> tuple[dict[str, int], int]:
    """Apply every frame at or below ``upto`` except checkpoints to ``snap``, in order.

    Returns the reset cut per node and the largest number of nodes + attempts seen.
    """
    cut: dict[str, int] = {}
    largest = 0
    for frame in other_frames(tx, snap.run_id, upto):
        apply(snap, frame)  # type: ignore[arg-type]
        snap.frame_no = frame.frame_no
        if frame.kind == "reset":  # apply checked its data; it drops these nodes' refs
            for node in (frame.data or {}).get("nodes") or []:
                if isinstance(node, str):  # anything else matches no node in fold either
                    cut[node] = frame.frame_no
        size = len(snap.nodes) + len(snap.attempts)
        if size > largest:
            largest = size
    return cut, largest


def state_at(tx: Travel, run_id: str, frame_no: int) -> Snapshot | None:
    """The snapshot at ``frame_no`` with its refs left in the database (``stored_refs``), or
    ``None`` when only a full fold can tell (a corrupt frame, a ref key bound twice, ...).

    ``frame_no`` must be a frame of the run (the caller checked it against the clock).
    """
    count, low = tx.frame_span(run_id, frame_no)
    if not count or count != frame_no - low + 1:
        return None  # a missing frame: fold names it

    snap = Snapshot(run_id, -1)
    cut, largest = _fold_other_frames(tx, snap, frame_no)
    snap.frame_no = frame_no

    # One pass over the checkpoint frames, per attempt: every frame, visible or not, is
    # well-formed (fold checks each one); how many refs are visible, and their top sequence.
    refs = StoredRefs(run_id, frame_no, cut)
    groups = tx.checkpoint_groups(refs)
    if groups is None:
        return None  # PostgreSQL could not read some data as JSON: fold names the frame
    total = 0
    for node_id, iteration, attempt, n, bad, shown, top in groups:
        if bad:
            return None  # fold names the frame
        total += n
        if not shown:
            continue  # reset away
        key = (node_id, iteration, attempt)
        if key not in snap.attempts:
            return None  # a ref no visible attempt owns: check_contents names it
        refs.per_attempt[key] = (shown, top + 1)
    if total + largest > _snapshot.MAX_SNAPSHOT_ROWS:
        return None  # maybe too large at some frame: fold decides, and says so
    snap.stored_refs = refs
    return snap
