"""The ledger: the store's one write path, and every change it applies.

Lives here: :func:`write` (advance a run's clock, check the fence, apply each change's
projection, insert its frames, in one transaction) and every :class:`Change`: runs, attempts
and nodes (``_write``); a new run's labels (``_labels``); claims, deleted attempts and restored
refs (``_runs``); publication and the group committer (``_publish``); content stored by a write
(``_content``) and the model calls that ride with a frame (``_calls``); pauses; time travel's
changes, bulk writes of live state, rewinds by key and by cut, retention; LangGraph threads
and the model calls their messages show (``_langgraph_calls``); whole histories written at
once.

Contract: the ledger may import the backend and the reads (a write that must read first reads
through them); the reads never import it; the store's handles (``Store``, ``Travel``,
``LangGraphStore``) and its doors import it through this front door; nothing outside
``smithers_tt.store`` imports it. Held by import-linter (``pyproject.toml``).
"""

from smithers_tt.store.ledger._bulk import write_history
from smithers_tt.store.ledger._calls import EncodedCall, call_changes, encode_call, with_calls
from smithers_tt.store.ledger._cut import CutStatements
from smithers_tt.store.ledger._labels import Labelled
from smithers_tt.store.ledger._langgraph import ThreadReplaced
from smithers_tt.store.ledger._langgraph_calls import LangGraphCalls
from smithers_tt.store.ledger._langgraph_write import LangGraphWrite, PinCache
from smithers_tt.store.ledger._live import (
    AUDIT_COLUMNS,
    BaseFrames,
    ForkRows,
    LiveWrites,
    Refold,
    audit_row,
)
from smithers_tt.store.ledger._node_changes import (
    AttemptEnded,
    AttemptStarted,
    NodeCancelled,
    NodeSet,
)
from smithers_tt.store.ledger._pauses import (
    ENDED,
    BreakpointsSet,
    CheckpointEdited,
    EditEnded,
    RunContinued,
    RunPaused,
)
from smithers_tt.store.ledger._prune import (
    count_kept_for_forks,
    inheriting_forks_of_old,
    prune_page,
    why_kept,
)
from smithers_tt.store.ledger._publish import (
    GroupCommitter,
    PublishUnit,
    WorkUnit,
)
from smithers_tt.store.ledger._runs import AttemptDeleted, RefPut, claim, open_ends
from smithers_tt.store.ledger._travel import (
    NEWEST_FIRST,
    AttemptRow,
    Forked,
    KeptRewind,
    NodesReset,
    RewindUndone,
    Rewound,
    fork_row,
    kept_rewinds,
    new_rewind_id,
    release_rewinds,
    undoable,
)
from smithers_tt.store.ledger._write import (
    CancelRequested,
    Change,
    Entry,
    NewRun,
    Note,
    RunCancelled,
    RunClaimed,
    RunEnded,
    RunReleased,
    Write,
    json_or_none,
    key_tuple,
    touch,
    write,
)

__all__ = [
    "AUDIT_COLUMNS",
    "ENDED",
    "NEWEST_FIRST",
    "AttemptDeleted",
    "AttemptEnded",
    "AttemptRow",
    "AttemptStarted",
    "BaseFrames",
    "BreakpointsSet",
    "CancelRequested",
    "Change",
    "CheckpointEdited",
    "CutStatements",
    "EditEnded",
    "EncodedCall",
    "Entry",
    "ForkRows",
    "Forked",
    "GroupCommitter",
    "KeptRewind",
    "Labelled",
    "LangGraphCalls",
    "LangGraphWrite",
    "LiveWrites",
    "NewRun",
    "NodeCancelled",
    "NodeSet",
    "NodesReset",
    "Note",
    "PinCache",
    "PublishUnit",
    "RefPut",
    "Refold",
    "RewindUndone",
    "Rewound",
    "RunCancelled",
    "RunClaimed",
    "RunContinued",
    "RunEnded",
    "RunPaused",
    "RunReleased",
    "ThreadReplaced",
    "WorkUnit",
    "Write",
    "audit_row",
    "call_changes",
    "claim",
    "count_kept_for_forks",
    "encode_call",
    "fork_row",
    "inheriting_forks_of_old",
    "json_or_none",
    "kept_rewinds",
    "key_tuple",
    "new_rewind_id",
    "open_ends",
    "prune_page",
    "release_rewinds",
    "touch",
    "undoable",
    "why_kept",
    "with_calls",
    "write",
    "write_history",
]
