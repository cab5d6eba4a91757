"""Purpose-built agents and helpers shared by the engine tests.

:class:`ScriptedAgent` wraps an async ``behaviour(request)`` with the declarations a test
wants and records, for every call, what the engine handed the agent (a deep copy taken at the
moment of the call, so later mutations by the agent do not change the record).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import secrets
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

import smithers_tt as st
from smithers_tt import AgentCheckpoint, CheckpointCapability, CheckpointFormat, GenerateRequest
from smithers_tt.store import CheckpointRef, NodeRecord

CODEC = "test.state"

Behaviour = Callable[[GenerateRequest], Awaitable[Any]]


@dataclass(frozen=True)
class Seen:
    """What one agent call received."""

    node_id: str
    iteration: int
    attempt: int
    mode: str | None
    codec: str | None
    version: int | None
    payload: Any
    schema_error: str | None
    correction_turn: int
    request: GenerateRequest  # the objects themselves (kept alive, so identity is meaningful)
    checkpoint: AgentCheckpoint | None


def formats(*specs: tuple[str, Iterable[int]]) -> list[CheckpointFormat]:
    return [CheckpointFormat(codec, versions) for codec, versions in specs]


def capabilities(*specs: tuple[str, Iterable[int], Iterable[str]]) -> list[CheckpointCapability]:
    return [CheckpointCapability(codec, versions, modes) for codec, versions, modes in specs]


class ScriptedAgent:
    """A checkpoint-aware agent whose every call runs ``behaviour(request)``.

    By default it produces and consumes ``test.state`` v1 in mode ``resume``.
    """

    def __init__(
        self,
        behaviour: Behaviour,
        *,
        id: str = "scripted",
        produces: list[CheckpointFormat] | None = None,
        consumes: list[CheckpointCapability] | None = None,
    ) -> None:
        self.id = id
        self.checkpoint_formats = produces if produces is not None else formats((CODEC, [1]))
        self.checkpoint_capabilities = (
            consumes if consumes is not None else capabilities((CODEC, [1], ["resume"]))
        )
        self.behaviour = behaviour
        self.seen: list[Seen] = []

    @property
    def calls(self) -> int:
        return len(self.seen)

    def calls_of(self, node_id: str) -> list[Seen]:
        return [s for s in self.seen if s.node_id == node_id]

    async def generate(self, request: GenerateRequest) -> Any:
        cp = request.resume_checkpoint
        self.seen.append(
            Seen(
                request.node_id,
                request.iteration,
                request.attempt,
                request.checkpoint_mode,
                cp.codec if cp else None,
                cp.version if cp else None,
                copy.deepcopy(cp.payload) if cp else None,
                request.schema_error,
                request.correction_turn,
                request,
                cp,
            )
        )
        return await self.behaviour(request)


def state(payload: Any, version: int = 1, codec: str = CODEC) -> AgentCheckpoint:
    """A checkpoint of the default test codec."""
    return AgentCheckpoint(codec, version, payload)


def count(db: st.Database, table: str, **where: Any) -> int:
    """Rows of ``table`` (optionally only those whose columns equal ``where``)."""
    t = sa.table(table, *(sa.column(c) for c in where))
    stmt = sa.select(sa.func.count()).select_from(t)
    for name, value in where.items():
        stmt = stmt.where(t.c[name] == value)
    return db.engine.transaction(lambda conn: conn.execute(stmt).scalar_one(), write=False)


def refs(db: st.Database, run_id: str, node_id: str | None = None) -> list[CheckpointRef]:
    """Every checkpoint ref of a run (or of one node) in key order."""
    return db.get_run(run_id).checkpoints(node_id)


def ref_key(ref: CheckpointRef) -> tuple[str, str, int, int, int]:
    return (ref.run_id, ref.node_id, ref.iteration, ref.attempt, ref.sequence)


def attempt_states(db: st.Database, run_id: str, node_id: str | None = None) -> list[str]:
    return [a.state for a in db.store.list_attempts(run_id, node_id)]


def node_map(db: st.Database, run_id: str) -> dict[tuple[str, int], NodeRecord]:
    return {(n.node_id, n.iteration): n for n in db.store.list_nodes(run_id)}


async def crash_during(
    db: st.Database, wf: st.Workflow, input: Any, reached: asyncio.Event, *, timeout: float = 20
) -> str:
    """Start a run of ``wf`` and abandon it, like a dying process, once ``reached`` is set.

    Nothing is written on the way out: the run stays ``running`` with its open attempts in
    progress, as after a ``kill -9``. Returns the run id.
    """
    run_id = f"crash-{secrets.token_hex(6)}"
    task = asyncio.create_task(db.arun(wf, input, run_id=run_id))
    waiter = asyncio.create_task(reached.wait())
    done, _ = await asyncio.wait(
        {task, waiter}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
    )
    if task in done:
        waiter.cancel()
        raise AssertionError(f"the run ended before the crash point: {task.result()!r}")
    assert waiter in done, "the crash point was never reached"
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return run_id


def crash_run(
    db: st.Database, wf: st.Workflow, input: Any, reached: Callable[[], asyncio.Event]
) -> str:
    """Synchronous :func:`crash_during`; ``reached()`` makes the event inside the loop."""

    async def main() -> str:
        return await crash_during(db, wf, input, reached())

    return asyncio.run(main())
