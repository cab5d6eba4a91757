"""A frame selected while a long run's history is still read behind its newest frame
(:mod:`smithers_tt.widgets._preload`) shows at once, from the frames read so far, and nothing
on the screen changes when the rest of the history arrives.

The thread reading the history is held between two of its steps (the test holds its next
turn), so the history is really still being read, from a real database, when the person
clicks: before, a selection waited for the whole history (seconds at 100,000 frames).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Any

import pytest

import smithers_tt as st
from smithers_tt.testing import large_run
from smithers_tt.widgets import Debugger, DebuggerModel
from smithers_tt.widgets import _loading as loading
from smithers_tt.widgets._preload import HistoryRead

from ._support import html_values

HELD_AT = 1_000
"""The thread reading the history stops before its step past this frame until released."""
PICKS = (300, 301, 777, 0, 999)
"""Frames a person selects while it is held (all read before it stops)."""


def _screen(d: Debugger) -> dict[str, Any]:
    """What a person sees of the selected frame: its number on the slider, the plot's
    marker and the frame table, the scrubber's line, and every text of the debugger (the
    inspector's state values and payload, the diff, the header)."""
    return {
        "frame": d.model.frame_no,
        "slider": d.scrubber.slider.value,
        "line": d.scrubber.label.value,
        "marker": d.timeline.figure.layout.shapes[0].x0,
        "table row": d.frame_table.rows.value,
        "texts": html_values(d),
    }


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """Every run is read behind its newest frame, 100 frames a step; past frame
    ``HELD_AT`` the thread waits before each step until the event is set, or the model waits
    for a frame it has not read."""
    release = threading.Event()
    real = getattr(HistoryRead, "turn", None)  # (a read without turns is not held)

    def turn(self: HistoryRead[Any]) -> AbstractContextManager[bool]:
        deadline = time.monotonic() + 30
        while self.progress >= HELD_AT and self.wanted <= self.progress:
            if release.wait(0.01) or time.monotonic() > deadline:
                break
        assert real is not None
        return real(self)

    monkeypatch.setattr(loading, "PRELOAD_AT", 0)
    monkeypatch.setattr(loading, "PRELOAD_STEP", 100)
    monkeypatch.setattr(HistoryRead, "turn", turn, raising=False)
    try:
        yield release
    finally:
        release.set()


def test_a_frame_selected_while_the_history_is_read_shows_at_once_and_stays(
    db: st.Database, held: threading.Event
) -> None:
    run_id = large_run(db, 2_500)
    held.set()
    read_first = Debugger(db, run_id, live=False)  # the history read before any selection
    assert read_first.model.history_ready(timeout=30)
    held.clear()
    opened = Debugger(db, run_id, live=False)  # a person clicks while it is read
    try:
        for n in PICKS:
            opened.select_frame(n)
            read_first.select_frame(n)
            assert not opened.model.history_loaded, "the selection waited for the history"
            job = opened.model._preload
            assert job is not None and not job.done and job.progress < HELD_AT + 100
            shown = _screen(opened)
            assert shown == _screen(read_first), f"frame {n}"
            assert shown["frame"] == shown["slider"] == shown["table row"] == n
            assert f"Frame {n} " in opened.inspector.summary.value
            assert opened.model.snapshot == db.snapshot(run_id, n)
            assert opened.model.ref_key == read_first.model.ref_key
        held.set()  # the rest of the history arrives
        assert opened.model.history_ready(timeout=30)
        assert _screen(opened) == shown, "something changed when the history arrived"
        opened.model.frames  # noqa: B018 (the model takes the history over)
        assert opened.model.history_loaded
        opened.model._emit("frame", "ref", "diff")  # every view drawn again from it
        assert _screen(opened) == shown, "drawn from the whole history, a view differs"
        opened.model.step(-1)
        read_first.model.step(-1)
        assert _screen(opened) == _screen(read_first)
    finally:
        held.set()
        opened.close()
        read_first.close()


def test_a_selection_past_what_was_read_has_the_thread_read_up_to_it_only(
    db: st.Database, held: threading.Event
) -> None:
    """Asked for a frame the thread has not read, the model has it read up to that frame in
    one step (not the whole history first), and shows it."""
    run_id = large_run(db, 2_500)
    d = Debugger(db, run_id, live=False)
    try:
        d.select_frame(1_234)
        job = d.model._preload
        assert job is not None and job.progress == 1_234 and not d.model.history_loaded
        assert d.model.snapshot == db.snapshot(run_id, 1_234)
        assert "Frame 1234 " in d.inspector.summary.value
        d.select_frame(1_233)  # read already: nothing more is
        assert job.progress == 1_234 and d.model.snapshot == db.snapshot(run_id, 1_233)
        held.set()
        assert d.model.history_ready(timeout=30)
        d.select_frame(2_000)
        assert d.model.history_loaded and d.model.snapshot == db.snapshot(run_id, 2_000)
    finally:
        held.set()
        d.close()


def test_a_history_read_a_frame_a_step_is_the_whole_history(
    db: st.Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A step of one frame (the first step is a fifth of a step, at least one frame)."""
    monkeypatch.setattr(loading, "PRELOAD_AT", 0)
    monkeypatch.setattr(loading, "PRELOAD_STEP", 1)
    run_id = large_run(db, 40)
    model = DebuggerModel(db, run_id)
    model.read_history_behind()
    assert model.history_ready(timeout=30) and not model.history_loaded
    model.select_frame(17)
    assert model.frames == db.store.frames(run_id) and model.snapshot == db.snapshot(run_id, 17)
