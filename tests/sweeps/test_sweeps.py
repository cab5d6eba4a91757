"""What-if sweeps on both backends: every branch starts from the parent's state at the frame
plus its own edits, the parent is unchanged, a failing branch stops nothing else, cancelling
stops the sweep, running it again runs nothing twice, and it reopens from the store."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import smithers_tt as st
from smithers_tt.errors import InvalidArgument, SweepNotFound
from smithers_tt.store import register_worker
from tests.sweeps._flows import CODEC, sweep_workflow

TOPIC = {"topic": "ants"}


def _second_checkpoint(run: st.Run) -> int:
    """The frame where ``plan`` published its second checkpoint (n == 2)."""
    return [f.frame_no for f in run.frames() if f.kind == "checkpoint"][1]


@pytest.fixture
def parent(db: st.Database) -> st.Run:
    wf, _ = sweep_workflow()
    run = db.run(wf, TOPIC)
    assert run.status == "finished"
    return run


def _state(db: st.Database, run_id: str, frame_no: int | None) -> dict[str, Any]:
    """What a frame makes visible, without the run's own id: nodes, and refs by content."""
    snap = db.snapshot(run_id, frame_no)
    return {
        "input": snap.input,
        "nodes": {k: (n.state, n.output) for k, n in snap.nodes.items()},
        "refs": {k: (r.content_hash, r.codec, r.version) for k, r in snap.refs.items()},
    }


VARIANTS = {
    "as-is": {},
    "bees": {"input": {"topic": "bees"}},
    "edited": {
        "checkpoints": {"plan": st.AgentCheckpoint(CODEC, 1, {"n": 2, "steps": ["x", "y"]})}
    },
    "replan": {"reset": ["plan"]},
}


def test_sweep_branches_start_from_the_parents_frame_plus_their_own_edits(
    db: st.Database, parent: st.Run
) -> None:
    frame = _second_checkpoint(parent)
    before = (_state(db, parent.id, None), parent.frames(), parent.refresh().record)
    at_frame = _state(db, parent.id, frame)
    wf, calls = sweep_workflow()

    sweep = db.sweep(parent.id, frame, VARIANTS, workflow=wf)

    branches = sweep.branches()
    assert {n: r.status for n, r in branches.items()} == dict.fromkeys(VARIANTS, "finished")
    for name, run in branches.items():
        assert run.labels["sweep"] == sweep.id and run.labels["variant"] == name
        assert (run.record.parent_run_id, run.record.parent_frame_no) == (parent.id, frame)
    start = {name: _state(db, run.id, 0) for name, run in branches.items()}
    assert start["as-is"] == at_frame
    assert start["bees"] == {**at_frame, "input": {"topic": "bees"}}
    # An edited checkpoint starts its node afresh, resuming from the edit (its only ref).
    assert start["edited"]["nodes"] == {} and len(start["edited"]["refs"]) == 1
    assert db.snapshot(branches["edited"].id, 0).payload("plan") == {"n": 2, "steps": ["x", "y"]}
    assert start["replan"]["refs"] == {} and start["replan"]["nodes"] == {}
    # What each branch came to: resumed from n == 2 (its parent's, or the edited one), or anew.
    plans = {name: run.output["plan"]["steps"] for name, run in branches.items()}
    assert plans == {
        "as-is": ["step 1", "step 2", "step 3"],
        "bees": ["step 1", "step 2", "step 3"],
        "edited": ["x", "y", "step 3"],
        "replan": ["step 1", "step 2", "step 3"],
    }
    assert branches["bees"].output["act"]["answer"] == "bees after 3 steps"
    assert [len([c for c in calls.of(r.id) if c == "plan"]) for r in branches.values()] == [
        1, 1, 1, 1,
    ]  # fmt: skip
    # The parent is as it was: state, frames and record.
    assert (_state(db, parent.id, None), parent.frames(), parent.refresh().record) == before


def test_a_failing_branch_stops_none_of_the_others(db: st.Database, parent: st.Run) -> None:
    wf, _ = sweep_workflow()
    variants = {"fails": {"input": {"topic": "ants", "fail": True}}, "a": {}, "b": {}}
    sweep = db.sweep(parent.id, _second_checkpoint(parent), variants, workflow=wf, concurrency=1)
    assert sweep.status() == {"fails": "failed", "a": "finished", "b": "finished"}
    assert "asked to fail" in (sweep.branches()["fails"].error or "")


def test_running_a_sweep_again_runs_no_branch_twice_and_makes_no_fork_twice(
    db: st.Database, parent: st.Run
) -> None:
    wf, calls = sweep_workflow()
    sweep = db.sweep(parent.id, _second_checkpoint(parent), {"a": {}, "b": {}}, workflow=wf)
    made = {n: r.id for n, r in sweep.branches().items()}
    called = len(calls.lines)

    again = db.get_sweep(sweep.id).run(wf)
    same = db.sweep(parent.id, _second_checkpoint(parent), {"a": {}, "b": {}}, workflow=wf,
                    sweep_id=sweep.id)  # fmt: skip

    assert len(calls.lines) == called
    assert {n: r.id for n, r in again.branches().items()} == made
    assert {n: r.id for n, r in same.branches().items()} == made
    assert len(db.runs(labels={"sweep": sweep.id})) == 2


def test_a_sweep_reopened_from_the_store_has_its_variants_and_scores(
    db: st.Database, parent: st.Run
) -> None:
    wf, _ = sweep_workflow()
    frame = _second_checkpoint(parent)
    sweep = db.sweep(
        parent.id, frame, VARIANTS, workflow=wf, score=lambda run: len(run.output["act"]["answer"])
    )
    other = st.connect(db.url)
    try:
        reopened = other.get_sweep(sweep.id)
        assert (reopened.run_id, reopened.frame_no) == (parent.id, frame)
        assert list(reopened.variants) == list(VARIANTS)
        assert reopened.variants["edited"]["checkpoints"]["plan"]["payload"]["steps"] == ["x", "y"]
        assert reopened.scores == {"as-is": 18, "bees": 18, "edited": 18, "replan": 18}
        assert [s.id for s in other.sweeps(parent.id)] == [sweep.id]
    finally:
        other.close()
    with pytest.raises(SweepNotFound):
        db.get_sweep("no-such-sweep")


def test_cancelling_a_sweep_starts_no_branch_and_cancels_those_not_ended(
    db: st.Database, parent: st.Run
) -> None:
    wf, calls = sweep_workflow(delay=0.01)
    frame = _second_checkpoint(parent)
    sweep = db.sweep(parent.id, frame, {"a": {}, "b": {}, "c": {}}, workflow=wf, concurrency=1,
                     score=lambda run: _cancel_once(db, run))  # fmt: skip
    statuses = sweep.status()
    assert statuses["a"] == "finished" and sweep.cancelled
    assert set(statuses.values()) == {"finished", "cancelled"}
    assert {n for n, s in statuses.items() if s == "cancelled"} == {"b", "c"}
    assert not [r for r in calls.lines if r[0] in {sweep.branches()[n].id for n in "bc"}]


def _cancel_once(db: st.Database, run: st.Run) -> float:
    """A score that cancels the sweep of the first branch it scores."""
    sweep = db.get_sweep(run.labels["sweep"])
    if not sweep.cancelled:
        sweep.cancel()
    return 1.0


@pytest.mark.parametrize(
    ("variants", "message"),
    [
        ({}, "non-empty"),
        ({"a": {"model": "x"}}, "not known"),
        ({3: {}}, "str value"),
        ({"a": {"input": {"t": float("nan")}}}, "non-finite"),
        ({"a": {"checkpoints": {"plan": 3}}}, "envelope"),
    ],
)
def test_a_refused_variant_forks_nothing(
    db: st.Database, parent: st.Run, variants: dict, message: str
) -> None:
    wf, _ = sweep_workflow()
    with pytest.raises((InvalidArgument, st.CheckpointInvalid), match=message):
        db.sweep(parent.id, 2, variants, workflow=wf)
    assert [r.id for r in db.runs()] == [parent.id]
    assert db.sweeps() == []


def test_a_sweep_of_a_frame_the_run_lacks_records_nothing(db: st.Database, parent: st.Run) -> None:
    wf, _ = sweep_workflow()
    with pytest.raises(st.SmithersError, match="frame"):
        db.sweep(parent.id, 10_000, {"a": {}}, workflow=wf)
    assert db.sweeps() == []


def test_a_branch_with_a_breakpoint_pauses_and_is_not_continued_by_a_rerun(
    db: st.Database, parent: st.Run
) -> None:
    wf, calls = sweep_workflow()
    variants = {"stop": {"break_before": ["act"]}, "go": {}}
    sweep = db.sweep(parent.id, _second_checkpoint(parent), variants, workflow=wf)
    assert sweep.status() == {"stop": "paused", "go": "finished"}
    called = len(calls.lines)
    assert sweep.run(wf).status() == {"stop": "paused", "go": "finished"}
    assert len(calls.lines) == called


def test_a_sweep_inside_a_running_event_loop(db: st.Database, parent: st.Run) -> None:
    wf, _ = sweep_workflow()

    async def main() -> dict[str, str]:
        sweep = db.get_sweep(
            db.sweep(parent.id, 3, {"a": {}}, workflow=wf).id
        )  # the sync call works inside a loop (a helper thread)
        return (await sweep.arun(wf)).status()

    assert asyncio.run(main()) == {"a": "finished"}


def test_a_sweep_queued_for_workers_runs_each_branch_once_across_two_workers(
    db: st.Database, parent: st.Run
) -> None:
    wf, calls = sweep_workflow()
    variants = {f"v{i}": {"input": {"topic": f"t{i}"}} for i in range(4)}
    frame = _second_checkpoint(parent)
    sweep = db.sweep(parent.id, frame, variants, workflow=wf, workers=True, wait=False)
    assert set(sweep.status().values()) == {"queued"}

    async def two_workers() -> list[int]:
        workers = [db.worker([wf], worker_id=f"w{i}", poll_interval=0.05) for i in (1, 2)]
        return await asyncio.gather(*(w.run(idle_exit=0.5) for w in workers))

    assert sum(asyncio.run(two_workers())) == len(variants)
    done = sweep.run(wf, workers=True, score=lambda run: run.output["act"]["steps"])
    assert done.status() == dict.fromkeys(variants, "finished")
    assert done.scores == dict.fromkeys(variants, 3)
    acts = [run for run, node, _ in calls.lines if node == "act"]
    assert sorted(acts) == sorted(r.id for r in done.branches().values())  # once each


def test_progress_counts_each_branch_once_as_it_ends(db: st.Database, parent: st.Run) -> None:
    wf, _ = sweep_workflow()
    seen: list[int] = []
    frame = _second_checkpoint(parent)
    sweep = db.sweep(
        parent.id, frame, {"a": {}, "b": {}, "c": {}}, workflow=wf, progress=seen.append
    )
    assert seen == [1, 1, 1]
    again: list[int] = []
    sweep.run(wf, progress=again.append)  # all ended already: counted at once, none run
    assert again == [3]


def test_a_sweep_under_another_workflow_definition_is_refused_unless_accepted(
    db: st.Database, parent: st.Run
) -> None:
    wf, _ = sweep_workflow()
    wf.tasks["act"].retry = st.Retry(count=3)  # another definition of the same workflow
    with pytest.raises(st.WorkflowChanged, match="accept_changed"):
        db.sweep(parent.id, 4, {"a": {}}, workflow=wf)
    assert db.sweeps() == [] and [r.id for r in db.runs()] == [parent.id]
    accepted = db.sweep(parent.id, 4, {"a": {}}, workflow=wf, accept_changed=True)
    assert accepted.status() == {"a": "finished"}


def test_by_default_a_sweep_goes_to_workers_on_postgresql_when_one_serves_the_workflow(
    db: st.Database, parent: st.Run
) -> None:
    wf, _ = sweep_workflow()
    register_worker(db.store, "w-live", "host", 1, [wf.name])
    sweep = db.sweep(parent.id, _second_checkpoint(parent), {"a": {}}, workflow=wf, wait=False)
    on_workers = db.engine.dialect == "postgresql"
    assert sweep.status() == {"a": "queued" if on_workers else "finished"}
