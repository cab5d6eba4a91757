"""The timeline's figure is replaced on every redraw, never edited: a view cannot keep an old
run's plot, nor an old selected-frame line (see ``TimelineView``'s docstring, and
test_browser_sequences.py in the browser). A replaced figure stays open until a view drew a
newer one: the page shows it until then, and a click there still reaches the debugger."""

from __future__ import annotations

from typing import Any

import pytest

import smithers_tt as st
from smithers_tt.demo import demo_workflow
from smithers_tt.widgets import Debugger
from smithers_tt.widgets._timeline import KEEP_OPEN
from smithers_tt.widgets._timeline_figure import build_timeline

from ._support import view_drew


def _names_and_sizes(figure) -> list[tuple[str, int]]:
    return [(t.name, len(t.x)) for t in figure.data]


def _drawn(figure: Any) -> None:
    """What plotly's view sends once it plotted the figure (the layout it computed)."""
    view_drew(figure)


def _click(figure: Any, trace_name: str, point: int) -> None:
    """What plotly's view sends when a person clicks a point of ``figure``."""
    index = next(i for i, t in enumerate(figure.data) if t.name == trace_name)
    figure._js2py_pointsCallback = {
        "event_type": "plotly_click",
        "points": {"xs": [0], "ys": [0], "point_indexes": [point], "trace_indexes": [index]},
    }


def test_every_redraw_lays_out_a_new_figure_with_the_whole_state(db: st.Database) -> None:
    wf, _ = demo_workflow()
    run = db.run(wf, {"topic": "bee"})
    child = db.fork(run.id, 5)
    dbg = Debugger(db, run.id, workflow=wf, live=False)
    shown = [dbg.timeline.figure]

    def check() -> None:
        figure = dbg.timeline.figure
        assert dbg.timeline.widget.children == (figure,)  # the one laid out is the new one
        assert figure is not shown[-1] and shown[-1].comm is not None  # the page may show it
        _drawn(figure)  # until a view drew the new one
        assert shown[-1].comm is None and figure.comm is not None
        expected = build_timeline(dbg.model).figure
        assert _names_and_sizes(figure) == [(t["name"], len(t["x"])) for t in expected["data"]]
        # a view that renders this widget draws from its state: the same traces
        assert [t["name"] for t in figure._widget_data] == [t["name"] for t in expected["data"]]
        assert figure.layout.xaxis.range == tuple(expected["layout"]["xaxis"]["range"])
        assert figure.layout.shapes[0].x0 == dbg.model.frame_no
        assert figure._widget_layout["shapes"][0]["x0"] == dbg.model.frame_no
        shown.append(figure)

    dbg.fork_tree.open(child.id)  # another run
    check()
    dbg.fork_tree.open(run.id)
    check()
    figure = dbg.timeline.figure
    dbg.select_frame(9)  # a selection: an edit of the line, in the views and their start state
    assert dbg.timeline.figure is figure
    assert figure.layout.shapes[0].x0 == 9 and figure._widget_layout["shapes"][0]["x0"] == 9
    dbg.actions.rewind.click()
    dbg.actions.confirm.click()  # a rewind
    assert dbg.model.last_frame == 9
    check()
    dbg.actions.undo.click()
    dbg.actions.confirm.click()  # and its undo
    check()
    dbg.timeline.time_axis.value = True  # the axis: a new figure, on wall-clock times
    assert dbg.timeline.figure is not shown[-1]
    assert isinstance(dbg.timeline.figure.layout.shapes[0].x0, str)
    dbg.close()


def test_a_click_on_a_figure_the_page_still_shows_reaches_the_debugger(db: st.Database) -> None:
    """The page draws a new figure seconds after the kernel made it: a click on the one it
    still shows toggles the breakpoint (it was lost in a closed comm), and one on a plot of a
    run no longer shown does nothing."""
    wf, _ = demo_workflow()
    run = db.run(wf, {"topic": "bee"}, break_before=["write"])
    dbg = Debugger(db, run.id, workflow=wf, live=False)
    shown = dbg.timeline.figure
    toggles = list(dbg.timeline.data.toggles)
    dbg.theme_probe.theme = {"light": True, "ink": "rgb(1, 2, 3)"}  # a redraw: a new figure
    assert dbg.timeline.figure is not shown
    _click(shown, "breakpoints", toggles.index(("review", "before")))  # on the old one
    assert dbg.model.breakpoints.is_set("review", "before")
    _click(shown, "breakpoints", toggles.index(("review", "before")))
    assert not dbg.model.breakpoints.is_set("review", "before")
    dbg.select_frame(2)
    frames = dbg.timeline.data.frames_of
    _click(shown, "run", 0)  # a point of the old figure selects its own frame
    assert dbg.model.frame_no == frames[[t.name for t in shown.data].index("run")][0]
    child = db.fork(run.id, 1)
    other = dbg.timeline.figure
    dbg.fork_tree.open(child.id)
    before = dbg.model.frame_no
    _click(other, "run", 0)  # a plot of the parent, while the fork is shown: nothing
    assert dbg.model.run_id == child.id and dbg.model.frame_no == before
    dbg.close()


def test_replaced_figures_close_once_a_view_drew_a_newer_one_or_past_a_few(
    db: st.Database,
) -> None:
    run = db.run(demo_workflow()[0], {"topic": "bee"})
    dbg = Debugger(db, run.id, live=False)  # never displayed: no view reports a draw
    figures = [dbg.timeline.figure]
    for n in range(1, 9):
        dbg.timeline.set_theme({**dbg.timeline.theme, "panel": f"#00000{n}"})  # a redraw each
        figures.append(dbg.timeline.figure)
    assert len(set(map(id, figures))) == len(figures)
    assert [f.comm is not None for f in figures] == [False] * (9 - KEEP_OPEN) + [True] * KEEP_OPEN
    _drawn(figures[-2])  # a view drew one of the open ones: those before it close
    assert [f.comm is not None for f in figures[-KEEP_OPEN:]] == [False] * (KEEP_OPEN - 2) + [
        True,
        True,
    ]
    dbg.close()


def test_a_views_first_draw_gets_the_selected_frame_line_again_once(db: st.Database) -> None:
    """A view that rendered while a selection's edit was in flight drew the old line; its
    first report of a draw gets the line sent again, and later reports (each edit is answered
    by one) do not, so the two never ping-pong."""
    run = db.run(demo_workflow()[0], {"topic": "bee"})
    dbg = Debugger(db, run.id, live=False)
    figure = dbg.timeline.figure
    sent: list[dict[str, Any]] = []
    figure._send_relayout_msg = lambda edit, *args, **kwargs: sent.append(edit)
    dbg.select_frame(4)
    sent.clear()  # the selection's own edit (the one a late view missed)
    _drawn(figure)
    assert sent == [{"shapes[0].x0": 4, "shapes[0].x1": 4}]
    _drawn(figure)
    view_drew(figure, edit=1)
    assert len(sent) == 1
    dbg.close()


def test_a_draw_reported_as_the_installed_plotly_reports_it_reaches_the_timeline(
    db: st.Database,
) -> None:
    """plotly 6 and 7's view reports a draw under ``_js2py_widget_layoutDelta``, a key plain
    ``FigureWidget`` has no trait for (dropped: no draw reached the timeline in a real page,
    so a view that rendered while a selection's edit was in flight kept its old line, seen in
    the browser sequences as "line: page 12, kernel 11"). The key plotly's bundle sets is one
    the timeline hears: the line is sent again, and the figures it replaced close."""
    run = db.run(demo_workflow()[0], {"topic": "bee"})
    dbg = Debugger(db, run.id, live=False)
    dbg.timeline.set_theme({**dbg.timeline.theme, "panel": "#000001"})  # a redraw
    older, figure = dbg.timeline._open[0], dbg.timeline.figure
    sent: list[dict[str, Any]] = []
    figure._send_relayout_msg = lambda edit, *args, **kwargs: sent.append(edit)
    dbg.select_frame(3)
    sent.clear()
    view_drew(figure)  # the page plotted the new figure (from state before the selection)
    assert sent == [{"shapes[0].x0": 3, "shapes[0].x1": 3}]
    assert older.comm is None and figure.comm is not None
    dbg.close()


def test_a_run_switch_or_a_rewind_lays_out_one_new_figure(
    db: st.Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every figure laid out carries plotly's 5 MB bundle to the page and blanks the plot until
    it is drawn: an action that announces several changes at once (a switch: the run and the
    fork tree; a rewind: the frames and the tree) lays out one, not one per announcement."""
    from smithers_tt.widgets import _timeline

    wf, _ = demo_workflow()
    run = db.run(wf, {"topic": "bee"})
    child = db.fork(run.id, 5)
    dbg = Debugger(db, run.id, workflow=wf, live=False)
    made: list[Any] = []
    real = _timeline._figure_widget
    monkeypatch.setattr(
        _timeline, "_figure_widget", lambda *a, **k: made.append(1) or real(*a, **k)
    )

    def laid_out(action: Any) -> int:
        made.clear()
        action()
        return len(made)

    assert laid_out(lambda: dbg.fork_tree.open(child.id)) == 1
    assert dbg.timeline.figure.layout.shapes[0].x0 == dbg.model.frame_no
    assert laid_out(lambda: dbg.fork_tree.open(run.id)) == 1
    dbg.select_frame(9)

    def rewind() -> None:
        dbg.actions.rewind.click()
        dbg.actions.confirm.click()

    assert laid_out(rewind) == 1 and dbg.model.last_frame == 9
    assert laid_out(lambda: dbg.select_frame(3)) == 0  # a selection edits the line
    dbg.close()
