"""Typed records the store hands out, and the opaque keyset cursors of its listings."""

from __future__ import annotations

import base64
import binascii
import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, NewType, TypeVar

from smithers_tt.checkpoint import loads
from smithers_tt.errors import InvalidArgument, StoreCorrupt

RunId = NewType("RunId", str)
T = TypeVar("T")

MAX_PAGE_SIZE = 1000
"""Largest page any listing returns; ask again with the cursor for more."""


def now_ms() -> int:
    """Wall-clock milliseconds, for people to read (never used to order events)."""
    return time.time_ns() // 1_000_000


VERIFY_HINT = (
    "run `smithers-tt verify` (or db.verify()) to list every damaged row, then restore the "
    "database from a backup or delete the damaged run"
)
"""What to do about a damaged row, in every message that reports one."""


def stored_json(text: str | bytes | None, where: str | Callable[[], str]) -> Any:
    """Parse a JSON column of a stored row (``None`` stays ``None``).

    Args:
        text: the column's value.
        where: the row and column, for the message (``"tt_runs.input_json of run 'r1'"``),
            or a function making it (called only when the value is damaged).

    Raises:
        StoreCorrupt: the value is not JSON (damaged by hand, a disk or a bad copy).
    """
    if text is None:
        return None
    try:
        return loads(text)
    except ValueError as error:  # orjson.JSONDecodeError, and text that is not UTF-8
        where = where() if callable(where) else where
        raise StoreCorrupt(
            f"{where} is damaged: it is not JSON ({error}); {VERIFY_HINT}", row=where
        ) from error


def new_run_id() -> RunId:
    """A new run id: creation time in hex then randomness, so ids sort roughly by age."""
    return RunId(f"{now_ms():011x}{secrets.token_hex(5)}")


@dataclass(frozen=True, slots=True)
class Fence:
    """Proof of ownership of a run: writes succeed only while ``epoch`` is the run's epoch."""

    run_id: str
    epoch: int


@dataclass(frozen=True, slots=True)
class AttemptKey:
    """Identifies one attempt: ``(run_id, node_id, iteration, attempt)``."""

    run_id: str
    node_id: str
    iteration: int
    attempt: int


@dataclass(frozen=True, slots=True)
class CheckpointRef:
    """An immutable pointer from one publication of an attempt to stored content."""

    run_id: str
    node_id: str
    iteration: int
    attempt: int
    sequence: int
    content_hash: str
    codec: str
    version: int
    purpose: str
    agent_id: str | None
    created_at_ms: int

    @property
    def attempt_key(self) -> AttemptKey:
        """The attempt that published this checkpoint."""
        return AttemptKey(self.run_id, self.node_id, self.iteration, self.attempt)

    @property
    def short_hash(self) -> str:
        """The first 12 hex digits of the content address, for display."""
        return self.content_hash[:12]


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One run as stored."""

    run_id: str
    workflow: str
    workflow_hash: str | None
    status: str
    input: Any
    output: Any
    error: str | None
    owner_epoch: int
    owner_id: str | None
    heartbeat_at_ms: int | None
    cancel_requested: bool
    parent_run_id: str | None
    parent_frame_no: int | None
    max_checkpoint_bytes: int | None
    created_at_ms: int
    updated_at_ms: int
    clock: int = 0
    graph: dict[str, list[str]] | None = None
    """Task ids and the tasks each needs, as defined when the run was created."""
    inherits: bool = False
    """A fork by reference not materialised yet: its history before frame 0 is its parent's up
    to ``parent_frame_no``, and it has no live nodes, attempts or refs of its own (read its
    state from a snapshot; resuming it materialises it)."""
    labels: dict[str, str] = field(default_factory=dict)
    """The run's labels (``{"case": "retry"}``), sorted by key (see :mod:`smithers_tt._labels`):
    read by ``get_run`` and ``list_runs``; empty in records read without them."""


@dataclass(frozen=True, slots=True)
class NodeView:
    """A node as visible at a frame: its state, last attempt and output (of that iteration).

    A snapshot holds these by ``(node_id, iteration)`` (its run is the snapshot's);
    :class:`NodeRecord` is the same row with its run.
    """

    node_id: str
    iteration: int
    state: str
    last_attempt: int | None
    output: Any


@dataclass(frozen=True, slots=True)
class NodeRecord(NodeView):
    """A node of a run: its state, last attempt and output (of its final iteration).

    The row of :class:`NodeView` with the run it belongs to (``run_id``, given by name).
    """

    run_id: str = field(kw_only=True)


@dataclass(frozen=True, slots=True)
class AttemptView:
    """An attempt as visible at a frame: what the run's history records of it.

    Not :class:`AttemptRecord`: the live row also holds what only the running attempt needs
    (the owner epoch its fence checks, the sequence of its next publish), which no frame
    records, so a snapshot cannot know it.
    """

    node_id: str
    iteration: int
    attempt: int
    state: str
    resumed_from: tuple[str, str, int, int, int] | None = None
    error: str | None = None
    error_code: str | None = None
    discard_resume: bool = False
    started_at_ms: int = 0
    finished_at_ms: int | None = None


@dataclass(frozen=True, slots=True)
class AttemptRecord:
    """One attempt of a node as stored, with where it resumed from.

    The live row: what :class:`AttemptView` shows of it, plus the owner epoch and the next
    publish's sequence (see there).
    """

    key: AttemptKey
    state: str
    owner_epoch: int
    next_sequence: int
    discard_resume: bool
    error: str | None
    error_code: str | None
    resumed_from: tuple[str, str, int, int, int] | None
    started_at_ms: int
    finished_at_ms: int | None


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """One page of a keyset-paginated listing; ``next_cursor`` is None on the last page."""

    items: list[T]
    next_cursor: str | None


def check_limit(limit: int) -> int:
    """Validate a page size (1..MAX_PAGE_SIZE)."""
    if type(limit) is not int or not 1 <= limit <= MAX_PAGE_SIZE:
        raise InvalidArgument(f"page limit must be an int from 1 to {MAX_PAGE_SIZE}, got {limit!r}")
    return limit


def encode_cursor(kind: str, values: list[Any]) -> str:
    """An opaque cursor for the row after which the next page starts."""
    raw = json.dumps([kind, *values], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(kind: str, cursor: str, types: tuple[type, ...]) -> list[Any]:
    """Parse a cursor made by :func:`encode_cursor` for the same listing, or raise."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        data = json.loads(raw)
    except (ValueError, TypeError, binascii.Error):
        data = None
    if (
        not isinstance(data, list)
        or len(data) != len(types) + 1
        or data[0] != kind
        or not all(type(v) is t for v, t in zip(data[1:], types, strict=True))
    ):
        raise InvalidArgument(
            f"not a cursor of this {kind} listing: {cursor[:40]!r}; pass the next_cursor of the "
            "previous page unchanged"
        )
    return data[1:]


FRAME_DATA_WRAPPING = 2
"""Levels of a frame's ``data`` that wrap the values it records (``{"output": {task:
output}}``): they do not count against the nesting bound of those values."""


@dataclass(frozen=True, slots=True)
class Frame:
    """One committed state change of a run."""

    run_id: str
    frame_no: int
    kind: str
    node_id: str | None = None
    iteration: int | None = None
    attempt: int | None = None
    sequence: int | None = None
    state: str | None = None
    content_hash: str | None = None
    codec: str | None = None
    version: int | None = None
    purpose: str | None = None
    agent_id: str | None = None
    data: Any = None
    created_at_ms: int = 0

    def checkpoint_ref(self) -> CheckpointRef:
        """The checkpoint ref a ``checkpoint`` frame records: what its content is loaded by."""
        return CheckpointRef(
            self.run_id,
            self.node_id or "",
            self.iteration or 0,
            self.attempt or 0,
            self.sequence or 0,
            self.content_hash or "",
            self.codec or "",
            self.version or 0,
            self.purpose or "",
            self.agent_id,
            self.created_at_ms,
        )


def run_from_row(row: Any, labels: dict[str, str] | None = None) -> RunRecord:
    """A ``tt_runs`` row (anything with its columns as attributes) as a :class:`RunRecord`,
    with the run's ``labels`` (read from ``tt_run_labels``) when the caller has them."""
    return RunRecord(
        row.run_id,
        row.workflow,
        row.workflow_hash,
        row.status,
        stored_json(row.input_json, f"tt_runs.input_json of run {row.run_id!r}"),
        stored_json(row.output_json, f"tt_runs.output_json of run {row.run_id!r}"),
        row.error,
        row.owner_epoch,
        row.owner_id,
        row.heartbeat_at_ms,
        bool(row.cancel_requested),
        row.parent_run_id,
        row.parent_frame_no,
        row.max_checkpoint_bytes,
        row.created_at_ms,
        row.updated_at_ms,
        row.clock,
        stored_json(row.graph_json, f"tt_runs.graph_json of run {row.run_id!r}"),
        bool(row.inherits),
        labels or {},
    )
