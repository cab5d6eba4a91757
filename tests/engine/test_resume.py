"""Resuming runs: finished runs reopen with zero agent calls, interrupted runs continue from
their checkpoints, a changed workflow is refused unless accepted, and ``db.run`` works inside a
running event loop (Jupyter)."""

from __future__ import annotations

import asyncio

import pytest

import smithers_tt as st
from smithers_tt import GenerateRequest, GenerateResult, Workflow, WorkflowChanged
from smithers_tt.demo import demo_workflow

from ._workflows import ScriptedAgent, crash_run, node_map, state


def test_resume_of_a_finished_run_calls_no_agent(db: st.Database, db_url: str) -> None:
    wf, _ = demo_workflow(flaky=True, invalid_first_draft=True)
    run = db.run(wf, {"topic": "owl"})
    assert run.status == "finished", run.error
    frames = len(run.frames())

    # In a "new process": a fresh connection and freshly built agents.
    other = st.connect(db_url)
    try:
        wf2, agents2 = demo_workflow(flaky=True, invalid_first_draft=True)
        again = other.resume(run.id, wf2)
        nodes = node_map(other, run.id)
    finally:
        other.close()

    assert (agents2.researcher.calls, agents2.writer.calls, agents2.reviewer.calls) == (0, 0, 0)
    assert again.status == "finished"
    assert again.output == run.output
    assert len(db.get_run(run.id).frames()) == frames
    assert {n.node_id: n.last_attempt for n in nodes.values()} == {
        "research": 2,
        "write": 1,
        "review": 1,
    }
    # Even a changed workflow is not consulted for a run that already ended.
    changed, agents3 = demo_workflow(steps=2)
    assert db.resume(run.id, changed).output == run.output
    assert agents3.researcher.calls == 0


def test_resume_of_a_failed_run_calls_no_agent(db: st.Database) -> None:
    calls: list[int] = []

    async def fails(request: GenerateRequest) -> str:
        calls.append(request.attempt)
        raise RuntimeError("always")

    wf = Workflow("failing")
    wf.task("t", agent=fails)
    run = db.run(wf)

    assert db.resume(run.id, wf).status == "failed"
    assert calls == [1]


def _interrupted_workflow(reached: dict[str, asyncio.Event], calls: list, prompt: str) -> Workflow:
    async def first(request: GenerateRequest) -> GenerateResult:
        calls.append(("first", request.attempt))
        return GenerateResult("first done", checkpoint=state({"first": True}))

    async def second(request: GenerateRequest) -> str:
        calls.append(("second", request.attempt))
        cp = request.resume_checkpoint
        steps = cp.payload["steps"] if cp else 0
        while steps < 4:
            steps += 1
            await request.on_checkpoint(state({"steps": steps}))
            if steps == 2 and request.attempt == 1:
                reached["event"].set()
                await asyncio.sleep(60)
        return f"second finished at {steps} (attempt {request.attempt})"

    wf = Workflow("interrupted")
    wf.task("first", agent=ScriptedAgent(first, id="first"))
    wf.task("second", agent=ScriptedAgent(second, id="second"), needs=["first"], prompt=prompt)
    return wf


def test_resume_continues_an_interrupted_run_from_its_newest_checkpoint(
    db: st.Database, db_url: str
) -> None:
    reached: dict[str, asyncio.Event] = {}
    calls: list = []
    wf = _interrupted_workflow(reached, calls, "go")
    run_id = crash_run(db, wf, None, lambda: reached.setdefault("event", asyncio.Event()))
    assert db.get_run(run_id).status == "running"

    other = st.connect(db_url)
    try:
        run = other.resume(run_id, _interrupted_workflow(reached, calls, "go"))
        record = other.store.get_run(run_id)
    finally:
        other.close()

    assert run.status == "finished", run.error
    assert calls == [("first", 1), ("second", 1), ("second", 2)]
    assert run.output == {"first": "first done", "second": "second finished at 4 (attempt 2)"}
    attempts = db.store.list_attempts(run_id, "second")
    assert [a.state for a in attempts] == ["interrupted", "finished"]
    assert attempts[1].resumed_from == (run_id, "second", 0, 1, 1)
    assert record.owner_epoch >= 2


def test_resume_refuses_a_changed_workflow_unless_accepted(db: st.Database) -> None:
    reached: dict[str, asyncio.Event] = {}
    calls: list = []
    wf = _interrupted_workflow(reached, calls, "go")
    run_id = crash_run(db, wf, None, lambda: reached.setdefault("event", asyncio.Event()))
    epoch = db.store.get_run(run_id).owner_epoch

    with pytest.raises(WorkflowChanged):
        db.resume(run_id, _interrupted_workflow(reached, calls, "a different prompt"))

    # Refusing changed nothing: not claimed, no agent called.
    assert db.store.get_run(run_id).owner_epoch == epoch
    assert calls == [("first", 1), ("second", 1)]

    run = db.resume(
        run_id, _interrupted_workflow(reached, calls, "a different prompt"), accept_changed=True
    )

    assert run.status == "finished", run.error
    assert calls == [("first", 1), ("second", 1), ("second", 2)]


def test_run_works_inside_a_running_event_loop(db: st.Database) -> None:
    wf, agents = demo_workflow(flaky=True)
    events: list[int] = []

    async def notebook_cell() -> st.Run:
        # Like a Jupyter cell: a loop is already running and the user calls the blocking API.
        asyncio.get_running_loop()
        run = db.run(wf, {"topic": "crow"}, on_event=lambda f: events.append(f.frame_no))
        again = db.resume(run.id, wf)
        assert again.output == run.output
        return run

    run = asyncio.run(notebook_cell())

    assert run.status == "finished", run.error
    assert agents.researcher.calls == 2
    assert sorted(events) == list(range(1, len(run.frames())))
