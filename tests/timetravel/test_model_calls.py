"""Model calls through time travel: a fork sees its parent's calls up to the fork frame as
it sees its history, a rewind hides the calls of the frames it removes (and its undo brings
them back), and a replay that reuses completed tasks makes no new calls and says what it
saved. The demo's agents record synthetic calls; both backends."""

from __future__ import annotations

from tests.timetravel._support import count
from tests.timetravel.conftest import Demo, fresh_workflow


def _ids(calls: list) -> list[str]:
    return [c.call_id for c in calls]


def _keys(calls: list) -> list[tuple]:
    return [(c.node_id, c.attempt, c.frame_no, c.position, c.status) for c in calls]


def test_the_demo_records_its_calls_with_the_frames_of_their_attempts(demo: Demo) -> None:
    calls = demo.db.store.model_calls(demo.run.id)
    by_node = {n: [c for c in calls if c.node_id == n] for n in ("research", "write", "review")}
    assert all(by_node.values())
    assert [c.status for c in by_node["research"]][:2] == [429, 200]  # the rate limit first
    frames = {f.frame_no: f for f in demo.frames()}
    for c in calls:  # each rode with a checkpoint or an attempt's end of its own attempt
        frame = frames[c.frame_no]
        assert frame.kind in ("checkpoint", "attempt_finished")
        assert (frame.node_id, frame.attempt) == (c.node_id, c.attempt)


def test_calls_at_a_frame_are_those_written_up_to_it(demo: Demo) -> None:
    calls = demo.db.store.model_calls(demo.run.id)
    middle = calls[len(calls) // 2].frame_no
    seen = demo.db.store.model_calls(demo.run.id, middle)
    assert _ids(seen) == [c.call_id for c in calls if c.frame_no <= middle]
    assert len(demo.run.model_calls(frame_no=middle)) == len(seen)


def test_a_fork_sees_its_parents_calls_up_to_the_fork_frame_without_copying_them(
    demo: Demo,
) -> None:
    db, run = demo.db, demo.run
    calls = db.store.model_calls(run.id)
    n = demo.frame("node_state", "research", state="finished")
    rows = count(db, "tt_model_calls")
    child = db.fork(run.id, n)
    grandchild = db.fork(child.id, 0)
    assert count(db, "tt_model_calls") == rows  # nothing copied
    inherited = [c for c in calls if c.frame_no <= n]
    for fork in (child, grandchild):
        seen = db.store.model_calls(fork.id)
        assert _ids(seen) == _ids(inherited) and all(c.inherited for c in seen)
        assert {c.run_id for c in seen} == {run.id}
    assert db.store.model_calls(child.id, inherited=False) == []


def _rewound(demo: Demo) -> tuple[list, int]:
    """Rewind the demo run to the end of its research; return its calls before and the frame."""
    before = demo.db.store.model_calls(demo.run.id)
    n = demo.frame("node_state", "research", state="finished")
    demo.db.rewind(demo.run.id, n, confirm=True)
    return before, n


def test_a_rewind_hides_the_calls_of_the_frames_it_removes_and_undo_brings_them_back(
    demo: Demo,
) -> None:
    db, run = demo.db, demo.run
    before, n = _rewound(demo)
    assert _ids(db.store.model_calls(run.id)) == [c.call_id for c in before if c.frame_no <= n]
    db.undo_rewind(run.id)
    assert db.store.model_calls(run.id) == before


def test_a_run_resumed_after_a_rewind_records_the_calls_of_its_new_frames_once(
    demo: Demo,
) -> None:
    db, run = demo.db, demo.run
    before, n = _rewound(demo)
    wf, _ = fresh_workflow()
    again = db.resume(run.id, wf)
    assert again.status == "finished"
    after = db.store.model_calls(run.id)
    kept = [c for c in before if c.frame_no <= n]
    assert after[: len(kept)] == kept
    redone = after[len(kept) :]
    # the rerun nodes made as many calls as the first time, in frames after the rewind point
    assert _keys(redone) != [] and all(c.frame_no > n for c in redone)
    assert [c.node_id for c in redone] == [c.node_id for c in before if c.frame_no > n]
    assert len(set(_ids(after))) == len(after)


def test_a_replay_that_reuses_completed_tasks_makes_no_calls_for_them_and_says_so(
    demo: Demo,
) -> None:
    db, run = demo.db, demo.run
    parent = db.store.model_calls(run.id)
    n = demo.frame("node_state", "research", state="finished")
    wf, agents = fresh_workflow()
    child = db.replay(run.id, n, wf)
    assert child.status == "finished" and agents.researcher.calls == 0
    own = db.store.model_calls(child.id, inherited=False)
    assert {c.node_id for c in own} == {"write", "review"}
    reused = child.reused_model_calls()
    research = [c for c in parent if c.node_id == "research"]
    assert _ids(reused) == _ids(research)
    assert sum(c.total_tokens or 0 for c in reused) > 0


def test_a_replay_at_the_last_frame_reuses_every_call(demo: Demo) -> None:
    wf, _ = fresh_workflow()
    child = demo.db.replay(demo.run.id, demo.run.record.clock, wf)
    assert demo.db.store.model_calls(child.id, inherited=False) == []
    assert _ids(child.reused_model_calls()) == _ids(demo.db.store.model_calls(demo.run.id))


def test_garbage_collection_keeps_the_requests_and_replies_calls_name(demo: Demo) -> None:
    db = demo.db
    db.collect_garbage()
    for c in db.store.model_calls(demo.run.id):
        for digest in (c.request_hash, c.reply_hash):
            if digest is not None:
                assert db.store.read_content(digest)
