"""The timeline of a run: its frames, and the tree of runs forked from the same root."""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa

from smithers_tt.errors import RunNotFound
from smithers_tt.store import Frame, Store
from smithers_tt.store import _schema as S

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
    r = S.runs
    cols = (
        r.c.run_id,
        r.c.parent_run_id,
        r.c.parent_frame_no,
        r.c.status,
        r.c.workflow,
        r.c.created_at_ms,
    )

    def work(conn: sa.Connection) -> tuple[str, list[ForkEdge]]:
        root, seen = run_id, {run_id}
        child: str | None = None
        while True:
            parent = conn.execute(sa.select(r.c.parent_run_id).where(r.c.run_id == root))
            row = parent.one_or_none()
            if row is None:
                if child is None:
                    raise RunNotFound(f"no run {run_id!r}")
                root = child  # the parent was deleted: the lineage starts at its child now
                break
            if row.parent_run_id is None or row.parent_run_id in seen:
                break
            child, root = root, row.parent_run_id
            seen.add(root)
        edges = [ForkEdge(*conn.execute(sa.select(*cols).where(r.c.run_id == root)).one())]
        level = [root]
        while level and len(edges) < MAX_TREE:
            rows = conn.execute(
                sa.select(*cols).where(r.c.parent_run_id.in_(level)).order_by(r.c.run_id)
            ).all()
            edges.extend(ForkEdge(*row) for row in rows)
            level = [row.run_id for row in rows]
        return root, edges[:MAX_TREE]

    return store.engine.transaction(work, write=False)


def timeline(store: Store, run_id: str) -> Timeline:
    """Frames of ``run_id`` plus its fork tree."""
    root, tree = fork_tree(store, run_id)
    return Timeline(run_id, root, store.frames(run_id, after=-1), tree)
