"""The timeline's figure is replaced on every redraw, never edited: a view cannot keep an old
run's plot (see ``TimelineView``'s docstring, and test_browser_sequences.py in the browser)."""

from __future__ import annotations

import smithers_tt as st
from smithers_tt.demo import demo_workflow
from smithers_tt.widgets import Debugger
from smithers_tt.widgets._timeline_figure import build_timeline


def _names_and_sizes(figure) -> list[tuple[str, int]]:
    return [(t.name, len(t.x)) for t in figure.data]


def test_every_redraw_lays_out_a_new_figure_with_the_whole_state(db: st.Database) -> None:
    wf, _ = demo_workflow()
    run = db.run(wf, {"topic": "bee"})
    child = db.fork(run.id, 5)
    dbg = Debugger(db, run.id, workflow=wf, live=False)
    shown = [dbg.timeline.figure]

    def check() -> None:
        figure = dbg.timeline.figure
        assert dbg.timeline.widget.children == (figure,)  # the one laid out is the new one
        assert figure is not shown[-1] and shown[-1].comm is None  # the old one is closed
        expected = build_timeline(dbg.model).figure
        assert _names_and_sizes(figure) == [(t["name"], len(t["x"])) for t in expected["data"]]
        # a view that renders this widget draws from its state: the same traces
        assert [t["name"] for t in figure._widget_data] == [t["name"] for t in expected["data"]]
        assert figure.layout.xaxis.range == tuple(expected["layout"]["xaxis"]["range"])
        assert figure.layout.shapes[0].x0 == dbg.model.frame_no
        shown.append(figure)

    dbg.fork_tree.open(child.id)  # another run
    check()
    dbg.fork_tree.open(run.id)
    check()
    dbg.select_frame(9)
    dbg.actions.rewind.click()
    dbg.actions.confirm.click()  # a rewind
    assert dbg.model.last_frame == 9
    check()
    dbg.actions.undo.click()
    dbg.actions.confirm.click()  # and its undo
    check()
    dbg.timeline.time_axis.value = True  # the axis: a new figure, on wall-clock times
    assert dbg.timeline.figure is not shown[-1] and shown[-1].comm is None
    assert isinstance(dbg.timeline.figure.layout.shapes[0].x0, str)
    dbg.close()
