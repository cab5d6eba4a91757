"""A model call as an agent reports it (:class:`ModelCall`) and as the store keeps it
(:class:`ModelCallRecord`), and the token counts of the usage shapes servers report.

Recorded with ``request.record_model_call(...)`` (an agent's :class:`~smithers_tt.GenerateRequest`),
read with ``run.model_calls()`` (a DataFrame) and the lineage view ``model_calls``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from smithers_tt._prices import PriceTable
from smithers_tt.checkpoint import validate
from smithers_tt.errors import InvalidArgument

__all__ = [
    "CALL_COLUMNS",
    "TOKEN_FIELDS",
    "CallTotals",
    "ModelCall",
    "ModelCallRecord",
    "RunCallTotals",
    "calls_frame",
    "totals_of",
    "usage_tokens",
]


def now_ms() -> int:
    """Wall-clock milliseconds."""
    return time.time_ns() // 1_000_000


REQUEST_CODEC = "smithers.model-request"
"""Codec of a call's stored request: payload ``{"messages": [...]}`` as sent."""
REPLY_CODEC = "smithers.model-reply"
"""Codec of a call's stored reply: payload the message received."""

TOKEN_FIELDS = ("prompt_tokens", "completion_tokens", "cached_tokens", "reasoning_tokens")
"""The token counts a model call records, where the server reports them."""


@dataclass(frozen=True, slots=True)
class ModelCall:
    """One call an agent made to a model, as the agent reports it (see
    ``GenerateRequest.record_model_call``); the store writes it with the attempt's next
    checkpoint, or its end.

    An HTTP retry is a call of its own (a 429 then a 200 are two), and so is each continuation
    of a reply cut off by the length limit. ``request`` (the messages sent) and ``reply`` (the
    message received) are strict JSON, stored once as content by their hash. Token counts are
    None when the server did not report them (never a guess); times are milliseconds:
    ``started_at_ms`` wall clock, ``ttft_ms`` to the first token of a streamed reply,
    ``latency_ms`` to its end. ``status`` is the HTTP status, ``error`` why the call failed.
    """

    model: str | None = None
    request: Any = None
    reply: Any = None
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    reasoning_tokens: int | None = None
    started_at_ms: int = field(default_factory=now_ms)
    ttft_ms: float | None = None
    latency_ms: float | None = None
    status: int | None = None
    error: str | None = None

    def __post_init__(self) -> None:
        for name in TOKEN_FIELDS:
            value = getattr(self, name)
            if value is not None and (type(value) is not int or value < 0):
                raise InvalidArgument(
                    f"ModelCall.{name} must be an int >= 0 or None, got {value!r}"
                )
        for name in ("ttft_ms", "latency_ms"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0
            ):
                raise InvalidArgument(
                    f"ModelCall.{name} must be a number >= 0 or None, got {value!r}"
                )
        if type(self.started_at_ms) is not int:
            raise InvalidArgument(
                f"ModelCall.started_at_ms must be an int, got {self.started_at_ms!r}"
            )
        if self.status is not None and type(self.status) is not int:
            raise InvalidArgument(f"ModelCall.status must be an int or None, got {self.status!r}")
        for name in ("request", "reply"):  # strict JSON, or CheckpointInvalid naming the path
            value = getattr(self, name)
            if value is not None:
                validate(value, subject=f"model call {name}", wrapping=1)
        for name in ("model", "finish_reason", "error"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise InvalidArgument(f"ModelCall.{name} must be a str or None, got {value!r}")

    @property
    def total_tokens(self) -> int | None:
        """Prompt plus completion tokens (None when neither was reported)."""
        return _sum_known(self.prompt_tokens, self.completion_tokens)


def _sum_known(*values: int | None) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


@dataclass(frozen=True, slots=True)
class ModelCallRecord:
    """A stored model call: the :class:`ModelCall` fields (but request and reply, which are
    content: ``request_hash``, ``reply_hash``), the attempt that made it, the frame it was
    written with and its position there. ``run_id`` is the run that recorded it: a fork's
    inherited calls (``inherited``) are its parent's rows, read up to the fork frame."""

    call_id: str
    run_id: str
    frame_no: int
    position: int
    node_id: str
    iteration: int
    attempt: int
    model: str | None
    request_hash: str | None
    reply_hash: str | None
    finish_reason: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    cached_tokens: int | None
    reasoning_tokens: int | None
    started_at_ms: int
    ttft_ms: float | None
    latency_ms: float | None
    status: int | None
    error: str | None
    inherited: bool = False

    @property
    def total_tokens(self) -> int | None:
        """Prompt plus completion tokens (None when neither was reported)."""
        return _sum_known(self.prompt_tokens, self.completion_tokens)


def _count(value: Any) -> int | None:
    return value if type(value) is int and value >= 0 else None


def _get(mapping: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(mapping, Mapping):
            return None
        mapping = mapping.get(key)
    return mapping


def usage_tokens(usage: Any) -> dict[str, int | None]:
    """The token counts (:data:`TOKEN_FIELDS`) of a reported usage, None where absent: the
    OpenAI shape (``prompt_tokens``, ``completion_tokens``, ``prompt_tokens_details.
    cached_tokens``, ``completion_tokens_details.reasoning_tokens``; what vLLM, llama.cpp and
    Ollama's compatible endpoint send too) or LangChain's ``usage_metadata`` (``input_tokens``,
    ``output_tokens``, ``input_token_details.cache_read``, ``output_token_details.reasoning``).
    """
    if not isinstance(usage, Mapping):
        return dict.fromkeys(TOKEN_FIELDS)
    if "input_tokens" in usage or "output_tokens" in usage:
        return {
            "prompt_tokens": _count(usage.get("input_tokens")),
            "completion_tokens": _count(usage.get("output_tokens")),
            "cached_tokens": _count(_get(usage, "input_token_details", "cache_read")),
            "reasoning_tokens": _count(_get(usage, "output_token_details", "reasoning")),
        }
    return {
        "prompt_tokens": _count(usage.get("prompt_tokens")),
        "completion_tokens": _count(usage.get("completion_tokens")),
        "cached_tokens": _count(_get(usage, "prompt_tokens_details", "cached_tokens")),
        "reasoning_tokens": _count(_get(usage, "completion_tokens_details", "reasoning_tokens")),
    }


CALL_COLUMNS = (
    "run_id", "node_id", "iteration", "attempt", "frame_no", "position", "call_id", "model",
    "finish_reason", *TOKEN_FIELDS, "total_tokens", "started_at_ms", "started_at", "ttft_ms",
    "latency_ms", "status", "error", "cost", "request_hash", "reply_hash", "inherited",
)  # fmt: skip
"""The columns of ``run.model_calls()`` and of the lineage view ``model_calls``, in order."""

_INTEGERS = ("iteration", "attempt", "frame_no", "position", *TOKEN_FIELDS, "total_tokens")


def calls_frame(calls: Any, prices: Any = None) -> Any:
    """Model call records as a pandas DataFrame of :data:`CALL_COLUMNS` (one row per call,
    tokens as nullable integers, ``cost`` by ``prices`` or NaN: never guessed)."""
    from smithers_tt._extras import require_extra

    require_extra("pandas", needed_for="model calls as a DataFrame")
    import pandas

    table = PriceTable.of(prices)
    rows = [
        {
            **{name: getattr(c, name) for name in CALL_COLUMNS if hasattr(c, name)},
            "started_at": pandas.to_datetime(c.started_at_ms, unit="ms", utc=True),
            "total_tokens": c.total_tokens,
            "cost": table.cost(c.model, c.prompt_tokens, c.completion_tokens, c.cached_tokens),
        }
        for c in calls
    ]
    frame = pandas.DataFrame(rows, columns=list(CALL_COLUMNS))
    for name in _INTEGERS:
        frame[name] = frame[name].astype("Int64")
    frame["status"] = frame["status"].astype("Int64")
    for name in ("ttft_ms", "latency_ms", "cost"):
        frame[name] = frame[name].astype("float64")
    frame["started_at"] = pandas.to_datetime(frame["started_at"], utc=True)
    frame["inherited"] = frame["inherited"].astype(bool)
    return frame


@dataclass(slots=True)
class CallTotals:
    """Totals of a set of model calls: how many, their tokens, their cost and the time spent
    waiting for models (``model_ms``, the calls' latencies summed) against ``wall_ms``.

    ``cost`` sums the calls that have a price; ``unpriced`` counts the calls that reported
    tokens but whose model has none (their cost is unknown, never guessed: ``cost`` is then
    a lower bound, and None when no call was priced)."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    cost: float | None = None
    unpriced: int = 0
    errors: int = 0
    model_ms: float = 0.0
    wall_ms: float | None = None

    @property
    def total_tokens(self) -> int:
        """Prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens

    def add(self, call: ModelCallRecord, cost: float | None) -> None:
        """Count ``call``, whose cost is ``cost``."""
        self.calls += 1
        for name in TOKEN_FIELDS:
            setattr(self, name, getattr(self, name) + (getattr(call, name) or 0))
        if cost is not None:
            self.cost = (self.cost or 0.0) + cost
        elif call.prompt_tokens is not None or call.completion_tokens is not None:
            self.unpriced += 1
        if call.error is not None:
            self.errors += 1
        self.model_ms += call.latency_ms or 0.0


@dataclass(slots=True)
class RunCallTotals:
    """A run's model calls totalled for the run and for each node (task id)."""

    run: CallTotals
    nodes: dict[str, CallTotals] = field(default_factory=dict)


def totals_of(
    calls: Sequence[ModelCallRecord], prices: PriceTable, spans: Sequence[Any] = ()
) -> RunCallTotals:
    """Totals of ``calls`` for the run and per node, priced by ``prices``; ``spans`` are
    ``(run_id, node_id, started_at_ms, finished_at_ms)`` of the attempts whose time the calls
    share: the run's own and, for a fork, its ancestors' that made the calls it inherits. A
    node's wall time is its attempts' durations summed; the run's is each run's span (first
    start to last end) summed, so a fork made long after its parent does not count the time
    between them."""
    totals = RunCallTotals(CallTotals())
    for call in calls:
        cost = prices.cost(
            call.model, call.prompt_tokens, call.completion_tokens, call.cached_tokens
        )
        totals.run.add(call, cost)
        totals.nodes.setdefault(call.node_id, CallTotals()).add(call, cost)
    by_run: dict[str, list[tuple[int, int]]] = {}
    for run_id, node_id, started, finished in spans:
        if finished is None:
            continue
        by_run.setdefault(run_id, []).append((started, finished))
        node = totals.nodes.get(node_id)
        if node is not None:
            node.wall_ms = (node.wall_ms or 0.0) + float(finished - started)
    if by_run:
        totals.run.wall_ms = float(
            sum(max(f for _, f in ends) - min(s for s, _ in ends) for ends in by_run.values())
        )
    return totals
