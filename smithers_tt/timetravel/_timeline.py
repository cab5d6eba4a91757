"""The timeline of a run: its frames, and the tree of runs forked from the same root."""

from __future__ import annotations

from dataclasses import dataclass

from smithers_tt.errors import RunNotFound
from smithers_tt.store import Frame, Store, Travel, travel

MAX_TREE = 10_000
"""Most runs a fork tree lists."""


@dataclass(frozen=True)
class ForkEdge:
    """One run of a fork tree and where it came from."""

    run_id: str
    parent_run_id: str | None
    parent_frame_no: int | None
    status: str
    workflow: str
    created_at_ms: int


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
        from smithers_tt.timetravel._html import timeline_html

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
        edges = [ForkEdge(*row)]
        level = [root]
        while level and len(edges) < MAX_TREE:
            rows = tx.fork_children(level)
            edges.extend(ForkEdge(*r) for r in rows)
            level = [r[0] for r in rows]
        return root, edges[:MAX_TREE]

    return travel(store.engine, work, write=False)


def timeline(store: Store, run_id: str) -> Timeline:
    """Frames of ``run_id`` plus its fork tree."""
    root, tree = fork_tree(store, run_id)
    return Timeline(run_id, root, store.frames(run_id, after=-1), tree)
