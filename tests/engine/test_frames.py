"""Frames: every state change of a run is a numbered frame, dense from 0, delivered to
``on_event``; completed nodes keep the attempt number that finished them."""

from __future__ import annotations

import asyncio

import sqlalchemy as sa

import smithers_tt as st
from smithers_tt import GenerateRequest, GenerateResult, Workflow
from smithers_tt.demo import demo_workflow
from smithers_tt.store import Frame

from ._workflows import ScriptedAgent, crash_run, node_map, state


async def _two_checkpoints(request: GenerateRequest) -> GenerateResult:
    await request.on_checkpoint(state({"step": 0}))
    return GenerateResult("done", checkpoint=state({"step": "final"}))


def test_frames_of_a_simple_run_are_dense_and_in_order(db: st.Database) -> None:
    received: list[Frame] = []
    wf = Workflow("simple")
    wf.task("t", agent=ScriptedAgent(_two_checkpoints))

    run = db.run(wf, {"x": 1}, on_event=received.append)

    frames = run.frames()
    assert [f.frame_no for f in frames] == list(range(len(frames)))
    assert [(f.kind, f.node_id, f.attempt, f.sequence, f.state, f.purpose) for f in frames] == [
        ("run_created", None, None, None, "running", None),
        ("node_state", "t", None, None, "running", None),
        ("attempt_started", "t", 1, None, "in_progress", None),
        ("checkpoint", "t", 1, 0, None, "progress"),
        ("checkpoint", "t", 1, 1, None, "turn"),
        ("attempt_finished", "t", 1, None, "finished", None),
        ("node_state", "t", 1, None, "finished", None),
        ("run_finished", None, None, None, "finished", None),
    ]
    assert frames[0].data == {"workflow": "simple", "input": {"x": 1}}
    checkpoint_frames = [f for f in frames if f.kind == "checkpoint"]
    assert [f.content_hash for f in checkpoint_frames] == [
        r.content_hash for r in run.checkpoints()
    ]
    # on_event saw every frame after frame 0, in order, exactly once.
    assert [(f.frame_no, f.kind) for f in received] == [(f.frame_no, f.kind) for f in frames[1:]]
    assert run.record.clock == frames[-1].frame_no


def test_on_event_receives_every_frame_of_a_concurrent_run(db: st.Database) -> None:
    received: list[Frame] = []
    wf, _ = demo_workflow(flaky=True, invalid_first_draft=True)
    wf.task("extra", agent=ScriptedAgent(_two_checkpoints))  # runs alongside research

    run = db.run(wf, {"topic": "wasp"}, on_event=received.append)

    assert run.status == "finished", run.error
    frames = run.frames()
    assert [f.frame_no for f in frames] == list(range(len(frames)))
    assert sorted(f.frame_no for f in received) == list(range(1, len(frames)))
    by_no = {f.frame_no: f for f in frames}
    for f in received:
        assert (f.kind, f.node_id, f.attempt, f.sequence, f.content_hash) == (
            by_no[f.frame_no].kind,
            by_no[f.frame_no].node_id,
            by_no[f.frame_no].attempt,
            by_no[f.frame_no].sequence,
            by_no[f.frame_no].content_hash,
        )


def test_on_event_only_sees_its_own_run(db: st.Database) -> None:
    wf = Workflow("pair")
    wf.task("t", agent=ScriptedAgent(_two_checkpoints))
    seen: dict[str, list[Frame]] = {"a": [], "b": []}

    async def main() -> tuple[st.Run, st.Run]:
        return await asyncio.gather(
            db.arun(wf, "a", on_event=seen["a"].append),
            db.arun(wf, "b", on_event=seen["b"].append),
        )

    run_a, run_b = asyncio.run(main())

    assert {f.run_id for f in seen["a"]} == {run_a.id}
    assert {f.run_id for f in seen["b"]} == {run_b.id}
    assert len(seen["a"]) == len(run_a.frames()) - 1
    assert len(seen["b"]) == len(run_b.frames()) - 1


def test_completed_nodes_keep_their_finishing_attempt_number(db: st.Database) -> None:
    wf, _ = demo_workflow(flaky=True)

    run = db.run(wf, {"topic": "moth"})

    nodes = node_map(db, run.id)
    for node_id in ("research", "write", "review"):
        finishing = [a for a in run.attempts(node_id) if a.state == "finished"]
        assert nodes[(node_id, 0)].last_attempt == finishing[-1].key.attempt
    assert nodes[("research", 0)].last_attempt == 2


def test_completed_nodes_keep_their_finishing_attempt_number_after_resume(
    db: st.Database,
) -> None:
    reached: dict[str, asyncio.Event] = {}
    calls: list[tuple[str, int]] = []

    async def flaky(request: GenerateRequest) -> GenerateResult:
        calls.append((request.node_id, request.attempt))
        await request.on_checkpoint(state({"node": request.node_id, "a": request.attempt}))
        if request.attempt == 1:
            raise ConnectionError("first attempt fails")
        return GenerateResult("a-done", checkpoint=state({"node": "a", "final": True}))

    async def hangs_once(request: GenerateRequest) -> dict:
        calls.append((request.node_id, request.attempt))
        await request.on_checkpoint(state({"node": "b", "a": request.attempt}))
        if request.attempt == 1:
            reached["event"].set()
            await asyncio.sleep(60)  # the process "dies" here
        return {"resumed_from": request.resume_checkpoint.payload}

    def build() -> Workflow:
        wf = Workflow("last-attempt")
        wf.task("a", agent=ScriptedAgent(flaky, id="flaky"), retries=1)
        wf.task("b", agent=ScriptedAgent(hangs_once, id="hangs"), needs=["a"])
        return wf

    run_id = crash_run(db, build(), None, lambda: reached.setdefault("event", asyncio.Event()))
    before = node_map(db, run_id)
    assert (before[("a", 0)].state, before[("a", 0)].last_attempt) == ("finished", 2)
    frames_before = len(db.get_run(run_id).frames())

    run = db.resume(run_id, build())

    assert run.status == "finished", run.error
    assert calls == [("a", 1), ("a", 2), ("b", 1), ("b", 2)]
    assert run.output == {"a": "a-done", "b": {"resumed_from": {"node": "b", "a": 1}}}
    after = node_map(db, run_id)
    assert (after[("a", 0)].state, after[("a", 0)].last_attempt) == ("finished", 2)
    assert (after[("b", 0)].state, after[("b", 0)].last_attempt) == ("finished", 2)
    assert [a.state for a in run.attempts("b")] == ["interrupted", "finished"]
    # The resume rewrote nothing about node a.
    new_frames = run.frames()[frames_before:]
    assert not [f for f in new_frames if f.node_id == "a"]
    assert new_frames[0].kind == "run_claimed"

    again = db.resume(run_id, build())  # a finished run: nothing changes

    assert node_map(db, run_id) == after
    assert len(again.frames()) == len(run.frames())
    assert calls == [("a", 1), ("a", 2), ("b", 1), ("b", 2)]


def test_on_event_receives_every_frame_a_resume_commits(db: st.Database) -> None:
    reached: dict[str, asyncio.Event] = {}

    async def hangs_once(request: GenerateRequest) -> int:
        await request.on_checkpoint(state({"attempt": request.attempt}))
        if request.attempt == 1:
            reached["event"].set()
            await asyncio.sleep(60)
        return request.attempt

    def build() -> Workflow:
        wf = Workflow("resume-events")
        wf.task("t", agent=ScriptedAgent(hangs_once))
        return wf

    run_id = crash_run(db, build(), None, lambda: reached.setdefault("event", asyncio.Event()))
    crashed = len(db.get_run(run_id).frames())
    received: list[Frame] = []

    run = db.resume(run_id, build(), on_event=received.append)

    assert run.status == "finished", run.error
    frames = run.frames()
    assert [f.frame_no for f in frames] == list(range(len(frames)))
    assert [(f.frame_no, f.kind) for f in received] == [
        (f.frame_no, f.kind) for f in frames[crashed:]
    ]
    assert [f.kind for f in received][:2] == ["run_claimed", "attempt_finished"]
    assert received[1].state == "interrupted"


def test_a_task_writes_two_transactions_its_start_then_its_result_with_its_end(
    db: st.Database,
) -> None:
    async def answer(request: GenerateRequest) -> GenerateResult:
        return GenerateResult("done", checkpoint=state({"step": "final"}))

    wf = Workflow("two")
    wf.task("t", agent=ScriptedAgent(answer))
    writes: list[str] = []

    def on_begin(conn: sa.Connection) -> None:
        if conn.get_execution_options().get("smithers_tt_write", True):
            writes.append("write")

    sa.event.listen(db.engine.sa, "begin", on_begin)
    try:
        run = db.run(wf)
    finally:
        sa.event.remove(db.engine.sa, "begin", on_begin)

    assert run.status == "finished", run.error
    # the run's creation, the task's start, the task's result with its end, the run's end
    assert len(writes) == 4
    assert [f.kind for f in run.frames()][1:-1] == [
        "node_state",
        "attempt_started",
        "checkpoint",
        "attempt_finished",
        "node_state",
    ]
