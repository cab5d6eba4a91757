"""What the debugger shows at a run's newest frame, read a page at a time, before (and
without) reading the run's history.

Opening a 100,000-frame run must not fold 100,000 frames to show the newest one: a person
first sees that frame's inspector (its status, a page of nodes, a page of checkpoint refs,
one payload) and its diff with the frame before. For a run that reads nothing from a parent,
the store's live tables hold exactly the newest snapshot, so :class:`NewestView` answers those
questions from them (:mod:`smithers_tt.store.reads._newest`): a count, a page, one ref. The diff
folds only the frames of the node the newest frame changed (and the run's own frames), which
decide everything the diff of two neighbouring frames compares.

The model uses it while the history is not loaded, which is only while the newest frame is
selected; anything else (another frame, a search, a diff of other frames) loads the history,
and the answers are the same (tests compare them on every kind of run).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from smithers_tt import timetravel as tt
from smithers_tt.store import CheckpointRef
from smithers_tt.store.for_widgets import (
    FrameRow,
    live_checkpointed_nodes,
    live_node_keys,
    live_node_rows,
    live_node_states,
    live_ref,
    live_ref_count,
    live_ref_page,
    live_ref_rank,
    live_top_iteration,
    newest_live_ref,
    node_frame_rows,
    seen_node_ids,
)
from smithers_tt.timetravel import Snapshot
from smithers_tt.widgets._scrub import STATUS_KINDS, node_of
from smithers_tt.widgets._sorted import SortedUnion
from smithers_tt.widgets._trim import Touched

RefKey = tuple[str, int, int, int]
NodeKey = tuple[str, int]

ONE_NODE_KINDS = ("node_state", "cache_hit", "attempt_started", "attempt_finished", "checkpoint")
"""Kinds of frame that change one node's rows (and nothing of another node)."""


@dataclass
class NodeTable:
    """The rows of the nodes table shown: (node, iteration) keys in order (the newest loop
    turns of every node when they are not all shown: :func:`newest_turns`), how many there
    are in all, and the node and attempt views of the keys shown."""

    keys: list[NodeKey]
    total: int
    nodes: dict[NodeKey, tt.NodeView]
    attempts: dict[tuple[str, int, int], tt.AttemptView]


def newest_turns(keys: Sequence[NodeKey], limit: int) -> list[tuple[int, int]]:
    """Of sorted (node, iteration) ``keys``, which to show when at most ``limit`` fit: each
    node's newest iterations, a turn at a time (every node's newest, then every node's one
    before, ...; the last turn that does not fit whole by node id), as the ranges
    ``keys[start:stop]`` they make, in key order. A long loop's table then shows where each
    of its nodes stands, not the first nodes' first iterations."""
    spans = []  # (start, stop) of each node's keys
    start, size = 0, len(keys)
    while start < size:
        stop = _rank(keys, (keys[start][0], float("inf")))
        spans.append((start, stop))
        start = stop
    counts = [stop - start for start, stop in spans]
    if sum(counts) <= limit:
        return spans
    low, high = 0, max(counts)  # the most whole turns that fit
    while low < high:
        turns = (low + high + 1) // 2
        if sum(min(c, turns) for c in counts) <= limit:
            low = turns
        else:
            high = turns - 1
    takes = [min(c, low) for c in counts]
    left = limit - sum(takes)
    for i, count in enumerate(counts):  # one more of each node that has one, by node id
        if left and count > low:
            takes[i], left = takes[i] + 1, left - 1
    return [(stop - take, stop) for (_, stop), take in zip(spans, takes, strict=True) if take]


def node_table(
    snap: Snapshot,
    limit: int,
    keys: tuple[Sequence[NodeKey], Sequence[tuple[str, int, int]]] | None = None,
) -> NodeTable:
    """The nodes table of a folded snapshot (the rows shown only: :func:`newest_turns`);
    ``keys``, when known (:meth:`FoldCache.node_keys`), are its sorted (node, iteration) keys
    and attempt keys, and spare going through every node and attempt."""
    nodes, attempts = snap.nodes, snap.attempts
    every: Sequence[NodeKey] = (
        sorted(set(nodes).union(map(node_of, attempts))) if keys is None else keys[0]
    )
    spans = newest_turns(every, limit)
    shown = [key for start, stop in spans for key in every[start:stop]]
    picked: dict[tuple[str, int, int], tt.AttemptView] = {}
    if len(shown) == len(every):
        picked = dict(attempts)
    elif keys is None:
        wanted = set(shown)
        picked = {k: v for k, v in attempts.items() if k[:2] in wanted}
    else:
        for start, stop in spans:  # a node's attempts of the iterations shown: one range
            (node_id, first), (_, last) = every[start], every[stop - 1]
            lo, hi = _rank(keys[1], (node_id, first)), _rank(keys[1], (node_id, last + 1))
            picked.update((k, attempts[k]) for k in keys[1][lo:hi])
    return NodeTable(shown, len(every), {k: nodes[k] for k in shown if k in nodes}, picked)


def _rank(items: Any, item: Any) -> int:
    """How many items of a sorted list or :class:`SortedUnion` come before ``item``."""
    if isinstance(items, SortedUnion):
        return items.rank(item)
    return bisect.bisect_left(items, item)


class NewestView:
    """The newest frame of a run that reads nothing from a parent, read from the store's
    live tables (see the module docstring)."""

    def __init__(self, db: Any, run_id: str, last: FrameRow, loader: Callable[..., Any]) -> None:
        self.engine = db.store.engine
        self.run_id = run_id
        self.last = last
        self.loader = loader
        self._refs: dict[RefKey, CheckpointRef | None] = {}
        self._count: int | None = None
        self._partial: dict[tuple[tuple[str, ...], int], tuple[Snapshot, Snapshot]] = {}
        self._checkpointed: list[str] | None = None

    @property
    def frame_no(self) -> int:
        """The newest frame's number."""
        return self.last.frame_no

    # --- refs ----------------------------------------------------------------------------

    def ref_count(self) -> int:
        """How many refs are visible."""
        if self._count is None:
            self._count = live_ref_count(self.engine, self.run_id)
        return self._count

    def ref(self, key: RefKey) -> CheckpointRef | None:
        """The visible ref of ``key``, or None."""
        if key not in self._refs:
            self._refs[key] = live_ref(self.engine, self.run_id, key)
        return self._refs[key]

    def rank(self, key: RefKey) -> int | None:
        """How many visible refs come before ``key`` in key order (None: not visible)."""
        return live_ref_rank(self.engine, self.run_id, key)

    def page(self, page: int, size: int) -> list[CheckpointRef]:
        """Page ``page`` (from 0) of the visible refs in key order."""
        refs = live_ref_page(self.engine, self.run_id, page * size, size)
        for ref in refs:
            self._refs[(ref.node_id, ref.iteration, ref.attempt, ref.sequence)] = ref
        return refs

    def newest_ref(self, node: NodeKey | None = None) -> CheckpointRef | None:
        """The newest ref of a (node, iteration), or of the whole run."""
        return newest_live_ref(self.engine, self.run_id, node)

    def checkpointed(self) -> list[str]:
        """The nodes with a visible ref, sorted."""
        if self._checkpointed is None:
            self._checkpointed = live_checkpointed_nodes(self.engine, self.run_id)
        return self._checkpointed

    def top_iteration(self, node_id: str) -> int | None:
        """The highest iteration of a node with a visible ref, or None."""
        return live_top_iteration(self.engine, self.run_id, node_id)

    # --- nodes ---------------------------------------------------------------------------

    def node_table(self, limit: int) -> NodeTable:
        """The first ``limit`` rows of the nodes table."""
        keys, total = live_node_keys(self.engine, self.run_id, limit)
        nodes, attempts = live_node_rows(self.engine, self.run_id, keys)
        return NodeTable(
            keys,
            total,
            {(r[0], r[1]): tt.NodeView(*r) for r in nodes},
            {(r[0], r[1], r[2]): tt.AttemptView(*r) for r in sorted(attempts)},
        )

    def node_states(self) -> dict[str, str]:
        """Each node's state (of its highest iteration)."""
        return live_node_states(self.engine, self.run_id)

    def node_ids(self) -> list[str]:
        """The node ids the run's frames name, in first-seen order."""
        return seen_node_ids(self.engine, self.run_id)

    # --- partial snapshots -----------------------------------------------------------------

    def partial(self, node_ids: tuple[str, ...], upto: int) -> Snapshot:
        """The snapshot at frame ``upto`` as far as ``node_ids`` and the run itself go (status,
        input, output, error): the fold of their frames only."""
        return self._partials(node_ids, upto)[1]

    def _partials(self, node_ids: tuple[str, ...], upto: int) -> tuple[Snapshot, Snapshot]:
        """:meth:`partial` at ``upto - 1`` and at ``upto``, from one read of the frames."""
        key = (node_ids, upto)
        found = self._partial.get(key)
        if found is None:
            rows = node_frame_rows(self.engine, self.run_id, node_ids, upto)
            snap = Snapshot(self.run_id, upto, loader=self.loader)
            for row in rows[:-1] if rows and rows[-1].frame_no == upto else rows:
                tt.apply(snap, row)
            before = replace(
                snap,
                frame_no=upto - 1,
                nodes=dict(snap.nodes),
                attempts=dict(snap.attempts),
                refs=dict(snap.refs),
            )
            if rows and rows[-1].frame_no == upto:
                tt.apply(snap, rows[-1])
            found = self._partial[key] = (before, snap)
        return found

    @property
    def status(self) -> str:
        """The run's status at the newest frame."""
        return self.partial((), self.frame_no).status

    def last_change(self) -> tuple[Snapshot, Snapshot, Touched | None] | None:
        """The snapshots before and at the newest frame, for what it changed, and what that is
        (None: compare the two whole; no answer when the frame is of a kind that changes more
        than the nodes it names and the run's status)."""
        f, n = self.last, self.frame_no
        if n == 0:
            return None
        if f.kind in ONE_NODE_KINDS and f.node_id is not None:
            node = (f.node_id,)
            if f.kind in ("node_state", "cache_hit"):
                touched = Touched({f.node_id}, set(), set())
            elif f.kind == "checkpoint":
                touched = Touched(set(), set(), {(f.node_id, f.iteration)})
            else:
                touched = Touched(set(), {(f.node_id, f.iteration, f.attempt)}, set())
        elif f.kind in STATUS_KINDS:
            node, touched = (), Touched(set(), set(), set())
        elif f.kind == "reset" and isinstance(f.data, dict):
            # the nodes it names lose their rows: compare those nodes whole
            node, touched = tuple(map(str, f.data.get("nodes") or ())), None
        else:
            return None
        before, after = self._partials(node, n)
        return before, after, touched
