"""A fork is one transaction that writes its run row, frame 0 and the parent's audit row, and
hands back the run as it reads: what a caller gets from ``db.fork`` is what the store holds."""

from __future__ import annotations

import json
from typing import Any

import pytest

from smithers_tt.checkpoint import AgentCheckpoint
from smithers_tt.demo.agents import NOTES
from smithers_tt.errors import FrameNotFound
from tests.timetravel._support import count, table_rows
from tests.timetravel.conftest import Demo

_WRITTEN = ("tt_runs", "tt_frames", "tt_audit", "tt_attempts", "tt_checkpoint_refs")
"""The tables a fork writes to."""

EDITED = AgentCheckpoint(NOTES, 1, {"topic": "bee", "notes": ["An edited note."], "tokens": 3})


def _forks(demo: Demo) -> dict[str, dict[str, Any]]:
    """Fork options by name: every way a fork's row is made differently."""
    last = demo.run.record.clock
    middle = demo.frame("checkpoint", "research", attempt=2, sequence=0)
    return {
        "middle": {"frame_no": middle},
        "ending kept": {"frame_no": last},
        "reset": {"frame_no": last, "reset": ["write"]},
        "input": {"frame_no": 0, "input": {"topic": "ant", "depth": [1, 2.5, None]}},
        "edited": {"frame_no": last, "checkpoints": {"research": EDITED}},
        "reason": {"frame_no": middle, "reason": "  what if the note were shorter  "},
    }


@pytest.mark.parametrize("kind", ["middle", "ending kept", "reset", "input", "edited", "reason"])
def test_fork_returns_the_run_exactly_as_it_reads_back(demo: Demo, kind: str) -> None:
    options = _forks(demo)[kind]
    frame_no = options.pop("frame_no")

    child = demo.db.fork(demo.run.id, frame_no, **options)

    assert child.record == demo.db.get_run(child.id).record
    assert (child.record.parent_run_id, child.record.parent_frame_no) == (demo.run.id, frame_no)
    assert child.record.clock == 0 and child.record.owner_id is None


def test_fork_keeps_the_parents_ending_only_when_nothing_is_reset(demo: Demo) -> None:
    db, run = demo.db, demo.run
    kept = db.fork(run.id, run.record.clock)
    reset = db.fork(run.id, run.record.clock, reset=["review"])

    assert (kept.status, kept.output, kept.error) == ("finished", run.output, None)
    assert (reset.status, reset.output, reset.error) == ("interrupted", None, None)
    assert db.get_run(kept.id).output == run.output


def test_fork_audits_on_the_parent_what_it_made(demo: Demo) -> None:
    db, run = demo.db, demo.run
    at = demo.frame("attempt_finished", "research", attempt=1)

    child = db.fork(run.id, at, reset=["write"], reason="  try a longer draft ")

    rows = [r for r in table_rows(db, "tt_audit") if r[2] == "fork"]
    assert [(r[1], r[3]) for r in rows] == [(run.id, at)]
    assert json.loads(rows[0][5]) == {
        "child": child.id,
        "reset": ["review", "write"],
        "reason": "try a longer draft",
    }


@pytest.mark.parametrize("frame_no", [-1, "last", 2.0, True, 2**70, -(2**70)], ids=repr)
def test_fork_at_no_frame_of_the_run_is_refused_and_writes_nothing(
    demo: Demo, frame_no: Any
) -> None:
    db, run = demo.db, demo.run
    before = {table: table_rows(db, table) for table in _WRITTEN}
    with pytest.raises(FrameNotFound, match=f"run {run.id} has frames 0 to {run.record.clock}"):
        db.fork(run.id, frame_no)
    assert {table: table_rows(db, table) for table in _WRITTEN} == before


def test_fork_past_the_newest_frame_is_refused_and_writes_nothing(demo: Demo) -> None:
    db, run = demo.db, demo.run
    runs = count(db, "tt_runs")
    with pytest.raises(FrameNotFound):
        db.fork(run.id, run.record.clock + 1)
    assert count(db, "tt_runs") == runs
    assert count(db, "tt_audit") == 0
    assert db.fork(run.id, run.record.clock).record.parent_frame_no == run.record.clock
