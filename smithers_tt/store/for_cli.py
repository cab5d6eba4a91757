"""The command line's door into the store: the two counts ``smithers_tt.cli`` shows that no
method of the database facade answers (queued runs for ``smithers-tt workers``, rows per
table for ``smithers-tt tables`` and the progress bar of ``smithers-tt verify``), and every
revision's id (what ``smithers-tt migrate`` reports it applied to a store it created).

The CLI imports ``smithers_tt.store`` (``migrate``) and this door only (import-linter,
``pyproject.toml``; see ``docs/store.md``, "The doors").
"""

from smithers_tt.store._claims import count_runs
from smithers_tt.store.backend import migration_names, row_counts

__all__ = ["count_runs", "migration_names", "row_counts"]
