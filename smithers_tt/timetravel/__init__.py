"""Time travel: snapshots of any frame, diffs, rewind, fork, reset and the fork tree."""

from smithers_tt.timetravel._at import inherited, snapshot_at
from smithers_tt.timetravel._diff import Change, SnapshotDiff, diff, json_diff
from smithers_tt.timetravel._fork import fork, materialize, materialized_rows
from smithers_tt.timetravel._html import run_html
from smithers_tt.timetravel._lease import LIVE_OWNER_MS, acquire_lease, release_lease
from smithers_tt.timetravel._materialize import live_rows
from smithers_tt.timetravel._ops import reset, rewind, undo_rewind
from smithers_tt.timetravel._retention import PruneReport, duration_ms, prune_runs
from smithers_tt.timetravel._snapshot import (
    MAX_SNAPSHOT_ROWS,
    AttemptView,
    NodeView,
    Snapshot,
    apply,
    fold,
)
from smithers_tt.timetravel._timeline import ForkEdge, Timeline, fork_tree, timeline
from smithers_tt.timetravel._undo import undo_refusal

__all__ = [
    "LIVE_OWNER_MS",
    "MAX_SNAPSHOT_ROWS",
    "AttemptView",
    "Change",
    "ForkEdge",
    "NodeView",
    "PruneReport",
    "Snapshot",
    "SnapshotDiff",
    "Timeline",
    "acquire_lease",
    "apply",
    "diff",
    "duration_ms",
    "fold",
    "fork",
    "fork_tree",
    "inherited",
    "json_diff",
    "live_rows",
    "materialize",
    "materialized_rows",
    "prune_runs",
    "release_lease",
    "reset",
    "rewind",
    "run_html",
    "snapshot_at",
    "timeline",
    "undo_refusal",
    "undo_rewind",
]
