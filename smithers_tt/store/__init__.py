"""Durable storage of runs, attempts and content-addressed checkpoints (SQLite, PostgreSQL)."""

from smithers_tt.store._dialect import Dialect
from smithers_tt.store._driver import Driver, driver
from smithers_tt.store._engine import Engine, RetryPolicy, display_url
from smithers_tt.store._frames import Frame
from smithers_tt.store._ledger import (
    AttemptEnded,
    AttemptStarted,
    Change,
    Entry,
    NodeSet,
    Note,
)
from smithers_tt.store._ledger import write as write_changes
from smithers_tt.store._maintenance import GcReport, VerifyReport, collect_garbage, verify
from smithers_tt.store._migrate import (
    StoreState,
    check_shape,
    check_store_shape,
    migrate,
    row_counts,
    store_state,
)
from smithers_tt.store._records import (
    MAX_PAGE_SIZE,
    AttemptKey,
    AttemptRecord,
    CheckpointRef,
    Fence,
    NodeRecord,
    Page,
    RunId,
    RunRecord,
)
from smithers_tt.store._store import HISTORY_SCAN_BOUND, Store

__all__ = [
    "HISTORY_SCAN_BOUND",
    "MAX_PAGE_SIZE",
    "AttemptEnded",
    "AttemptKey",
    "AttemptRecord",
    "AttemptStarted",
    "Change",
    "CheckpointRef",
    "Dialect",
    "Driver",
    "Engine",
    "Entry",
    "Fence",
    "Frame",
    "GcReport",
    "NodeRecord",
    "NodeSet",
    "Note",
    "Page",
    "RetryPolicy",
    "RunId",
    "RunRecord",
    "Store",
    "StoreState",
    "VerifyReport",
    "check_shape",
    "check_store_shape",
    "collect_garbage",
    "display_url",
    "driver",
    "migrate",
    "row_counts",
    "store_state",
    "verify",
    "write_changes",
]
