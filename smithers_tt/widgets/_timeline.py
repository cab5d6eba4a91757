"""The timeline widget: a plotly ``FigureWidget`` of a run's figure
(:mod:`~smithers_tt.widgets._timeline_figure`), one row per node (and loop iteration).

Every point knows its frame: a click selects it through the controller, and a click on a
breakpoint toggle (:mod:`~smithers_tt.widgets._timeline_gutter`) turns it on or off through
``model.breakpoints``. :class:`TimelineView` redraws from the model when it announces a change.
"""

from __future__ import annotations

import functools
from typing import Any

from smithers_tt.widgets._bulk import paused_gc
from smithers_tt.widgets._close import close_all
from smithers_tt.widgets._model import DebuggerModel
from smithers_tt.widgets._plotly_once import LOADER, plotly_bundle
from smithers_tt.widgets._theme import LIGHT
from smithers_tt.widgets._timeline_data import TimelineData
from smithers_tt.widgets._timeline_figure import _iso, build_timeline

DRAWN = ("_js2py_layoutDelta", "_js2py_widget_layoutDelta")
"""The state keys by which plotly's view says it plotted a figure (it sends the layout it
computed). plotly.py observes ``_js2py_layoutDelta``, but the widget bundle of plotly 6 and 7
sets ``_js2py_widget_layoutDelta`` (its rename of ``_layout`` to ``_widget_layout`` reached
that name too), a key ``FigureWidget`` has no trait for: ipywidgets dropped every report, so
no draw ever reached :meth:`TimelineView._drawn` in a real page, and a view that rendered
while a selection's edit was in flight kept the old selected-frame line for good. The figure
class here (:func:`_figure_class`) has a trait for that key as well, and the timeline listens
to both."""


@functools.cache
def _figure_class() -> Any:
    """plotly's ``FigureWidget`` with a trait for the key its bundle reports a draw under, whose
    page model evaluates plotly's bundle once per page, not once per figure
    (:mod:`~smithers_tt.widgets._plotly_once`: ``BUNDLE`` and ``KEY`` name these traits)."""
    import plotly.graph_objects as go
    import traitlets
    from plotly.serializers import custom_serializers

    bundle, key = plotly_bundle()

    class FigureWidget(go.FigureWidget):  # type: ignore[misc]  # plotly's name, in counts too
        _esm = LOADER
        _plotly_bundle = traitlets.Unicode(bundle).tag(sync=True)
        _plotly_bundle_key = traitlets.Unicode(key).tag(sync=True)
        _js2py_widget_layoutDelta = traitlets.Dict(allow_none=True).tag(
            sync=True, **custom_serializers
        )

    return FigureWidget


HEARD = 1
"""The layout edit id a figure's page model is sent right after its comm opens, before the
figure is laid out: a model that hears the kernel has it when its view plots, and the view's
first report of a draw says so (``layout_edit_id``).

A model that does not report it never will hear anything: anywidget (0.11) gives a model's
module 2 s to load, and if it takes longer every later message to that model is dropped
(``_handle_comm_msg`` awaits ``Runtime.ready``, which the timeout rejected for good), while
its view still plots from the state the comm opened with once the module loads. Those 2 s
run from the model's creation until its module is imported *and* its ``initialize`` has
returned, so they cover the figures' loader awaiting plotly's 5 MB bundle
(:mod:`~smithers_tt.widgets._plotly_once`). The page compiles the bundle once, for its first
figure (and any opened while it compiles): on a loaded machine that takes more than 2 s, and
a selection's edit of such a figure never reached the page ("line: page 12, kernel 11" in the
browser sequences, when plotly's bundle was every figure's module and compiled anew for
each). A figure opened later gets the compiled bundle at once. JupyterLab hands the page's
messages over one at a time, each once the last is handled, so a model that hears the kernel
has this edit id before the message that lays the figure out creates its view."""


def _figure_widget(figure: dict[str, Any], line: Any = None) -> Any:
    """A ``FigureWidget`` whose comm opens with the figure already in its state, with the
    selected-frame line at ``line`` when given (else where the figure was built), and
    ``HEARD`` sent after.

    plotly opens the widget's comm first and sets ``_widget_data`` / ``_widget_layout`` in a
    second message; a view that renders in between (seen in JupyterLab under load, about one
    time in four) draws an empty plot and never recovers, because later trace messages only
    edit what it drew. Reopening the comm sends everything in the opening message.
    """
    if line is not None:
        layout = figure["layout"]
        shapes = [dict(shape) for shape in layout["shapes"]]
        shapes[0].update(x0=line, x1=line)
        figure = {**figure, "layout": {**layout, "shapes": shapes}}
    fig = _figure_class()(figure)
    fig._config = {"responsive": True, "displaylogo": False}  # follows the cell's width
    fig.close()
    vars(fig).pop("_repr_mimebundle_", None)  # close() hides plotly's own display method
    fig.open()
    fig._last_layout_edit_id = HEARD
    return fig


KEEP_OPEN = 4
"""Replaced figures kept open (their clicks still reach Python) until a view draws a newer
one; past this many the oldest is closed anyway (a debugger never displayed draws none)."""


class TimelineView:
    """The timeline as a plotly ``FigureWidget`` driven by (and driving) the model, with a
    switch between a frame axis and a wall-clock time axis.

    Every redraw (another run, new frames, a rewind, the theme, the axis) replaces the
    ``FigureWidget`` inside :attr:`widget` by a new one that opens with the whole figure in its
    state, instead of editing the one shown. plotly's views apply edits (delete traces, add
    traces, relayout) to what they drew; a view that missed or could not apply one (a view
    rendered while the edits were in flight, a delete of traces it does not have, a relayout of
    the line that came before the view listened) kept drawing an old run or an old line for
    good, while every other part of the debugger showed the new one. A view of a new widget
    draws all of its state, so no earlier message can leave it behind. A new figure costs the
    page no new compile of plotly's 5 MB bundle: a page compiles it once, for its first figure
    (:mod:`~smithers_tt.widgets._plotly_once`). Only the selected-frame line is an edit
    (:meth:`show_selection` says why), except in a figure whose page model hears nothing
    (``HEARD``): there a selection lays out a new figure too, as an edit would never arrive.

    A replaced figure is not closed at once: the page shows it until it has drawn the new one
    (seconds on a busy machine, most for a page's first figure, which compiles the bundle),
    and a click there (a person's, on what they see) must not be lost in a closed comm. Each
    figure's clicks are read against the figure data it was drawn from; older figures close
    once a view reports it drew a newer one (plotly's view sends its layout back after it
    plots), or when more than ``KEEP_OPEN`` wait.
    """

    def __init__(self, model: DebuggerModel) -> None:
        import ipywidgets as W

        self.model = model
        self.theme: dict[str, Any] = dict(LIGHT)
        self.time_axis = W.Checkbox(
            value=False,
            description="time axis",
            indent=False,
            tooltip="wall-clock time on the x axis instead of frame numbers",
            layout=W.Layout(width="auto"),
        )
        self.time_axis.observe(lambda _: self.rebuild(), names="value")
        self.box = W.Box([], layout=W.Layout(width="100%"))
        self.box.add_class("stt-timeline")
        self._open: list[Any] = []  # figures laid out and not yet closed, oldest first
        self._lined: Any = None  # the figure whose first draw report was answered
        self._deaf = False  # the page's model of the figure shown hears nothing (``HEARD``)
        self._opened_at: Any = None  # the line the figure shown opened with
        self._show(self._build())
        model.on("run", self.rebuild)
        model.on("frames", self.rebuild)
        model.on("tree", self.rebuild)
        model.on("breakpoints", self.rebuild)
        model.on("frame", self.show_selection)

    @property
    def widget(self) -> Any:
        """What to lay out: the box that holds the current figure."""
        return self.box

    def _build(self) -> TimelineData:
        with paused_gc():
            return build_timeline(self.model, theme=self.theme, time_axis=self.time_axis.value)

    def set_theme(self, theme: dict[str, Any]) -> None:
        """Colour the figure for a theme (a :func:`~smithers_tt.widgets._theme.clean_theme`
        dict); redraws only when it changed."""
        if theme != self.theme:
            self.theme = dict(theme)
            self.rebuild()

    def _show(self, data: TimelineData, line: Any = None) -> None:
        """Lay out a new figure of ``data`` in place of the one shown (see the class
        docstring), with the selected-frame line at ``line`` when given."""
        figure = _figure_widget(data.figure, line)
        self._deaf, self._opened_at = False, figure.layout.shapes[0].x0
        run_id = self.model.run_id

        def clicked(trace: Any, points: Any, selector: Any = None) -> None:
            self._clicked(data, run_id, points)

        for trace in figure.data:
            trace.on_click(clicked)
        figure.observe(lambda change: self._drawn(figure, change), names=list(DRAWN))
        self.data, self.figure = data, figure
        self._open.append(figure)
        self.box.children = (figure,)
        while len(self._open) > KEEP_OPEN:
            close_all([self._open.pop(0)])

    def _drawn(self, figure: Any, change: dict[str, Any]) -> None:
        """A view drew ``figure``: close the figures it replaced, and answer its first report
        (once per figure: the view answers each edit with a draw). A page model that heard
        ``HEARD`` gets the selected-frame line again (a view that rendered while a selection's
        edit was in flight drew the line from before it; once it reports a draw it listens);
        one that did not never hears anything, and gets a new figure if the line moved since
        it opened."""
        report = change["new"]
        if not report or figure not in self._open:
            return
        older = self._open[: self._open.index(figure)]
        del self._open[: len(older)]
        close_all(older)
        if figure is self.figure and self._lined is not figure:
            self._lined = figure
            self._deaf = (report.get("layout_edit_id") or 0) < HEARD
            self.resend_selection()

    def on_click(self, trace: Any, points: Any, selector: Any = None) -> None:
        """plotly's click callback on the figure shown: select the frame of the clicked
        point, or turn the clicked breakpoint toggle on or off."""
        self._clicked(self.data, self.model.run_id, points)

    def _clicked(self, data: TimelineData, run_id: str, points: Any) -> None:
        """A click on a point of a figure drawn from ``data`` for run ``run_id`` (the one
        shown, or one the page still shows while it draws the next)."""
        if not points.point_inds or run_id != self.model.run_id:
            return  # no point, or a plot of a run no longer shown: nothing it names is here
        if data.toggles and points.trace_index == len(data.frames_of) - 1:
            node_id, when = data.toggles[points.point_inds[0]]
            self.model.breakpoints.toggle(node_id, when)
            return
        frames = data.frames_of[points.trace_index]
        frame = frames[points.point_inds[0]]
        if frame is not None and frame <= self.model.last_frame:  # not one a rewind undid
            self.model.select_frame(frame)

    def click(self, trace_name: str, point: int = 0) -> None:
        """Act as if the person clicked point ``point`` of the named trace (for tests)."""
        for index, trace in enumerate(self.figure.data):
            if trace.name == trace_name:

                class _Points:
                    trace_index = index
                    point_inds = [point]

                self.on_click(trace, _Points())
                return
        raise KeyError(trace_name)

    def close(self) -> None:
        """Close every figure still open (the one shown, and those replaced that wait for a
        view to draw a newer one) and the timeline's own widgets."""
        close_all([*self._open, self.box, self.time_axis])
        self._open.clear()

    def rebuild(self) -> None:
        """Redraw every trace (new frames, another run, a rewind, the theme, the axis)."""
        self._show(self._build())

    def resend_selection(self) -> None:
        """Send the selected-frame line to every view again, even where Python's copy of the
        layout already holds it (plotly sends only changes); to a page model that hears
        nothing, a new figure instead, if the line moved since it opened."""
        x = self.figure.layout.shapes[0].x0
        if not self._reopened(x):
            self.figure._send_relayout_msg({"shapes[0].x0": x, "shapes[0].x1": x})

    def _reopened(self, x: Any) -> bool:
        """Whether the page's model of the figure shown hears nothing (``HEARD``), having laid
        out a new figure with the selected-frame line at ``x`` if it moved since that one
        opened (all its view can draw)."""
        if not self._deaf:
            return False
        if x != self._opened_at:
            self._show(self.data, line=x)
        return True

    def show_selection(self) -> None:
        """Move the selected-frame line, in the views shown and in the state a view shown
        later starts from (a frame selected before ``display`` must show there too).

        The one edit of a figure shown, not a new figure: a new figure per selection (tried)
        made every scrub step blank the plot until the page drew it again (seconds, under
        load) and tripled a selection's cost at 100,000 frames. A view that renders while the
        edit is in flight draws the old line until its first report of a draw gets the line
        again (:meth:`_drawn`); a figure whose page model hears nothing gets a new figure
        instead (:meth:`_reopened`)."""
        n = self.model.frame_no
        x: Any = _iso(self.model.frame(n).created_at_ms or 0) if self.time_axis.value else n
        if self._reopened(x):
            return
        fig = self.figure
        # not under hold_sync: plotly sends each edit by setting a trait and clearing it at
        # once, so holding the sync would send only the cleared value
        fig.layout.shapes[0].update(x0=x, x1=x)
        start = dict(fig._widget_layout)
        shapes = [dict(shape) for shape in start.get("shapes") or ()]
        if shapes:
            shapes[0].update(x0=x, x1=x)
            start["shapes"] = shapes
            fig._widget_layout = start
