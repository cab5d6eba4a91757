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
from smithers_tt.store._maintenance import (
    GcReport,
    Progress,
    VerifyReport,
    collect_garbage,
    verify,
)
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
    check_limit,
    new_run_id,
    now_ms,
)
from smithers_tt.store._store import HISTORY_SCAN_BOUND, Store
from smithers_tt.store._travel import ForkEdgeRow, RunState, Travel, travel
from smithers_tt.store._travel_bulk import StoredRefs
from smithers_tt.store._travel_prune import count_kept_for_forks, prune_page
from smithers_tt.store._travel_write import Refold

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
    "ForkEdgeRow",
    "Frame",
    "GcReport",
    "LangGraphDocument",
    "LangGraphIndexQuery",
    "LangGraphRead",
    "LangGraphStore",
    "LangGraphWrite",
    "NodeRecord",
    "Page",
    "Progress",
    "Refold",
    "RetryPolicy",
    "RunId",
    "RunRecord",
    "RunState",
    "Store",
    "StoreState",
    "StoredRefs",
    "Travel",
    "VerifyReport",
    "check_limit",
    "check_shape",
    "check_store_shape",
    "collect_garbage",
    "count_kept_for_forks",
    "display_url",
    "langgraph_run_id",
    "migrate",
    "new_run_id",
    "now_ms",
    "prune_page",
    "row_counts",
    "store_state",
    "travel",
    "verify",
]
