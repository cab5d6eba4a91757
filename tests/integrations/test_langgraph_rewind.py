"""A smithers_tt rewind of a LangGraph thread's run, as LangGraph sees it afterwards."""

from __future__ import annotations

import pytest

pytest.importorskip("langgraph.checkpoint.conformance")

import smithers_tt as st
from smithers_tt.integrations.langgraph import CHECKPOINT_CODEC, SmithersSaver
from tests.integrations.test_langgraph_saver import _graph

CONFIG = {"configurable": {"thread_id": "rw"}}


def _at(checkpoint_id: str) -> dict:
    return {
        "configurable": {
            **CONFIG["configurable"],
            "checkpoint_ns": "",
            "checkpoint_id": checkpoint_id,
        }
    }


def _ids(saver: SmithersSaver) -> list[str]:
    return [t.config["configurable"]["checkpoint_id"] for t in saver.list(CONFIG)]


@pytest.mark.parametrize("frames", [1, 2, 3])
def test_rewind_of_a_thread_leaves_langgraph_at_the_newest_kept_checkpoint(
    db: st.Database, frames: int
) -> None:
    saver = SmithersSaver(db)
    app = _graph(3).compile(checkpointer=saver)
    final = app.invoke({"topic": "t", "notes": [], "count": 0}, CONFIG)
    run_id = saver.run_id("rw")
    clock = db.get_run(run_id).record.clock
    newest_frames = [f for f in db.store.frames(run_id) if f.frame_no > clock - 3]
    assert all(f.codec == CHECKPOINT_CODEC for f in newest_frames)  # one checkpoint a frame
    every = _ids(saver)  # newest first
    kept = every[frames:]
    kept_before = saver.get_tuple(_at(kept[0]))

    db.rewind(run_id, clock - frames, confirm=True)
    assert _ids(saver) == kept
    assert saver.get_tuple(CONFIG) == kept_before  # values, metadata and pending writes
    state = app.get_state(CONFIG)
    assert state.config["configurable"]["checkpoint_id"] == kept[0]
    assert state.values["topic"] == "t"  # not the empty state
    assert saver.get_tuple(_at(every[0])) is None  # a cut checkpoint is gone from its view

    db.undo_rewind(run_id)  # the newer checkpoints come back
    assert _ids(saver) == every
    assert saver.get_tuple(CONFIG).config["configurable"]["checkpoint_id"] == every[0]
    assert app.get_state(CONFIG).values == final

    db.rewind(run_id, clock - frames, confirm=True)
    assert app.invoke(None, CONFIG) == final  # goes on from the kept checkpoint
    history = [h.config["configurable"]["checkpoint_id"] for h in app.get_state_history(CONFIG)]
    assert history[-len(kept) :] == kept and history[0] not in every


@pytest.mark.parametrize("same_saver", [True, False], ids=["same_saver", "new_saver"])
def test_a_thread_rewound_and_run_again_keeps_every_value_it_reads_after_gc(
    db: st.Database, same_saver: bool
) -> None:
    # Running again from the cut writes the values it wrote before (the graph is
    # deterministic), whose first value frames the rewind cut and the next frame drops: the
    # new checkpoints must pin them again, whatever a saver remembered of the run before.
    saver = SmithersSaver(db)
    app = _graph(3).compile(checkpointer=saver)
    final = app.invoke({"topic": "t" * 300, "notes": [], "count": 0}, CONFIG)
    run_id = saver.run_id("rw")
    db.rewind(run_id, db.get_run(run_id).record.clock - 3, confirm=True)  # 3 checkpoints
    if not same_saver:
        saver = SmithersSaver(db)
        app = _graph(3).compile(checkpointer=saver)
    assert app.invoke(None, CONFIG) == final
    db.collect_garbage()
    for state in app.get_state_history(CONFIG):  # every checkpoint reads whole
        assert saver.get_tuple(state.config) is not None
    assert app.get_state(CONFIG).values == final
    assert db.verify().ok


def test_a_thread_rewound_to_its_middle_the_wide_way_comes_back_whole_on_undo(
    db: st.Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The rewind that keeps the live rows it changes (timetravel._wide, taken here for a short
    # thread) and the undo that puts them back: LangGraph reads the thread as before.
    from smithers_tt.store.for_timetravel import Travel
    from smithers_tt.timetravel import _delta, _wide

    monkeypatch.setattr(_wide, "WIDE_SPAN", 0)
    monkeypatch.setattr(_delta, "MOST_FRAMES", 0)
    restored: list[str] = []
    real = Travel.restore_kept
    monkeypatch.setattr(
        Travel, "restore_kept", lambda self, *a: restored.append(a[1]) or real(self, *a)
    )
    saver = SmithersSaver(db)
    app = _graph(8).compile(checkpointer=saver)
    final = app.invoke({"topic": "t", "notes": [], "count": 0}, CONFIG)
    run_id = saver.run_id("rw")
    clock = db.get_run(run_id).record.clock
    before = list(saver.list(CONFIG))
    refs = db.get_run(run_id).checkpoints()

    db.rewind(run_id, clock // 2, confirm=True)
    assert len(_ids(saver)) < len(before)
    db.undo_rewind(run_id)
    assert len(restored) == 1  # what the rewind kept, put back
    assert list(saver.list(CONFIG)) == before  # values, metadata, parents and pending writes
    assert db.get_run(run_id).checkpoints() == refs
    assert app.get_state(CONFIG).values == final
    db.rewind(run_id, clock // 2, confirm=True)
    assert app.invoke(None, CONFIG) == final  # and it goes on from the cut as before
