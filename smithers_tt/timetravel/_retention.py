"""History retention: delete old ended runs, leaves of the fork tree first, then the content
nothing reaches any more.

A run is old when it ended (``finished``, ``failed`` or ``cancelled``) and has not changed for
longer than the cutoff. Deleting a run deletes its frames, nodes, attempts and refs (the
foreign keys cascade); its content goes only if no other run's refs or frames, and no cache
entry, still pin it, which :func:`smithers_tt.store.collect_garbage` decides afterwards.

With ``keep_forks`` (the default) a run is deleted only once no run forked from it remains, so
a kept fork keeps its whole ancestry (and its lineage in the fork tree); without it, old runs go
whatever descends from them, and their forks stay whole on their own (every run's history is
self-contained: its base frames restate the state it was forked from and pin that content).

Work is done in pages of runs, one transaction each, so a prune of millions of runs never
holds one long transaction; every deleted run leaves a ``prune`` row in the audit table.
"""

from __future__ import annotations

import math
import secrets
from dataclasses import dataclass, field

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from smithers_tt.checkpoint._json import canonical_bytes
from smithers_tt.errors import InvalidArgument
from smithers_tt.store import GcReport, Store, collect_garbage
from smithers_tt.store import _schema as S
from smithers_tt.store._maintenance import Progress
from smithers_tt.store._records import check_limit, now_ms
from smithers_tt.timetravel._materialize import insert_rows

TERMINAL = ("finished", "failed", "cancelled")
"""Statuses of runs that ended: the only ones retention ever deletes."""

MAX_LISTED = 1000
"""At most this many deleted run ids are listed in a report (the count is always exact)."""


@dataclass
class PruneReport:
    """What a prune did: runs deleted (and which), old runs kept because of their forks, pages
    of runs, and what the content collection that followed did."""

    cutoff_ms: int | None = None
    runs_deleted: int = 0
    deleted: list[str] = field(default_factory=list)
    kept_for_forks: int = 0
    pages: int = 0
    content: GcReport = field(default_factory=GcReport)

    @property
    def content_deleted(self) -> int:
        """Content rows deleted (no run, frame or cache entry pinned them any more)."""
        return self.content.deleted

    @property
    def bytes_freed(self) -> int:
        """Bytes of checkpoint content freed."""
        return self.content.bytes_freed


def duration_ms(older_than: object) -> int:
    """Milliseconds from a ``timedelta`` or a number of seconds (>= 0, finite)."""
    seconds = older_than.total_seconds() if hasattr(older_than, "total_seconds") else older_than
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, int | float)
        or not math.isfinite(seconds)
        or seconds < 0
    ):
        raise InvalidArgument(
            f"older_than must be a datetime.timedelta or seconds >= 0, got {older_than!r}"
        )
    return int(seconds * 1000)


def prune_runs(
    store: Store,
    *,
    older_than_ms: int,
    keep_forks: bool = True,
    page_size: int = 100,
    progress: Progress | None = None,
) -> PruneReport:
    """Delete ended runs unchanged for ``older_than_ms``, then collect unreachable content.

    Args:
        store: the store to prune.
        older_than_ms: runs whose ``updated_at_ms`` is older than now minus this go.
        keep_forks: keep a run while any run forked from it remains (leaves go first).
        page_size: runs deleted per transaction (1 to 1,000).
        progress: called after each page with the rows it deleted: first pages of runs,
            then pages of content.

    Runs executing, waiting to resume or held by a time-travel lease are never deleted.
    """
    if type(older_than_ms) is not int or older_than_ms < 0:
        raise InvalidArgument(f"older_than_ms must be an int >= 0, got {older_than_ms!r}")
    check_limit(page_size)
    r = S.runs
    child = r.alias("child")
    report = PruneReport(cutoff_ms=now_ms() - older_than_ms)

    def old(now: int) -> sa.ColumnElement[bool]:
        """Conditions a run must meet to go (checked again by the deleting statement)."""
        conditions = [
            r.c.status.in_(TERMINAL),
            r.c.updated_at_ms < report.cutoff_ms,
            sa.or_(r.c.lease_owner.is_(None), r.c.lease_until_ms <= now),
        ]
        if keep_forks:
            conditions.append(~sa.exists().where(child.c.parent_run_id == r.c.run_id))
        return sa.and_(*conditions)

    def page(conn: Connection, after: str | None) -> tuple[list[str], str | None]:
        now = now_ms()
        # Newest ids first: forks are younger than their parents (ids start with their
        # creation time), so a parent usually comes after its last fork went, in one pass.
        scan = sa.select(r.c.run_id).where(old(now)).order_by(r.c.run_id.desc()).limit(page_size)
        if after is not None:
            scan = scan.where(r.c.run_id < after)
        ids = list(conn.execute(scan).scalars())
        if not ids:
            return [], None
        gone = conn.execute(
            r.delete()
            .where(r.c.run_id.in_(ids), old(now))
            .returning(r.c.run_id, r.c.status, r.c.updated_at_ms, r.c.parent_run_id, r.c.clock)
        ).all()
        insert_rows(
            conn,
            S.audit,
            [
                {
                    "audit_id": secrets.token_hex(16),
                    "run_id": row.run_id,
                    "operation": "prune",
                    "frame_no": row.clock,
                    "actor": None,
                    "detail_json": canonical_bytes(
                        {
                            "status": row.status,
                            "updated_at_ms": row.updated_at_ms,
                            "parent_run_id": row.parent_run_id,
                            "cutoff_ms": report.cutoff_ms,
                        }
                    ).decode(),
                    "created_at_ms": now,
                }
                for row in gone
            ],
        )
        return sorted(row.run_id for row in gone), ids[-1]

    while True:  # passes: each can turn parents of deleted forks into leaves
        deleted_in_pass = 0
        after: str | None = None
        while True:
            deleted, after = store.engine.transaction(lambda conn, a=after: page(conn, a))
            if after is None:
                break
            report.pages += 1
            report.runs_deleted += len(deleted)
            deleted_in_pass += len(deleted)
            room = MAX_LISTED - len(report.deleted)
            report.deleted.extend(deleted[: max(0, room)])
            if progress:
                progress(len(deleted))
        if not keep_forks or not deleted_in_pass:
            break

    if keep_forks:
        waiting = sa.and_(
            r.c.status.in_(TERMINAL),
            r.c.updated_at_ms < report.cutoff_ms,
            sa.exists().where(child.c.parent_run_id == r.c.run_id),
        )
        report.kept_for_forks = store.engine.transaction(
            lambda conn: conn.execute(sa.select(sa.func.count()).where(waiting)).scalar_one(),
            write=False,
        )
    report.content = collect_garbage(store.engine, progress=progress)
    return report
