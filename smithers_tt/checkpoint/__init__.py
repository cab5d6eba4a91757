"""The checkpoint contract: envelopes, strict JSON, canonical bytes, format declarations."""

from smithers_tt.checkpoint._envelope import (
    MAX_CHECKPOINT_BYTES,
    MODES,
    AgentCheckpoint,
    CheckpointCapability,
    CheckpointFormat,
    CheckpointMode,
    EncodedCheckpoint,
    accepts,
    declaration_signature,
    produces,
    size_limit,
)
from smithers_tt.checkpoint._json import (
    MAX_DEPTH,
    MAX_SAFE_INT,
    canonical_bytes,
    canonical_envelope,
    child_path,
    clone,
    content_hash,
    loads,
    validate,
)

__all__ = [
    "MAX_CHECKPOINT_BYTES",
    "MAX_DEPTH",
    "MAX_SAFE_INT",
    "MODES",
    "AgentCheckpoint",
    "CheckpointCapability",
    "CheckpointFormat",
    "CheckpointMode",
    "EncodedCheckpoint",
    "accepts",
    "canonical_bytes",
    "canonical_envelope",
    "child_path",
    "clone",
    "content_hash",
    "declaration_signature",
    "loads",
    "produces",
    "size_limit",
    "validate",
]
