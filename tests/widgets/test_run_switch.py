"""Switching the shown run is whole or not at all, and the model never asks itself forever
where its newest frame is (a RecursionError the browser sequences met after a replay and a run
switch: the history and the newest frame both unset, each asked the other)."""

from __future__ import annotations

import pytest

import smithers_tt as st
from smithers_tt.demo import demo_workflow
from smithers_tt.errors import StoreError
from smithers_tt.widgets import DebuggerModel, _loading


def _forked(db: st.Database) -> tuple[st.Run, st.Run]:
    wf, _ = demo_workflow()
    run = db.run(wf, {"topic": "bee"})
    return run, db.fork(run.id, 9)


def test_a_model_holding_neither_history_nor_newest_frame_reads_the_history(
    db: st.Database,
) -> None:
    run, _ = _forked(db)
    model = DebuggerModel(db, run.id)
    last = model.last_frame
    model._history, model._newest = None, None  # what a switch stopped half-way left behind
    assert model.last_frame == last
    assert [f.frame_no for f in model.visible_frames][-1] == last
    assert model.history_loaded


def test_a_switch_whose_reads_fail_leaves_the_run_shown_before_whole(
    db: st.Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    run, child = _forked(db)
    model = DebuggerModel(db, run.id)
    before = (model.run_id, model.record, model.last_frame, model.frame_no, model.tree)

    def away(*args: object, **kwargs: object) -> object:
        raise StoreError("the store went away")

    monkeypatch.setattr(_loading.tt, "fork_tree", away)
    with pytest.raises(StoreError):
        model.switch_run(child.id)
    assert (model.run_id, model.record, model.last_frame, model.frame_no, model.tree) == before
    monkeypatch.undo()
    model.switch_run(child.id)
    assert model.run_id == child.id and model.last_frame == child.refresh().record.clock
