"""What the handles a database hands out (a :class:`~smithers_tt.runs.Run`, a
:class:`~smithers_tt.lineage.Lineage`) use of it.

:class:`~smithers_tt.Database` imports those handles to make them, so they name it by this
protocol instead of importing it back: no import cycle, not even a ``TYPE_CHECKING`` one.
"""

from __future__ import annotations

from typing import Protocol

from smithers_tt.store import Engine, Store
from smithers_tt.timetravel import Snapshot


class OpenedDatabase(Protocol):
    """An open :class:`smithers_tt.Database`, as its runs and lineages see it."""

    engine: Engine
    store: Store

    def snapshot(self, run_id: str, frame_no: int | None = None) -> Snapshot:
        """Exactly what frame ``frame_no`` (default: the newest) of a run makes visible."""
        ...
