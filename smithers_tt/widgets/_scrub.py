"""The snapshots of one run's frames, for scrubbing: each folded from the nearest one kept.

A selection in the debugger must cost what changed, not the run's length. Recent snapshots
are cached and keyframes kept while folding (further apart as the snapshot grows). While refs
are only added, the fold also follows each node's newest ref and the keys added since the
snapshot it started from, so the sorted keys come from a merge; a diff of two frames
compares only what the frames between them changed (:meth:`FoldCache.touched`,
:func:`trimmed`). Snapshots are never changed once made: folded ones share the row objects
they did not change, which is what lets a comparison skip them by identity.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from smithers_tt.checkpoint import AgentCheckpoint
from smithers_tt.store import CheckpointRef, Frame
from smithers_tt.timetravel import Snapshot, apply

RefKey = tuple[str, int, int, int]

SNAPSHOT_CACHE = 24
"""Recent snapshots kept (besides the keyframes)."""
KEYFRAME_EVERY = 250
"""Frames between the snapshots kept while folding (scrubbing never starts from frame 0), at
least; further apart as the snapshot grows (see ``KEYFRAME_SPREAD``)."""
KEYFRAME_SPREAD = 64
"""A keyframe is a copy of the snapshot's rows: they are kept at least ``rows / SPREAD``
frames apart, so keeping them costs a bounded number of row copies per folded frame however
big the snapshot gets (a 100,000-frame build made 179 copies instead of 400), and a selection
folds at most that many frames from the nearest."""


class FoldCache:
    """The snapshots of ``frames`` (one run's, dense; the list may grow at its end)."""

    def __init__(
        self,
        run_id: str,
        frames: list[Frame],
        loader: Callable[[CheckpointRef], AgentCheckpoint],
        base: Snapshot | None = None,
    ) -> None:
        self.run_id, self.loader = run_id, loader
        self.reset(frames, base)

    def reset(self, frames: list[Frame], base: Snapshot | None = None) -> None:
        """Start again on ``frames`` (the run's history was rewritten), folded on ``base``
        (what a fork by reference inherits, :func:`smithers_tt.timetravel.inherited`) or on
        nothing."""
        self.frames, self.base = frames, base
        self._base_newest = None if base is None else newest_refs(base)
        self.clear()

    def clear(self) -> None:
        """Let go of every snapshot kept; they are folded again when needed."""
        self._snapshots: OrderedDict[int, Snapshot] = OrderedDict()
        self._keyframes: dict[int, Snapshot] = {}
        self._indexes: OrderedDict[int, _SnapshotIndex] = OrderedDict()

    def _index(self, frame_no: int) -> int:
        return frame_no - self.frames[0].frame_no if self.frames else 0

    def at(self, n: int) -> Snapshot:
        """The snapshot at frame ``n`` (one of the frames)."""
        cached = self._snapshots.get(n)
        if cached is not None:
            self._snapshots.move_to_end(n)
            return cached
        starts = [k for k in (*self._snapshots, *self._keyframes) if k <= n]
        if starts:
            start = max(starts)
            base: Snapshot | None = self._snapshots.get(start) or self._keyframes[start]
            assert base is not None
            snap = copy_rows(base)
            first = self._index(start) + 1
            newest = self._index_of(base).newest
            if newest is not None:
                newest = dict(newest)  # the base's own stays as it is
        else:
            base = None
            before = self.frames[0].frame_no - 1 if self.frames else -1
            if self.base is None:
                snap, newest = Snapshot(self.run_id, before), {}
            else:
                snap, newest = copy_rows(self.base), dict(self._base_newest or {})
                snap.frame_no = before
            first = 0
        # While refs are only added (the count says when some were removed, by a reset), the
        # fold follows each node's newest ref and the keys added since the base, from which
        # the sorted keys come by a merge: a selection never scans nor sorts every ref.
        expected, added = len(snap.refs), []
        since = snap.frame_no  # the newest keyframe (or start) of this fold
        for f in self.frames[first : self._index(n) + 1]:
            if f.kind == "checkpoint":
                key = (f.node_id, f.iteration, f.attempt, f.sequence)
                if key not in snap.refs:
                    expected += 1
                    added.append(key)
                apply(snap, f)
                if newest is not None:
                    _note_newest(newest, key, snap.refs.get(key))
            else:
                apply(snap, f)
            snap.frame_no = no = f.frame_no
            if (
                no > 0
                and no % KEYFRAME_EVERY == 0
                and no != n
                and no - since >= snap.size // KEYFRAME_SPREAD
                and no not in self._keyframes
            ):
                since = no
                kept = self._keyframes[no] = copy_rows(snap)
                grew = len(snap.refs) == expected
                newest = newest if grew else None
                self._index_as(
                    kept, None if newest is None else dict(newest), base if grew else None, added
                )
                base, expected, added = kept, len(snap.refs), []
        grew = len(snap.refs) == expected
        self._index_as(snap, newest if grew else None, base if grew else None, added)
        snap.loader = self.loader
        self._snapshots[n] = snap
        while len(self._snapshots) > SNAPSHOT_CACHE:
            self._snapshots.popitem(last=False)
        return snap

    def newest(self, snap: Snapshot) -> dict[tuple[str, int], CheckpointRef]:
        """Each node's newest ref in a snapshot, kept while the snapshot is (scrubbing back
        and forth compares the same snapshots again)."""
        index = self._index_of(snap)
        if index.newest is None:
            index.newest = newest_refs(snap)
        return index.newest

    def sorted_ref_keys(self, snap: Snapshot) -> list[RefKey]:
        """The keys of a snapshot's refs, sorted: merged from its base's when those are
        sorted already (the step of a slider), else sorted once."""
        index = self._index_of(snap)
        if index.ref_keys is None:
            before = None if index.base is None else self._index_of(index.base).ref_keys
            if before is None:
                index.ref_keys = sorted(snap.refs)
            else:  # two sorted runs: the sort merges them in one pass
                index.ref_keys = sorted(before + sorted(index.added))
        return index.ref_keys

    def attempts_by_node(self, snap: Snapshot) -> list[tuple[str, int, list[int]]]:
        """Each node (and iteration) with attempts in ``snap``, and their numbers, sorted."""
        index = self._index_of(snap)
        if index.attempts is None:
            found: dict[tuple[str, int], list[int]] = {}
            for node_id, iteration, attempt in snap.attempts:
                found.setdefault((node_id, iteration), []).append(attempt)
            index.attempts = [(n, i, sorted(a)) for (n, i), a in sorted(found.items())]
        return index.attempts

    def _index_of(self, snap: Snapshot) -> _SnapshotIndex:
        """What is known of a snapshot beyond its rows (made on first use)."""
        found = self._indexes.get(id(snap))
        if found is None or found.snap is not snap:
            found = self._index_as(snap, None, None, [])
        return found

    def _index_as(
        self,
        snap: Snapshot,
        newest: dict[tuple[str, int], CheckpointRef] | None,
        base: Snapshot | None,
        added: list[RefKey],
    ) -> _SnapshotIndex:
        index = self._indexes[id(snap)] = _SnapshotIndex(snap, newest, base, added)
        self._indexes.move_to_end(id(snap))
        while len(self._indexes) > SNAPSHOT_CACHE + len(self._keyframes) + 2:
            self._indexes.popitem(last=False)
        return index

    def touched(self, after: int, upto: int) -> Touched | None:
        """What the frames ``after < frame_no <= upto`` change: node ids,
        attempts and nodes with checkpoints (None when one of them is a kind that changes
        more, a reset, or when there are too many to be worth it)."""
        if upto - after > TOUCHED_AT_MOST:
            return None
        nodes: set[str] = set()
        attempts: set[tuple[Any, ...]] = set()
        refs: set[tuple[Any, ...]] = set()
        for f in self.frames[self._index(after) + 1 : self._index(upto) + 1]:
            kind = f.kind
            if kind in ("node_state", "cache_hit"):
                nodes.add(str(f.node_id))
            elif kind in ("attempt_started", "attempt_finished"):
                attempts.add((f.node_id, f.iteration, f.attempt))
            elif kind == "checkpoint":
                refs.add((f.node_id, f.iteration))
            elif kind not in STATUS_KINDS:
                return None
        return Touched(nodes, attempts, refs)


def copy_rows(snap: Snapshot) -> Snapshot:
    """A snapshot whose row dicts are its own (the rows themselves are shared)."""
    return replace(snap, nodes=dict(snap.nodes), attempts=dict(snap.attempts), refs=dict(snap.refs))


def _note_newest(
    newest: dict[tuple[str, int], CheckpointRef], key: tuple[Any, ...], ref: CheckpointRef | None
) -> None:
    """Update each node's newest ref with the ref just folded in at ``key``."""
    if ref is None:
        return
    found = newest.get(key[:2])
    if found is None or (found.attempt, found.sequence) <= (key[2], key[3]):
        newest[key[:2]] = ref


def newest_refs(snap: Snapshot) -> dict[tuple[str, int], CheckpointRef]:
    newest: dict[tuple[str, int], tuple[tuple[int, int], CheckpointRef]] = {}
    for (node_id, iteration, attempt, sequence), ref in snap.refs.items():
        key = (node_id, iteration)
        found = newest.get(key)
        if found is None or found[0] < (attempt, sequence):
            newest[key] = ((attempt, sequence), ref)
    return {k: v[1] for k, v in newest.items()}


def trimmed(
    a: Snapshot,
    b: Snapshot,
    na: dict[tuple[str, int], CheckpointRef],
    nb: dict[tuple[str, int], CheckpointRef],
    touched: Touched | None = None,
) -> tuple[Snapshot, Snapshot]:
    """The two snapshots with only what :func:`timetravel.diff` can report: each node's
    newest ref where the two sides differ, the attempts that differ, and every iteration of
    the nodes whose rows differ (outputs take a node's highest finished iteration). Same
    result, in one pass over the refs instead of one per node, and a diff of two nearby
    frames of a 100,000-frame run sorts what changed, not the thousands of rows that did
    not (folded snapshots share the objects of the rows they did not change). ``touched``,
    when given, is what the frames between two frames of one run change: only that is
    compared."""
    differ = {
        k
        for k in (set(na) | set(nb) if touched is None else touched.refs)
        if k not in na or k not in nb or na[k].content_hash != nb[k].content_hash
    }

    def keep(snap: Snapshot, newest: dict[tuple[str, int], CheckpointRef]) -> Snapshot:
        refs = {
            (r.node_id, r.iteration, r.attempt, r.sequence): r
            for r in (newest.get(k) for k in differ)
            if r is not None
        }
        return replace(
            snap,
            refs=refs,
            nodes={k: v for k, v in snap.nodes.items() if k[0] in nodes},
            attempts={k: snap.attempts[k] for k in attempts if k in snap.attempts},
        )

    if touched is None:
        nodes = {k[0] for k in _differing(a.nodes, b.nodes)}
        attempts = _differing(a.attempts, b.attempts)
    else:
        nodes, attempts = touched.nodes, touched.attempts
    return keep(a, na), keep(b, nb)


@dataclass(slots=True)
class _SnapshotIndex:
    """What the cache knows of one snapshot beyond its rows."""

    snap: Snapshot
    newest: dict[tuple[str, int], CheckpointRef] | None
    """Each node's newest ref (None until known)."""
    base: Snapshot | None
    """The snapshot this one was folded from, when refs were only added since."""
    added: list[RefKey]
    """The ref keys added since ``base``."""
    ref_keys: list[RefKey] | None = None
    """The ref keys, sorted (None until asked)."""
    attempts: list[tuple[str, int, list[int]]] | None = None
    """Each node (and iteration) with its attempt numbers, sorted (None until asked)."""


class Touched(NamedTuple):
    """What a range of frames changes (see :meth:`FoldCache.touched`)."""

    nodes: set[str]
    attempts: set[tuple[Any, ...]]
    refs: set[tuple[Any, ...]]


TOUCHED_AT_MOST = 5_000
"""Frames between two compared frames beyond which comparing every row is cheaper."""

STATUS_KINDS = frozenset(
    ("run_claimed", "run_finished", "run_failed", "run_cancelled", "run_paused",
     "run_continued", "run_released", "cancel_requested", "breakpoints_set")
)  # fmt: skip
"""Frame kinds that change no node, attempt or ref (only the run's status, compared on its
own, or nothing a snapshot holds)."""


def _differing(x: dict[Any, Any], y: dict[Any, Any]) -> set[Any]:
    """Keys whose values differ between two dicts (the same object counts as equal)."""
    return {k for k in x.keys() | y.keys() if x.get(k) is not y.get(k) and x.get(k) != y.get(k)}
