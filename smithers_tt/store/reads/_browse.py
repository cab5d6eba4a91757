"""What the run browser reads: one page of runs, newest first, filtered in the database.

Run ids begin with their creation time in hex (:func:`~smithers_tt.store.new_run_id`), so
"newest first" is the primary key read backwards and a page after a cursor is a range of it:
the first page of a store of 100,000 runs reads 51 rows of the index, whatever the store's
size. Filters narrow that walk (status through ``tt_runs_status_idx``; a label by a probe of
``tt_run_labels`` per run, as ``db.runs(labels=...)``); a text filter looks in the run's
input, output and error, case-insensitively, with ``%`` and ``_`` matched as themselves. Each
page also counts the forks of its runs (``tt_runs_parent``) and reads their labels.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import sqlalchemy as sa

from smithers_tt.store._records import RunRecord, run_from_row
from smithers_tt.store.backend import Engine
from smithers_tt.store.backend import schema as S
from smithers_tt.store.reads._labels import carrying, labels_of

__all__ = ["RunFilter", "RunListing", "run_listing", "run_workflows"]

MAX_TEXT = 200
"""Longest text a filter looks for."""


@dataclass(frozen=True)
class RunFilter:
    """Which runs a page shows (every field optional; all given must hold)."""

    statuses: Sequence[str] = ()
    workflow: str | None = None
    since_ms: int | None = None
    until_ms: int | None = None
    text: str | None = None
    """Looked for in the input, output and error, ignoring case."""
    labels: Mapping[str, str] = field(default_factory=dict)
    """Labels a run must carry, each with its value."""


@dataclass(frozen=True)
class RunListing:
    """One page of runs, newest first, with the number of forks of each."""

    runs: list[RunRecord]
    forks: dict[str, int]
    older: str | None
    """The cursor of the next (older) page; None on the last page."""


def _escaped(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def run_listing(
    engine: Engine, where: RunFilter, *, before: str | None = None, limit: int = 50
) -> RunListing:
    """Up to ``limit`` runs matching ``where``, newest first, older than the run id
    ``before`` (a page's :attr:`RunListing.older`) when given."""
    r = S.runs
    stmt = sa.select(r).order_by(r.c.run_id.desc()).limit(limit + 1)
    if before is not None:
        stmt = stmt.where(r.c.run_id < before)
    if len(where.statuses) == 1:  # the status index's walk, newest first
        stmt = stmt.where(r.c.status == where.statuses[0])
    elif where.statuses:
        stmt = stmt.where(r.c.status.in_(list(where.statuses)))
    if where.workflow is not None:
        stmt = stmt.where(r.c.workflow == where.workflow)
    if where.labels:
        stmt = stmt.where(*carrying(where.labels))
    if where.since_ms is not None:
        stmt = stmt.where(r.c.created_at_ms >= where.since_ms)
    if where.until_ms is not None:
        stmt = stmt.where(r.c.created_at_ms < where.until_ms)
    if where.text:
        pattern = f"%{_escaped(where.text[:MAX_TEXT])}%"
        stmt = stmt.where(
            sa.or_(
                *(
                    c.ilike(pattern, escape="\\")
                    for c in (r.c.input_json, r.c.output_json, r.c.error)
                )
            )
        )

    def read(conn: sa.Connection) -> tuple[list[RunRecord], dict[str, int]]:
        rows = conn.execute(stmt).fetchall()
        labels = labels_of(conn, [row.run_id for row in rows[:limit]])
        runs = [run_from_row(row, labels.get(row.run_id)) for row in rows]
        ids = [run.run_id for run in runs[:limit]]
        forks: dict[str, int] = dict.fromkeys(ids, 0)
        if ids:
            counted = sa.select(r.c.parent_run_id, sa.func.count()).where(
                r.c.parent_run_id.in_(ids)
            )
            for parent, n in conn.execute(counted.group_by(r.c.parent_run_id)).fetchall():
                forks[parent] = int(n)
        return runs, forks

    runs, forks = engine.transaction(read, write=False)
    more = len(runs) > limit
    runs = runs[:limit]
    return RunListing(runs, forks, runs[-1].run_id if more else None)


def run_workflows(engine: Engine, *, limit: int = 200) -> list[str]:
    """The names of the store's workflows (up to ``limit``), in order."""
    r = S.runs
    stmt = sa.select(r.c.workflow).distinct().order_by(r.c.workflow).limit(limit)
    return engine.transaction(lambda conn: [w for (w,) in conn.execute(stmt)], write=False)
