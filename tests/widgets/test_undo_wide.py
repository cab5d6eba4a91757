"""The debugger after a rewind to the middle of a long run and its undo (the rewind that
keeps the live rows it changes, ``timetravel._wide``, and the undo that puts them back):
every view shows the same run and frame as a debugger opened afresh on the run, after the
rewind, after the undo (where every frame reads as it did before the rewind), and after a step
back to a frame inside what the undo put back."""

from __future__ import annotations

from typing import Any

import ipywidgets as W
import pytest

import smithers_tt as st
from smithers_tt.testing import large_run
from smithers_tt.timetravel import _delta, _wide
from smithers_tt.widgets import Debugger

from ._support import walk


def _screen(d: Debugger) -> dict[str, Any]:
    """What a person sees: the frame on the slider, the plot's marker and the frame table,
    the scrubber's line, the graph, and every text (header, inspector, nodes, diff)."""
    return {
        "frame": d.model.frame_no,
        "slider": (d.scrubber.slider.value, d.scrubber.slider.max),
        "line": d.scrubber.label.value,
        "marker": d.timeline.figure.layout.shapes[0].x0,
        "table row": d.frame_table.rows.value,
        # (but the report of the action just done, which a fresh debugger has not done)
        "texts": [w.value for w in walk(d) if isinstance(w, W.HTML) and w is not d.actions.report],
    }


def _afresh(db: st.Database, run_id: str, frame_no: int) -> dict[str, Any]:
    fresh = Debugger(db, run_id, live=False)
    fresh.model.select_frame(frame_no)
    return _screen(fresh)


@pytest.mark.parametrize("cut", [1_200, 2_999])
def test_every_view_shows_the_run_as_a_fresh_debugger_does_after_a_wide_rewind_and_its_undo(
    db: st.Database, monkeypatch: pytest.MonkeyPatch, cut: int
) -> None:
    monkeypatch.setattr(_wide, "WIDE_SPAN", 0)  # a short run takes the path of a long one
    monkeypatch.setattr(_delta, "MOST_FRAMES", 0)
    taken: list[int] = []
    real = _wide.rewind
    monkeypatch.setattr(_wide, "rewind", lambda *args: taken.append(1) or real(*args))
    run_id = large_run(db, 4_000, payload_bytes=40)
    newest = db.get_run(run_id).record.clock
    before = {frame: _afresh(db, run_id, frame) for frame in (newest, cut)}
    d = Debugger(db, run_id, live=False)
    d.model.select_frame(cut)
    assert d.model.request_rewind() is not None
    done = d.model.confirm()
    assert done is not None and done.ok, done
    assert taken == [1]  # the wide way: the undo puts back what it kept
    assert d.model.frame_no == cut
    assert _screen(d) == _afresh(db, run_id, cut)

    assert d.model.request_undo_rewind() is not None
    done = d.model.confirm()
    assert done is not None and done.ok, done
    assert db.get_run(run_id).record.clock == newest
    assert _screen(d) == _afresh(db, run_id, d.model.frame_no)
    assert {frame: _afresh(db, run_id, frame) for frame in before} == before  # as it was
    back = (cut + newest) // 2  # inside what the undo put back
    d.model.select_frame(back)
    assert _screen(d) == _afresh(db, run_id, back)
