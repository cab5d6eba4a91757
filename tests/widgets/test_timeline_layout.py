"""The timeline figure's layout (issue 33, item 5), checked on the figure dict; the browser
checks the same in 800 px and 1024 px windows (test_browser_layout.py)."""

from __future__ import annotations

import smithers_tt as st
from smithers_tt.demo import demo_workflow
from smithers_tt.widgets import DebuggerModel
from smithers_tt.widgets._html import CSS
from smithers_tt.widgets._timeline_figure import LANE, MAX_LANES, build_timeline


def _forked(db: st.Database, forks: int, at: int = 5) -> st.Run:
    run = db.run(demo_workflow()[0], {"topic": "bee"})
    for _ in range(forks):
        db.fork(run.id, at)
    return run


def _labels(layout: dict) -> list[dict]:
    return [a for a in layout["annotations"] if "fork" in a["text"]]


def test_labels_of_forks_at_one_frame_each_have_a_line_above_the_plot(db: st.Database) -> None:
    run = _forked(db, 3)
    layout = build_timeline(DebuggerModel(db, run.id)).figure["layout"]
    labels = _labels(layout)
    assert len(labels) == 3
    assert len({a["yshift"] for a in labels}) == 3  # one line each: never drawn over each other
    for a in labels:  # above the plot area (the run's markers are its top row), in the margin
        assert a["y"] == 1 and a["yref"] == "paper" and a["yanchor"] == "bottom"
        assert a["yshift"] + LANE <= layout["margin"]["t"]


def test_the_fork_of_label_is_above_the_run_row(db: st.Database) -> None:
    run = db.run(demo_workflow()[0], {"topic": "bee"})
    child = db.fork(run.id, 5)
    layout = build_timeline(DebuggerModel(db, child.id)).figure["layout"]
    (label,) = [a for a in layout["annotations"] if "fork of" in a["text"]]
    assert label["y"] == 1 and label["yanchor"] == "bottom"  # not over row 0's markers


def test_many_forks_at_one_frame_keep_a_bounded_margin(db: st.Database) -> None:
    run = _forked(db, MAX_LANES + 3)
    layout = build_timeline(DebuggerModel(db, run.id)).figure["layout"]
    labels = _labels(layout)
    assert len(labels) == MAX_LANES  # the last says how many more
    assert labels[-1]["text"] == "+4 more forks"
    assert len({a["yshift"] for a in labels}) == MAX_LANES
    assert layout["margin"]["t"] <= 10 + LANE * MAX_LANES


def test_the_legend_is_below_the_plot_and_the_figure_has_room_for_it(db: st.Database) -> None:
    run = _forked(db, 0)
    layout = build_timeline(DebuggerModel(db, run.id)).figure["layout"]
    legend = layout["legend"]
    assert legend["yref"] == "container" and legend["y"] == 0 and legend["yanchor"] == "bottom"
    rows = len(layout["yaxis"]["tickvals"])
    # the rows keep 26 px each (less only past the cap) once the margins and legend are off
    assert layout["height"] - layout["margin"]["t"] - layout["margin"]["b"] - 110 >= 26 * rows


def test_the_frame_table_rows_end_in_an_ellipsis_and_are_whole() -> None:
    assert "text-overflow: ellipsis" in CSS.split(".stt-frame-rows option")[1].split("}")[0]
    # the list is exactly ten rows high: scrolled to any row, the top row is never cut
    assert "height: calc(10 * 18px + 2px)" in CSS
