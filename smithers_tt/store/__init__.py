"""Durable storage of runs, attempts and content-addressed checkpoints (SQLite, PostgreSQL)."""

from smithers_tt.store._engine import Engine, RetryPolicy, display_url
from smithers_tt.store._frames import Frame
from smithers_tt.store._langgraph import LangGraphStore
from smithers_tt.store._langgraph_read import LangGraphDocument, LangGraphRead
from smithers_tt.store._langgraph_sql import (
    LANGGRAPH_DOC_NODE,
    LANGGRAPH_VALUE_NODE,
    LANGGRAPH_WORKFLOW,
    LangGraphIndexQuery,
    langgraph_run_id,
)
from smithers_tt.store._langgraph_write import LangGraphWrite
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
    "LANGGRAPH_DOC_NODE",
    "LANGGRAPH_VALUE_NODE",
    "LANGGRAPH_WORKFLOW",
    "MAX_PAGE_SIZE",
    "AttemptKey",
    "AttemptRecord",
    "CheckpointRef",
    "Engine",
    "Fence",
    "Frame",
    "GcReport",
    "LangGraphDocument",
    "LangGraphIndexQuery",
    "LangGraphRead",
    "LangGraphStore",
    "LangGraphWrite",
    "NodeRecord",
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
    "langgraph_run_id",
    "migrate",
    "row_counts",
    "store_state",
    "verify",
]
