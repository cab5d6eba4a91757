"""The reads: what the store's consumers read, one module per consumer, none of it writing.

Lives here: the Store's reads of runs, nodes, attempts, frames, refs and verified content
(``_runs``), with runs' labels (``_labels``) and run ids as people type and read them
(``_run_ids``: a unique prefix resolved, each id's shortest unique prefix); the debugger's
reads of a run's newest state a page at a time (``_newest``), of its frames as light rows
(``_frame_rows``), of frame searches (``_frame_search``), of one node's frames
(``_node_frames``) and of timeline rows (``_timeline``); a run's model calls as its frames see
them, and their totals per node and run (``_calls``); time travel's set-based reads of the
state at frame N (``_travel``); the LangGraph saver's read transaction (``_langgraph``); and
the store described for lineage analytics (``_describe``: tables, type families, read-only
access, content sizes).

Contract: a read never writes and never imports the ledger; it imports the backend and the
store's shared rows (:mod:`smithers_tt.store._frames`, :mod:`~smithers_tt.store._records`);
the ledger, the store's handles and its doors (``for_widgets`` ...) import it through this
front door; nothing outside ``smithers_tt.store`` imports it. Held by import-linter
(``pyproject.toml``).
"""

from smithers_tt.store.reads._browse import RunFilter, RunListing, run_listing, run_workflows
from smithers_tt.store.reads._calls import ModelCallReads
from smithers_tt.store.reads._describe import (
    ColumnInfo,
    TableInfo,
    TableReader,
    TypeFamily,
    content_sizes,
    describe_tables,
    read_only_access,
    read_tables,
)
from smithers_tt.store.reads._failures import FailureRow, failure_rows
from smithers_tt.store.reads._frame_rows import FrameRow, frame_rows
from smithers_tt.store.reads._frame_search import (
    FrameChoices,
    choices_of_bins,
    find_frames,
    frame_choices,
    frames_at,
)
from smithers_tt.store.reads._labels import carrying, labels_of
from smithers_tt.store.reads._langgraph import LangGraphDocument, LangGraphRead
from smithers_tt.store.reads._newest import (
    frame_span,
    live_checkpointed_nodes,
    live_node_keys,
    live_node_rows,
    live_node_states,
    live_ref,
    live_ref_count,
    live_ref_page,
    live_ref_rank,
    live_top_iteration,
    newest_live_ref,
    node_frame_rows,
    seen_node_ids,
)
from smithers_tt.store.reads._node_frames import attempt_span, node_frame_near
from smithers_tt.store.reads._run_ids import MIN_PREFIX, MIN_SHOWN, RunCandidate
from smithers_tt.store.reads._runs import HISTORY_SCAN_BOUND, RunReads
from smithers_tt.store.reads._timeline import (
    AttemptFrame,
    FrameBin,
    attempt_frames,
    frame_bins,
    frame_times,
    node_level_pairs,
    numbered_frames,
)
from smithers_tt.store.reads._travel import (
    KEYS_PER_STATEMENT,
    StoredRefs,
    TravelReads,
    corrupt_frame,
    keys_match,
    plain_rows,
    run_sql,
    stored_sizes,
)

__all__ = [
    "HISTORY_SCAN_BOUND",
    "KEYS_PER_STATEMENT",
    "MIN_PREFIX",
    "MIN_SHOWN",
    "AttemptFrame",
    "ColumnInfo",
    "FailureRow",
    "FrameBin",
    "FrameChoices",
    "FrameRow",
    "LangGraphDocument",
    "LangGraphRead",
    "ModelCallReads",
    "RunCandidate",
    "RunFilter",
    "RunListing",
    "RunReads",
    "StoredRefs",
    "TableInfo",
    "TableReader",
    "TravelReads",
    "TypeFamily",
    "attempt_frames",
    "attempt_span",
    "carrying",
    "choices_of_bins",
    "content_sizes",
    "corrupt_frame",
    "describe_tables",
    "failure_rows",
    "find_frames",
    "frame_bins",
    "frame_choices",
    "frame_rows",
    "frame_span",
    "frame_times",
    "frames_at",
    "keys_match",
    "labels_of",
    "live_checkpointed_nodes",
    "live_node_keys",
    "live_node_rows",
    "live_node_states",
    "live_ref",
    "live_ref_count",
    "live_ref_page",
    "live_ref_rank",
    "live_top_iteration",
    "newest_live_ref",
    "node_frame_near",
    "node_frame_rows",
    "node_level_pairs",
    "numbered_frames",
    "plain_rows",
    "read_only_access",
    "read_tables",
    "run_listing",
    "run_sql",
    "run_workflows",
    "seen_node_ids",
    "stored_sizes",
]
