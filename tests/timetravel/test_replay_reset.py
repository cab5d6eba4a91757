"""Replay (fork and execute) and reset (retry a node, and its dependents, from scratch)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import smithers_tt as st
from smithers_tt.engine import GenerateRequest
from smithers_tt.errors import InvalidArgument
from tests.timetravel._support import TOPIC, count, live_view, record_requests
from tests.timetravel.conftest import Demo, fresh_workflow


def _calls(agents: Any) -> tuple[int, int, int]:
    return agents.researcher.calls, agents.writer.calls, agents.reviewer.calls


def test_replay_reruns_only_the_nodes_after_the_frame(demo: Demo) -> None:
    db, run = demo.db, demo.run
    wf, agents = fresh_workflow()
    child = db.replay(run.id, demo.frame("node_state", "research", state="finished"), wf)
    assert child.status == "finished" and child.record.parent_run_id == run.id
    assert _calls(agents) == (0, 2, 1)  # research was done at the frame
    assert child.output == run.output
    assert len(child.attempts("research")) == 2  # inherited, not rerun


def test_replay_reruns_reset_nodes_and_their_dependents(demo: Demo) -> None:
    db, run = demo.db, demo.run
    wf, agents = fresh_workflow()
    child = db.replay(run.id, run.record.clock, wf, reset=["research"])
    assert child.status == "finished"
    assert _calls(agents) == (2, 2, 1)  # everything ran again (flaky research retried)
    assert child.output == run.output


def test_replay_at_the_last_frame_calls_no_agent(demo: Demo) -> None:
    wf, agents = fresh_workflow()
    child = demo.db.replay(demo.run.id, demo.run.record.clock, wf)
    assert child.status == "finished" and child.output == demo.run.output
    assert _calls(agents) == (0, 0, 0)


def test_replay_resumes_an_interrupted_attempt_from_its_checkpoint_at_the_frame(
    demo: Demo,
) -> None:
    db, run = demo.db, demo.run
    n = demo.frame("checkpoint", "research", attempt=2, sequence=0)
    wf, agents = fresh_workflow()
    seen = record_requests(wf, "research")
    child = db.replay(run.id, n, wf)
    assert child.status == "finished"
    assert agents.researcher.calls == 1
    assert seen[0].attempt == 3 and seen[0].resume_checkpoint.payload == run.snapshot(n).payload(
        "research"
    )
    assert child.output == run.output


def test_reset_removes_the_nodes_attempts_and_restarts_numbering_from_one(demo: Demo) -> None:
    db, run = demo.db, demo.run
    assert db.reset(run.id, "research") == ["research"]
    live = live_view(db, run.id)
    assert live["status"] == "interrupted"
    assert not [
        k for part in ("nodes", "attempts", "refs") for k in live[part] if k[0] == "research"
    ]
    assert {k[0] for k in live["attempts"]} == {"write", "review"}  # dependents stay
    reset_frame = run.frames()[-1]
    assert reset_frame.kind == "reset" and reset_frame.data["nodes"] == ["research"]
    assert len(reset_frame.data["removed"]) == 2  # the frames keep what was removed

    wf, agents = fresh_workflow()  # flaky again: new attempt 1 fails after two steps
    seen = record_requests(wf, "research")
    assert db.resume(run.id, wf).status == "finished"
    assert [r.attempt for r in seen] == [1, 2]
    assert seen[0].resume_checkpoint is None  # never the reset attempts' checkpoints
    assert len(seen[1].resume_checkpoint.payload["notes"]) == 2  # the new attempt 1's state
    attempts = run.attempts("research")
    assert [a.key.attempt for a in attempts] == [1, 2]
    assert attempts[1].resumed_from == (run.id, "research", 0, 1, 1)
    assert agents.writer.calls == 0 and agents.reviewer.calls == 0  # dependents were kept


def _graph_workflow(calls: dict[str, int]) -> st.Workflow:
    """a -> b, and c that needs nothing but finishes after both (timing is not a dependency)."""

    def agent(name: str, delay: float = 0.0) -> Any:
        async def generate(request: GenerateRequest) -> Any:
            calls[name] = calls.get(name, 0) + 1
            await asyncio.sleep(delay)
            return {"task": name}

        generate.id = name  # type: ignore[attr-defined]
        return generate

    wf = st.Workflow("graph")
    wf.task("a", agent=agent("a"))
    wf.task("b", agent=agent("b"), needs=["a"])
    wf.task("c", agent=agent("c", delay=0.3))
    return wf


def test_reset_with_dependents_resets_the_tasks_that_need_the_node_from_the_graph(
    db: st.Database,
) -> None:
    calls: dict[str, int] = {}
    run = db.run(_graph_workflow(calls), None)
    frames = run.frames()
    finished = {
        f.node_id: f.frame_no for f in frames if f.kind == "node_state" and f.state == "finished"
    }
    assert finished["c"] > finished["b"] > finished["a"]  # c ended last, yet depends on nothing

    assert sorted(db.reset(run.id, "a", dependents=True)) == ["a", "b"]
    assert {a.key.node_id for a in run.attempts()} == {"c"}
    calls.clear()
    assert db.resume(run.id, _graph_workflow(calls)).status == "finished"
    assert calls == {"a": 1, "b": 1}

    assert db.reset(run.id, "a") == ["a"]
    assert {a.key.node_id for a in run.attempts()} == {"b", "c"}


def test_reset_refuses_unknown_nodes_and_live_runs(demo: Demo, db: st.Database) -> None:
    frames = count(db, "tt_frames")
    with pytest.raises(InvalidArgument, match="no task"):
        db.reset(demo.run.id, "nope")
    _, fence = db.store.create_run("live", graph={"n": []})
    with pytest.raises(st.SmithersError, match="being executed"):
        db.reset(fence.run_id, "n")
    assert count(db, "tt_frames") == frames + 1  # only the new run's frame 0


def test_reset_then_resume_leaves_other_runs_alone(demo: Demo) -> None:
    db = demo.db
    other = db.run(fresh_workflow()[0], TOPIC)
    before = live_view(db, other.id)
    db.reset(demo.run.id, "write", dependents=True)
    assert db.resume(demo.run.id, fresh_workflow()[0]).status == "finished"
    assert live_view(db, other.id) == before
