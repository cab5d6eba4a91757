"""Time travel: snapshots of any frame, diffs, rewind, fork, reset and the fork tree."""

from smithers_tt.timetravel._diff import Change, SnapshotDiff, diff, json_diff
from smithers_tt.timetravel._ops import acquire_lease, fork, release_lease, reset, rewind
from smithers_tt.timetravel._retention import PruneReport, prune_runs
from smithers_tt.timetravel._snapshot import (
    MAX_SNAPSHOT_ROWS,
    AttemptView,
    NodeView,
    Snapshot,
    fold,
)
from smithers_tt.timetravel._timeline import ForkEdge, Timeline, fork_tree, timeline

__all__ = [
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
    "diff",
    "fold",
    "fork",
    "fork_tree",
    "json_diff",
    "prune_runs",
    "release_lease",
    "reset",
    "rewind",
    "timeline",
]
