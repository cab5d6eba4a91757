"""A binned timeline bins its attempt bars too: per row, state and bin of frames, one bar from
the first attempt's start to the last one's end, whose hover text says how many attempts it
stands for (a bin of one attempt keeps that attempt's own text), so a long run's figure has
about as many bars as it can show, not one per attempt. Every attempt stays covered by a bar
of its state in its row (a failed one in the failed trace), a click on a merged bar selects a
frame of it, and a short run's figure is the one it was: one bar per attempt."""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Any

import pytest

import smithers_tt as st
from smithers_tt.demo import demo_workflow
from smithers_tt.testing import large_run
from smithers_tt.widgets import DebuggerModel
from smithers_tt.widgets import _timeline as T
from smithers_tt.widgets._model import node_label
from smithers_tt.widgets._timeline import (
    TimelineData,
    TimelineView,
    _attempt_text,
    _gather_rows,
    build_timeline,
)

MERGED = re.compile(r"^(\d+) attempts of (.+), (\w+), frames (\d+)-(\d+|now)$")


def _bars(data: TimelineData) -> dict[str, list[tuple[Any, ...]]]:
    """Per bar trace (by state): its bars as (x0, x1, row, text, first frame, last frame)."""
    out: dict[str, list[tuple[Any, ...]]] = {}
    for index, trace in enumerate(data.figure["data"]):
        if not trace["name"].startswith("attempt: "):
            continue
        xs, ys, texts = list(trace["x"]), list(trace["y"]), list(trace["hovertext"])
        frames = data.frames_of[index]
        assert len(xs) % 3 == 0
        bars = []
        for i in range(0, len(xs), 3):
            assert texts[i] == texts[i + 1] and texts[i + 2] is None  # start, end, gap
            assert ys[i] == ys[i + 1] and frames[i + 2] is None
            bars.append((xs[i], xs[i + 1], int(ys[i]), texts[i], frames[i], frames[i + 1]))
        out[trace["name"].removeprefix("attempt: ")] = bars
    return out


def _attempts(db: st.Database, run_id: str, width: int) -> Any:
    """The run's attempts and rows, walked from its frames."""
    model = DebuggerModel(db, run_id)
    found = _gather_rows(model, width, None, False)
    return model, found


@pytest.fixture
def wide_bins(monkeypatch: pytest.MonkeyPatch) -> int:
    """Twenty bins: on a 3,000-frame run, 150 frames each (about fifteen attempts)."""
    monkeypatch.setattr(T, "BINS", 20)
    return 20


def test_binned_bars_are_bounded_by_rows_states_and_bins(db: st.Database, wide_bins: int) -> None:
    run_id = large_run(db, 3_000)
    model = DebuggerModel(db, run_id)
    data = build_timeline(model, aggregate_at=100)  # a fresh model: from SQL
    assert data.aggregated
    width = math.ceil(3_000 / wide_bins)
    _, found = _attempts(db, run_id, width)
    attempts = list(found.attempts.values())
    bars = _bars(data)
    states = {a.state for a in attempts}
    assert set(bars) == states and "failed" in states
    points = sum(3 * len(b) for b in bars.values())
    rows = len(data.rows) - 1
    assert points <= 3 * rows * len(states) * (wide_bins + 1)
    assert points < 3 * len(attempts) / 2  # not one bar per attempt
    # the figure costs what it shows: no more bars than (state, row, bin) triples
    for state, found_bars in bars.items():
        keys = [(row, int(first) // width) for _, _, row, _, first, _ in found_bars]
        assert len(keys) == len(set(keys)), state


def test_every_attempt_is_covered_by_a_bar_of_its_state_and_row(
    db: st.Database, wide_bins: int
) -> None:
    run_id = large_run(db, 3_000)
    width = math.ceil(3_000 / wide_bins)
    for model_path in ("sql", "walk"):
        model = DebuggerModel(db, run_id)
        if model_path == "walk":
            model.frames  # noqa: B018  # the history read: the walk
            assert model.history_loaded
        data = build_timeline(model, aggregate_at=100)
        bars = _bars(data)
        _, found = _attempts(db, run_id, width)
        counted: Counter[tuple[str, int]] = Counter()
        for a in found.attempts.values():
            row = found.rows.of(a.node_id, a.iteration)
            end = a.end if a.end is not None else model.last_frame + 0.4
            covering = [b for b in bars[a.state] if b[2] == row and b[0] <= a.start and end <= b[1]]
            assert covering, (a, model_path)
            counted[(a.state, row)] += 1
        told: Counter[tuple[str, int]] = Counter()
        for state, found_bars in bars.items():
            for x0, x1, row, text, first, last in found_bars:
                merged = MERGED.match(text)
                if merged is None:  # one attempt: its own compact text
                    assert text.startswith(data.rows[row].split("[")[0]), text
                    assert f" {state}, frames {first}-{last}" in text
                    told[(state, row)] += 1
                    continue
                count, label, said, low, high = merged.groups()
                assert int(count) > 1 and label == data.rows[row] and said == state
                assert (int(low), int(high)) == (first, last) == (x0, x1)
                inside = [
                    a
                    for a in found.attempts.values()
                    if a.state == state
                    and found.rows.of(a.node_id, a.iteration) == row
                    and first <= a.start
                    and a.end is not None
                    and a.end <= last
                    and int(a.start) // width == first // width
                ]
                assert len(inside) == int(count), text
                told[(state, row)] += int(count)
        assert told == counted  # every attempt told once, in its state and row


def test_a_failed_attempt_stays_in_the_failed_trace(db: st.Database, wide_bins: int) -> None:
    run_id = large_run(db, 3_000)
    _, found = _attempts(db, run_id, math.ceil(3_000 / wide_bins))
    failed = [a for a in found.attempts.values() if a.state == "failed"]
    assert failed
    data = build_timeline(DebuggerModel(db, run_id), aggregate_at=100)
    bars = _bars(data)
    for a in failed:  # over a finished bar of its row, in a trace drawn after it
        row = found.rows.of(a.node_id, a.iteration)
        assert any(b[2] == row and b[0] <= a.start and a.end <= b[1] for b in bars["failed"])
    names = [t["name"] for t in data.figure["data"]]
    assert names.index("attempt: finished") < names.index("attempt: failed")


def test_a_click_on_a_merged_bar_selects_a_frame_of_it(db: st.Database, wide_bins: int) -> None:
    run_id = large_run(db, 3_000)
    model = DebuggerModel(db, run_id)
    view = TimelineView(model)  # 3,000 frames: binned
    assert view.data.aggregated
    bars = _bars(view.data)["finished"]
    index, bar = next((i, b) for i, b in enumerate(bars) if MERGED.match(b[3]))
    x0, x1 = int(bar[0]), int(bar[1])
    view.click("attempt: finished", 3 * index)
    assert model.frame_no == x0
    view.click("attempt: finished", 3 * index + 1)
    assert model.frame_no == x1
    assert model.frame(x0).kind == "attempt_started"
    assert model.frame(x1).kind == "attempt_finished"


def test_single_attempt_bins_and_time_axis(db: st.Database) -> None:
    run_id = large_run(db, 3_000)  # 400 bins of 8 frames: one attempt per bin, mostly
    data = build_timeline(DebuggerModel(db, run_id), aggregate_at=100)
    texts = [b[3] for bars in _bars(data).values() for b in bars]
    assert any(MERGED.match(t) is None and " #1 finished, frames " in t for t in texts)
    timed = build_timeline(DebuggerModel(db, run_id), aggregate_at=100, time_axis=True)
    assert [len(b) for b in _bars(timed).values()] == [len(b) for b in _bars(data).values()]
    assert all(isinstance(b[0], str) for bars in _bars(timed).values() for b in bars)


# --- a short run: unchanged -----------------------------------------------------------


def _bars_before(model: DebuggerModel) -> dict[str, list[tuple[Any, ...]]]:
    """The bars the timeline drew before bars were binned (one per attempt; its code,
    frozen), for a timeline that is not binned."""
    nodes = model.node_ids if model.breakpoints.enabled else None
    found = _gather_rows(model, 1, nodes, False)
    last = model.last_frame
    out: dict[str, list[tuple[Any, ...]]] = {}
    for a in found.attempts.values():
        state = "inherited" if a.inherited else a.state
        row = found.rows.of(a.node_id, a.iteration)
        end = a.end if a.end is not None else last + 0.4
        start = a.start
        if a.inherited:
            start, end = -0.45, -0.05
        text = _attempt_text(a, None if a.end is None else int(a.end), False)
        start_frame = None if a.inherited else int(a.start)
        end_frame = None if a.inherited else (int(a.end) if a.end is not None else last)
        if a.inherited:
            start_frame = end_frame = 0
        out.setdefault(state, []).append((start, end, row, text, start_frame, end_frame))
    return out


def test_a_short_run_keeps_one_bar_per_attempt(db: st.Database) -> None:
    wf, _ = demo_workflow(flaky=True, invalid_first_draft=True)
    run = db.run(wf, {"topic": "bee"})
    child = db.fork(run.id, 9).id  # inherited attempts
    graph = {"a": [], "b": ["a"]}
    record, fence = db.store.create_run("open", None, graph=graph)
    db.store.start_attempt(fence, "a", node_state="running")  # still running
    for run_id in (run.id, child, record.run_id, large_run(db, 300)):
        model = DebuggerModel(db, run_id)
        data = build_timeline(model)
        assert not data.aggregated
        assert _bars(data) == _bars_before(model), run_id
        assert all(MERGED.match(b[3]) is None for bars in _bars(data).values() for b in bars)


def test_a_label_names_the_row(db: st.Database, wide_bins: int) -> None:
    run_id = large_run(db, 3_000, nodes=("a", "b"))  # a loop: rows per node past 40 pairs
    data = build_timeline(DebuggerModel(db, run_id), aggregate_at=100)
    merged = [MERGED.match(b[3]) for bars in _bars(data).values() for b in bars]
    labels = {m.group(2) for m in merged if m}
    assert labels and labels <= {node_label("a", 0), node_label("b", 0)}
