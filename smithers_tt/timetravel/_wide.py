"""Rewind of many frames (half a long run) in proportion to what it changes, with the
checkpoint frames left in the database, and an undo that puts back what it changed.

:mod:`._delta` reads the frames above a cut one by one, which is right for a few of them. A
rewind to the middle of a 155,000-frame run takes away 77,500 frames, 50,000 of them
checkpoints; folding the whole history below the cut to put the live state back, and on undo
folding the whole history again and rewriting every live row, cost seconds. Here:

* the frames above the cut other than checkpoints (attempts, nodes, run status: a minority)
  are read as keys and checked as :mod:`._delta` checks them; the checkpoint frames above
  the cut are one aggregate per attempt, in SQL;
* the nodes and attempts those frames touch are either first seen above the cut (an attempt
  started there, a node with no frame of its own at or below the cut: none of them exists at
  the cut) or *split* by it (a handful: those running at the cut), whose state at the cut is
  folded from their own frames (:func:`._delta.at_cut`);
* a rewind keeps the live rows it is about to change under its id (the touched nodes and
  attempts, the refs above the cut: ``store.ledger._kept``), deletes the refs above the cut
  and the rows first seen above it by key, and puts the split rows back as the cut shows
  them; the rows no frame above the cut touched are what they were at the cut, and stay;
* its undo writes the kept rows back as they were (``Travel.restore_kept``): no frame is
  read or folded, whatever the history's length.

Like :mod:`._delta`, it answers only where that is exactly the full replace: not when a
``reset``, ``forked`` or ``run_created`` frame lies above the cut, not when a frame above it
names no node or a checkpoint comes before its attempt's start, not for a short history
(:data:`WIDE_SPAN`: there the full fold is cheap and checks every frame). Anything else goes
to the full path.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from smithers_tt.store.for_timetravel import Travel
from smithers_tt.timetravel import _delta, _snapshot
from smithers_tt.timetravel._delta import Tail
from smithers_tt.timetravel._materialize import live_rows
from smithers_tt.timetravel._snapshot import (
    AttemptKeyT,
    NodeKey,
    Snapshot,
)

WIDE_SPAN = 20_000
"""The shortest history (frames at or below the cut) this path rewinds: shorter ones take the
full fold, which checks every frame and costs little there."""


@dataclass
class WideTail:
    """What the frames above a cut touch: ``checkpoints`` is the per-attempt aggregate of
    its checkpoint frames, the rest is read from the keys of the others."""

    checkpoints: dict[AttemptKeyT, int]
    """Per attempt: its checkpoint frames above the cut."""
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
        return sum(self.checkpoints.values())


def tail_of(tx: Travel, run_id: str, cut: int, clock: int) -> WideTail | None:
    """What the frames above ``cut`` of a run at ``clock`` touch (read as keys: which rows
    they touch is all a rewind needs of the frames it takes away), or ``None`` when this path
    does not answer (see the module docstring)."""
    if type(cut) is not int or clock <= cut:
        return None
    low = tx.first_frame_no(run_id)
    if low is None or cut < max(low, 0):
        return None
    span = cut - low + 1
    if span < WIDE_SPAN or span > _snapshot.MAX_SNAPSHOT_ROWS:
        return None
    groups = tx.tail_checkpoints(run_id, cut, clock)
    tail = WideTail({(g[0], g[1], g[2]): g[3] for g in groups})
    first_ref = {(g[0], g[1], g[2]): g[4] for g in groups}
    keys = tx.other_frame_keys(run_id, cut, clock)
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
    tail.attempts.update(tail.checkpoints)  # attempts touched by their checkpoints only
    if len(tail.split_attempts) > _delta.MOST_ROWS:
        return None
    tail.split_nodes = tx.nodes_seen(run_id, cut, sorted(tail.nodes))
    if len(tail.split_nodes) > _delta.MOST_ROWS:
        return None
    return tail


def rewind(tx: Travel, run_id: str, cut: int, tail: WideTail, kept_as: str) -> Snapshot:
    """Put the live rows back to frame ``cut`` (the frames above it are ``tail``), keeping
    the rows it changes under ``kept_as`` (the rewind's id) for its undo; return the snapshot
    of the touched rows at the cut (with the run's ending when a frame above the cut set
    it)."""
    split = Tail([], set(tail.split_nodes), tail.split_attempts, set(), run_level=tail.run_level)
    snap = _delta.at_cut(tx, run_id, cut, split)
    nodes, attempts = live_rows(snap, run_id)
    tx.write_wide(
        run_id,
        cut,
        nodes_gone=sorted(tail.nodes),
        node_rows=nodes,
        attempts_gone=sorted(tail.attempts - set(snap.attempts)),
        kept_attempts=attempts,
        kept_as=kept_as,
    )
    return snap
