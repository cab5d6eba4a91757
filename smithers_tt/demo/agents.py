"""Deterministic demo agents: no network, no API key, real state in real checkpoints.

They behave like small language-model agents (they take steps, keep notes, make a mistake now
and then) but every word they produce is a pure function of their input and state, so runs
are reproducible and tests can compare outputs exactly.

* :class:`Researcher` gathers notes on a topic in steps, publishing a ``progress`` checkpoint
  after each step and resuming from the newest one; ``fail_first_attempt_after`` makes its
  first attempt fail after publishing that many steps (the retry resumes, not restarts).
* :class:`Writer` drafts from the notes; with ``first_output_invalid`` its first answer lacks
  the title and the schema-correction turn fixes it, continuing from its own checkpoint.
* :class:`Reviewer` is a task fork of the writer: it starts from the writer's final state in
  mode ``fork`` and reviews the draft it finds there.

Each step records the model call a real agent would have made (``request.record_model_call``):
synthetic, with deterministic tokens and timings computed from the text (a 429 before the
flaky researcher's first step, as a rate-limited provider answers), on the models of
:data:`DEMO_PRICES`. Nothing is sent anywhere.
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

from pydantic import BaseModel

from smithers_tt import ModelCall, PriceTable
from smithers_tt.checkpoint import AgentCheckpoint, CheckpointCapability, CheckpointFormat
from smithers_tt.engine import GenerateRequest, GenerateResult

NOTES = "demo.notes"
DRAFT = "demo.draft"

_FACTS = [
    "lives in colonies of thousands",
    "communicates through dances",
    "keeps a steady temperature in winter",
    "has a division of labour by age",
    "navigates by the sun's position",
    "stores surplus for lean months",
    "defends its home together",
    "decides on a new home by consensus",
]


def _pick(topic: str, step: int) -> str:
    digest = hashlib.sha256(f"{topic}:{step}".encode()).digest()
    return f"A {topic} colony {_FACTS[digest[0] % len(_FACTS)]} (finding {step + 1})."


class Notes(BaseModel):
    """Output of the research task."""

    topic: str
    notes: list[str]


class Draft(BaseModel):
    """Output of the writing task."""

    title: str
    body: str
    words: int


class Review(BaseModel):
    """Output of the review task."""

    verdict: str
    comments: list[str]


DEMO_PRICES = PriceTable(
    {
        "demo-small": {"input": 0.15, "output": 0.60, "cached_input": 0.075},
        "demo-large": {"input": 2.50, "output": 10.00, "cached_input": 1.25},
    }
)
"""Made-up prices (per million tokens) of the demo's made-up models."""


def _tokens(text: str) -> int:
    """A deterministic token count: about four per three words."""
    return max(1, len(text.split()) * 4 // 3)


def model_call(model: str, prompt: str, reply: str, *, cached: int = 0) -> ModelCall:
    """The synthetic call a demo step stands for: tokens from the text, timings from its
    hash (the same text always takes the same time), finished with ``stop``."""
    spread = hashlib.sha256(f"{model}:{prompt}:{reply}".encode()).digest()[0]
    prompt_tokens, completion_tokens = _tokens(prompt) + 40, _tokens(reply)
    ttft = 2.0 + spread / 64  # small: the demo's steps take milliseconds of wall time
    return ModelCall(
        model,
        [{"role": "user", "content": prompt}],
        {"role": "assistant", "content": reply},
        "stop",
        prompt_tokens,
        completion_tokens,
        min(cached, prompt_tokens),
        0,
        ttft_ms=ttft,
        latency_ms=ttft + 0.05 * completion_tokens,
        status=200,
    )


def rate_limited(model: str, prompt: str) -> ModelCall:
    """A synthetic 429: the provider refused before answering (no tokens)."""
    return ModelCall(
        model, [{"role": "user", "content": prompt}], latency_ms=1.5, status=429,
        error="HTTP 429",
    )  # fmt: skip


class DemoAgent:
    """Shared bookkeeping: how many times each agent was called, and an optional delay."""

    id = "demo"

    def __init__(self, *, step_delay: float = 0.0) -> None:
        self.calls = 0
        self.step_delay = step_delay

    async def _step(self) -> None:
        await asyncio.sleep(self.step_delay)

    @staticmethod
    async def _call(request: GenerateRequest, call: ModelCall) -> None:
        """Record ``call`` after waiting its latency: a made-up call takes the time it says,
        so a run's model time stays within its attempts' wall time, as a real one does."""
        await asyncio.sleep((call.latency_ms or 0.0) / 1000)
        request.record_model_call(call)


class Researcher(DemoAgent):
    """Gathers ``steps`` notes on the run input's ``topic``, one checkpoint per step."""

    id = "researcher"
    checkpoint_formats = [CheckpointFormat(NOTES, versions=[1])]
    checkpoint_capabilities = [CheckpointCapability(NOTES, versions=[1], modes=["resume"])]

    def __init__(
        self,
        *,
        steps: int = 4,
        fail_first_attempt_after: int | None = None,
        step_delay: float = 0.0,
    ) -> None:
        super().__init__(step_delay=step_delay)
        self.steps = steps
        self.fail_first_attempt_after = fail_first_attempt_after

    async def generate(self, request: GenerateRequest) -> GenerateResult:
        self.calls += 1
        topic = str((request.input or {}).get("topic", "bee"))
        state: dict[str, Any] = (
            request.resume_checkpoint.payload
            if request.resume_checkpoint
            else {"topic": topic, "notes": [], "tokens": 0}
        )
        while len(state["notes"]) < self.steps:
            await self._step()
            note = _pick(topic, len(state["notes"]))
            prompt = f"Find fact {len(state['notes']) + 1} about the {topic}."
            if request.attempt == 1 and not state["notes"] and self.fail_first_attempt_after:
                await self._call(request, rate_limited("demo-small", prompt))
            await self._call(request, model_call("demo-small", prompt, note, cached=40))
            state["notes"].append(note)
            state["tokens"] += len(note.split())
            await request.on_checkpoint(AgentCheckpoint(NOTES, 1, state))
            if (
                request.attempt == 1
                and self.fail_first_attempt_after is not None
                and len(state["notes"]) == self.fail_first_attempt_after
            ):
                raise ConnectionError("the research source timed out (simulated)")
        return GenerateResult(
            {"topic": topic, "notes": list(state["notes"])},
            checkpoint=AgentCheckpoint(NOTES, 1, state),
        )


class Writer(DemoAgent):
    """Writes a draft from the research notes; may need one schema-correction turn."""

    id = "writer"
    checkpoint_formats = [CheckpointFormat(DRAFT, versions=[1])]
    checkpoint_capabilities = [CheckpointCapability(DRAFT, versions=[1], modes=["resume", "fork"])]

    def __init__(self, *, first_output_invalid: bool = False, step_delay: float = 0.0) -> None:
        super().__init__(step_delay=step_delay)
        self.first_output_invalid = first_output_invalid

    async def generate(self, request: GenerateRequest) -> GenerateResult:
        self.calls += 1
        await self._step()
        notes = request.needs["research"]["notes"]
        topic = request.needs["research"]["topic"]
        if request.resume_checkpoint is not None:
            state = request.resume_checkpoint.payload
        else:
            body = " ".join(notes)
            state = {"body": body, "revisions": [], "title": None}
        if request.schema_error:
            state["revisions"].append(f"fixed: {request.schema_error.splitlines()[0][:120]}")
            state["title"] = f"What we know about the {topic}"
        elif self.first_output_invalid and state["title"] is None:
            # Resumed from its own untitled first draft (after a crash), it is that same draft.
            if "first draft, no title yet" not in state["revisions"]:
                state["revisions"].append("first draft, no title yet")
        else:
            state["title"] = state["title"] or f"What we know about the {topic}"
        prompt = f"Write about the {topic} from these notes: {' '.join(notes)}"
        if request.schema_error:
            prompt = f"Your answer was rejected: {request.schema_error.splitlines()[0][:120]}"
        await self._call(request, model_call("demo-large", prompt, state["body"]))
        checkpoint = AgentCheckpoint(DRAFT, 1, state)
        output: dict[str, Any] = {"body": state["body"], "words": len(state["body"].split())}
        if state["title"] is not None:
            output["title"] = state["title"]
        return GenerateResult(output, checkpoint=checkpoint)


class Reviewer(DemoAgent):
    """Reviews the writer's draft, starting from the writer's own state (a task fork)."""

    id = "reviewer"
    checkpoint_formats = [CheckpointFormat(DRAFT, versions=[1])]
    checkpoint_capabilities = [CheckpointCapability(DRAFT, versions=[1], modes=["fork"])]

    async def generate(self, request: GenerateRequest) -> GenerateResult:
        self.calls += 1
        await self._step()
        assert request.resume_checkpoint is not None and request.checkpoint_mode == "fork"
        state = request.resume_checkpoint.payload
        words = len(state["body"].split())
        comments = [f"{words} words from {len(state['revisions'])} revision(s)"]
        if words < 40:
            comments.append("short: add a section on foraging")
        state["revisions"].append("reviewed")
        reply = "; ".join(comments)
        await self._call(request, model_call("demo-large", f"Review: {state['body']}", reply))
        return GenerateResult(
            {"verdict": "accept" if words >= 20 else "revise", "comments": comments},
            checkpoint=AgentCheckpoint(DRAFT, 1, state),
        )
