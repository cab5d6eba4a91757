"""Breakpoints changed while a run is live (frame ``breakpoints_set``): a running run pauses
at a breakpoint another connection set while its first node ran (its watcher reads them at
every poll, or at once when PostgreSQL notifies it); a queued or paused run
uses the newest ones when it goes on; an ended run refuses them. A fork starts with the
breakpoints its parent had at the fork point."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import smithers_tt as st
from smithers_tt.engine._executor import WATCHING
from smithers_tt.errors import InvalidArgument

PICKED_UP = 3 * WATCHING.poll
"""Longer than the executor's watcher takes to read breakpoints set meanwhile."""


class Setter:
    """Its call sets the run's breakpoints through another connection (another process would
    do the same), then returns."""

    id = "setter"

    def __init__(self, url: str, **marks: Any) -> None:
        self.url, self.marks = url, marks

    async def generate(self, request: st.GenerateRequest) -> Any:
        def other_process() -> None:
            with st.connect(self.url) as other:
                other.set_breakpoints(request.run_id, **self.marks)

        await asyncio.to_thread(other_process)
        await asyncio.sleep(PICKED_UP)  # as a person's click would: not at a node's end
        return {"set": True}


async def _plain(request: st.GenerateRequest) -> Any:
    return {"needs": sorted(request.needs)}


def _flow(first: Any = _plain) -> st.Workflow:
    wf = st.Workflow("live-breakpoints")
    wf.task("plan", agent=first)
    wf.task("write", agent=_plain, needs=["plan"])
    wf.task("check", agent=_plain, needs=["write"])
    return wf


def _states(run: st.Run) -> dict[str, str]:
    return {n.node_id: n.state for n in run.nodes()}


def _paused_at(run: st.Run) -> list[tuple[str, str | None]]:
    return [(f.data["when"], f.node_id) for f in run.frames() if f.kind == "run_paused"]


def test_a_running_run_pauses_at_a_breakpoint_set_while_it_ran(db: st.Database) -> None:
    wf = _flow(Setter(db.url, break_before=["check"]))
    run = db.run(wf)
    assert run.status == "paused"
    assert (run.pause.reason, run.pause.when, run.pause.node_id) == (
        "breakpoint",
        "before",
        "check",
    )
    assert _states(run)["write"] == "finished"  # the nodes before it ran
    kinds = [f.kind for f in run.frames()]
    assert kinds.index("breakpoints_set") < kinds.index("run_paused")
    finished = db.resume(run.id, wf)
    assert finished.status == "finished" and _paused_at(finished) == [("before", "check")]


def test_a_breakpoint_after_a_node_set_while_the_run_ran_pauses_after_it(db: st.Database) -> None:
    wf = _flow(Setter(db.url, break_after=["write"]))
    run = db.run(wf)
    assert run.status == "paused" and _paused_at(run) == [("after", "write")]
    assert _states(run).get("check") != "finished"


def test_breakpoints_set_on_a_paused_run_are_the_ones_it_goes_on_with(db: st.Database) -> None:
    wf = _flow()
    run = db.run(wf, break_before=["write"])
    assert _paused_at(run) == [("before", "write")]
    db.set_breakpoints(run.id, wf, break_after=["write"])  # and no longer before check
    run = db.resume(run.id, wf)
    assert run.status == "paused" and _paused_at(run)[-1] == ("after", "write")
    assert db.resume(run.id, wf).status == "finished"


def test_breakpoints_set_on_a_queued_run_pause_the_worker_that_executes_it(
    db: st.Database,
) -> None:
    wf = _flow()
    run = db.submit(wf)
    db.set_breakpoints(run.id, break_before=["check"])  # checked against the run's graph
    run = db.resume(run.id, wf)  # what a worker's claim executes
    assert run.status == "paused" and _paused_at(run) == [("before", "check")]


def test_set_breakpoints_refuses_an_ended_run_and_an_unknown_node(db: st.Database) -> None:
    wf = _flow()
    run = db.run(wf)
    assert run.status == "finished"
    clock = run.record.clock
    with pytest.raises(InvalidArgument, match="finished: breakpoints set now would never"):
        db.set_breakpoints(run.id, break_before=["check"])
    paused = db.run(wf, break_before=["write"])
    with pytest.raises(InvalidArgument, match="'nope' is not a task"):
        db.set_breakpoints(paused.id, break_before=["nope"])
    with pytest.raises(InvalidArgument, match="not a task of workflow"):
        db.set_breakpoints(paused.id, wf, break_after=["nope"])
    assert db.get_run(run.id).record.clock == clock  # nothing was written
    assert "breakpoints_set" not in [f.kind for f in db.get_run(paused.id).frames()]


def test_a_fork_pauses_at_the_breakpoints_its_parent_had_at_the_fork_point(
    db: st.Database,
) -> None:
    wf = _flow()
    parent = db.run(wf, break_before=["check"])
    parent = db.resume(parent.id, wf)
    assert parent.status == "finished"
    plan_done = next(
        f.frame_no
        for f in parent.frames()
        if f.kind == "node_state" and f.node_id == "plan" and f.state == "finished"
    )
    child = db.replay(parent.id, plan_done, wf)
    assert child.status == "paused"
    assert (child.pause.reason, child.pause.node_id) == ("breakpoint", "check")
    # breakpoints set on the parent after the fork point are not the child's
    db2 = db.run(wf, break_before=["write"])
    db.set_breakpoints(db2.id, break_before=["check"])
    early = db.fork(db2.id, 0)
    inherited = [f for f in db.store.pause_frames(early.id) if f.frame_no < 0]
    assert [f.data["breakpoints"] for f in inherited] == [{"before": ["write"], "after": []}]
