"""Durable storage of runs, attempts and content-addressed checkpoints (SQLite, PostgreSQL)."""

from smithers_tt.store._access import PostgresAccess, SqliteAccess
from smithers_tt.store._bulk_write import write_history
from smithers_tt.store._cache import cache_lookup, cache_store
from smithers_tt.store._claims import (
    Claim,
    WorkerRecord,
    claim_next,
    count_runs,
    list_workers,
    register_worker,
    release_run,
    worker_heartbeat,
)
from smithers_tt.store._describe import (
    ColumnInfo,
    TableInfo,
    TableReader,
    TypeFamily,
    content_sizes,
    describe_tables,
    read_only_access,
    read_tables,
)
from smithers_tt.store._dialect import Dialect
from smithers_tt.store._driver import Driver, driver
from smithers_tt.store._engine import Engine, RetryPolicy, display_url
from smithers_tt.store._frame_search import FrameChoices, find_frames, frame_choices, frames_at
from smithers_tt.store._frames import Frame, checkpoint_frame, frame_row
from smithers_tt.store._frames_columns import FrameRow, frame_rows
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
from smithers_tt.store._ledger import (
    AttemptEnded,
    AttemptStarted,
    Change,
    Entry,
    NodeSet,
    Note,
)
from smithers_tt.store._ledger import write as write_changes
from smithers_tt.store._ledger_langgraph import ThreadReplaced
from smithers_tt.store._ledger_pause import ENDED, PAUSE_KINDS, RunContinued, RunPaused
from smithers_tt.store._ledger_travel import undoable
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
from smithers_tt.store._newest import (
    frame_span,
    live_checkpointed_nodes,
    live_node_keys,
    live_node_rows,
    live_ref,
    live_ref_count,
    live_ref_page,
    live_ref_rank,
    live_top_iteration,
    newest_live_ref,
    node_frame_rows,
    seen_node_ids,
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
from smithers_tt.store._schema import RUN_LEVEL_KINDS
from smithers_tt.store._store import HISTORY_SCAN_BOUND, Store
from smithers_tt.store._timeline_rows import (
    AttemptFrame,
    FrameBin,
    attempt_frames,
    frame_bins,
    frame_times,
    node_level_pairs,
    numbered_frames,
)
from smithers_tt.store._travel import ForkEdgeRow, RunState, Travel, travel
from smithers_tt.store._travel_bulk import StoredRefs
from smithers_tt.store._travel_prune import (
    count_kept_for_forks,
    inheriting_forks_of_old,
    prune_page,
)
from smithers_tt.store._travel_write import Refold

__all__ = [
    "ENDED",
    "HISTORY_SCAN_BOUND",
    "LANGGRAPH_DOC_NODE",
    "LANGGRAPH_VALUE_NODE",
    "LANGGRAPH_WORKFLOW",
    "MAX_PAGE_SIZE",
    "PAUSE_KINDS",
    "RUN_LEVEL_KINDS",
    "AttemptEnded",
    "AttemptFrame",
    "AttemptKey",
    "AttemptRecord",
    "AttemptStarted",
    "Change",
    "CheckpointRef",
    "Claim",
    "ColumnInfo",
    "Dialect",
    "Driver",
    "Engine",
    "Entry",
    "Fence",
    "ForkEdgeRow",
    "Frame",
    "FrameBin",
    "FrameChoices",
    "FrameRow",
    "GcReport",
    "LangGraphDocument",
    "LangGraphIndexQuery",
    "LangGraphRead",
    "LangGraphStore",
    "LangGraphWrite",
    "NodeRecord",
    "NodeSet",
    "Note",
    "Page",
    "PostgresAccess",
    "Progress",
    "Refold",
    "RetryPolicy",
    "RunContinued",
    "RunId",
    "RunPaused",
    "RunRecord",
    "RunState",
    "SqliteAccess",
    "Store",
    "StoreState",
    "StoredRefs",
    "TableInfo",
    "TableReader",
    "ThreadReplaced",
    "Travel",
    "TypeFamily",
    "VerifyReport",
    "WorkerRecord",
    "attempt_frames",
    "cache_lookup",
    "cache_store",
    "check_limit",
    "check_shape",
    "check_store_shape",
    "checkpoint_frame",
    "claim_next",
    "collect_garbage",
    "content_sizes",
    "count_kept_for_forks",
    "count_runs",
    "describe_tables",
    "display_url",
    "driver",
    "find_frames",
    "frame_bins",
    "frame_choices",
    "frame_row",
    "frame_rows",
    "frame_span",
    "frame_times",
    "frames_at",
    "inheriting_forks_of_old",
    "langgraph_run_id",
    "list_workers",
    "live_checkpointed_nodes",
    "live_node_keys",
    "live_node_rows",
    "live_ref",
    "live_ref_count",
    "live_ref_page",
    "live_ref_rank",
    "live_top_iteration",
    "migrate",
    "new_run_id",
    "newest_live_ref",
    "node_frame_rows",
    "node_level_pairs",
    "now_ms",
    "numbered_frames",
    "prune_page",
    "read_only_access",
    "read_tables",
    "register_worker",
    "release_run",
    "row_counts",
    "seen_node_ids",
    "store_state",
    "travel",
    "undoable",
    "verify",
    "worker_heartbeat",
    "write_changes",
    "write_history",
]
