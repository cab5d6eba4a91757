"""Fork: a child run whose frame 0 is the parent's frame N, sharing content, self-contained."""

from __future__ import annotations

import pytest

from smithers_tt.checkpoint import AgentCheckpoint
from smithers_tt.demo.agents import NOTES
from smithers_tt.errors import CheckpointInvalid, InvalidArgument, RunNotFound
from tests.timetravel._support import (
    capture_live,
    check_joint_frame,
    count,
    dump,
    execute,
    joint_frames,
    live_view,
    record_requests,
    restored_view,
    snapshot_view,
    without_status,
)
from tests.timetravel.conftest import Demo, fresh_workflow


def test_fork_inherits_exactly_the_refs_visible_at_the_frame(demo: Demo) -> None:
    db, run = demo.db, demo.run
    n = demo.frame("checkpoint", "research", attempt=2, sequence=0)  # mid attempt 2
    at_n = run.snapshot(n)
    contents = count(db, "tt_checkpoint_contents")

    child = db.fork(run.id, n)

    assert (child.record.parent_run_id, child.record.parent_frame_no) == (run.id, n)
    assert child.status == "interrupted" and child.input == run.input
    zero = child.snapshot(0)
    assert snapshot_view(zero) == dict(snapshot_view(at_n), status="interrupted")
    assert without_status(live_view(db, child.id)) == restored_view(at_n)
    assert sorted(k for k in zero.refs) == [
        ("research", 0, 1, 0),
        ("research", 0, 1, 1),
        ("research", 0, 2, 0),
    ]  # nothing published after frame n
    assert zero.payload("research") == at_n.payload("research")
    frames = child.frames()
    assert frames[-1].frame_no == 0 and all(f.frame_no < 0 for f in frames[:-1])
    forked = frames[-1]
    assert forked.kind == "forked"
    assert (forked.data["parent_run_id"], forked.data["parent_frame_no"]) == (run.id, n)
    assert count(db, "tt_checkpoint_contents") == contents  # shared, not copied
    assert count(db, "tt_audit", "run_id = :r AND operation = 'fork'", r=run.id) == 1
    tree = db.timeline(child.id).tree
    assert [(e.run_id, e.parent_run_id) for e in tree] == [(run.id, None), (child.id, run.id)]


def test_fork_at_a_frame_before_a_reset_inherits_the_old_attempts_not_their_reused_numbers(
    demo: Demo,
) -> None:
    db, run = demo.db, demo.run
    n = demo.frame("attempt_finished", "research", attempt=1)  # attempt 1 failed: refs 0, 1
    at_n = run.snapshot(n)
    db.reset(run.id, "research", dependents=True)
    fence = db.store.claim_run(run.id)
    key = db.store.start_attempt(fence, "research").key  # attempt number 1 again
    for step in range(4):
        db.store.publish(
            fence, key, AgentCheckpoint(NOTES, 1, {"topic": "x", "notes": [str(step)], "tokens": 0})
        )
    db.store.finish_attempt(fence, key, "finished")
    db.store.finish_run(fence, "failed", error="stop")

    child = db.fork(run.id, n)

    assert without_status(live_view(db, child.id)) == restored_view(at_n)
    (attempt,) = child.attempts("research")
    assert attempt.state == "failed" and attempt.error.startswith("ConnectionError")
    assert [(r.sequence, r.content_hash) for r in child.checkpoints()] == [
        (k[3], ref.content_hash) for k, ref in sorted(at_n.refs.items())
    ]
    wf, _ = fresh_workflow()
    seen = record_requests(wf, "research")
    assert db.resume(child.id, wf).status == "finished"
    assert seen[0].resume_checkpoint.payload == at_n.payload("research")
    assert child.refresh().output == demo.run.output


def test_fork_snapshot_matches_live_state_at_every_frame_when_resumed(demo: Demo) -> None:
    db, run = demo.db, demo.run
    child = db.fork(run.id, demo.frame("checkpoint", "research", attempt=2, sequence=1))
    assert snapshot_view(child.snapshot(0)) == live_view(db, child.id)
    wf, agents = fresh_workflow()
    seen, stop = capture_live(db)
    try:
        assert db.resume(child.id, wf).status == "finished"
    finally:
        stop()
    frames = {f.frame_no: f for f in child.frames()}
    assert sorted(seen) == list(range(1, max(frames) + 1))
    joint = joint_frames(frames)
    assert joint.keys() & set(seen)
    for n, live in seen.items():
        if frames[n].kind == "run_claimed":
            continue  # the claim commits with the frames that end open attempts: see n + 1
        if n in joint:
            check_joint_frame(child.snapshot(n), child.snapshot(n - 1), live, joint[n])
            continue
        assert snapshot_view(child.snapshot(n)) == live, f"frame {n}"
    # The attempt in progress at the fork point ended with the claim, in a frame.
    ended = child.snapshot(2).attempts["research", 0, 2]
    assert (frames[2].kind, ended.state) == ("attempt_finished", "interrupted")
    assert agents.researcher.calls == 1  # it resumed from the fork's checkpoint
    assert child.refresh().output == run.output


def test_fork_at_the_last_frame_of_a_finished_run_keeps_its_ending(demo: Demo) -> None:
    db, run = demo.db, demo.run
    child = db.fork(run.id, run.record.clock)
    assert (child.status, child.output, child.error) == ("finished", run.output, None)
    zero = child.snapshot(0)
    assert (zero.status, zero.output) == ("finished", run.output)
    assert snapshot_view(zero) == snapshot_view(run.snapshot())


def test_fork_resets_named_nodes_and_their_dependents(demo: Demo) -> None:
    db, run = demo.db, demo.run
    child = db.fork(run.id, run.record.clock, reset=["write"])
    live = live_view(db, child.id)
    assert {k[0] for k in live["nodes"]} == {k[0] for k in live["attempts"]} == {"research"}
    assert {k[0] for k in live["refs"]} == {"research"}
    assert child.status == "interrupted" and child.output is None
    assert child.frames()[-1].data["reset"] == ["review", "write"]
    wf, agents = fresh_workflow()
    assert db.resume(child.id, wf).status == "finished"
    assert (agents.researcher.calls, agents.writer.calls, agents.reviewer.calls) == (0, 2, 1)
    assert child.refresh().output == run.output
    assert run.refresh().status == "finished"  # the parent is untouched

    alone = db.fork(run.id, run.record.clock, reset=["write"], dependents=False)
    assert {k[0] for k in live_view(db, alone.id)["nodes"]} == {"research", "review"}


def test_fork_replaces_the_input_when_given(demo: Demo) -> None:
    db, run = demo.db, demo.run
    child = db.fork(run.id, 0, input={"topic": "ant"})
    assert child.input == {"topic": "ant"} and child.snapshot(0).input == {"topic": "ant"}
    assert run.refresh().input == {"topic": "bee"}
    done = db.resume(child.id, fresh_workflow()[0])
    assert done.output["research"]["topic"] == "ant"
    runs = count(db, "tt_runs")
    with pytest.raises(CheckpointInvalid):
        db.fork(run.id, 0, input={"topic": float("nan")})
    assert count(db, "tt_runs") == runs


def test_fork_resumes_from_an_edited_checkpoint(demo: Demo) -> None:
    db, run = demo.db, demo.run
    edited = AgentCheckpoint(NOTES, 1, {"topic": "bee", "notes": ["An edited note."], "tokens": 3})
    contents = count(db, "tt_checkpoint_contents")

    child = db.fork(run.id, run.record.clock, checkpoints={"research": edited})

    assert count(db, "tt_checkpoint_contents") == contents + 1  # only the edit is new
    (attempt,) = child.attempts("research")
    assert (attempt.key.attempt, attempt.state, attempt.error_code) == (1, "finished", "edited")
    assert child.checkpoint("research") == edited
    assert child.snapshot(0).payload("research") == edited.payload
    assert not child.attempts("write") and not child.attempts("review")  # dependents rerun
    wf, agents = fresh_workflow()
    seen = record_requests(wf, "research")
    assert db.resume(child.id, wf).status == "finished"
    assert len(seen) == 1
    assert seen[0].resume_checkpoint.payload == edited.payload
    assert seen[0].checkpoint_mode == "resume"
    assert child.refresh().output["research"]["notes"][0] == "An edited note."
    assert agents.writer.calls >= 1 and agents.reviewer.calls == 1


@pytest.mark.parametrize(
    "edited",
    [
        AgentCheckpoint("other.codec", 1, {"notes": []}),
        AgentCheckpoint(NOTES, 2, {"topic": "bee", "notes": [], "tokens": 0}),
    ],
    ids=["codec", "version"],
)
def test_fork_refuses_an_edited_checkpoint_of_another_format(
    demo: Demo, edited: AgentCheckpoint
) -> None:
    db, run = demo.db, demo.run
    before = dump(db)
    with pytest.raises(InvalidArgument, match="allow_new_format"):
        db.fork(run.id, run.record.clock, checkpoints={"research": edited})
    assert dump(db) == before  # no child run, no content
    child = db.fork(
        run.id, run.record.clock, checkpoints={"research": edited}, allow_new_format=True
    )
    assert child.checkpoint("research") == edited


def test_fork_refuses_unknown_nodes_and_runs(demo: Demo) -> None:
    db, run = demo.db, demo.run
    before = dump(db)
    with pytest.raises(InvalidArgument, match="no task"):
        db.fork(run.id, 3, reset=["nope"])
    with pytest.raises(RunNotFound):
        db.fork("no-such-run", 0)
    assert dump(db) == before


def test_fork_of_a_fork_inherits_the_forks_state(demo: Demo) -> None:
    db, run = demo.db, demo.run
    child = db.fork(run.id, demo.frame("attempt_started", "write"), reset=["write"])
    assert db.resume(child.id, fresh_workflow()[0]).status == "finished"
    m = next(f.frame_no for f in child.frames() if f.kind == "checkpoint" and f.node_id == "write")
    at_m = child.snapshot(m)

    grandchild = db.fork(child.id, m)

    assert snapshot_view(grandchild.snapshot(0)) == dict(snapshot_view(at_m), status="interrupted")
    assert without_status(live_view(db, grandchild.id)) == restored_view(at_m)
    assert grandchild.record.parent_run_id == child.id
    wf, agents = fresh_workflow()
    assert db.resume(grandchild.id, wf).status == "finished"
    assert agents.researcher.calls == 0 and agents.reviewer.calls == 1
    assert grandchild.refresh().output == run.output
    tree = db.timeline(grandchild.id).tree
    assert [e.run_id for e in tree] == [run.id, child.id, grandchild.id]


def test_fork_keeps_its_snapshots_and_content_when_its_parent_is_deleted(demo: Demo) -> None:
    db, run = demo.db, demo.run
    child = db.fork(run.id, demo.frame("node_state", "write", state="finished"))
    views = {n: snapshot_view(child.snapshot(n)) for n in (0,)}
    payloads = {node: child.snapshot(0).payload(node) for node in ("research", "write")}
    db.reset(child.id, "research", dependents=True)  # only the child's frames pin its content

    execute(db, "DELETE FROM tt_runs WHERE run_id = :r", r=run.id)
    db.collect_garbage()

    assert count(db, "tt_frames", "run_id = :r", r=run.id) == 0  # the parent is gone
    assert {n: snapshot_view(child.snapshot(n)) for n in views} == views
    zero = child.snapshot(0)
    assert {node: zero.payload(node) for node in payloads} == payloads
    for ref in zero.refs.values():
        db.store.load(ref)  # verified: stored, hash and size match
    assert db.verify().ok
    assert db.timeline(child.id).root == child.id
    db.rewind(child.id, 0, confirm=True)
    assert without_status(live_view(db, child.id)) == restored_view(zero)
    assert db.resume(child.id, fresh_workflow()[0]).status == "finished"
