"""The workflow the sweep tests sweep (not a test module).

``plan -> act``: ``plan`` counts to 3, one checkpoint (``plan.state`` v1) a step, resuming
from its newest; ``act`` answers from the run input and plan's output, and fails when the
input says ``{"fail": true}``. Every agent call is logged as ``RUN NODE ATTEMPT`` to
``$SMITHERS_TT_TEST_SWEEP_LOG`` when set (one ``O_APPEND`` write a line: a SIGKILL cannot tear
it), and to :attr:`Calls.lines` always. ``$SMITHERS_TT_TEST_STEP_DELAY`` slows each step.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from smithers_tt import (
    AgentCheckpoint,
    CheckpointCapability,
    CheckpointFormat,
    GenerateRequest,
    GenerateResult,
    Workflow,
)

LOG_ENV = "SMITHERS_TT_TEST_SWEEP_LOG"
DELAY_ENV = "SMITHERS_TT_TEST_STEP_DELAY"
CODEC = "plan.state"
STEPS = 3


class Calls:
    """Every agent call, as ``(run_id, node_id, attempt)``."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, str, int]] = []
        path = os.environ.get(LOG_ENV)
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644) if path else None

    def add(self, request: GenerateRequest) -> None:
        self.lines.append((request.run_id, request.node_id, request.attempt))
        if self.fd is not None:
            line = f"{request.run_id} {request.node_id} {request.attempt}\n"
            os.write(self.fd, line.encode())

    def of(self, run_id: str) -> list[str]:
        return [node for run, node, _ in self.lines if run == run_id]


class Planner:
    id = "planner"
    checkpoint_formats = [CheckpointFormat(CODEC, [1])]
    checkpoint_capabilities = [CheckpointCapability(CODEC, [1], ["resume"])]

    def __init__(self, calls: Calls, delay: float) -> None:
        self.calls, self.delay = calls, delay

    async def generate(self, request: GenerateRequest) -> Any:
        self.calls.add(request)
        cp = request.resume_checkpoint
        state = cp.payload if cp is not None else {"n": 0, "steps": []}
        while state["n"] < STEPS:
            await asyncio.sleep(self.delay)
            state["n"] += 1
            state["steps"].append(f"step {state['n']}")
            await request.on_checkpoint(AgentCheckpoint(CODEC, 1, state))
        return GenerateResult({"n": state["n"], "steps": state["steps"]})


class Actor:
    id = "actor"

    def __init__(self, calls: Calls, delay: float) -> None:
        self.calls, self.delay = calls, delay

    async def generate(self, request: GenerateRequest) -> Any:
        self.calls.add(request)
        await asyncio.sleep(self.delay)
        given = request.input or {}
        if given.get("fail"):
            raise RuntimeError("this variant asked to fail")
        plan = request.needs["plan"]
        return {"answer": f"{given.get('topic')} after {plan['n']} steps",
                "model": given.get("model", "m1"), "steps": len(plan["steps"])}  # fmt: skip


def sweep_workflow(delay: float | None = None) -> tuple[Workflow, Calls]:
    """The workflow and the log of its agents' calls."""
    if delay is None:
        delay = float(os.environ.get(DELAY_ENV, "0"))
    calls = Calls()
    wf = Workflow("what-if")
    wf.task("plan", agent=Planner(calls, delay), prompt="plan")
    wf.task("act", agent=Actor(calls, delay), needs=["plan"], prompt="act")
    return wf, calls


def logged() -> Workflow:
    """The workflow alone (for ``smithers-tt worker --workflows tests.sweeps._flows:logged``)."""
    return sweep_workflow()[0]
