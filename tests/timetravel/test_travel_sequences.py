"""Random sequences of time travel, checked against naive full copies.

A seeded sequence of operations (new runs, forks at random frames (plain, with a node reset,
or with an edited checkpoint), forks executed to their end, rewinds to random frames (past
fork points too), undos of the newest rewind) runs on one database. Beside it, a naive model
keeps for every run a full copy of what each of its frames shows, written when the frame came
to be:

* a fork's frame 0 is a copy of its parent's frame (what a fork means), minus the nodes it
  reset and with the checkpoint it edited;
* a rewind to frame f keeps the copies up to f; its undo puts back the copies it removed;
* nothing else changes a run's history: not its parent's rewind, its children's forks, nor
  the runs around it.

After every operation, every frame of every run must show what the model says, and the live
tables of every run must equal its newest frame. A fork implementation that shares its
parent's history (forks by reference) must keep this true.
"""

from __future__ import annotations

import os
import random
from typing import Any

import pytest

import smithers_tt as st
from smithers_tt import AgentCheckpoint
from smithers_tt.demo.agents import NOTES
from smithers_tt.errors import SmithersError
from smithers_tt.timetravel import _delta, _wide
from tests.timetravel._support import TOPIC, live_view, snapshot_view, without_status
from tests.timetravel.conftest import fresh_workflow

SEEDS = [int(s) for s in os.environ.get("SMITHERS_TT_TRAVEL_SEEDS", "1602,20261202").split(",")]
STEPS = int(os.environ.get("SMITHERS_TT_TRAVEL_STEPS", "20"))

View = dict[str, Any]


def _view(db: st.Database, run_id: str, frame_no: int) -> View:
    """What a frame shows, without the run's id (copies of other runs compare equal)."""
    return snapshot_view(db.snapshot(run_id, frame_no))


def _views(db: st.Database, run_id: str, start: int = 0) -> list[View]:
    clock = db.store.get_run(run_id).clock
    return [_view(db, run_id, n) for n in range(start, clock + 1)]


class Model:
    """Full copies of what every frame of every run shows, and the rewinds kept for undo."""

    def __init__(self, db: st.Database) -> None:
        self.db = db
        self.frames: dict[str, list[View]] = {}
        self.undo: dict[str, list[list[View]]] = {}
        self.runs: list[str] = []

    def add_run(self, run_id: str, views: list[View]) -> None:
        self.runs.append(run_id)
        self.frames[run_id] = views
        self.undo[run_id] = []

    def check(self, step: str) -> None:
        for run_id in self.runs:
            expected = self.frames[run_id]
            clock = self.db.store.get_run(run_id).clock
            assert clock == len(expected) - 1, f"{step}: run {run_id} has frames 0 to {clock}"
            for n, view in enumerate(expected):
                assert _view(self.db, run_id, n) == view, f"{step}: run {run_id} frame {n}"
            live = without_status(live_view(self.db, run_id))
            assert live == without_status(expected[-1]), f"{step}: live tables of {run_id}"


def _forked_view(parent: View, reset: list[str], edited: str | None, child: View) -> View:
    """What a fork's frame 0 must show: the parent's frame, without the reset nodes (their
    nodes, attempts and refs), and with the edited node's newest checkpoint replaced (taken
    from the child, whose payload the test checks separately)."""
    gone = set(reset)
    view = {
        "status": child["status"],
        "nodes": {k: v for k, v in parent["nodes"].items() if k[0] not in gone},
        "attempts": {k: v for k, v in parent["attempts"].items() if k[0] not in gone},
        "refs": {k: v for k, v in parent["refs"].items() if k[0] not in gone},
    }
    if edited is not None:
        view["refs"] = {k: v for k, v in view["refs"].items() if k[0] != edited}
        view["refs"].update({k: v for k, v in child["refs"].items() if k[0] == edited})
        view["nodes"] = child["nodes"]  # an edit resets what depends on it: checked below
        view["attempts"] = child["attempts"]
    return view


def _step(rng: random.Random, db: st.Database, model: Model, wf: Any) -> str:
    """One random operation; returns what it did (for failure messages)."""
    op = rng.choice(["run", "fork", "fork", "fork", "rewind", "rewind", "undo", "undo"])
    if op == "run" or not model.runs:
        run = db.run(wf, {"topic": f"topic {rng.randrange(1000)}"})
        model.add_run(run.id, _views(db, run.id))
        return f"run {run.id}"
    run_id = rng.choice(model.runs)
    clock = len(model.frames[run_id]) - 1
    if op == "fork":
        at = rng.randrange(0, clock + 1)
        parent = model.frames[run_id][at]
        kind = rng.choice(["plain", "reset", "edit"])
        with_refs = sorted({k[0] for k in parent["refs"]})
        reset: list[str] = []
        edited = None
        options: dict[str, Any] = {}
        if kind == "reset" and parent["nodes"]:
            reset = [rng.choice(sorted({k[0] for k in parent["nodes"]}))]
            options = {"reset": reset, "dependents": False}
        elif kind == "edit" and "research" in with_refs:
            edited = "research"
            notes = dict(db.snapshot(run_id, at).payload("research"))
            notes["notes"] = [f"edited {rng.randrange(1000)}", *notes["notes"][1:]]
            options = {"checkpoints": {"research": AgentCheckpoint(NOTES, 1, notes)}}
        child = db.fork(run_id, at, **options)
        first = _view(db, child.id, 0)
        expected = _forked_view(parent, reset, edited, first)
        assert first == expected, f"fork of {run_id} at {at} ({kind})"
        if edited is not None:
            assert db.snapshot(child.id, 0).payload("research") == notes
        resumed = rng.random() < 0.5
        if resumed:
            db.resume(child.id, wf)
        model.add_run(child.id, [first, *_views(db, child.id, 1)])
        return f"fork {child.id} of {run_id} at {at} ({kind}{', resumed' if resumed else ''})"
    if op == "rewind":
        if clock < 1:
            return "nothing to rewind"
        to = rng.randrange(0, clock)
        db.rewind(run_id, to, confirm=True, force=True)
        model.undo[run_id].append(model.frames[run_id][to + 1 :])
        model.frames[run_id] = model.frames[run_id][: to + 1]
        return f"rewind {run_id} to {to}"
    if not model.undo[run_id]:
        with pytest.raises(SmithersError):
            db.undo_rewind(run_id)
        return f"undo {run_id}: nothing to undo, refused"
    db.undo_rewind(run_id)
    model.frames[run_id] = model.frames[run_id] + model.undo[run_id].pop()
    return f"undo {run_id}"


@pytest.mark.parametrize("seed", SEEDS)
def test_random_forks_rewinds_and_undos_match_full_copies(db: st.Database, seed: int) -> None:
    rng = random.Random(seed)
    wf, _ = fresh_workflow()
    model = Model(db)
    run = db.run(wf, TOPIC)
    model.add_run(run.id, _views(db, run.id))
    done = []
    for _ in range(STEPS):
        done.append(_step(rng, db, model, wf))
        model.check(" / ".join(done))
    assert db.verify().ok
    kinds = {d.split()[0] for d in done}
    assert {"fork", "rewind"} <= kinds, done  # the seeds exercise what the test is about


@pytest.mark.parametrize("seed", SEEDS)
def test_random_sequences_match_full_copies_when_rewinds_go_wide(
    db: st.Database, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same sequences with every rewind and undo that can taking the path of half a
    long run (``timetravel._wide``: no fold below the cut, checkpoint frames left in SQL)."""
    monkeypatch.setattr(_wide, "WIDE_SPAN", 0)
    monkeypatch.setattr(_delta, "MOST_FRAMES", 0)
    test_random_forks_rewinds_and_undos_match_full_copies(db, seed)
