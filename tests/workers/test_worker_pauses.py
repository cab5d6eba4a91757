"""Workers and pauses: a worker pauses a run at its breakpoints, never claims it while it is
paused (however long its heartbeat has been silent), and claims it once it is continued."""

from __future__ import annotations

import asyncio

import pytest

import smithers_tt as st
from smithers_tt.demo import demo_workflow
from smithers_tt.engine._astore import AsyncStore
from smithers_tt.store import claim_next

from .test_api import TOPIC, _until


def test_a_worker_never_claims_a_paused_run_until_it_is_continued(db: st.Database) -> None:
    wf, agents = demo_workflow()
    run = db.submit(wf, TOPIC, break_before=["write"])
    worker = db.worker([wf], worker_id="w-1", stale_after=0.5, poll_interval=0.05)

    async def scenario() -> None:
        stop = asyncio.Event()
        working = asyncio.create_task(worker.run(stop))
        await _until(lambda: db.get_run(run.id).status == "paused", what="the pause")
        # Far longer than the takeover timeout: a paused run has no owner to time out.
        await asyncio.sleep(1.5)
        assert db.get_run(run.id).status == "paused" and agents.writer.calls == 0
        signatures = {wf.name: wf.signature()}
        assert claim_next(db.store, "w-2", signatures, stale_after_ms=1) is None
        await asyncio.to_thread(db.continue_run, run.id)
        await _until(lambda: db.get_run(run.id).status == "finished", what="the end")
        stop.set()
        await working

    asyncio.run(scenario())
    done = db.get_run(run.id)
    assert done.output["write"]["title"]
    assert agents.researcher.calls == 1 and agents.writer.calls >= 1
    claims = [f.data["owner_id"] for f in done.frames() if f.kind == "run_claimed"]
    assert claims == ["w-1", "w-1"]  # claimed when queued, then again once continued
    assert worker.completed == 1 and worker.lost == 0


@pytest.mark.parametrize(
    ("write", "submit", "ends_as"),
    [
        ("pause_run", {"break_before": ["write"]}, "paused"),
        ("finish_run", {}, "finished"),
    ],
)
def test_a_heartbeat_right_after_a_run_leaves_its_worker_does_not_count_it_lost(
    db: st.Database, monkeypatch: pytest.MonkeyPatch, write: str, submit: dict, ends_as: str
) -> None:
    """The write that pauses or ends a run takes it from its owner; the worker's heartbeat
    that comes before the execution returns finds the fence gone. That is the execution's own
    doing: the worker must let it return (paused, finished), not cancel it as lost."""
    wf, _ = demo_workflow()
    run = db.submit(wf, TOPIC, **submit)
    worker = db.worker([wf], worker_id="w-1", poll_interval=0.05)
    real = getattr(AsyncStore, write)
    beats: list[int] = []

    async def then_heartbeat(self: AsyncStore, *args: object, **kwargs: object) -> object:
        result = await real(self, *args, **kwargs)
        await worker._heartbeat()  # the worker's loop may beat here: make it do so
        beats.append(len(worker._lost))
        return result

    monkeypatch.setattr(AsyncStore, write, then_heartbeat)

    async def scenario() -> None:
        stop = asyncio.Event()
        working = asyncio.create_task(worker.run(stop))
        await _until(lambda: db.get_run(run.id).status == ends_as, what=f"the run {ends_as}")
        await _until(lambda: not worker._active, what="the execution's end")
        stop.set()
        await working

    asyncio.run(scenario())
    assert beats == [1]  # the heartbeat did find the fence gone
    assert worker.lost == 0
    assert worker.completed == (ends_as == "finished")
    assert db.get_run(run.id).status == ends_as
