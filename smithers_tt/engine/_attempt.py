"""One attempt of an agent: its turns (schema correction) and what it publishes.

:class:`Publisher` is the attempt's ``on_checkpoint``; :func:`turns` calls the agent until its
output matches the task's schema; :func:`cache_key` is what a cached result is found by. The
executor (:mod:`._executor`) starts and ends attempts around them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from smithers_tt._model_calls import ModelCall
from smithers_tt.checkpoint import (
    AgentCheckpoint,
    EncodedCheckpoint,
    canonical_bytes,
    content_hash,
    produces,
)
from smithers_tt.engine._agent import GenerateRequest, GenerateResult
from smithers_tt.engine._astore import AsyncStore
from smithers_tt.engine._resume import SESSION_CODEC, ResumePoint
from smithers_tt.engine._workflow import Task
from smithers_tt.errors import (
    CheckpointInvalid,
    FenceLost,
    FormatNotDeclared,
    InvalidArgument,
    OutputInvalid,
)
from smithers_tt.store import AttemptKey, Fence


class Publisher:
    """The ``on_checkpoint`` of one attempt: validated, declared, ordered, fenced, durable.

    The checkpoints of an agent's result are not published at once but kept (:meth:`keep`)
    and published with the attempt's end, in the transaction that records it (a task is two
    transactions: its start, then its result with its end); :meth:`flush` publishes them
    earlier when another turn of the agent needs them stored first.

    The model calls the agent records (:meth:`record`) wait for the attempt's next write and
    go with it, in its transaction: the next publish, or the attempt's end (:meth:`take_calls`).
    """

    def __init__(
        self, astore: AsyncStore, fence: Fence, max_bytes: int, task: Task, key: AttemptKey
    ) -> None:
        self.astore, self.fence, self.max_bytes = astore, fence, max_bytes
        self.task, self.key = task, key
        self._lock = asyncio.Lock()  # FIFO: publications of one attempt stay in call order
        self.fence_lost: FenceLost | None = None
        self.newest: AgentCheckpoint | None = None
        self.kept: list[tuple[EncodedCheckpoint, str, str]] = []
        """Validated result checkpoints not yet stored: (encoded, purpose, agent id)."""
        self.calls: list[ModelCall] = []
        """Model calls recorded since the attempt's last write."""

    async def __call__(self, checkpoint: AgentCheckpoint, purpose: str = "progress") -> Any:
        await self.flush()  # stay in call order behind result checkpoints kept earlier
        encoded, stored = self._encode(checkpoint)
        async with self._lock:
            try:
                ref = await self.astore.publish(
                    self.fence, self.key, encoded, purpose=purpose, agent_id=self.task.agent.id,
                    model_calls=self.take_calls(),
                )  # fmt: skip
            except FenceLost as error:
                self.fence_lost = error
                raise
        self._stored(checkpoint, stored)
        return ref

    def keep(self, checkpoint: AgentCheckpoint, purpose: str) -> None:
        """Validate ``checkpoint`` now; store it with the attempt's end (see :meth:`take`)."""
        encoded, stored = self._encode(checkpoint)
        self.kept.append((encoded, purpose, self.task.agent.id))
        self._stored(checkpoint, stored)

    def record(self, call: ModelCall) -> None:
        """Keep a model call the agent made; it is stored with the attempt's next write."""
        if not isinstance(call, ModelCall):
            raise InvalidArgument(f"record a ModelCall, not {type(call).__name__}")
        self.calls.append(call)

    def take_calls(self) -> list[ModelCall]:
        """The model calls recorded since the last write, for the write that stores them."""
        calls, self.calls = self.calls, []
        return calls

    def take(self) -> list[tuple[EncodedCheckpoint, str, str]]:
        """The kept checkpoints, for the write that ends the attempt (which stores them)."""
        kept, self.kept = self.kept, []
        return kept

    async def flush(self) -> None:
        """Publish the kept checkpoints now, in order."""
        for encoded, purpose, agent_id in self.take():
            async with self._lock:
                try:
                    await self.astore.publish(
                        self.fence, self.key, encoded, purpose=purpose, agent_id=agent_id,
                        model_calls=self.take_calls(),
                    )  # fmt: skip
                except FenceLost as error:
                    self.fence_lost = error
                    raise

    def _stored(self, checkpoint: AgentCheckpoint, stored: AgentCheckpoint) -> None:
        if checkpoint.codec != SESSION_CODEC:
            self.newest = stored

    def _encode(self, checkpoint: AgentCheckpoint) -> tuple[EncodedCheckpoint, AgentCheckpoint]:
        """Check and encode once (the store does not hash it again); and a snapshot of what
        is stored: the agent may edit its state while the publish is in flight, and a
        correction turn must resume exactly the stored checkpoint."""
        if self.fence_lost is not None:
            raise FenceLost(f"attempt {self.key} lost ownership earlier: {self.fence_lost}")
        if not isinstance(checkpoint, AgentCheckpoint):
            raise CheckpointInvalid(
                f"on_checkpoint takes an AgentCheckpoint, got {type(checkpoint).__name__}"
            )
        agent = self.task.agent
        if checkpoint.codec != SESSION_CODEC and not produces(
            agent.formats, checkpoint.codec, checkpoint.version
        ):
            raise FormatNotDeclared(
                f"agent {agent.id!r} published {checkpoint.codec} v{checkpoint.version}, "
                f"which it does not declare in checkpoint_formats "
                f"{[(f.codec, list(f.versions)) for f in agent.formats]}; nothing was written"
            )
        encoded = checkpoint.encode(self.max_bytes)  # validates mutations since creation
        return encoded, checkpoint.clone()


async def turns(
    task: Task,
    publisher: Publisher,
    request: GenerateRequest,
    point: ResumePoint,
    asker: Callable[[], Callable[[Any], Any]],
) -> Any:
    """Call the agent until its output matches the task's schema (at most ``schema_retries``
    correction turns, each resuming from the newest checkpoint); return the output. The
    result checkpoints are kept in ``publisher``; ``asker()`` is each turn's
    ``request.ask``."""
    turn = 0
    while True:
        request = replace(request, ask=asker())
        call = task.agent.generate(request)
        raw = await (asyncio.wait_for(call, task.timeout) if task.timeout else call)
        result = raw if isinstance(raw, GenerateResult) else GenerateResult(raw)
        purpose = "turn" if turn == 0 else "schema-correction"
        if result.checkpoint is not None:
            publisher.keep(result.checkpoint, purpose)
        if result.session is not None:
            publisher.keep(
                AgentCheckpoint(SESSION_CODEC, 1, {"session": result.session}), "session"
            )
        try:
            return task.validate_output(result.output)
        except OutputInvalid as error:
            if turn >= task.schema_retries:
                raise
            await publisher.flush()  # the correction turn resumes from them: store them
            turn += 1
            newest = publisher.newest or point.checkpoint
            request = replace(
                request,
                schema_error=str(error),
                correction_turn=turn,
                resume_checkpoint=newest.clone() if newest else None,
                checkpoint_mode=("resume" if publisher.newest else point.mode) if newest else None,
                resume_session=None if newest else request.resume_session,
            )


def cache_key(
    workflow: str,
    task: Task,
    iteration: int,
    run_input: Any,
    prompt: str | None,
    needs: dict[str, Any],
) -> str:
    """What an attempt's result is cached under (``Task(cache=True)``): the hash of everything
    that decides it (workflow, task, iteration, run input, needs, prompt, output schema, agent
    and its declarations)."""
    doc = {
        "workflow": workflow,
        "task": task.id,
        "iteration": iteration,
        "input": run_input,
        "needs": needs,
        "prompt": prompt,
        "output": task.output_schema(),
        "agent": task.agent.id,
        "declarations": task.agent.signature,
    }
    # {"needs": {task: output}} wraps outputs in two levels that do not count against
    # their nesting bound.
    return content_hash(canonical_bytes(doc, wrapping=2))
