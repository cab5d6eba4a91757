"""What a task hands its agent, what it gets back, and how any agent object is adapted.

An agent is any object with an async ``generate(request)`` method (and optionally ``id``,
``checkpoint_formats``, ``checkpoint_capabilities``, ``supports_sessions``), or a plain
function (async or not) taking the request. Agents that declare nothing run unchanged: they
get no checkpoint and may not publish one.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from smithers_tt._ids import check_id
from smithers_tt._model_calls import ModelCall
from smithers_tt.checkpoint import (
    AgentCheckpoint,
    CheckpointCapability,
    CheckpointFormat,
    CheckpointMode,
    declaration_signature,
)
from smithers_tt.errors import InvalidArgument
from smithers_tt.store import CheckpointRef


@dataclass(frozen=True)
class GenerateRequest:
    """Everything an agent gets for one call.

    ``resume_checkpoint`` is a fresh deep copy for this call only (mutate it freely) and is
    given together with ``checkpoint_mode`` (``resume``: continue your own state; ``fork``:
    start from another task's state). ``resume_session`` is a native provider session id and
    is never given together with a checkpoint. ``await on_checkpoint(cp)`` returns once the
    checkpoint is durable; it raises ``FenceLost`` (and nothing was written) when this attempt
    no longer owns its node. ``schema_error`` is set on schema-correction turns.

    ``record_model_call(...)`` records a call the agent made to a model (tokens, timings,
    status), stored with the attempt's next write.

    ``await ask(question)`` asks a person: the first time, the run pauses durably (this
    call never returns; the attempt is interrupted, so checkpoint what you have first) and
    once it is continued with an answer, the node's next attempt gets that answer from the
    same call (the n-th question of a call gets the n-th answer). ``answer`` is the answer
    given when the run paused before this node (a breakpoint or the task's interrupt).
    """

    run_id: str
    node_id: str
    iteration: int
    attempt: int
    prompt: str | None
    input: Any
    needs: dict[str, Any]
    on_checkpoint: Callable[[AgentCheckpoint], Awaitable[CheckpointRef]]
    resume_checkpoint: AgentCheckpoint | None = None
    checkpoint_mode: CheckpointMode | None = None
    resume_session: str | None = None
    schema_error: str | None = None
    correction_turn: int = 0
    max_checkpoint_bytes: int = 16 * 1024 * 1024
    ask: Callable[[Any], Awaitable[Any]] = field(default=None, compare=False)  # type: ignore[assignment]
    answer: Any = None
    on_model_call: Callable[[ModelCall], None] | None = field(default=None, compare=False)
    """Where :meth:`record_model_call` sends its calls (the engine's attempt; None: nowhere)."""

    def record_model_call(self, call: ModelCall | None = None, /, **fields: Any) -> ModelCall:
        """Record one call this agent made to a model: a :class:`~smithers_tt.ModelCall`, or
        its fields (``model``, ``request`` (the messages sent), ``reply``, ``finish_reason``,
        ``prompt_tokens``, ``completion_tokens``, ``cached_tokens``, ``reasoning_tokens``,
        ``started_at_ms``, ``ttft_ms``, ``latency_ms``, ``status``, ``error``). It is stored
        with the attempt's next checkpoint or its end, in that write's transaction (no commit
        of its own); each HTTP try is a call (a 429 then a 200 are two). Outside a run's
        engine the call is checked and returned, and stored nowhere.

        Raises:
            InvalidArgument: a field has the wrong type (a token count that is not an int >= 0).
        """
        if call is None:
            call = ModelCall(**fields)
        elif fields:
            raise InvalidArgument("give a ModelCall or its fields, not both")
        if self.on_model_call is not None:
            self.on_model_call(call)
        return call

    def __post_init__(self) -> None:
        if self.ask is None:
            object.__setattr__(self, "ask", _cannot_ask)


async def _cannot_ask(question: Any) -> Any:
    raise InvalidArgument(
        "this request was not made by a run's engine, so it cannot ask a person; "
        "run the agent in a workflow (db.run) to ask"
    )


@dataclass
class GenerateResult:
    """What an agent returns: its output, and optionally its final checkpoint or session."""

    output: Any
    checkpoint: AgentCheckpoint | None = None
    session: str | None = None


@dataclass(frozen=True)
class AgentSpec:
    """An agent normalised: id, declarations and an async ``generate``."""

    id: str
    formats: tuple[CheckpointFormat, ...]
    capabilities: tuple[CheckpointCapability, ...]
    generate: Callable[[GenerateRequest], Awaitable[Any]] = field(compare=False)
    supports_sessions: bool = False
    target: Any = field(default=None, compare=False)

    @property
    def signature(self) -> str:
        """The declaration signature (order and duplicates ignored) used in cache keys."""
        return declaration_signature(self.formats, self.capabilities)


def _declared(obj: Any, name: str, kind: type) -> tuple[Any, ...]:
    values = tuple(getattr(obj, name, None) or ())
    for value in values:
        if not isinstance(value, kind):
            raise InvalidArgument(
                f"agent {obj!r}: {name} must contain {kind.__name__} objects, got {value!r}"
            )
    return values


def as_agent(obj: Any) -> AgentSpec:
    """Adapt an agent object or a function into an :class:`AgentSpec`."""
    if isinstance(obj, AgentSpec):
        return obj
    method = getattr(obj, "generate", None)
    if callable(method):
        agent_id = str(getattr(obj, "id", None) or type(obj).__name__)
        fn = method
    elif callable(obj):
        agent_id = str(getattr(obj, "id", None) or getattr(obj, "__qualname__", repr(obj)))
        fn = obj
    else:
        raise InvalidArgument(
            f"{obj!r} is not an agent: give an object with an async generate(request) method "
            "or a function taking the request"
        )

    async def generate(request: GenerateRequest) -> Any:
        if inspect.iscoroutinefunction(fn):
            return await fn(request)
        result = await asyncio.to_thread(fn, request)
        return await result if inspect.isawaitable(result) else result

    return AgentSpec(
        check_id(agent_id, "agent id"),
        _declared(obj, "checkpoint_formats", CheckpointFormat),
        _declared(obj, "checkpoint_capabilities", CheckpointCapability),
        generate,
        bool(getattr(obj, "supports_sessions", False)),
        obj,
    )
