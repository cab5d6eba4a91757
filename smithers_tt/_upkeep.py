"""The upkeep of a store, as :class:`~smithers_tt.database.Database` offers it: verify what is
stored, collect content nothing reaches, delete the history of old runs (a part of the entry
object, kept in a module of its own so that ``database.py`` stays a readable size)."""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import Any

from smithers_tt import timetravel as tt
from smithers_tt.store import (
    Engine,
    GcReport,
    Progress,
    Store,
    VerifyReport,
    collect_garbage,
    verify,
)


class Upkeep:
    """``db.verify``, ``db.collect_garbage`` and ``db.gc`` (the maintenance part of
    :class:`~smithers_tt.database.Database`)."""

    engine: Engine
    store: Store

    def verify(self, *, page_size: int = 200, progress: Progress | None = None) -> VerifyReport:
        """Check every stored checkpoint's SHA-256 and size, every checkpoint frame's codec,
        version and size against its content, every ref against its checkpoint frame, and that
        every stored JSON column parses; see :func:`store.verify`."""
        return verify(self.engine, page_size=page_size, progress=progress)

    def collect_garbage(self, **options: Any) -> GcReport:
        """Delete checkpoint content nothing reaches; see :func:`store.collect_garbage`."""
        return collect_garbage(self.engine, **options)

    def gc(
        self,
        older_than: datetime.timedelta | float | None = None,
        *,
        keep_forks: bool = True,
        run_ids: Sequence[str] | None = None,
        progress: Progress | None = None,
    ) -> tt.PruneReport:
        """Delete the history of runs that ended longer than ``older_than`` ago (a timedelta
        or seconds), leaves of the fork tree first, then the content nothing reaches.

        With ``keep_forks`` (default) a run stays while a run forked from it remains. With
        ``older_than=None`` no run is deleted: only unreachable content is collected. With
        ``run_ids`` (whole ids) only those runs may go: ``db.gc(0, run_ids=[...])`` deletes
        the ended ones among them (the run browser's Delete), and the report's ``kept`` says
        why each that stayed was kept. See :func:`smithers_tt.timetravel.prune_runs`.
        """
        if older_than is None:
            return tt.PruneReport(content=collect_garbage(self.engine, progress=progress))
        return tt.prune_runs(
            self.store,
            older_than_ms=tt.duration_ms(older_than),
            keep_forks=keep_forks,
            run_ids=run_ids,
            progress=progress,
        )
