"""The snapshots of one run's frames, for scrubbing: each rebuilt from what its frames set.

A selection in the debugger must cost what it shows, not the run's length, and holding a
100,000-frame run must not cost the memory of hundreds of snapshot copies. So the frames are
folded once, lazily (only as far as a selection asks), remembering every assignment: the
node, attempt or ref each frame sets (one row per frame of those kinds) is appended to one of
three logs shared by every snapshot, and each frame records how long the logs were after it.
The frames may be the store's rows (:class:`smithers_tt.store.for_widgets.FrameRow`): the fold reads
their fields only. The snapshot at frame ``n`` is then its segment's start rows updated with
the first entries of each log: exactly the dicts the fold made (a key set again keeps its
place and takes the later value), with the same row objects, in a few milliseconds and
without folding again. It starts from the nearest copy of the rows kept every ``MARK_EVERY``
assignments (or a nearer snapshot still cached). A reset removes rows, which a log cannot
express, so it starts a new segment whose start rows are a copy of the rows after it.

Each node's newest ref follows the fold the same way (a fourth log), so a selection never
scans every ref for it. The sorted ref keys of a snapshot are those of the nearest copy (sorted
once) and the keys added since, as one :class:`~smithers_tt.widgets._sorted.SortedUnion`. A
diff of two frames compares only what the frames between them changed
(:meth:`FoldCache.touched`, :func:`~smithers_tt.widgets._trim.trimmed`).
Snapshots are never changed once made: they share the row objects they did not change, which
is what lets a comparison skip them by identity.
"""

from __future__ import annotations

import bisect
from array import array
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from operator import itemgetter
from typing import Any

from smithers_tt.checkpoint import AgentCheckpoint
from smithers_tt.store import CheckpointRef, Frame
from smithers_tt.store.for_widgets import FrameRow
from smithers_tt.timetravel import Snapshot, apply
from smithers_tt.widgets._bulk import paused_gc
from smithers_tt.widgets._records import RefKey
from smithers_tt.widgets._sorted import SortedUnion
from smithers_tt.widgets._trim import Touched, newest_refs

NodeKey = tuple[str, int]
Rows = tuple[dict[Any, Any], ...]
"""Nodes, attempts, refs and each node's newest ref, as dicts."""
AttemptKey = tuple[str, int, int]

ATTEMPTS, REFS = 1, 2
"""Which row dict (nodes 0, attempts 1, refs 2, newest refs 3) sorted keys are asked of."""

node_of = itemgetter(0, 1)
"""The node and iteration of an attempt's (or ref's) key."""

MARK_EVERY = 16_384
"""Logged assignments between the copies of the rows a segment keeps (a 100,000-frame run
logs about 160,000: ten copies, and a snapshot is rebuilt from at most this many)."""
SNAPSHOT_CACHE = 12
"""Recent snapshots kept (each is rebuilt from the logs in a few milliseconds when it is
needed again; the diff and the inspector ask for the same two or three many times)."""


class FoldCache:
    """The snapshots of ``frames`` (one run's, dense; the list may grow at its end)."""

    def __init__(
        self,
        run_id: str,
        frames: list[FrameRow] | list[Frame],
        loader: Callable[[CheckpointRef], AgentCheckpoint],
        base: Snapshot | None = None,
    ) -> None:
        self.run_id, self.loader = run_id, loader
        self.reset(frames, base)

    def reset(self, frames: list[FrameRow] | list[Frame], base: Snapshot | None = None) -> None:
        """Start again on ``frames`` (the run's history was rewritten), folded on ``base``
        (what a fork by reference inherits, :func:`smithers_tt.timetravel.inherited`) or on
        nothing."""
        self.frames, self.base = frames, base
        self.clear()

    def clear(self) -> None:
        """Let go of every snapshot kept and of the fold; it is made again when needed."""
        self._snapshots: OrderedDict[int, Snapshot] = OrderedDict()
        self._indexes: OrderedDict[int, _SnapshotIndex] = OrderedDict()
        self._segments: list[_Segment] = []
        self._firsts: list[int] = []
        self._work: Snapshot | None = None
        self._newest: dict[NodeKey, CheckpointRef] | None = None
        self._done = 0  # frames folded so far (a prefix of self.frames)
        self._scalars: list[tuple[Any, ...]] = []
        self._scalars_at: list[int] = []

    def _index(self, frame_no: int) -> int:
        return frame_no - self.frames[0].frame_no if self.frames else 0

    def at(self, n: int) -> Snapshot:
        """The snapshot at frame ``n`` (one of the frames)."""
        cached = self._snapshots.get(n)
        if cached is not None:
            self._snapshots.move_to_end(n)
            return cached
        self.fold_through(n)
        snap, newest, segment = self._rebuild(n)
        self._index_as(snap, newest, segment)
        self._snapshots[n] = snap
        while len(self._snapshots) > SNAPSHOT_CACHE:
            self._snapshots.popitem(last=False)
        return snap

    def fold_through(self, n: int) -> None:
        """Fold the frames up to frame ``n`` (those not folded yet), without making its
        snapshot (a read ahead: :mod:`~smithers_tt.widgets._preload`)."""
        try:
            with paused_gc():
                self._fold_to(self._index(n) + 1)
        except Exception:  # a corrupt frame: the fold stopped half-way, start again next time
            self.clear()
            raise

    # --- the fold ------------------------------------------------------------------------

    def _fold_to(self, count: int) -> None:
        """Fold the first ``count`` frames (those not folded yet), logging what they set.

        A frame of one of ``ROW_KINDS`` sets exactly one row, under the key its fields name
        (what :func:`timetravel.apply` does): that row is logged here, at the cost of two
        appends, and the logs' lengths are counted in locals. Any other kind sets none (it may
        change the run's status, input, output or error), or replaces the row dicts (a
        reset), which starts a new segment; so does one that changed how many rows there are
        without replacing them (no kind does: a guard).
        """
        if self._work is None:
            self._begin()
        snap, newest = self._work, self._newest
        assert snap is not None and newest is not None
        segment = self._segments[-1]
        nodes, attempts, refs = snap.nodes, snap.attempts, snap.refs
        nk, nv, ak, av, rk, rv, wk, wv = segment.appends()
        cn, ca, cr, cw = segment.counts()
        lengths, mark = segment.lengths.extend, segment.next_mark
        f = None
        for f in self.frames[self._done : count]:
            kind = f.kind
            if kind not in ROW_KINDS:
                rows = len(nodes) + len(attempts) + len(refs)
            apply(snap, f)
            if kind == "checkpoint":
                attempt, sequence = f.attempt, f.sequence
                key4 = (f.node_id, f.iteration, attempt, sequence)
                ref = refs[key4]
                rk(key4)
                rv(ref)
                cr += 1
                key = (f.node_id, f.iteration)
                found = newest.get(key)
                if (
                    found is None
                    or found.attempt < attempt
                    or (found.attempt == attempt and found.sequence <= sequence)
                ):
                    newest[key] = ref
                    wk(key)
                    wv(ref)
                    cw += 1
            elif kind in NODE_KINDS:
                key = (f.node_id, f.iteration)
                nk(key)
                nv(nodes[key])
                cn += 1
            elif kind in ATTEMPT_KINDS:
                key = (f.node_id, f.iteration, f.attempt)
                ak(key)
                av(attempts[key])
                ca += 1
            else:
                snap.frame_no = f.frame_no
                if (
                    snap.nodes is not nodes
                    or snap.attempts is not attempts
                    or snap.refs is not refs
                    or rows != len(nodes) + len(attempts) + len(refs)
                ):  # a reset removed rows: what follows starts from a copy of what is left
                    self._note_scalars(snap)
                    segment = self._segment(snap, newest_refs(snap), f.frame_no)
                    snap, newest = self._work, self._newest
                    assert snap is not None and newest is not None
                    nodes, attempts, refs = snap.nodes, snap.attempts, snap.refs
                    nk, nv, ak, av, rk, rv, wk, wv = segment.appends()
                    cn, ca, cr, cw = segment.counts()
                    lengths, mark = segment.lengths.extend, segment.next_mark
                    continue
                self._note_scalars(snap)  # the run's status, input, output or error may change
            lengths((cn, ca, cr, cw))
            if cn + ca + cr + cw >= mark:
                segment.keep(f.frame_no, nodes, attempts, refs, newest)
                mark = segment.next_mark
        if f is not None:
            snap.frame_no = f.frame_no
        self._done = max(self._done, min(count, len(self.frames)))

    def _begin(self) -> None:
        before = self.frames[0].frame_no - 1 if self.frames else -1
        if self.base is None:
            start, newest = Snapshot(self.run_id, before), {}
        else:
            start = replace(self.base, frame_no=before)
            newest = newest_refs(self.base)
        self._segment(start, newest, before + 1, first_frame=True)
        self._note_scalars(start)

    def _segment(
        self,
        rows: Snapshot,
        newest: dict[NodeKey, CheckpointRef],
        first: int,
        *,
        first_frame: bool = False,
    ) -> _Segment:
        """Start a segment at frame ``first`` from the rows of ``rows`` (before that frame
        when it is the first one folded, else after it: a reset)."""
        start = replace(
            rows,
            nodes=dict(rows.nodes),
            attempts=dict(rows.attempts),
            refs=dict(rows.refs),
            loader=None,
            stored_refs=None,
        )
        segment = _Segment(first, start, dict(newest), next_mark=MARK_EVERY)
        work = replace(start, nodes=dict(start.nodes), attempts=dict(start.attempts),
                       refs=dict(start.refs))  # fmt: skip
        self._work, self._newest = work, dict(newest)
        if not first_frame:  # the reset frame itself: its rows are the start rows
            segment.lengths.extend((0, 0, 0, 0))
        self._segments.append(segment)
        self._firsts.append(first)
        return segment

    def _note_scalars(self, snap: Snapshot) -> None:
        """Record the run's status, input, output and error from this frame on."""
        self._scalars.append((snap.status, snap.input, snap.output, snap.error))
        self._scalars_at.append(snap.frame_no)

    def _rebuild(self, n: int) -> tuple[Snapshot, dict[NodeKey, CheckpointRef], _Segment]:
        """The snapshot at frame ``n`` (folded already) from its segment's logs."""
        segment = self._segments[bisect.bisect_right(self._firsts, n) - 1]
        nodes, attempts, refs, newest = segment.rows_at(n, self._near(segment, n))
        status, input_, output, error = self._scalars[bisect.bisect_right(self._scalars_at, n) - 1]
        snap = replace(
            segment.start,
            frame_no=n,
            status=status,
            input=input_,
            output=output,
            error=error,
            nodes=nodes,
            attempts=attempts,
            refs=refs,
            loader=self.loader,
        )
        return snap, newest, segment

    def _near(self, segment: _Segment, n: int) -> tuple[int, Rows] | None:
        """The rows of the newest snapshot kept at or before frame ``n`` in ``segment`` (the
        previous frame when stepping), to rebuild from instead of a copy further back."""
        found = max((k for k in self._snapshots if segment.first <= k <= n), default=None)
        if found is None:
            return None
        snap = self._snapshots[found]
        index = self._indexes.get(id(snap))
        if index is None or index.snap is not snap or index.segment is not segment:
            return None
        if index.newest is None:
            return None
        return found, (snap.nodes, snap.attempts, snap.refs, index.newest)

    # --- what is known of a snapshot beyond its rows ----------------------------------------

    def newest(self, snap: Snapshot) -> dict[NodeKey, CheckpointRef]:
        """Each node's newest ref in a snapshot, kept while the snapshot is (scrubbing back
        and forth compares the same snapshots again)."""
        index = self._index_of(snap)
        if index.newest is None:
            index.newest = newest_refs(snap)
        return index.newest

    def sorted_ref_keys(self, snap: Snapshot) -> Sequence[RefKey]:
        """The keys of a snapshot's refs, sorted: merged from those of the nearest copy of the
        rows kept before it (sorted once) and the keys added since, else sorted once."""
        index = self._index_of(snap)
        if index.ref_keys is None:
            segment = index.segment
            if segment is None:
                index.ref_keys = sorted(snap.refs)
            else:
                index.ref_keys = segment.sorted_keys_at(snap.frame_no)
        return index.ref_keys

    def node_keys(self, snap: Snapshot) -> tuple[Sequence[NodeKey], Sequence[AttemptKey]] | None:
        """The (node, iteration) keys of a snapshot's nodes and attempts, and the keys of its
        attempts, sorted, from the nearest copy of the rows kept before it and what came
        since (None: a snapshot this cache did not make, whose keys it cannot know so)."""
        index = self._index_of(snap)
        segment = index.segment
        if segment is None:
            return None
        if index.node_keys is None:
            n = snap.frame_no
            index.node_keys = (segment.node_keys_at(n), segment.sorted_keys_at(n, ATTEMPTS))
        return index.node_keys

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
            found = self._index_as(snap, None, None)
        return found

    def _index_as(
        self,
        snap: Snapshot,
        newest: dict[NodeKey, CheckpointRef] | None,
        segment: _Segment | None,
    ) -> _SnapshotIndex:
        index = self._indexes[id(snap)] = _SnapshotIndex(snap, newest, segment)
        self._indexes.move_to_end(id(snap))
        while len(self._indexes) > SNAPSHOT_CACHE + 2:
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


class _Log:
    """Assignments to one row dict, in order: keys and values in two lists (two objects for
    the garbage collector to walk, not one pair per assignment)."""

    __slots__ = ("keys", "values")

    def __init__(self) -> None:
        self.keys: list[Any] = []
        self.values: list[Any] = []

    def __len__(self) -> int:
        return len(self.keys)

    def span(self, start: int, stop: int) -> Iterable[tuple[Any, Any]]:
        """Assignments ``start`` to ``stop`` (excluded) as pairs."""
        return zip(self.keys[start:stop], self.values[start:stop], strict=True)


@dataclass(slots=True)
class _Segment:
    """Frames ``first`` and later up to the next reset: the rows they start from and what
    each frame set (the logs, and their lengths after each frame)."""

    first: int
    start: Snapshot
    """The rows before frame ``first`` (the first segment) or after it (a reset)."""
    newest0: dict[NodeKey, CheckpointRef]
    """Each node's newest ref in ``start``."""
    nodes: _Log = field(default_factory=_Log)
    attempts: _Log = field(default_factory=_Log)
    refs: _Log = field(default_factory=_Log)
    newest: _Log = field(default_factory=_Log)
    lengths: array[int] = field(default_factory=lambda: array("q"))
    """The four logs' lengths after each frame, frame ``first`` first."""
    marks: list[tuple[int, Rows]] = field(default_factory=list)
    """Copies of the four row dicts (nodes, attempts, refs, newest) after some frames: a
    snapshot is rebuilt from the nearest one before it and at most ``MARK_EVERY`` logged
    assignments."""
    next_mark: int = 0
    _sorted: dict[tuple[int, int], list[Any]] = field(default_factory=dict)
    """The sorted keys of a row dict (1: attempts, 2: refs) in each copy kept (-1: the
    start), once asked."""
    _node_keys: dict[int, tuple[list[NodeKey], set[NodeKey]]] = field(default_factory=dict)
    """The (node, iteration) keys of the nodes and attempts in each copy kept, sorted and as
    a set, once asked."""

    def appends(self) -> tuple[Callable[[Any], None], ...]:
        """The append methods of the logs' keys and values: nodes, attempts, refs, newest."""
        logs = (self.nodes, self.attempts, self.refs, self.newest)
        return tuple(m for log in logs for m in (log.keys.append, log.values.append))

    def counts(self) -> tuple[int, int, int, int]:
        """The four logs' lengths now."""
        return len(self.nodes), len(self.attempts), len(self.refs), len(self.newest)

    def keep(self, frame_no: int, *rows: dict[Any, Any]) -> None:
        """Keep a copy of the row dicts as they are after frame ``frame_no``."""
        self.marks.append((frame_no, tuple(dict(r) for r in rows)))
        self.next_mark += MARK_EVERY

    def rows_at(self, n: int, near: tuple[int, Rows] | None = None) -> list[dict[Any, Any]]:
        """The four row dicts after frame ``n``: the nearest copy kept before it (or the
        start, or the rows ``near`` gives after an earlier frame of the segment, if nearer)
        with the logged assignments since made again (a key set again keeps its place and
        takes the later value, as in the dict the fold set them in)."""
        counts = self._counts(n)
        found = self._mark_before(n)
        if near is not None and (found < 0 or near[0] > self.marks[found][0]):
            kept, done = near[1], self._counts(near[0])
        else:
            kept, done = self._kept_before(found)
        logs = (self.nodes, self.attempts, self.refs, self.newest)
        out = []
        for rows, log, start, stop in zip(kept, logs, done, counts, strict=True):
            rows = rows.copy()
            rows.update(log.span(start, stop))
            out.append(rows)
        return out

    def sorted_keys_at(self, n: int, which: int = REFS) -> Sequence[Any]:
        """The keys of the refs (or, ``which`` = ``ATTEMPTS``, of the attempts) after frame
        ``n``, sorted: those of the nearest copy kept before it (sorted once) and the keys
        added since, as one :class:`SortedUnion`."""
        found = self._mark_before(n)
        base, new = self._since(found, self._counts(n)[which], which)
        return SortedUnion(base, new) if new else base

    def node_keys_at(self, n: int) -> Sequence[NodeKey]:
        """The (node, iteration) keys of the nodes and of the attempts after frame ``n``,
        sorted: those of the nearest copy kept before it and those added since (a segment
        never removes a row, so nothing else changes)."""
        found = self._mark_before(n)
        base, held = self._node_keys_of(found)
        done, counts = self._kept_before(found)[1], self._counts(n)
        new = set(self.nodes.keys[done[0] : counts[0]])
        new.update(map(node_of, self.attempts.keys[done[1] : counts[1]]))
        new.difference_update(held)
        return SortedUnion(base, sorted(new)) if new else base

    def _node_keys_of(self, found: int) -> tuple[list[NodeKey], set[NodeKey]]:
        got = self._node_keys.get(found)
        if got is None:
            kept = self._kept_before(found)[0]
            held = set(kept[0])
            held.update(map(node_of, kept[1]))
            got = self._node_keys[found] = (sorted(held), held)
        return got

    def _counts(self, n: int) -> array[int]:
        at = 4 * (n - self.first)
        return self.lengths[at : at + 4]

    def _mark_before(self, n: int) -> int:
        """The index of the last copy kept at or before frame ``n`` (-1: the start)."""
        return bisect.bisect_right(self.marks, n, key=lambda m: m[0]) - 1

    def _kept_before(self, found: int) -> tuple[Rows, Sequence[int]]:
        """The rows of copy ``found`` (-1: the start) and the logs' lengths there."""
        if found < 0:
            start = self.start
            return (start.nodes, start.attempts, start.refs, self.newest0), (0, 0, 0, 0)
        kept_at, kept = self.marks[found]
        return kept, self._counts(kept_at)

    def _since(self, found: int, stop: int, which: int) -> tuple[list[Any], list[Any]]:
        """The sorted keys of row dict ``which`` in copy ``found`` (-1: the start), and those
        logged since, up to ``stop``, that it does not hold (sorted)."""
        kept, done = self._kept_before(found)
        base = self._sorted.get((which, found))
        if base is None:
            if found < 0:
                base = sorted(kept[which])
            else:  # the copy before, and what came since: two sorted runs, one merge
                before, new = self._since(found - 1, done[which], which)
                base = sorted(before + new)
            self._sorted[(which, found)] = base
        rows, log = kept[which], (self.nodes, self.attempts, self.refs)[which]
        return base, sorted(k for k in set(log.keys[done[which] : stop]) if k not in rows)


@dataclass(slots=True)
class _SnapshotIndex:
    """What the cache knows of one snapshot beyond its rows."""

    snap: Snapshot
    newest: dict[NodeKey, CheckpointRef] | None
    """Each node's newest ref (None until known)."""
    segment: _Segment | None
    """The segment it was rebuilt from (None: a snapshot from elsewhere)."""
    ref_keys: Sequence[RefKey] | None = None
    """The ref keys, sorted (None until asked)."""
    node_keys: tuple[Sequence[NodeKey], Sequence[AttemptKey]] | None = None
    """The (node, iteration) keys of the nodes and attempts, and the attempt keys, sorted
    (None until asked)."""
    attempts: list[tuple[str, int, list[int]]] | None = None
    """Each node (and iteration) with its attempt numbers, sorted (None until asked)."""


NODE_KINDS = frozenset(("node_state", "cache_hit"))
"""Frame kinds that set one node row."""
ATTEMPT_KINDS = frozenset(("attempt_started", "attempt_finished"))
"""Frame kinds that set one attempt row."""
ROW_KINDS = NODE_KINDS | ATTEMPT_KINDS | {"checkpoint"}
"""Frame kinds that set one row (a checkpoint frame sets a ref)."""

TOUCHED_AT_MOST = 5_000
"""Frames between two compared frames beyond which comparing every row is cheaper."""

STATUS_KINDS = frozenset(
    ("run_claimed", "run_finished", "run_failed", "run_cancelled", "run_paused",
     "run_continued", "run_released", "cancel_requested", "breakpoints_set")
)  # fmt: skip
"""Frame kinds that change no node, attempt or ref (only the run's status, compared on its
own, or nothing a snapshot holds)."""
