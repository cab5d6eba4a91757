"""Lineage analytics: DuckDB scans of the store, answered as pandas DataFrames.

``db.lineage()`` opens a :class:`Lineage`; it needs the ``lineage`` extra
(``pip install 'smithers-tt[lineage]'``), which pins duckdb together with the DuckDB sqlite and
postgres extension packages so that the scanners load from installed files, offline. Nothing
here is imported by ``import smithers_tt``.

::

    with db.lineage() as lin:
        lin.runs()                      # one row per run with its counts
        lin.dedup()                     # logical vs stored bytes per codec, and overall
        lin.sql("SELECT codec, count(*) FROM checkpoints GROUP BY codec")

The views and their columns are documented on :class:`Lineage`'s methods and in
:data:`VIEWS`.
"""

from smithers_tt.lineage._connect import (
    EXTENSIONS_ENV,
    LineageError,
    LineageFallbackWarning,
    LineageUnavailable,
)
from smithers_tt.lineage._lineage import Lineage
from smithers_tt.lineage._views import VIEWS, View

__all__ = [
    "EXTENSIONS_ENV",
    "VIEWS",
    "Lineage",
    "LineageError",
    "LineageFallbackWarning",
    "LineageUnavailable",
    "View",
]
