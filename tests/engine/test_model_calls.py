"""Agents record model calls with ``request.record_model_call``: each is stored with the
attempt's next write (a checkpoint's publish, or the attempt's end), so recording costs no
commit of its own; both backends."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

import smithers_tt as st
from smithers_tt.checkpoint import AgentCheckpoint, CheckpointCapability, CheckpointFormat
from smithers_tt.engine import GenerateRequest, GenerateResult
from smithers_tt.errors import InvalidArgument
from smithers_tt.store import Frame


class Stepper:
    """Three steps, each a checkpoint; with ``calls``, each step records that many calls
    before its checkpoint and the answer one more (kept for the attempt's end). ``end``:
    ``"answer"``, ``"raise"`` (the agent fails after its last call), ``"ask"`` (it asks a
    person: the run pauses) or ``"hang"`` (it waits until it is cancelled, sets
    :attr:`reached` first, and records one more call in its cancellation's grace)."""

    id = "stepper"
    checkpoint_formats = [CheckpointFormat("steps", (1,))]
    checkpoint_capabilities = [CheckpointCapability("steps", (1,), ("resume",))]

    def __init__(self, calls: int, end: str = "answer") -> None:
        self.calls, self.end = calls, end
        self.reached = threading.Event()

    async def generate(self, request: GenerateRequest) -> GenerateResult:
        for step in range(3):
            for n in range(self.calls):
                request.record_model_call(
                    model="m", request=[{"role": "user", "content": f"{step}.{n}"}],
                    prompt_tokens=10 + step, completion_tokens=n, latency_ms=1.5,
                )  # fmt: skip
            await request.on_checkpoint(AgentCheckpoint("steps", 1, {"step": step}))
        if self.calls:
            request.record_model_call(model="m", completion_tokens=7, status=200)
        if self.end == "raise":
            raise RuntimeError("the agent broke after its calls")
        if self.end == "ask":
            return GenerateResult(await request.ask({"question": "go on?"}))
        if self.end == "hang":
            self.reached.set()
            try:
                await asyncio.sleep(120)
            except asyncio.CancelledError:
                if self.calls:
                    request.record_model_call(model="m", completion_tokens=8, error="cancelled")
                raise
        return GenerateResult("done", checkpoint=AgentCheckpoint("steps", 1, {"step": 3}))


def _writes(
    db: st.Database, calls: int, monkeypatch: pytest.MonkeyPatch, end: str = "answer"
) -> tuple[int, st.Run]:
    """Write transactions (commits that write: reads commit too, as many as a watcher
    happens to make) of a run of :class:`Stepper` recording ``calls`` calls a step."""
    writes = [0]
    transaction = db.engine.transaction

    def counted(work: Any, *, write: bool = True, **options: Any) -> Any:
        writes[0] += write
        return transaction(work, write=write, **options)

    wf = st.Workflow("stepper")
    wf.task("work", agent=Stepper(calls, end))
    with monkeypatch.context() as patch:
        patch.setattr(db.engine, "transaction", counted)
        run = db.run(wf)
    return writes[0], run


def test_recording_model_calls_adds_no_commit(
    db: st.Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    without, _ = _writes(db, 0, monkeypatch)
    with_calls, run = _writes(db, 2, monkeypatch)
    # the run made and ended, the attempt started, 3 publishes, the attempt ended
    assert with_calls == without == 7
    calls = db.store.model_calls(run.id)
    assert len(calls) == 3 * 2 + 1
    publishes = [f.frame_no for f in run.frames() if f.kind == "checkpoint"]
    assert [c.frame_no for c in calls[:6]] == [p for p in publishes[:3] for _ in range(2)]
    end = next(f.frame_no for f in run.frames() if f.kind == "checkpoint" and f.sequence == 3)
    assert calls[-1].frame_no == end  # kept with the result checkpoint, at the attempt's end
    assert [c.completion_tokens for c in calls] == [0, 1, 0, 1, 0, 1, 7]


def _ended(run: st.Run) -> Frame:
    """The frame that ended the run's (one) attempt."""
    (frame,) = [f for f in run.frames() if f.kind == "attempt_finished"]
    return frame


def test_the_calls_of_an_attempt_that_fails_are_stored_with_its_end_at_no_extra_commit(
    db: st.Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    without, _ = _writes(db, 0, monkeypatch, end="raise")
    with_calls, run = _writes(db, 2, monkeypatch, end="raise")
    assert run.status == "failed"
    assert with_calls == without
    calls = db.store.model_calls(run.id)
    assert [c.completion_tokens for c in calls] == [0, 1, 0, 1, 0, 1, 7]
    end = _ended(run)
    assert end.state == "failed" and calls[-1].frame_no == end.frame_no
    assert {c.attempt for c in calls} == {1}


def test_the_calls_of_a_cancelled_attempt_are_stored_with_the_cancel_that_ends_it(
    db: st.Database,
) -> None:
    agent = Stepper(2, end="hang")
    wf = st.Workflow("stepper")
    wf.task("work", agent=agent)

    def cancel() -> None:
        assert agent.reached.wait(60)
        db.cancel("hangs")

    thread = threading.Thread(target=cancel)
    thread.start()
    try:
        run = db.run(wf, run_id="hangs", cancel_grace=5)
    finally:
        thread.join()
    assert run.status == "cancelled"
    calls = db.store.model_calls(run.id)
    # the one made before it waited and the one made in its grace: with the cancel's end
    assert [c.completion_tokens for c in calls] == [0, 1, 0, 1, 0, 1, 7, 8]
    end = _ended(run)
    assert end.state == "cancelled"
    assert [c.frame_no for c in calls[-2:]] == [end.frame_no] * 2
    assert calls[-1].error == "cancelled"
    # the frame shows them, as every frame shows the calls it has seen
    assert len(db.store.model_calls(run.id, frame_no=end.frame_no - 1)) == 6


def test_the_calls_of_an_attempt_that_asks_a_person_are_stored_with_the_pause(
    db: st.Database,
) -> None:
    wf = st.Workflow("stepper")
    wf.task("work", agent=Stepper(2, end="ask"))
    run = db.run(wf)
    assert run.status == "paused"
    calls = db.store.model_calls(run.id)
    assert [c.completion_tokens for c in calls] == [0, 1, 0, 1, 0, 1, 7]
    end = _ended(run)
    assert end.state == "interrupted" and calls[-1].frame_no == end.frame_no


def test_a_call_recorded_outside_a_run_is_checked_and_stored_nowhere() -> None:
    async def publish(cp: Any) -> Any:
        raise AssertionError("not called")

    request = GenerateRequest("r", "n", 0, 1, None, None, {}, publish)
    call = request.record_model_call(model="m", prompt_tokens=3)
    assert call == st.ModelCall("m", prompt_tokens=3, started_at_ms=call.started_at_ms)
    with pytest.raises(InvalidArgument, match="prompt_tokens"):
        request.record_model_call(model="m", prompt_tokens=-1)
    with pytest.raises(InvalidArgument, match="latency_ms"):
        request.record_model_call(latency_ms=float("nan"))
    with pytest.raises(InvalidArgument, match="not both"):
        request.record_model_call(call, model="m")


def test_a_request_that_is_not_strict_json_is_refused_where_it_is_recorded(
    db: st.Database,
) -> None:
    async def agent(request: GenerateRequest) -> str:
        request.record_model_call(model="m", request=[{"content": float("inf")}])
        return "done"

    wf = st.Workflow("bad-call")
    wf.task("work", agent=agent)
    run = db.run(wf)
    assert run.status == "failed"
    assert "model call request is not strict JSON" in (run.error or "")
    assert "$[0].content" in (run.error or "")
    assert db.store.model_calls(run.id) == []
