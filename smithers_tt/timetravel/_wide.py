"""Rewind and undo of many frames (half a long run) in proportion to what they change, with
the checkpoint frames left in the database.

:mod:`._delta` reads the frames above a cut one by one, which is right for a few of them. A
rewind to the middle of a 155,000-frame run takes away 77,500 frames, 50,000 of them
checkpoints; folding the whole history below the cut to put the live state back, and on undo
folding the whole history again and rewriting every live row, cost seconds. Here:

* the frames above the cut other than checkpoints (attempts, nodes, run status: a minority)
  are read and checked as :mod:`._delta` reads them; the checkpoint frames above the cut are
  one aggregate per attempt (well-formed as the fold checks them, their top sequence), in SQL;
* the nodes and attempts those frames touch are either first seen above the cut (an attempt
  started there, a node with no frame of its own at or below the cut: none of them exists at
  the cut) or *split* by it (a handful: those running at the cut), whose state at the cut is
  folded from their own frames (:func:`._delta.at_cut`);
* a rewind deletes the refs above the cut and the rows first seen above it by key, and puts
  the split rows back as the cut shows them; the rows no frame above the cut touched are what
  they were at the cut, and stay;
* an undo folds the frames it put back on top of the split rows as the live tables hold them
  (the rewind left them as the cut shows them), inserts the rows first seen above the cut and
  copies the refs of the checkpoint frames it put back (``INSERT ... SELECT`` joining their
  content, which must be stored and within the ceiling).

Like :mod:`._delta`, it answers only where that is exactly the full replace: not when a
``reset``, ``forked`` or ``run_created`` frame lies above the cut, not when any frame read is
malformed, not for a short history (:data:`WIDE_SPAN`: there the full fold is cheap and checks
every frame). Anything else goes to the full path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from smithers_tt.errors import SnapshotInvalid
from smithers_tt.store.for_timetravel import StoredRefs, Travel
from smithers_tt.timetravel import _delta, _snapshot
from smithers_tt.timetravel._bulk import other_frames
from smithers_tt.timetravel._delta import Tail
from smithers_tt.timetravel._materialize import live_rows
from smithers_tt.timetravel._snapshot import (
    AttemptKeyT,
    AttemptView,
    NodeKey,
    NodeView,
    Snapshot,
    apply,
)

WIDE_SPAN = 20_000
"""The shortest history (frames at or below the cut) this path rewinds: shorter ones take the
full fold, which checks every frame and costs little there."""


@dataclass
class WideTail:
    """What the frames above a cut touch: ``others`` are those frames but checkpoints (as
    :func:`apply` reads them; an undo's only: a rewind reads their keys, not the frames),
    ``checkpoints`` the per-attempt aggregate of the rest."""

    others: list[Any]
    checkpoints: dict[AttemptKeyT, tuple[int, int]]
    """Per attempt: (checkpoint frames above the cut, their top sequence)."""
    nodes: set[NodeKey] = field(default_factory=set)
    attempts: set[AttemptKeyT] = field(default_factory=set)
    started: set[AttemptKeyT] = field(default_factory=set)
    """Attempts started above the cut before any other frame of theirs: none exists at the
    cut (see :class:`._delta.Tail`)."""
    run_level: bool = False
    split_nodes: set[NodeKey] = field(default_factory=set)
    """Touched nodes with a frame of their own at or below the cut (the others do not exist
    there)."""

    @property
    def split_attempts(self) -> set[AttemptKeyT]:
        return self.attempts - self.started

    @property
    def ref_count(self) -> int:
        return sum(n for n, _ in self.checkpoints.values())


def tail_of(tx: Travel, run_id: str, cut: int, clock: int, *, undo: bool) -> WideTail | None:
    """The frames above ``cut`` of a run at ``clock`` and what they touch, or ``None`` when
    this path does not answer (see the module docstring). An ``undo`` folds them, so they are
    read whole and checked; a rewind takes them away and reads only their keys."""
    if type(cut) is not int or clock <= cut:
        return None
    low = tx.first_frame_no(run_id)
    if low is None or cut < max(low, 0):
        return None
    span = cut - low + 1
    if span < WIDE_SPAN or span > _snapshot.MAX_SNAPSHOT_ROWS:
        return None
    groups = tx.tail_checkpoints(run_id, cut, clock, checked=undo)
    if groups is None or any(g[4] for g in groups):
        return None  # malformed: the full path names the frame
    tail = WideTail([], {(g[0], g[1], g[2]): (g[3], g[6]) for g in groups})
    first_ref = {(g[0], g[1], g[2]): g[5] for g in groups}
    if undo:
        try:
            frames = list(other_frames(tx, run_id, clock, cut))
        except SnapshotInvalid:
            return None  # the full path names the frame
        keys = [(f.frame_no, f.kind, f.node_id, f.iteration, f.attempt) for f in frames]
    else:  # taken away: which rows they touch is all a rewind needs of them
        frames, keys = [], tx.other_frame_keys(run_id, cut, clock)
    if len(keys) + tail.ref_count != clock - cut:
        return None  # a missing frame
    starts: dict[AttemptKeyT, int] = {}
    touch = _delta.touch_key
    for frame_no, kind, node_id, iteration, attempt in keys:
        if not touch(tail, kind, node_id, iteration, attempt):
            return None
        if kind == "attempt_started":
            starts.setdefault((node_id, iteration, attempt), frame_no)
    if any(first_ref.get(key, starts[key]) < starts[key] for key in tail.started):
        return None  # a checkpoint before its attempt's start
    tail.others = frames
    tail.attempts.update(tail.checkpoints)  # attempts touched by their checkpoints only
    if len(tail.split_attempts) > _delta.MOST_ROWS:
        return None
    tail.split_nodes = tx.nodes_seen(run_id, cut, sorted(tail.nodes))
    if len(tail.split_nodes) > _delta.MOST_ROWS:
        return None
    return tail


def rewind(tx: Travel, run_id: str, cut: int, tail: WideTail) -> Snapshot:
    """Put the live rows back to frame ``cut`` (the frames above it are ``tail``); return
    the snapshot of the touched rows at the cut (with the run's ending when a frame above
    the cut set it)."""
    split = Tail([], set(tail.split_nodes), tail.split_attempts, set(), run_level=tail.run_level)
    snap = _delta.at_cut(tx, run_id, cut, split)
    nodes, attempts = live_rows(snap, run_id)
    tx.write_wide(
        run_id,
        cut,
        nodes_gone=sorted(tail.nodes),
        node_rows=nodes,
        attempts_gone=sorted(tail.attempts - set(snap.attempts)),
        fresh_attempts=[],
        kept_attempts=attempts,
        refs_up_to=None,
    )
    return snap


def undo(tx: Travel, run_id: str, cut: int, clock: int, tail: WideTail) -> bool:
    """Once the frames ``tail`` are back above ``cut`` (up to ``clock``), put the live rows
    back to ``clock``: the split rows as the live tables hold them with those frames folded
    on top, the rest inserted, the refs copied. False (nothing written) when a checkpoint put
    back belongs to no attempt visible at ``clock``: the full path says so.

    Raises:
        SnapshotInvalid: a frame put back is corrupt (nothing was changed).
        Refold: a ref put back has no stored content within the ceiling, or its key is bound
            twice (the caller redoes the undo with the full fold).
    """
    snap = Snapshot(run_id, cut)
    nodes, attempts = tx.live_by_key(run_id, sorted(tail.split_nodes), sorted(tail.split_attempts))
    snap.nodes = {(row[0], row[1]): NodeView(*row) for row in nodes}
    snap.attempts = {tuple(row[:3]): AttemptView(*row) for row in attempts}  # type: ignore[misc]
    live_nodes, live_attempts = set(snap.nodes), set(snap.attempts)
    for frame in tail.others:
        apply(snap, frame)
        snap.frame_no = frame.frame_no
    snap.frame_no = clock
    if any(key not in snap.attempts for key in tail.checkpoints):
        return False
    snap.stored_refs = StoredRefs(
        run_id, clock, {}, {key: (n, top + 1) for key, (n, top) in tail.checkpoints.items()}
    )
    node_rows, attempt_rows = live_rows(snap, run_id)
    fresh = [
        r for r in attempt_rows if (r["node_id"], r["iteration"], r["attempt"]) not in live_attempts
    ]
    kept = [
        r for r in attempt_rows if (r["node_id"], r["iteration"], r["attempt"]) in live_attempts
    ]
    tx.write_wide(
        run_id,
        cut,
        nodes_gone=sorted(live_nodes),
        node_rows=node_rows,
        attempts_gone=[],
        fresh_attempts=fresh,
        kept_attempts=kept,
        refs_up_to=clock,
        expected_refs=tail.ref_count,
    )
    return True
