"""Time travel's door into the store: what ``smithers_tt.timetravel`` uses, and nothing else.

Time travel decides in Python (snapshots, diffs, what a rewind keeps) and has the store read
and write in sets: the ``Travel`` handle (one transaction of reads and writes of a run's state
at frame N), the state a fork starts from (``RunState``), the refs left in the database
(``StoredRefs``), a live state rebuilt from frames (``Refold``), retention's pages
(``prune_page``, the forks that keep old frames alive, why chosen runs stayed), and the rows
a snapshot holds (``NodeView``, ``AttemptView``: defined beside the store's records of the
same rows). Time travel imports ``smithers_tt.store`` and this door only (import-linter,
``pyproject.toml``; see ``docs/store.md``, "The doors").
"""

from smithers_tt.store._records import AttemptView, NodeView, check_limit, new_run_id
from smithers_tt.store._travel import RunState, Travel
from smithers_tt.store.backend import RUN_LEVEL_KINDS
from smithers_tt.store.ledger import (
    ForkRows,
    Refold,
    count_kept_for_forks,
    inheriting_forks_of_old,
    prune_page,
    undoable,
    why_kept,
)
from smithers_tt.store.reads import StoredRefs

__all__ = [
    "RUN_LEVEL_KINDS",
    "AttemptView",
    "ForkRows",
    "NodeView",
    "Refold",
    "RunState",
    "StoredRefs",
    "Travel",
    "check_limit",
    "count_kept_for_forks",
    "inheriting_forks_of_old",
    "new_run_id",
    "prune_page",
    "undoable",
    "why_kept",
]
