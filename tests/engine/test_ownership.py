"""Ownership: a stale owner cannot publish, cancellation gives agents a grace for a final
checkpoint and then fences them, cancelling the caller's task stops the agents, and parallel
retries never see each other's state."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

import smithers_tt as st
from smithers_tt import FenceLost, GenerateRequest, GenerateResult, Workflow
from smithers_tt.engine import Watching, _executor
from smithers_tt.store import CheckpointRef

from ._workflows import ScriptedAgent, count, crash_during, refs, state


@pytest.mark.parametrize("agent_reaction", ["reraises", "swallows"])
def test_stale_owner_cannot_publish_after_another_process_claims_the_run(
    db: st.Database, db_url: str, agent_reaction: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What stops the stale owner here is the fence of each publish: its watcher (woken by
    # PostgreSQL's notice of the claim, or polling, or heartbeating into the new fence) must
    # not stop the agent first; under load a 0.1 s poll did, between the claim and step 1.
    monkeypatch.setattr(
        _executor, "WATCHING", Watching(listen=False, poll=600, safety_poll=600, heartbeat=600)
    )
    thief = st.connect(db_url)  # "another process": its own Database and connections
    outcomes: list[Any] = []

    async def work(request: GenerateRequest) -> str:
        outcomes.append(await request.on_checkpoint(state({"step": 0})))
        await asyncio.to_thread(thief.store.claim_run, request.run_id, "thief")
        await asyncio.sleep(0.5)
        before = (count(db, "tt_checkpoint_refs"), count(db, "tt_checkpoint_contents"))
        for step in (1, 2):
            try:
                await request.on_checkpoint(state({"step": step, "unique": "never stored"}))
            except FenceLost as error:
                outcomes.append(error)
        after = (count(db, "tt_checkpoint_refs"), count(db, "tt_checkpoint_contents"))
        outcomes.append((before, after))
        if agent_reaction == "reraises":
            raise outcomes[1]
        return "finished anyway"

    agent = ScriptedAgent(work)
    wf = Workflow("stale")
    wf.task("t", agent=agent, retries=3)
    run_id = "stale-owner-run"
    try:
        with pytest.raises(FenceLost):
            db.run(wf, run_id=run_id)
        record = thief.store.get_run(run_id)
    finally:
        thief.close()

    assert agent.calls == 1  # FenceLost never retries
    first, lost1, lost2, (before, after) = outcomes
    assert isinstance(first, CheckpointRef)
    assert isinstance(lost1, FenceLost) and isinstance(lost2, FenceLost)
    assert before == after == (1, 1)  # nothing written, not even content
    assert [r.sequence for r in refs(db, run_id)] == [0]
    # The thief owns the run now; the old owner's attempt ended as interrupted.
    assert (record.status, record.owner_epoch, record.owner_id) == ("running", 2, "thief")
    assert [a.state for a in db.store.list_attempts(run_id)] == ["interrupted"]


@pytest.mark.parametrize("canceller", ["same-database-from-a-thread", "another-database"])
def test_cancel_gives_a_grace_for_a_final_checkpoint_then_fences_the_agent(
    db: st.Database, db_url: str, canceller: str
) -> None:
    started = threading.Event()
    record: dict[str, Any] = {}
    grace = 2.0  # generous: the final publish must land within it even on a loaded machine

    async def long_step(request: GenerateRequest) -> str:
        await request.on_checkpoint(state({"step": 0}))
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            record["final"] = await request.on_checkpoint(state({"step": "final"}))
            record["final_in_db"] = db.store.read_content(record["final"].content_hash)
            # Outlive the grace: wait until the owner has made the run cancelled, then try.
            deadline = time.monotonic() + 30
            while db.store.get_run(request.run_id).status != "cancelled":
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)
            try:
                await request.on_checkpoint(state({"step": "too late"}))
            except FenceLost as error:
                record["late"] = error
            raise
        return "never"

    async def other_task(request: GenerateRequest) -> str:
        await asyncio.sleep(60)
        return "never"

    wf = Workflow("cancel")
    wf.task("t", agent=ScriptedAgent(long_step))
    wf.task("u", agent=other_task)
    run_id = f"cancel-{canceller}"

    def cancel() -> None:
        assert started.wait(20)
        if canceller == "another-database":
            other = st.connect(db_url)
            try:
                other.cancel(run_id)
            finally:
                other.close()
        else:
            db.cancel(run_id)

    thread = threading.Thread(target=cancel)
    thread.start()
    began = time.monotonic()
    try:
        run = db.run(wf, run_id=run_id, cancel_grace=grace)
    finally:
        thread.join()

    assert run.status == "cancelled"
    assert time.monotonic() - began < 20
    final: CheckpointRef = record["final"]
    assert record["final_in_db"] == state({"step": "final"}).encode().data
    assert isinstance(record["late"], FenceLost)
    stored = refs(db, run_id, "t")
    assert [db.store.load(r).payload for r in stored] == [{"step": 0}, {"step": "final"}]
    assert stored[-1] == final
    assert {a.key.node_id: a.state for a in db.store.list_attempts(run_id)} == {
        "t": "cancelled",
        "u": "cancelled",
    }
    kinds = [f.kind for f in run.frames()]
    assert kinds.index("cancel_requested") < kinds.index("run_cancelled")
    assert db.get_run(run_id).status == "cancelled"


def test_cancel_takes_effect_without_calling_agents_when_the_run_crashed(db: st.Database) -> None:
    reached = None
    agent_calls: list[int] = []

    async def slow(request: GenerateRequest) -> str:
        agent_calls.append(request.attempt)
        await request.on_checkpoint(state({"step": 0}))
        reached.set()
        await asyncio.sleep(60)
        return "never"

    wf = Workflow("cancel-crashed")
    wf.task("t", agent=ScriptedAgent(slow))

    async def main() -> str:
        nonlocal reached
        reached = asyncio.Event()
        return await crash_during(db, wf, None, reached)

    run_id = asyncio.run(main())
    db.cancel(run_id)  # its owner is gone: the request waits for whoever resumes it

    run = db.resume(run_id, wf)

    assert run.status == "cancelled"
    assert agent_calls == [1]
    assert [a.state for a in run.attempts("t")] == ["interrupted"]
    assert [r.sequence for r in run.checkpoints("t")] == [0]
    assert db.resume(run_id, wf).status == "cancelled"


def test_arun_stops_its_agents_and_their_writes_when_the_callers_task_is_cancelled(
    db: st.Database,
) -> None:
    log: list[Any] = []

    async def busy(request: GenerateRequest) -> str:
        try:
            for step in range(100):
                await request.on_checkpoint(state({"step": step}))
                log.append(step)
                await asyncio.sleep(0.02)
        except asyncio.CancelledError:
            log.append("cancelled")
            raise
        return "never"

    wf = Workflow("caller-cancel")
    wf.task("t", agent=ScriptedAgent(busy))

    async def main() -> tuple[str, int, int]:
        task = asyncio.create_task(db.arun(wf, run_id="caller-cancel"))
        while len(log) < 3:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        frames = len(db.get_run("caller-cancel").frames())
        await asyncio.sleep(0.3)  # the loop keeps running, like a Jupyter kernel
        return "caller-cancel", frames, len(db.get_run("caller-cancel").frames())

    run_id, frames_then, frames_later = asyncio.run(main())

    assert log[-1] == "cancelled"
    assert frames_then == frames_later
    # Abandoned like a crash: the run can be resumed later, from the last checkpoint.
    assert db.get_run(run_id).status == "running"


def test_parallel_retries_never_cross_contaminate(db: st.Database) -> None:
    published: set[str] = set()
    both = None

    class Stateful:
        """One class, one codec, two instances on two parallel tasks."""

        id = "stateful"
        checkpoint_formats = [st.CheckpointFormat("shared.codec", [1])]
        checkpoint_capabilities = [st.CheckpointCapability("shared.codec", [1], ["resume"])]

        def __init__(self) -> None:
            self.resumed: list[tuple[int, Any]] = []

        async def generate(self, request: GenerateRequest) -> GenerateResult:
            cp = request.resume_checkpoint
            self.resumed.append((request.attempt, cp.payload if cp else None))
            if request.attempt == 1:
                for step in range(3):
                    await request.on_checkpoint(
                        st.AgentCheckpoint(
                            "shared.codec", 1, {"node": request.node_id, "step": step}
                        )
                    )
                    await asyncio.sleep(0)
                published.add(request.node_id)
                if len(published) == 2:
                    both.set()
                await asyncio.wait_for(both.wait(), timeout=10)
                raise ConnectionError(f"{request.node_id} failed after publishing")
            return GenerateResult(cp.payload)

    agents = {"left": Stateful(), "right": Stateful()}
    wf = Workflow("parallel-retries")
    for name, agent in agents.items():
        wf.task(name, agent=agent, retries=1)

    async def main() -> st.Run:
        nonlocal both
        both = asyncio.Event()
        return await db.arun(wf)

    run = asyncio.run(main())

    assert run.status == "finished", run.error
    for name, agent in agents.items():
        assert agent.resumed == [(1, None), (2, {"node": name, "step": 2})]
        assert run.output[name] == {"node": name, "step": 2}
        assert run.attempts(name)[1].resumed_from == (run.id, name, 0, 1, 2)
