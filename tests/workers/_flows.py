"""Workflows for worker processes started by the tests (not a test module).

``smithers-tt worker --workflows tests.workers._flows:logged`` (run from the repository root)
loads :func:`logged`: the demo workflow (research -> write -> review) whose agents log, to
``$SMITHERS_TT_TEST_WORKER_LOG/<pid>.log`` when that variable is set, one line per event:

* ``call RUN NODE ITERATION ATTEMPT``: an agent was called;
* ``ack RUN NODE ITERATION ATTEMPT SEQUENCE HASH``: ``on_checkpoint`` returned, so the
  checkpoint is acknowledged (committed); the line is written after that, and before the
  agent goes on;
* ``fence RUN NODE ITERATION ATTEMPT``: ``on_checkpoint`` raised FenceLost (nothing written).

Every checkpoint goes through ``on_checkpoint``: the final checkpoint an agent returns is
published by the wrapper itself (purpose ``turn``), so every acknowledged checkpoint is logged.
``$SMITHERS_TT_TEST_STEP_DELAY`` sets the demo's ``step_delay`` (default 0). Lines are single
``write`` calls on an ``O_APPEND`` file: a SIGKILL cannot lose or tear a written line.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

from smithers_tt import AgentCheckpoint, FenceLost, GenerateRequest, GenerateResult, Workflow
from smithers_tt.demo import demo_workflow
from smithers_tt.engine import as_agent

LOG_ENV = "SMITHERS_TT_TEST_WORKER_LOG"
DELAY_ENV = "SMITHERS_TT_TEST_STEP_DELAY"


class Log:
    """An append-only event log (or nothing when no directory is configured)."""

    def __init__(self, directory: str | None) -> None:
        self.fd = None
        if directory:
            path = os.path.join(directory, f"{os.getpid()}.log")
            self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def write(self, *fields: Any) -> None:
        if self.fd is not None:
            os.write(self.fd, (" ".join(map(str, fields)) + "\n").encode())


class Logged:
    """A demo agent with the same id and declarations that logs calls and checkpoints."""

    def __init__(self, inner: Any, log: Log) -> None:
        self.inner, self.log = inner, log
        self.id = inner.id
        self.checkpoint_formats = inner.checkpoint_formats
        self.checkpoint_capabilities = inner.checkpoint_capabilities

    async def generate(self, request: GenerateRequest) -> Any:
        where = (request.run_id, request.node_id, request.iteration, request.attempt)
        self.log.write("call", *where)
        publish = request.on_checkpoint

        async def on_checkpoint(checkpoint: AgentCheckpoint, *args: Any) -> Any:
            try:
                ref = await publish(checkpoint, *args)
            except FenceLost:
                self.log.write("fence", *where)
                raise
            self.log.write("ack", *where, ref.sequence, ref.content_hash)
            return ref

        result = await self.inner.generate(replace(request, on_checkpoint=on_checkpoint))
        if isinstance(result, GenerateResult) and result.checkpoint is not None:
            purpose = "turn" if request.correction_turn == 0 else "schema-correction"
            await on_checkpoint(result.checkpoint, purpose)
            result = replace(result, checkpoint=None)
        return result


def logged() -> Workflow:
    """The demo workflow with logging agents (see the module docstring)."""
    wf, _ = demo_workflow(step_delay=float(os.environ.get(DELAY_ENV, "0")))
    log = Log(os.environ.get(LOG_ENV))
    for task in wf.tasks.values():
        task.agent = as_agent(Logged(task.agent.target, log))
    return wf


def changed() -> Workflow:
    """The demo workflow with another definition (research retries differ): a run submitted
    with it is never claimed by a worker that knows :func:`logged` or the demo, and back."""
    wf, _ = demo_workflow(step_delay=float(os.environ.get(DELAY_ENV, "0")))
    wf.tasks["research"].retry = replace(wf.tasks["research"].retry, count=5)
    return wf
