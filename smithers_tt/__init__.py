"""smithers_tt: durable agent checkpoints and time travel for Python.

Start with :func:`connect`; everything else is reached from the object it returns.
"""

from smithers_tt._extras import require_extras
from smithers_tt._model_calls import ModelCall
from smithers_tt._prices import PriceTable
from smithers_tt._sweep_promote import Promotion
from smithers_tt.checkpoint import (
    MAX_CHECKPOINT_BYTES,
    AgentCheckpoint,
    CheckpointCapability,
    CheckpointFormat,
    CheckpointMode,
)
from smithers_tt.database import Database, connect
from smithers_tt.engine import GenerateRequest, GenerateResult, Loop, Retry, TaskContext, Workflow
from smithers_tt.errors import (
    CheckpointCorrupt,
    CheckpointInvalid,
    CheckpointMissing,
    CheckpointPoisoned,
    CheckpointTooLarge,
    FenceLost,
    ForkIncompatible,
    OutputInvalid,
    RunNotFound,
    SmithersError,
    TaskFailed,
    WorkflowChanged,
)
from smithers_tt.runs import Run
from smithers_tt.sweeps import Sweep
from smithers_tt.timetravel import Snapshot, SnapshotDiff, diff

__version__ = "0.1.0"

__all__ = [
    "MAX_CHECKPOINT_BYTES",
    "AgentCheckpoint",
    "CheckpointCapability",
    "CheckpointCorrupt",
    "CheckpointFormat",
    "CheckpointInvalid",
    "CheckpointMissing",
    "CheckpointMode",
    "CheckpointPoisoned",
    "CheckpointTooLarge",
    "Database",
    "FenceLost",
    "ForkIncompatible",
    "GenerateRequest",
    "GenerateResult",
    "Loop",
    "ModelCall",
    "OutputInvalid",
    "PriceTable",
    "Promotion",
    "Retry",
    "Run",
    "RunNotFound",
    "SmithersError",
    "Snapshot",
    "SnapshotDiff",
    "Sweep",
    "TaskContext",
    "TaskFailed",
    "Workflow",
    "WorkflowChanged",
    "__version__",
    "connect",
    "diff",
    "require_extras",
]
