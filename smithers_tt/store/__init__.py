"""Durable storage of runs, attempts and content-addressed checkpoints (SQLite, PostgreSQL).

The store's front door: what users (through ``smithers_tt.connect``, ``smithers_tt.runs`` and
``smithers_tt.testing``) and the engine need. Behind it are the store's rooms
(``docs/store.md``): ``backend/`` (the database), ``ledger/`` (the one write path), ``reads/``
(one module per consumer), and the handles composed of them (``Store``, ``Travel``,
``LangGraphStore``).

A package above the store that needs more than this has a door of its own here, named for it
(``for_widgets``, ``for_langgraph``, ``for_lineage``, ``for_timetravel``, ``for_cli``), and
imports this module and its own door only; nothing outside ``smithers_tt.store`` imports
anything else of it (import-linter, ``pyproject.toml``). A name goes here only when users or
the engine use it, or more than one package above the store does.
"""

from smithers_tt.store._cache import cache_lookup, cache_store
from smithers_tt.store._claims import (
    Claim,
    WorkerRecord,
    claim_next,
    list_workers,
    register_worker,
    release_run,
    worker_heartbeat,
)
from smithers_tt.store._maintenance import (
    GcReport,
    Progress,
    VerifyReport,
    collect_garbage,
    verify,
)
from smithers_tt.store._records import (
    AttemptKey,
    AttemptRecord,
    CheckpointRef,
    Fence,
    Frame,
    NodeRecord,
    RunRecord,
    now_ms,
)
from smithers_tt.store._store import Store
from smithers_tt.store._travel import travel
from smithers_tt.store.backend import (
    Engine,
    RetryPolicy,
    StoreState,
    check_store_shape,
    display_url,
    migrate,
    store_state,
)
from smithers_tt.store.ledger import ENDED, write_history
from smithers_tt.store.reads import FailureRow, failure_rows

__all__ = [
    "ENDED",
    "AttemptKey",
    "AttemptRecord",
    "CheckpointRef",
    "Claim",
    "Engine",
    "FailureRow",
    "Fence",
    "Frame",
    "GcReport",
    "NodeRecord",
    "Progress",
    "RetryPolicy",
    "RunRecord",
    "Store",
    "StoreState",
    "VerifyReport",
    "WorkerRecord",
    "cache_lookup",
    "cache_store",
    "check_store_shape",
    "claim_next",
    "collect_garbage",
    "display_url",
    "failure_rows",
    "list_workers",
    "migrate",
    "now_ms",
    "register_worker",
    "release_run",
    "store_state",
    "travel",
    "verify",
    "worker_heartbeat",
    "write_history",
]
