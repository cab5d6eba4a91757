"""smithers_tt: durable agent checkpoints and time travel for Python.

Start with :func:`connect`; everything else is reached from the object it returns.
"""

from smithers_tt.checkpoint import (
    MAX_CHECKPOINT_BYTES,
    AgentCheckpoint,
    CheckpointCapability,
    CheckpointFormat,
    CheckpointMode,
)
from smithers_tt.database import Database, connect
from smithers_tt.errors import (
    CheckpointCorrupt,
    CheckpointInvalid,
    CheckpointMissing,
    CheckpointTooLarge,
    FenceLost,
    SmithersError,
)

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
    "CheckpointTooLarge",
    "Database",
    "FenceLost",
    "SmithersError",
    "__version__",
    "connect",
]
