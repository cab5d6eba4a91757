"""The debugger's door into the store: what ``smithers_tt.widgets`` reads, and nothing else.

The widgets read a run a page at a time, never its whole history: its frames as light rows,
frame searches and timeline bins, and its newest live state (nodes, refs) one question at a
time; and a run's model calls with their totals per node and run (:class:`ModelCallReads`:
what the waterfall and the header's totals draw). These reads live in the store's ``reads/``
room (``_newest``, ``_frame_rows``, ``_frame_search``, ``_timeline``, ``_calls``); this
module is the one place outside the store that names them. The widgets import
``smithers_tt.store`` (records, ``ENDED``) and this door only (import-linter,
``pyproject.toml``; see ``docs/store.md``, "The doors").
"""

from smithers_tt.store._frames import PAUSE_KINDS
from smithers_tt.store.reads import (
    AttemptFrame,
    FrameBin,
    FrameChoices,
    FrameRow,
    ModelCallReads,
    RunFilter,
    RunListing,
    attempt_frames,
    content_sizes,
    find_frames,
    frame_bins,
    frame_choices,
    frame_rows,
    frame_span,
    frame_times,
    frames_at,
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
    node_level_pairs,
    numbered_frames,
    run_listing,
    run_workflows,
    seen_node_ids,
)

__all__ = [
    "PAUSE_KINDS",
    "AttemptFrame",
    "FrameBin",
    "FrameChoices",
    "FrameRow",
    "ModelCallReads",
    "RunFilter",
    "RunListing",
    "attempt_frames",
    "content_sizes",
    "find_frames",
    "frame_bins",
    "frame_choices",
    "frame_rows",
    "frame_span",
    "frame_times",
    "frames_at",
    "live_checkpointed_nodes",
    "live_node_keys",
    "live_node_rows",
    "live_ref",
    "live_ref_count",
    "live_ref_page",
    "live_ref_rank",
    "live_top_iteration",
    "newest_live_ref",
    "node_frame_rows",
    "node_level_pairs",
    "numbered_frames",
    "run_listing",
    "run_workflows",
    "seen_node_ids",
]
