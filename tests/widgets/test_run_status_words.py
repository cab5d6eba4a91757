"""What the debugger calls a run's status: a fork that nothing has run yet is stored as
``interrupted`` (work left, nobody executing it), which people read as a crash; every place
that shows it (the fork tree, the header, the inspector at frame 0, frame 0's own words, the
diff's run list, the fork's report) says "not started" until something runs it."""

from __future__ import annotations

import pytest

import smithers_tt as st
from smithers_tt.demo import demo_workflow
from smithers_tt.widgets import Debugger


@pytest.fixture
def workflow() -> st.Workflow:
    return demo_workflow()[0]


@pytest.fixture
def run(db: st.Database, workflow: st.Workflow) -> st.Run:
    return db.run(workflow, {"topic": "bee"})


def _fork_from_the_debugger(dbg: Debugger, frame_no: int) -> str:
    dbg.select_frame(frame_no)
    assert dbg.model.request_fork(reset=["write"]) is not None
    result = dbg.model.confirm()
    assert result is not None and result.ok, result
    return result.run_id


def _diff_label(dbg: Debugger, run_id: str) -> str:
    """How the diff's list of runs to compare with names ``run_id`` (another run than the
    one shown)."""
    dbg.diff.mode.value = "runs"
    return next(label for label, value in dbg.diff.run.options if value == run_id)


def _shown_words(dbg: Debugger) -> dict[str, str]:
    """The texts that state the shown run's status: its fork-tree button, the header and
    the inspector."""
    return {
        "fork tree": dbg.fork_tree.buttons[dbg.model.run_id].description,
        "header": dbg.header.value,
        "inspector": dbg.inspector.summary.value,
    }


def test_a_fresh_fork_reads_not_started_everywhere_it_shows(
    db: st.Database, run: st.Run, workflow: st.Workflow
) -> None:
    dbg = Debugger(db, run.id, workflow=workflow, live=False)
    child = _fork_from_the_debugger(dbg, 7)
    assert db.store.get_run(child).status == "interrupted"  # what the store says
    assert dbg.model.message is not None
    assert f"new run {child} (not started, frame 0)" in dbg.model.message.text
    assert " · not started · fork @ frame 7" in dbg.fork_tree.buttons[child].description
    short = db.store.short_run_ids([child])[child]  # the run picker shows it short
    assert _diff_label(dbg, child) == f"{short} (fork @ 7, not started)"

    dbg.fork_tree.open(child)
    assert dbg.model.run_id == child and dbg.model.frame_no == 0
    words = _shown_words(dbg)
    assert "interrupted" not in " ".join(words.values()), words
    assert ">not started</span>" in words["header"]  # the status badge
    assert "run status at this frame: <span" in words["inspector"]
    assert ">not started</span>" in words["inspector"]
    assert "not started, ready to run" in dbg.model.frame_title()
    assert "not started" in words["fork tree"]


def test_a_fork_that_ran_reads_its_real_status_and_frame_0_still_not_started(
    db: st.Database, run: st.Run, workflow: st.Workflow
) -> None:
    dbg = Debugger(db, run.id, workflow=workflow, live=False)
    child = _fork_from_the_debugger(dbg, 7)
    dbg.fork_tree.open(child)
    db.resume(child, workflow)
    dbg.refresh()
    assert dbg.model.record.status == "finished"
    words = _shown_words(dbg)
    assert " · finished · fork @ frame 7" in words["fork tree"]
    assert ">finished</span>" in words["header"] and "not started" not in words["header"]
    assert ">finished</span>" in words["inspector"]
    dbg.select_frame(0)  # at its frame 0 nothing had run yet
    assert ">not started</span>" in dbg.inspector.summary.value
    dbg.fork_tree.open(run.id)
    short = db.store.short_run_ids([child])[child]  # the run picker shows it short
    assert _diff_label(dbg, child) == f"{short} (fork @ 7, finished)"


def test_a_rewound_root_run_still_reads_interrupted(db: st.Database, run: st.Run) -> None:
    db.rewind(run.id, 0, confirm=True)  # a run that was not forked: interrupted is the truth
    dbg = Debugger(db, run.id, live=False)
    assert dbg.model.record.status == "interrupted" and dbg.model.frame_no == 0
    assert ">interrupted</span>" in dbg.header.value
    assert " · interrupted · root" in dbg.fork_tree.buttons[run.id].description
