"""What the lineage shows for a fork by reference is what materialising it writes: the same
nodes, attempts, refs and frames (its base frames included) before and after
``db.materialize``, for forks of every shape, on both backends."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import smithers_tt as st
from smithers_tt import GenerateRequest, GenerateResult, Loop, Retry, Workflow
from smithers_tt.checkpoint import AgentCheckpoint
from smithers_tt.demo.agents import NOTES
from tests.engine._workflows import ScriptedAgent, state

from .conftest import TOPIC, fresh_workflow, records

EXCLUDED = {
    # Stamped with the time the rows are computed (now), not taken from the history: the
    # lineage computes them when it opens, materialising when it writes.
    "nodes": {"updated_at_ms"},
}
"""Columns not compared, by relation: only stamps of the moment the rows are computed."""

RELATIONS = {
    # relation (a view, or a raw table where the view leaves columns out): its key
    "nodes": "node_id, iteration",
    "attempts": "node_id, iteration, attempt",
    "checkpoints": "node_id, iteration, attempt, sequence",
    "raw.tt_checkpoint_refs": "node_id, iteration, attempt, sequence",
    "raw.tt_frames": "frame_no",  # every frame, the base frames below 0 included
}


def shown(db: st.Database, run_id: str) -> dict[str, list[dict[str, Any]]]:
    """What a lineage opened now shows of ``run_id``: its rows of every relation, by key."""
    with db.lineage() as lin:
        found = {
            name: records(lin.sql(f"FROM {name} WHERE run_id = ? ORDER BY {key}", [run_id]))
            for name, key in RELATIONS.items()
        }
    for name, rows in found.items():
        for row in rows:
            for column in EXCLUDED.get(name, ()):
                row.pop(column)
            if name == "raw.tt_frames" and row["kind"] == "node_state" and row["frame_no"] < 0:
                # A base frame restating a node is stamped when it is computed, likewise.
                row.pop("created_at_ms")
    return found


def _loop_workflow() -> Workflow:
    """A loop of four turns whose second turn fails once (retried), then a task after it;
    every call publishes two checkpoints."""
    failed: set[int] = set()

    async def work(request: GenerateRequest) -> GenerateResult:
        for step in range(2):
            await request.on_checkpoint(state({"node": request.node_id, "step": step}))
        if request.node_id == "loop" and request.iteration == 1 and 1 not in failed:
            failed.add(1)
            raise ConnectionError("flaky once")
        return GenerateResult({"n": request.iteration})

    agent = ScriptedAgent(work)
    wf = Workflow("loop")
    wf.task("loop", agent=agent, loop=Loop(until=lambda out: out["n"] >= 3, max=6), retry=Retry(2))
    wf.task("last", agent=agent, needs=["loop"])
    return wf


def _frame(db: st.Database, run_id: str, kind: str, node_id: str, **match: Any) -> int:
    for f in db.get_run(run_id).frames():
        if (f.kind, f.node_id) == (kind, node_id) and all(
            getattr(f, k) == v for k, v in match.items()
        ):
            return f.frame_no
    raise AssertionError(f"no {kind} frame of {node_id} with {match}")


def _demo(db: st.Database) -> str:
    run = db.run(fresh_workflow(), TOPIC)
    assert run.status == "finished", run.error
    return run.id


def plain(db: st.Database) -> str:
    """A fork after research, nothing reset."""
    run_id = _demo(db)
    return db.fork(run_id, _frame(db, run_id, "node_state", "research", state="finished")).id


def edited(db: st.Database) -> str:
    """A fork at the end with an edited research checkpoint (research and what needs it
    run again)."""
    run_id = _demo(db)
    notes = AgentCheckpoint(NOTES, 1, {"topic": "bee", "notes": ["edited"], "tokens": 1})
    return db.fork(run_id, db.get_run(run_id).record.clock, checkpoints={"research": notes}).id


def reset(db: st.Database) -> str:
    """A fork while ``write`` was running, ``write`` (and ``review``) reset."""
    run_id = _demo(db)
    return db.fork(run_id, _frame(db, run_id, "attempt_started", "write"), reset=["write"]).id


def fork_of_fork(db: st.Database) -> str:
    """A fork (by reference) of an edited fork by reference of a fork that ran."""
    run_id = _demo(db)
    first = db.fork(run_id, _frame(db, run_id, "node_state", "research", state="finished"))
    done = db.resume(first.id, fresh_workflow())
    assert done.status == "finished", done.error
    notes = AgentCheckpoint(NOTES, 1, {"topic": "bee", "notes": ["again"], "tokens": 2})
    second = db.fork(first.id, done.record.clock, checkpoints={"research": notes})
    return db.fork(second.id, 0, reset=["review"]).id


def after_a_reset(db: st.Database) -> str:
    """A fork at the end of a run whose ``write`` was reset and ran again (its attempt
    numbers used twice in the history)."""
    run_id = _demo(db)
    assert db.reset(run_id, "write", dependents=True) == ["review", "write"]
    assert db.resume(run_id, fresh_workflow()).status == "finished"
    return db.fork(run_id, db.get_run(run_id).record.clock).id


def loop(db: st.Database) -> str:
    """A fork in the middle of a loop with a retried turn."""
    run = db.run(_loop_workflow(), {"x": 1})
    assert run.status == "finished", run.error
    return db.fork(run.id, _frame(db, run.id, "node_state", "loop", iteration=2)).id


def loop_end(db: st.Database) -> str:
    """A fork at the end of a run with a loop and a retried turn, ``last`` reset."""
    run = db.run(_loop_workflow(), {"x": 2})
    assert run.status == "finished", run.error
    return db.fork(run.id, run.record.clock, reset=["last"]).id


@pytest.mark.parametrize(
    "make", [plain, edited, reset, fork_of_fork, after_a_reset, loop, loop_end]
)
def test_lineage_shows_a_fork_by_reference_as_materialising_it_writes(
    db: st.Database, make: Callable[[st.Database], str]
) -> None:
    fork_id = make(db)
    assert db.get_run(fork_id).record.inherits
    before = shown(db, fork_id)

    assert db.materialize(fork_id)

    assert not db.get_run(fork_id).record.inherits
    assert shown(db, fork_id) == before
    assert before["raw.tt_frames"][0]["frame_no"] < 0  # it has base frames to compare
    assert db.verify().ok
