"""``Debugger.close()`` closes every widget the debugger made: its parts, their layouts and
styles, the figures the timeline keeps open for the page (``KEEP_OPEN``), the fork tree's
buttons and the checkpoint editor's fields it replaced, the progress bar of the last action.
A widget left open keeps its comm, and its place in ipywidgets' registry, for as long as the
kernel lives; a notebook that opens a debugger per cell piles them up."""

from __future__ import annotations

from collections import Counter
from typing import Any

import ipywidgets as W
import pytest

import smithers_tt as st
from smithers_tt.demo import demo_workflow
from smithers_tt.widgets import Debugger
from smithers_tt.widgets._timeline import KEEP_OPEN

from ._support import view_drew


def _open_widgets() -> dict[str, Any]:
    """ipywidgets' registry of open widgets (model id -> widget)."""
    try:  # ipywidgets 8: a module-level dict (``Widget.widgets`` warns it is deprecated)
        from ipywidgets.widgets.widget import _instances
    except ImportError:  # ipywidgets 7
        return dict(W.Widget.widgets)
    return dict(_instances)


def _left_open(before: dict[str, Any]) -> Counter[str]:
    """The kinds of widgets opened since ``before`` and still open."""
    now = _open_widgets()
    return Counter(type(w).__name__ for key, w in now.items() if key not in before)


def _drawn(figure: Any) -> None:
    """What plotly's view sends once it plotted the figure (the layout it computed)."""
    view_drew(figure)


def _use_everything(dbg: Debugger, db: st.Database, drawn: bool) -> None:
    """What a person does with a debugger: redraws past ``KEEP_OPEN`` (the theme), a selection,
    a fork with an edited checkpoint, a switch to it and back, a rewind and its undo, the time
    axis, the diff's modes."""
    for n in range(KEEP_OPEN + 2):
        dbg.timeline.set_theme({**dbg.timeline.theme, "panel": f"#00000{n}"})
        if drawn:
            _drawn(dbg.timeline.figure)
    dbg.select_frame(7)
    actions = dbg.actions
    actions.edit_node.value = "research"  # the editor lays out one field per key
    actions.checkpoint_editor.set_field("notes", '["edited"]')
    actions.fork.click()
    actions.confirm.click()
    child = dbg.model.last_result.run_id
    dbg.fork_tree.open(child)
    dbg.fork_tree.open(dbg.model.root)
    dbg.select_frame(5)
    actions.rewind.click()
    actions.confirm.click()
    actions.undo.click()
    actions.confirm.click()
    dbg.timeline.time_axis.value = True
    for mode in ("runs", "attempts", "frames"):
        dbg.diff.mode.value = mode
    db.fork(dbg.model.run_id, 3)  # a fork made elsewhere: the tree gains a button
    dbg.refresh()


@pytest.mark.parametrize("drawn", [False, True], ids=["never-displayed", "drawn-by-a-view"])
def test_close_leaves_no_widget_of_the_debugger_open(db: st.Database, drawn: bool) -> None:
    wf, _ = demo_workflow()
    run = db.run(wf, {"topic": "bee"})
    before = _open_widgets()
    dbg = Debugger(db, run.id, workflow=wf, live=False)
    _use_everything(dbg, db, drawn)
    assert dbg.model.last_frame == run.refresh().record.clock  # the undo brought it all back
    opened = _left_open(before)
    assert opened["FigureWidget"] >= 1 and opened["Button"] > 10  # the debugger made them
    dbg.close()
    assert _left_open(before) == Counter()


def test_redraws_close_the_widgets_they_replace(db: st.Database) -> None:
    """Redrawing the fork tree, refilling the editor's fields and redrawing the timeline
    (once a view drew the new figure) leave as many widgets open as before."""
    wf, _ = demo_workflow()
    run = db.run(wf, {"topic": "bee"})
    db.fork(run.id, 4)
    dbg = Debugger(db, run.id, workflow=wf, live=False)
    dbg.select_frame(7)
    dbg.actions.edit_node.value = "research"
    _drawn(dbg.timeline.figure)
    before = len(_open_widgets())
    for n in range(3):
        dbg.fork_tree.update()
        dbg.actions.edit_node.value = "(no edit)" if n % 2 else "research"
        dbg.timeline.set_theme({**dbg.timeline.theme, "panel": f"#00000{n}"})
        _drawn(dbg.timeline.figure)
    assert len(_open_widgets()) == before
    dbg.close()
