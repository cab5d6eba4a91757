"""Rewind and undo in proportion to what they change: the last k frames, not the whole run.

The live tables are the projection of the run's history at its clock. Taking away (or putting
back) the frames above a cut changes only the rows those frames touched, so the set-based
path here reads just those k frames (by number), then, for the nodes and attempts they touch
and for the run's ending, the frames at or below the cut that decide what those rows were at
the cut (the touched nodes' own frames and the resets, read by node from a partial index, and
one index probe each for the run's status and ending: none of it grows with the history),
folds them with the very same :func:`~smithers_tt.timetravel._snapshot.apply`, and writes
only those rows:

* a rewind deletes the refs published above the cut and the attempts started above it, puts
  the touched attempts and nodes back as they were at the cut, and sets the run row (its
  stored output and error stay when no frame above the cut set them);
* an undo folds the frames it put back on top of the touched rows as the live tables hold
  them (the rewind it undoes left them as the cut shows them, and nothing changed since: the
  run is still at the cut), read by key: no search; the run row is the one the rewind kept.

It answers only where that is exactly the full replace (:func:`replace_live_state` of the
fold): not when the frames include a ``reset`` (it brings back rows no frame above the cut
names), not for a cut that leaves nothing to take away (a rewind to the newest frame rebuilds
the live state from the history), not when k is large next to the history (the full path is
as cheap then, and validates every frame). Those go to the full path. The refs, attempts and
nodes no frame above the cut names are left as they are: they are what they were at the cut.
Validation is bounded by what is touched: every frame read is checked as the fold checks it,
the content of the refs an undo puts back must be stored and within the ceiling.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from smithers_tt.errors import SnapshotInvalid
from smithers_tt.store import Frame
from smithers_tt.store.for_timetravel import RUN_LEVEL_KINDS, Travel
from smithers_tt.timetravel import _snapshot
from smithers_tt.timetravel._materialize import check_contents, live_rows
from smithers_tt.timetravel._snapshot import (
    AttemptKeyT,
    AttemptView,
    NodeKey,
    NodeView,
    RefKey,
    Snapshot,
    apply,
)

SHARE = 8
"""The set-based path takes k frames away only from a history at least this many times k
frames long (below that the full fold costs about the same and checks every frame)."""

MOST_FRAMES = 5_000
"""The most frames above the cut the set-based path takes away or puts back at once."""

MOST_ROWS = 200
"""The most nodes and attempts those frames may touch (each is one index range to read)."""

_ATTEMPT = ("attempt_started", "attempt_finished", "checkpoint")
_NODE = ("node_state", "cache_hit")
_RUN = frozenset(RUN_LEVEL_KINDS)
"""Frames that set the run's status (what :func:`apply` does with them): the store's partial
index ``tt_frames_run_level`` lists the same kinds."""
_ENDING = ("run_created", "forked", "run_finished", "run_failed", "run_cancelled", "reset")
"""Frames that set (or, for ``run_created``, start) the run's output and error."""
_REFUSED = ("reset", "forked", "run_created")
"""Frames above a cut that send it to the full path."""


@dataclass
class Tail:
    """The frames above a cut and what they touch."""

    frames: list[Frame]
    nodes: set[NodeKey] = field(default_factory=set)
    attempts: set[AttemptKeyT] = field(default_factory=set)
    started: set[AttemptKeyT] = field(default_factory=set)
    """Attempts whose first frame above the cut starts them: none of them exists at the cut
    (attempt numbers are only reused after a reset, and a reset sends the cut elsewhere)."""
    refs: set[RefKey] = field(default_factory=set)
    run_level: bool = False
    """Some frame above the cut sets the run's status, output or error."""


def tail_of(tx: Travel, run_id: str, cut: int, clock: int) -> Tail | None:
    """The frames above ``cut`` of a run at ``clock`` and what they touch, or ``None`` when
    the set-based path does not answer (see the module docstring)."""
    if type(cut) is not int or not 1 <= clock - cut <= MOST_FRAMES:
        return None
    k = clock - cut
    low = tx.first_frame_no(run_id)
    if low is None or cut < max(low, 0):
        return None
    span = cut - low + 1
    if k * SHARE > span or span > _snapshot.MAX_SNAPSHOT_ROWS:
        return None  # the bound: the fold decides whether the history is too large
    try:
        frames = tx.frames_after(run_id, cut)
    except SnapshotInvalid:
        return None  # the full path names the frame (or never reads it)
    if [f.frame_no for f in frames] != list(range(cut + 1, clock + 1)):
        return None
    tail = Tail(frames)
    if not all(touch(tail, f) for f in frames):
        return None
    if len(tail.nodes) + len(tail.attempts - tail.started) > MOST_ROWS:
        return None
    return tail


def touch(tail: Any, f: Any) -> bool:
    """Add to ``tail`` (a :class:`Tail` or what has its sets) what frame ``f`` above the cut
    touches; False when the set-based paths do not answer for such a frame."""
    return touch_key(tail, f.kind, f.node_id, f.iteration, f.attempt, f.sequence)


def touch_key(
    tail: Any, kind: str, node_id: Any, iteration: Any, attempt: Any, sequence: Any = None
) -> bool:
    """:func:`touch` for a frame given by its fields (``sequence`` is read only of a
    checkpoint)."""
    if kind in _REFUSED:
        return False
    if kind in _ATTEMPT or kind in _NODE:
        if node_id is None or iteration is None:
            return False
        if kind in _NODE:
            tail.nodes.add((node_id, iteration))
            return True
        if attempt is None:
            return False
        key = (node_id, iteration, attempt)
        if key not in tail.attempts and kind == "attempt_started":
            tail.started.add(key)
        tail.attempts.add(key)
        if kind == "checkpoint":
            if sequence is None:
                return False
            tail.refs.add((*key, sequence))
    elif kind in _RUN:
        tail.run_level = True
    return True


def at_cut(tx: Travel, run_id: str, cut: int, tail: Tail) -> Snapshot:
    """The touched nodes and attempts (those that exist) and, when frames above the cut set
    it, the run's ending, as frame ``cut`` shows them.

    Folded with :func:`apply` from what decides them: every frame at or below the cut of the
    touched nodes' own ``(node_id, iteration)`` (read by node from a partial index: a few
    per attempt) and every reset, and for the run the newest frame that set its status and
    the newest that set its ending (one index probe each). Those frames are the full fold's,
    restricted to these rows: nothing else changes them.

    Raises:
        SnapshotInvalid: a frame read is corrupt (nothing was changed).
    """
    attempts = tail.attempts - tail.started
    pairs = {k[:2] for k in tail.nodes} | {k[:2] for k in attempts}
    found = [
        f
        for f in tx.node_history(run_id, cut, sorted(pairs))
        if f.kind == "reset"
        or ((f.node_id, f.iteration) in tail.nodes and f.kind in _NODE)
        or ((f.node_id, f.iteration, f.attempt) in attempts and f.kind in _ATTEMPT)
    ]
    if tail.run_level:  # the run's status and ending: one index probe each
        for kinds in (None, _ENDING):
            f = tx.run_level_frame(run_id, cut, kinds)
            if f is not None:
                found.append(f)
    snap = Snapshot(run_id, -1)
    for f in sorted({f.frame_no: f for f in found}.values(), key=lambda f: f.frame_no):
        apply(snap, f)
    snap.frame_no = cut
    return snap


@dataclass
class Delta:
    """What a rewind or undo writes: the touched rows as ``snap`` (at the end of the new
    history) shows them."""

    snap: Snapshot
    tail: Tail
    ref_frames: dict[RefKey, int] = field(default_factory=dict)


def write(tx: Travel, run_id: str, cut: int, delta: Delta, *, rewind: bool) -> None:
    """Write the touched rows: those ``delta.snap`` holds, the others deleted."""
    snap, tail = delta.snap, delta.tail
    nodes, attempts = live_rows(snap, run_id)
    gone = [key for key in tail.attempts if key not in snap.attempts]
    refs = [(*key, delta.ref_frames[key]) for key in sorted(snap.refs)]
    tx.write_delta(
        run_id,
        nodes=sorted(tail.nodes),
        node_rows=nodes,
        attempts_gone=sorted(gone),
        attempt_rows=attempts,
        refs_gone=sorted(tail.refs) if rewind else [],
        refs_above=cut,
        ref_rows=refs,
    )


def rewound(tx: Travel, run_id: str, cut: int, tail: Tail) -> Delta:
    """The rows a rewind to ``cut`` writes (the frames above it are ``tail``)."""
    snap = at_cut(tx, run_id, cut, tail)
    return Delta(snap, tail)


def undone(tx: Travel, run_id: str, cut: int, tail: Tail) -> Delta:
    """The rows an undo writes once the frames ``tail`` are back above ``cut``: the touched
    rows as the live tables hold them (the rewind left them as frame ``cut`` shows them)
    with those frames folded on top.

    Raises:
        SnapshotInvalid, CheckpointMissing: a frame put back is corrupt, or names content
            that is not stored or is too large (nothing was changed).
    """
    snap = Snapshot(run_id, cut)
    nodes, attempts = tx.live_by_key(
        run_id, sorted(tail.nodes), sorted(tail.attempts - tail.started)
    )
    snap.nodes = {(row[0], row[1]): NodeView(*row) for row in nodes}
    snap.attempts = {tuple(row[:3]): AttemptView(*row) for row in attempts}  # type: ignore[misc]
    delta = Delta(snap, tail)
    for f in tail.frames:
        apply(snap, f)
        snap.frame_no = f.frame_no
        if f.kind == "checkpoint":
            delta.ref_frames[(f.node_id, f.iteration, f.attempt, f.sequence)] = f.frame_no  # type: ignore[index]
    check_contents(tx, snap)
    return delta
