"""What the debugger's diff compares, as a person picks it: the previous frame or a frame
picked by hand, another run of the fork tree picked by hand or by default (the parent at the
fork frame, else a child at its newest frame), and two attempts of a node.

Every diff is checked against :func:`smithers_tt.timetravel.diff` of the store's own
snapshots (the model trims and caches them; the result must be the same)."""

from __future__ import annotations

import pytest

import smithers_tt as st
from smithers_tt import AgentCheckpoint
from smithers_tt import timetravel as tt
from smithers_tt.demo import demo_workflow
from smithers_tt.demo.agents import NOTES
from smithers_tt.errors import InvalidArgument
from smithers_tt.timetravel import Change
from smithers_tt.widgets import DebuggerModel
from smithers_tt.widgets._model import DiffResult


def _expected(db: st.Database, a: tt.Snapshot, b: tt.Snapshot) -> list[tuple[str, list[Change]]]:
    """The sections a person reads, from the full snapshots' diff."""
    d = tt.diff(a, b, load=db.store.load)
    out = [("run status", [Change("change", "$", *d.status)])] if d.status else []
    out += [("nodes", d.nodes), ("attempts", d.attempts), ("outputs", d.outputs)]
    return out + [(f"checkpoint {label}", changes) for label, changes in d.checkpoints.items()]


def _assert_diff(
    db: st.Database, result: DiffResult, a: tuple[str, int], b: tuple[str, int]
) -> None:
    assert (result.a, result.b) == (f"run {a[0]} frame {a[1]}", f"run {b[0]} frame {b[1]}")
    expected = _expected(db, db.snapshot(*a), db.snapshot(*b))
    assert result.sections == expected
    assert result.empty is not any(changes for _, changes in expected)


def _family(db: st.Database) -> tuple[str, str, str, int, int]:
    """A run with two forks: one with an edited checkpoint, one with a node reset."""
    wf, _ = demo_workflow(flaky=True)
    parent = db.run(wf, {"topic": "bee"}).id
    frames = db.store.frames(parent)
    done = max(f.frame_no for f in frames if f.kind == "node_state" and f.state == "finished"
               and f.node_id == "research")  # fmt: skip
    notes = dict(db.snapshot(parent, done).payload("research"))
    notes["notes"] = ["edited by a person", *notes["notes"][1:]]
    edited = db.fork(parent, done, checkpoints={"research": AgentCheckpoint(NOTES, 1, notes)})
    later = done + 3
    reset = db.fork(parent, later, reset=["write"])
    return parent, edited.id, reset.id, done, later


def test_frames_mode_compares_with_the_previous_frame_or_one_picked_by_hand(
    db: st.Database,
) -> None:
    wf, _ = demo_workflow(flaky=True)
    run_id = db.run(wf, {"topic": "bee"}).id
    last = db.store.get_run(run_id).clock
    model = DebuggerModel(db, run_id)
    assert model.diff_mode == "frames"
    for n in (last, 1, 7, last - 1, 12):
        model.select_frame(n)
        result = model.diff()
        _assert_diff(db, result, (run_id, n - 1), (run_id, n))
        assert result.note is None
    model.select_frame(0)
    result = model.diff()
    _assert_diff(db, result, (run_id, 0), (run_id, 0))
    assert result.empty and "both sides are the same frame" in (result.note or "")

    events: list[str] = []
    model.on("diff", lambda: events.append("diff"))
    model.select_frame(12)
    model.set_diff(compare_frame=3)  # picked by hand: stays while other frames are selected
    assert events == ["diff"]
    _assert_diff(db, model.diff(), (run_id, 3), (run_id, 12))
    model.select_frame(9)
    _assert_diff(db, model.diff(), (run_id, 3), (run_id, 9))
    model.set_diff(compare_frame=last + 50)  # beyond the newest frame: the newest
    _assert_diff(db, model.diff(), (run_id, last), (run_id, 9))
    model.set_diff(compare_frame=-4)
    _assert_diff(db, model.diff(), (run_id, 0), (run_id, 9))
    model.set_diff(compare_frame=9)
    assert "both sides are the same frame" in (model.diff().note or "")
    model.set_diff(compare_frame=None)  # back to the previous frame
    _assert_diff(db, model.diff(), (run_id, 8), (run_id, 9))


def test_runs_mode_compares_the_run_picked_by_hand(db: st.Database) -> None:
    parent, edited, reset, done, later = _family(db)
    clock = {r: db.store.get_run(r).clock for r in (parent, edited, reset)}

    model = DebuggerModel(db, parent)  # a parent: its first fork, at that fork's newest frame
    model.set_diff("runs")
    assert model.default_compare_run() == (edited, clock[edited])
    _assert_diff(db, model.diff(), (edited, clock[edited]), (parent, clock[parent]))
    model.set_diff(compare_run=reset)  # the other fork, picked by hand
    _assert_diff(db, model.diff(), (reset, clock[reset]), (parent, clock[parent]))
    model.select_frame(later)
    _assert_diff(db, model.diff(), (reset, clock[reset]), (parent, later))
    model.set_diff(compare_run_frame=0)  # and a frame of it picked by hand
    _assert_diff(db, model.diff(), (reset, 0), (parent, later))
    model.set_diff(compare_run=None, compare_run_frame=None)
    _assert_diff(db, model.diff(), (edited, clock[edited]), (parent, later))

    model = DebuggerModel(db, edited)  # a fork: its parent at the fork frame
    model.set_diff("runs")
    assert model.default_compare_run() == (parent, done)
    result = model.diff()
    _assert_diff(db, result, (parent, done), (edited, clock[edited]))
    assert any("edited by a person" in str(c.new) for _, cs in result.sections for c in cs)
    model.set_diff(compare_run=reset)  # a sibling picked by hand: at its newest frame
    _assert_diff(db, model.diff(), (reset, clock[reset]), (edited, clock[edited]))
    model.set_diff(compare_run=parent)  # the parent picked by hand: at the fork frame
    _assert_diff(db, model.diff(), (parent, done), (edited, clock[edited]))
    model.set_diff(compare_run_frame=2)
    _assert_diff(db, model.diff(), (parent, 2), (edited, clock[edited]))

    wf, _ = demo_workflow()
    alone = db.run(wf, {"topic": "ant"}).id
    model = DebuggerModel(db, alone)
    model.set_diff("runs")
    assert model.default_compare_run() is None
    result = model.diff()
    assert result.sections == [] and "no parent or forks" in (result.note or "")
    model.set_diff(compare_run=parent)  # any run can still be picked by hand
    _assert_diff(db, model.diff(), (parent, clock[parent]), (alone, model.last_frame))


def test_attempts_mode_compares_two_attempts_of_a_node(db: st.Database) -> None:
    wf, _ = demo_workflow(flaky=True, invalid_first_draft=True)
    run_id = db.run(wf, {"topic": "bee"}).id
    model = DebuggerModel(db, run_id)
    model.set_diff("attempts")
    snap = db.snapshot(run_id)
    twice = sorted({(k[0], k[1]) for k in snap.attempts if (k[0], k[1], 2) in snap.attempts})
    assert ("research", 0) in twice
    assert model.attempts_with_history(2) == [
        (n, i, sorted(k[2] for k in snap.attempts if k[:2] == (n, i))) for n, i in twice
    ]

    def expected(node: str, first: int, second: int) -> list[tuple[str, list[Change]]]:
        views = [snap.attempts[(node, 0, n)] for n in (first, second)]
        changes = [
            Change("change", f"$.{name}", getattr(views[0], name), getattr(views[1], name))
            for name in ("state", "error", "error_code", "resumed_from")
            if getattr(views[0], name) != getattr(views[1], name)
        ]
        newest = []
        for n in (first, second):
            keys = [k for k in snap.refs if k[:3] == (node, 0, n)]
            newest.append(db.store.load(snap.refs[max(keys)]).to_json() if keys else None)
        return [("attempt", changes), (f"checkpoint {node}", tt.json_diff(*newest))]

    result = model.diff()  # the last frame is the run's: the first node with two attempts
    first_node = twice[0][0]
    assert (result.a, result.b) == (f"{first_node} attempt #1", f"{first_node} attempt #2")
    assert result.sections == expected(first_node, 1, 2)
    for node, _ in twice:  # a frame of a node: that node's attempts
        model.select_frame(max(f.frame_no for f in model.frames if f.node_id == node))
        result = model.diff()
        assert (result.a, result.b) == (f"{node} attempt #1", f"{node} attempt #2")
        assert result.sections == expected(node, 1, 2)
        assert result.sections[0][1], "the first attempt failed, the second did not"
    model.set_diff(attempt_pair=("research", 0, 2, 1))  # picked by hand, either way round
    assert model.diff().sections == expected("research", 2, 1)
    model.set_diff(attempt_pair=("research", 0, 1, 3))
    result = model.diff()
    assert result.sections == [] and "has no attempts #1 and #3" in (result.note or "")
    model.set_diff(attempt_pair=None)
    model.select_frame(3)  # before any second attempt
    result = model.diff()
    assert result.sections == [] and result.note == "no node has two attempts at this frame"


def test_wrong_diff_settings_are_refused_and_change_nothing(db: st.Database) -> None:
    wf, _ = demo_workflow()
    model = DebuggerModel(db, db.run(wf, {"topic": "bee"}).id)
    model.set_diff("runs", compare_run_frame=2)
    with pytest.raises(InvalidArgument, match="frames, runs or attempts, not 'run'"):
        model.set_diff("run")
    with pytest.raises(InvalidArgument, match=r"unknown diff settings \['frame'\]"):
        model.set_diff("frames", frame=3)
    assert (model.diff_mode, model.compare_run_frame) == ("runs", 2)
    model.set_diff(None)  # keeps the mode
    assert model.diff_mode == "runs"
