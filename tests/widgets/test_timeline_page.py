"""The page ends on the kernel's selected-frame line whatever the order in which the kernel's
messages, the page's draws and its reports interleave, and whether or not a figure's page
model hears the kernel after its comm opened (see ``HEARD`` in
``smithers_tt/widgets/_timeline.py``, and ``_plotly_page.py`` for the page).

The browser sequences saw "line: page 12, kernel 11" on a loaded machine: a figure opened
with the line at frame 12, its page model gave up on plotly's module after 2 s and dropped
every message after the opening one, and the selection of frame 11 (an edit of that figure)
never reached the page; nor did the line sent again on the view's first draw.
"""

from __future__ import annotations

import random
from typing import Any

import comm
import pytest

import smithers_tt as st
from smithers_tt.demo import demo_workflow
from smithers_tt.widgets import Debugger

from ._plotly_page import Page


def _debugger(db: st.Database, page: Page, monkeypatch: pytest.MonkeyPatch) -> Debugger:
    """A debugger of a finished demo run (frames 0 to 20), shown by ``page``."""
    monkeypatch.setattr(comm, "create_comm", page.comm)
    run = db.run(demo_workflow()[0], {"topic": "bee"})
    dbg = Debugger(db, run.id, live=False)
    page.box_id = dbg.timeline.box.model_id  # before the page handles any message
    return dbg


def _kernel_line(dbg: Debugger) -> Any:
    return dbg.timeline.figure.layout.shapes[0].x0


def _redraw(dbg: Debugger, n: int) -> None:
    """A redraw: a new figure (another theme)."""
    dbg.timeline.set_theme({**dbg.timeline.theme, "panel": f"#{n:06x}"})


@pytest.mark.parametrize("report_first", [True, False], ids=["drawn-first", "selected-first"])
def test_a_selection_reaches_a_page_whose_figure_model_hears_nothing(
    db: st.Database, monkeypatch: pytest.MonkeyPatch, report_first: bool
) -> None:
    """The order of the browser sequences' failure: a figure opened with the line at 12 whose
    page model hears nothing more, then the selection of 11 (before or after the page's
    report of its first draw reached the kernel)."""
    page = Page(deaf=lambda n: n >= 1)  # the first figure hears; the redraw's does not
    dbg = _debugger(db, page, monkeypatch)
    dbg.select_frame(12)
    _redraw(dbg, 1)
    page.handle()
    page.plot()
    assert page.line() == 12
    if report_first:
        page.report()
    dbg.select_frame(11)  # the scrubber's "previous frame"
    page.settle()
    assert (page.line(), _kernel_line(dbg)) == (11, 11), "the page kept the old line"
    assert page.shown() == dbg.timeline.figure.model_id
    dbg.close()


def test_a_figure_whose_page_model_hears_the_kernel_is_edited_not_replaced(
    db: st.Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A selection on a page that hears the kernel stays one edit of the figure shown (a new
    figure per selection blanks the plot until the page draws it)."""
    page = Page()
    dbg = _debugger(db, page, monkeypatch)
    page.settle()
    figure = dbg.timeline.figure
    for frame in (3, 7, 2):
        dbg.select_frame(frame)
        page.settle()
        assert page.line() == frame and dbg.timeline.figure is figure
    dbg.close()


def test_a_page_model_that_hears_nothing_keeps_its_figure_while_the_line_stays(
    db: st.Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A figure whose page model hears nothing is replaced only when its line is wrong: the
    page's report of its draw alone does not churn figures."""
    page = Page(deaf=lambda n: True)
    dbg = _debugger(db, page, monkeypatch)
    page.settle()
    figure = dbg.timeline.figure
    assert page.line() == 20 and page.shown() == figure.model_id
    dbg.select_frame(20)
    page.settle()
    assert dbg.timeline.figure is figure
    dbg.select_frame(5)
    page.settle()
    assert page.line() == 5 and dbg.timeline.figure is not figure
    dbg.close()


@pytest.mark.parametrize("seed", range(16))
def test_the_page_ends_on_the_kernels_line_in_any_interleaving(
    db: st.Database, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    """Selections, redraws and the time axis in a seeded order, interleaved at random with
    the page handling some of the kernel's messages, plotting, and reporting some draws,
    with each figure's page model hearing the kernel or not at random: once the page caught
    up, it shows the kernel's figure with the kernel's line."""
    rng = random.Random(seed)
    page = Page(deaf=lambda n: rng.random() < 0.5)
    dbg = _debugger(db, page, monkeypatch)
    for step in range(40):
        what = rng.choice(["select", "select", "redraw", "axis", "handle", "plot", "report"])
        if what == "select":
            dbg.select_frame(rng.randint(0, dbg.model.last_frame))
        elif what == "redraw":
            _redraw(dbg, step)
        elif what == "axis" and rng.random() < 0.3:
            dbg.timeline.time_axis.value = not dbg.timeline.time_axis.value
        elif what == "handle":
            page.handle(rng.randint(1, 6))
        elif what == "plot":
            page.plot()
        elif what == "report":
            page.report(rng.randint(1, 3))
    page.settle()
    assert page.shown() == dbg.timeline.figure.model_id
    assert page.line() == _kernel_line(dbg)
    if not dbg.timeline.time_axis.value:
        assert page.line() == dbg.model.frame_no
    dbg.close()
