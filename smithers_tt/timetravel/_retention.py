"""History retention: delete old ended runs, leaves of the fork tree first, then the content
nothing reaches any more.

A run is old when it ended (``finished``, ``failed`` or ``cancelled``) and has not changed for
longer than the cutoff. Deleting a run deletes its frames, nodes, attempts and refs (the
foreign keys cascade); its content goes only if no other run's refs or frames, and no cache
entry, still pin it, which :func:`smithers_tt.store.collect_garbage` decides afterwards.

With ``keep_forks`` (the default) a run is deleted only once no run forked from it remains, so
a kept fork keeps its whole ancestry (and its lineage in the fork tree); without it, old runs go
whatever descends from them, and their forks stay whole on their own: a fork made by reference
is materialised first (base frames that restate the state it was forked from, and pin that
content), and a parent with such a fork is never deleted before that.

Work is done in pages of runs, one transaction each, so a prune of millions of runs never
holds one long transaction; every deleted run leaves a ``prune`` row in the audit table.

With ``run_ids`` only those runs are looked at (the run browser's Delete: the same rules, on
the runs a person chose), and the report says why each one that stayed was kept.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from smithers_tt.errors import InvalidArgument
from smithers_tt.store import ENDED, GcReport, Progress, Store, collect_garbage, now_ms
from smithers_tt.store.for_timetravel import (
    check_limit,
    count_kept_for_forks,
    inheriting_forks_of_old,
    prune_page,
    why_kept,
)
from smithers_tt.timetravel._fork import materialize

MAX_LISTED = 1000
"""At most this many deleted run ids are listed in a report (the count is always exact)."""


@dataclass
class PruneReport:
    """What a prune did: runs deleted (and which), old runs kept because of their forks, pages
    of runs, and what the content collection that followed did."""

    cutoff_ms: int | None = None
    runs_deleted: int = 0
    forks_materialised: int = 0
    """Forks by reference given their own history first (their parents went)."""
    deleted: list[str] = field(default_factory=list)
    kept_for_forks: int = 0
    kept: dict[str, str] = field(default_factory=dict)
    """With ``run_ids``: each chosen run that stayed, and why (runs that do not exist are not
    listed)."""
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
    run_ids: Sequence[str] | None = None,
    progress: Progress | None = None,
) -> PruneReport:
    """Delete ended runs unchanged for ``older_than_ms``, then collect unreachable content.

    Args:
        store: the store to prune.
        older_than_ms: runs whose ``updated_at_ms`` is older than now minus this go.
        keep_forks: keep a run while any run forked from it remains (leaves go first).
        page_size: runs deleted per transaction (1 to 1,000).
        run_ids: only these runs (None: every run); the report's ``kept`` says why each
            of them that stayed was kept.
        progress: called after each page with the rows it deleted: first pages of runs,
            then pages of content.

    Runs executing, waiting to resume or held by a time-travel lease are never deleted.
    """
    if type(older_than_ms) is not int or older_than_ms < 0:
        raise InvalidArgument(f"older_than_ms must be an int >= 0, got {older_than_ms!r}")
    check_limit(page_size)
    cutoff = now_ms() - older_than_ms
    report = PruneReport(cutoff_ms=cutoff)
    chosen = None if run_ids is None else sorted(set(run_ids))
    while not keep_forks:  # forks that read an old parent's frames get their own first
        forks = inheriting_forks_of_old(
            store.engine, statuses=ENDED, cutoff_ms=cutoff, run_ids=chosen
        )
        if not forks:
            break
        for child in forks:
            report.forks_materialised += materialize(store, child)
    while True:  # passes: each can turn parents of deleted forks into leaves
        deleted_in_pass = 0
        after: str | None = None
        while True:
            deleted, after = prune_page(
                store.engine,
                statuses=ENDED,
                cutoff_ms=cutoff,
                keep_forks=keep_forks,
                page_size=page_size,
                after=after,
                run_ids=chosen,
            )
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
        report.kept_for_forks = count_kept_for_forks(
            store.engine, statuses=ENDED, cutoff_ms=cutoff, run_ids=chosen
        )
    if chosen:
        report.kept = why_kept(
            store.engine, chosen, statuses=ENDED, cutoff_ms=cutoff, keep_forks=keep_forks
        )
    report.content = collect_garbage(store.engine, progress=progress)
    return report
