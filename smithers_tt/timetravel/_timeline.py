"""The timeline of a run: its frames, and the tree of runs forked from the same root."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from smithers_tt.errors import RunNotFound
from smithers_tt.store import Frame, Store, travel
from smithers_tt.store.for_timetravel import Travel
from smithers_tt.timetravel._html import MUTED, table, title

MAX_TREE = 10_000
"""Most runs a fork tree lists."""


NOT_STARTED = "not started"
"""What a fork nothing has run yet reads as (its stored status is ``interrupted``)."""


@dataclass(frozen=True)
class ForkEdge:
    """One run of a fork tree and where it came from.

    ``fork_point_rewound``: the parent was rewound (``force=True``) below the frame this run
    was forked at, so the parent no longer has that frame as it was (the run itself is whole:
    its base frames restate what it started from)."""

    run_id: str
    parent_run_id: str | None
    parent_frame_no: int | None
    status: str
    workflow: str
    created_at_ms: int
    fork_point_rewound: bool = False
    started: bool = True
    """Whether the run has a frame after its frame 0: False for a fork that nothing has run
    yet (its status is ``interrupted`` until something does)."""

    @property
    def shown_status(self) -> str:
        """The status as people should read it: a fork nothing has run yet is "not started"
        (ready to run), never "interrupted", which people take for a crash."""
        fresh = self.parent_run_id is not None and not self.started
        return NOT_STARTED if fresh and self.status == "interrupted" else self.status

    @property
    def where(self) -> str:
        """Where the run came from, in words."""
        if self.parent_run_id is None:
            return "root"
        said = f"fork of {self.parent_run_id} @ frame {self.parent_frame_no}"
        return said + (" (that frame was rewound away)" if self.fork_point_rewound else "")


@dataclass
class Timeline:
    """A run's frames and the fork tree it belongs to (``root`` first, parents before
    children)."""

    run_id: str
    root: str
    frames: list[Frame]
    tree: list[ForkEdge]

    def children(self, run_id: str) -> list[ForkEdge]:
        """Runs forked directly from ``run_id``."""
        return [e for e in self.tree if e.parent_run_id == run_id]

    def _repr_html_(self) -> str:
        """Frames and fork tree as escaped HTML tables in notebooks."""
        return timeline_html(self)


def fork_tree(store: Store, run_id: str) -> tuple[str, list[ForkEdge]]:
    """The root of ``run_id``'s lineage and every run descending from it."""

    def work(tx: Travel) -> tuple[str, list[ForkEdge]]:
        root, seen = run_id, {run_id}
        child = None
        while True:
            row = tx.fork_edge(root)
            if row is None:
                if child is None:
                    raise RunNotFound(f"no run {run_id!r}")
                # the parent was deleted: the lineage starts at its child now
                root, row = child[0], child
                break
            if row[1] is None or row[1] in seen:
                break
            child, root = row, row[1]
            seen.add(root)
        edges = [_edge(row)]
        level = [root]
        while level and len(edges) < MAX_TREE:
            rows = tx.fork_children(level)
            edges.extend(_edge(r) for r in rows)
            level = [r[0] for r in rows]
        return root, _mark_rewound(tx, edges[:MAX_TREE])

    return travel(store.engine, work, write=False)


def _edge(row: tuple[Any, ...]) -> ForkEdge:
    """A fork-tree entry of a row of :meth:`Travel.fork_edge` (its last column the clock)."""
    *fields, clock = row
    return ForkEdge(*fields, started=clock > 0)


def _mark_rewound(tx: Travel, edges: list[ForkEdge]) -> list[ForkEdge]:
    """Flag the edges whose fork point their parent no longer has as it was: the frame is
    gone, or was written again after the fork (a rewind past it, then new frames)."""
    forks = [e for e in edges if e.parent_run_id is not None and e.parent_frame_no is not None]
    if not forks:
        return edges
    stamps = tx.frame_stamps([(e.parent_run_id, e.parent_frame_no) for e in forks])  # type: ignore[misc]
    present = {e.run_id for e in edges}
    out = []
    for e in edges:
        if e.parent_run_id in present and e.parent_frame_no is not None:
            stamp = stamps.get((e.parent_run_id, e.parent_frame_no))
            if stamp is None or stamp > e.created_at_ms:
                e = replace(e, fork_point_rewound=True)
        out.append(e)
    return out


def timeline(
    store: Store, run_id: str, *, first: int | None = None, last: int | None = None
) -> Timeline:
    """Frames of ``run_id`` (those numbered ``first`` to ``last`` when given, both
    included) plus its fork tree."""
    root, tree = fork_tree(store, run_id)
    after = -1 if first is None else max(first, 0) - 1
    return Timeline(run_id, root, store.frames(run_id, after=after, upto=last), tree)


def timeline_html(t: Timeline) -> str:
    """A timeline: the run's frames (numbers, kinds, nodes) and its fork tree."""
    frames = table(
        ["frame", "kind", "node", "attempt", "seq", "state", "purpose"],
        (
            (
                f.frame_no,
                f.kind,
                f.node_id or "",
                f.attempt or "",
                "" if f.sequence is None else f.sequence,
                f.state or "",
                f.purpose or "",
            )
            for f in t.frames
            if f.frame_no >= 0
        ),
        sum(1 for f in t.frames if f.frame_no >= 0),
    )
    tree = table(
        ["run", "parent", "fork frame", "status"],
        (
            (
                e.run_id,
                e.parent_run_id or "(root)",
                ""
                if e.parent_frame_no is None
                else f"{e.parent_frame_no}" + (" (rewound away)" if e.fork_point_rewound else ""),
                e.status,
            )
            for e in t.tree
        ),
        len(t.tree),
    )
    return (
        f"<div>{title(f'Timeline of run {t.run_id} (root {t.root})')}{frames}"
        f"<div {MUTED}>fork tree</div>{tree}</div>"
    )
