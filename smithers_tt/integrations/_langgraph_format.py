"""The LangGraph saver's document format: codecs, names and the helpers its modules share.

A thread is a run (:func:`thread_run_id`); a checkpoint is one document of codec
:data:`CHECKPOINT_CODEC`, a long channel or write value one content of codec
:data:`VALUE_CODEC` (see :mod:`smithers_tt.integrations.langgraph`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple

from smithers_tt.checkpoint import canonical_envelope, loads
from smithers_tt.errors import CheckpointCorrupt, InvalidArgument
from smithers_tt.store.for_langgraph import (
    LANGGRAPH_DOC_NODE,
    LANGGRAPH_VALUE_NODE,
    LANGGRAPH_WORKFLOW,
    langgraph_run_id,
)

WORKFLOW = LANGGRAPH_WORKFLOW
"""Workflow name of the runs that hold LangGraph threads."""

CHECKPOINT_CODEC = "langgraph.checkpoint"
"""Codec of a checkpoint document: ``{"id", "parent", "checkpoint", "metadata", "values"}``.
``checkpoint`` is the LangGraph checkpoint without id and channel values and ``metadata`` its
metadata, both as plain JSON (or, when they are not, encoded under ``checkpoint_encoded`` /
``metadata_encoded``); ``values`` maps channel name to an encoded value or ``{"ref": sha256}``.
An encoded value is ``{"json": value}`` or ``{"msgpack" | "bytes" | "bytearray": base64}``."""

VALUE_CODEC = "langgraph.value"
"""Codec of one channel (or write) value stored as its own content: an encoded value."""

DOC_NODE = LANGGRAPH_DOC_NODE
VALUE_NODE = LANGGRAPH_VALUE_NODE
PAGE = 100
"""Index rows read per page."""
# Bytes a value adds to a content envelope beyond its own encoding.
ENVELOPE_OVERHEAD = len(canonical_envelope(VALUE_CODEC, 1, None)) - len(b"null")

thread_run_id = langgraph_run_id


def thread_of(config: RunnableConfig) -> tuple[str, str]:
    """``(thread_id, checkpoint_ns)`` of a config."""
    conf = config.get("configurable") or {}
    if conf.get("thread_id") is None:
        raise InvalidArgument("a LangGraph config needs configurable.thread_id")
    return str(conf["thread_id"]), str(conf.get("checkpoint_ns") or "")


def payload(data: bytes, codec: str, digest: str) -> Any:
    """The payload of verified canonical bytes (written by this module) of ``codec``."""
    envelope = loads(data)
    if type(envelope) is not dict or envelope.get("codec") != codec or "payload" not in envelope:
        raise CheckpointCorrupt(f"content {digest[:12]} is not a {codec} document")
    return envelope["payload"]


def slot_refs(slots: Any) -> Iterator[str]:
    """The content hashes the value slots refer to."""
    for slot in slots:
        if type(slot) is dict and "ref" in slot:
            yield slot["ref"]


class Recent:
    """What this process stored of a recent checkpoint: its run's incarnation, its channel
    versions and its value slots (reused by its children for channels that did not change)."""

    __slots__ = ("token", "values", "versions")

    def __init__(self, token: int, versions: dict[str, Any], values: dict[str, Any]) -> None:
        self.token, self.versions, self.values = token, versions, values


class Paging:
    """Keyset paging shared by ``list`` and ``alist``: page sizes, the cursor, the limit."""

    def __init__(self, limit: int | None, filtered: bool) -> None:
        self.left, self.filtered = limit, filtered
        self.cursor: tuple[str, str] | None = None
        self.more = limit is None or limit > 0

    @property
    def size(self) -> int:
        """Rows to ask for in the next page."""
        if self.left is None or self.filtered:
            return PAGE
        return max(1, min(PAGE, self.left))

    def take(
        self, tuples: list[CheckpointTuple], cursor: tuple[str, str] | None
    ) -> list[CheckpointTuple]:
        """The tuples of a page the limit leaves, and the cursor of the next."""
        if self.left is not None:
            tuples = tuples[: self.left]
            self.left -= len(tuples)
        self.cursor = cursor
        self.more = cursor is not None and (self.left is None or self.left > 0)
        return tuples
