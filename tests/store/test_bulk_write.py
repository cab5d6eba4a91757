"""Writing a whole history at once (``store.write_history``, through
``smithers_tt.testing.large_run``): the run reads exactly like one the engine executed."""

from __future__ import annotations

import pytest

import smithers_tt as st
from smithers_tt.errors import FenceLost, InvalidArgument, RunNotFound
from smithers_tt.store import Frame, write_history
from smithers_tt.testing import large_run
from smithers_tt.timetravel import fold

from ._support import checkpoint, count, refs_of


def test_a_large_run_has_exactly_its_frames_and_ends_finished(db: st.Database) -> None:
    run_id = large_run(db, 500)
    run = db.store.get_run(run_id)
    frames = db.store.frames(run_id, after=-1)
    assert [f.frame_no for f in frames] == list(range(500))
    assert (run.status, run.clock) == ("finished", 499)
    assert frames[-1].kind == "run_finished"
    assert run.output == frames[-1].data["output"]


def test_a_large_run_s_live_tables_are_what_its_frames_fold_to(db: st.Database) -> None:
    run_id = large_run(db, 700)
    folded = fold(run_id, db.store.frames(run_id, after=-1))
    nodes = {
        (n.node_id, n.iteration): (n.state, n.last_attempt) for n in db.store.list_nodes(run_id)
    }
    assert nodes == {k: (n.state, n.last_attempt) for k, n in folded.nodes.items()}
    attempts = {
        (a.key.node_id, a.key.iteration, a.key.attempt): (a.state, a.resumed_from)
        for a in db.store.list_attempts(run_id)
    }
    assert attempts == {k: (a.state, a.resumed_from) for k, a in folded.attempts.items()}
    assert "failed" in {state for state, _ in attempts.values()}  # retries are history too
    refs = {(r.node_id, r.iteration, r.attempt, r.sequence): r for r in refs_of(db, run_id)}
    assert refs == folded.refs
    assert db.snapshot(run_id).refs == folded.refs
    for ref in list(refs.values())[:5]:
        assert db.store.load(ref).codec == "synthetic.state"  # content stored, verified


def test_large_runs_share_content_they_have_in_common(db: st.Database) -> None:
    first = large_run(db, 300)
    stored = count(db, "tt_checkpoint_contents")
    second = large_run(db, 300)  # the same payloads: nothing new to store
    assert count(db, "tt_checkpoint_contents") == stored
    assert {r.content_hash for r in refs_of(db, first)} == {
        r.content_hash for r in refs_of(db, second)
    }


def test_write_history_ends_the_creator_s_ownership(db: st.Database) -> None:
    _, fence = db.store.create_run("wf")
    frames = [Frame(fence.run_id, 1, "run_finished", state="finished", data={"output": {}})]
    write_history(
        db.engine,
        fence.run_id,
        frames,
        [],
        nodes=[],
        attempts=[],
        refs=[],
        status="finished",
        output={},
    )
    with pytest.raises(FenceLost):
        db.store.start_attempt(fence, "node")


def test_write_history_refuses_frames_out_of_order_and_writes_nothing(db: st.Database) -> None:
    _, fence = db.store.create_run("wf")
    frames = [Frame(fence.run_id, n, "node_state", "node", 0, state="running") for n in (1, 3)]
    encoded = checkpoint("never stored").encode()
    with pytest.raises(InvalidArgument, match="densely"):
        write_history(
            db.engine,
            fence.run_id,
            frames,
            [encoded],
            nodes=[],
            attempts=[],
            refs=[],
            status="finished",
            output=None,
        )
    assert count(db, "tt_frames", run_id=fence.run_id) == 1
    assert count(db, "tt_checkpoint_contents") == 0


def test_write_history_refuses_frames_that_do_not_follow_the_clock(db: st.Database) -> None:
    # Dense but starting past the run's clock + 1: the ledger numbers them, so they would
    # leave a gap; nothing is written (not the run's end, not the content).
    _, fence = db.store.create_run("wf")
    frames = [Frame(fence.run_id, n, "node_state", "node", 0, state="running") for n in (5, 6)]
    with pytest.raises(InvalidArgument, match="clock"):
        write_history(
            db.engine,
            fence.run_id,
            frames,
            [checkpoint("never stored").encode()],
            nodes=[],
            attempts=[],
            refs=[],
            status="finished",
            output=None,
        )
    assert count(db, "tt_frames", run_id=fence.run_id) == 1
    assert count(db, "tt_checkpoint_contents") == 0
    assert db.get_run(fence.run_id).status == "running"


def test_write_history_of_a_missing_run_writes_nothing(db: st.Database) -> None:
    frames = [Frame("ghost", 1, "run_finished", state="finished")]
    encoded = checkpoint("never stored").encode()
    with pytest.raises(RunNotFound):
        write_history(
            db.engine,
            "ghost",
            frames,
            [encoded],
            nodes=[],
            attempts=[],
            refs=[],
            status="finished",
            output=None,
        )
    assert count(db, "tt_checkpoint_contents") == 0
