"""The timeline's figure: a plotly figure dict of a run, one row per node (and loop
iteration), and per trace the frame of every point.

Attempts are bars coloured by state; checkpoint publications are markers by purpose
(``progress`` circle, ``turn`` diamond, ``schema-correction`` star, ``session`` square);
retries are marked where the new attempt starts; fork points are dashed lines, labelled above
the plot. Past ``AGGREGATE_AT`` frames the markers are binned (one per node, purpose and bin
of frames, with a count) and past ``GL_AT`` points the traces are WebGL (``scattergl``), so a
10,000-frame run stays light. :func:`build_timeline` is pure; one function makes the figure of
what either gatherer finds (:func:`_figure`).
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

from smithers_tt.store.for_widgets import FrameRow
from smithers_tt.widgets._html import STATE_COLOURS, esc
from smithers_tt.widgets._model import DebuggerModel
from smithers_tt.widgets._theme import LIGHT, plotly_theme
from smithers_tt.widgets._timeline_data import (
    PURPOSE_SYMBOLS,
    TimelineData,
    _Attempt,
    _Gathered,
    _Trace,
)
from smithers_tt.widgets._timeline_gather import _gather_rows, _gather_sql
from smithers_tt.widgets._timeline_gutter import GUTTER, breakpoint_gutter, gutter_axis
from smithers_tt.widgets._words import (
    began_from,
    clock_time,
    describe_frame,
    duration,
    node_label,
)

try:  # optional: speeds up figures of long runs
    import numpy as np
except ImportError:  # pragma: no cover
    np = None  # type: ignore[assignment]


AGGREGATE_AT = 2_000
"""Runs with more frames than this get binned markers."""

BINS = 400
"""About how many bins of frames an aggregated timeline has."""

GL_AT = 1_500
"""Past this many points the traces are drawn with WebGL."""


LATER_ATTEMPT = "attempt #2+ started"
"""The timeline's trace of attempts after a node's first: retries and re-runs."""


def _frame_text(f: FrameRow, t0: int | None = None) -> str:
    when = clock_time(f.created_at_ms)
    if t0 is not None and f.created_at_ms is not None:
        when += f" (+{duration(max(0, f.created_at_ms - t0))})"
    return f"<b>frame {f.frame_no}</b><br>{esc(describe_frame(f))}<br>{esc(when)}"


def _attempt_text(a: _Attempt, end_frame: int | None, compact: bool = False) -> str:
    if compact:  # long runs: one short line per bar end keeps the figure light
        end = "now" if end_frame is None else str(end_frame)
        label = node_label(a.node_id, a.iteration)
        text = f"{label} #{a.attempt} {a.state}, frames {int(a.start)}-{end}"
        took = a.took
        if took:
            text += f", took {took}"
        if a.error:
            text += f": {a.error[:60]}"
        return esc(text)
    lines = [
        f"<b>{esc(node_label(a.node_id, a.iteration))} attempt #{a.attempt}</b>",
        f"state: {esc(a.state)}",
    ]
    if a.inherited:
        lines.append("inherited from the parent run at the fork")
    else:
        end = "now" if end_frame is None else f"frame {end_frame}"
        lines.append(f"frames {int(a.start)} to {end}")
        if a.took:
            lines.append(f"took {a.took} ({clock_time(a.start_ms)} to {clock_time(a.end_ms)})")
        elif a.end is None and a.start_ms is not None:
            lines.append(f"started {clock_time(a.start_ms)}, still running")
    began = began_from(a.node_id, a.resumed_from)
    if began is not None:
        lines.append(esc(began))
    if a.error:
        text = a.error if len(a.error) <= 200 else a.error[:200] + "…"
        lines.append(f"error: {esc(text)}")
    return "<br>".join(lines)


def build_timeline(
    model: DebuggerModel,
    *,
    aggregate_at: int = AGGREGATE_AT,
    gl_at: int = GL_AT,
    theme: dict[str, Any] | None = None,
    time_axis: bool = False,
) -> TimelineData:
    """The timeline figure of the model's run (see the module docstring).

    ``theme`` (from :func:`smithers_tt.widgets._theme.clean_theme`) colours the figure;
    ``time_axis`` puts wall-clock time on the x axis instead of frame numbers (each point
    still selects its frame). A binned timeline (more frames than ``aggregate_at``) is made
    from counts the database makes, without reading the run's history
    (:func:`_gather_sql`), unless the model read it already; a short one from the model's
    frames (:func:`_gather_rows`). Both give the same figure.
    """
    aggregated = model.last_frame + 1 > aggregate_at  # frames 0 to last_frame: dense
    # the walk is the cheaper of the two once the history is read (a step back in time)
    gather = _gather_sql if aggregated and not model.history_loaded else _gather_rows
    return _figure(
        model, gather, aggregated=aggregated, gl_at=gl_at, theme=theme, time_axis=time_axis
    )


def _figure(
    model: DebuggerModel,
    gather: Any,
    *,
    aggregated: bool,
    gl_at: int = GL_AT,
    theme: dict[str, Any] | None = None,
    time_axis: bool = False,
) -> TimelineData:
    """The figure of what ``gather`` (:func:`_gather_rows` or :func:`_gather_sql`) finds,
    binned when ``aggregated``."""
    theme = theme or LIGHT
    last = model.last_frame
    width = max(1, math.ceil((last + 1) / BINS)) if aggregated else 1
    marks = model.breakpoints if model.breakpoints.enabled else None
    model.counted_choices = None  # the SQL gather counts them again; the walk does not
    found: _Gathered = gather(model, width, model.node_ids if marks else None, time_axis)
    rows, t0, times = found.rows, found.t0, found.times
    run_id = model.run_id

    def at(x: float | None) -> Any:
        """The x of a frame position: the frame number, or its time on a time axis."""
        if not time_axis or x is None:
            return x
        n = min(max(round(x), 0), last)
        ms = times.get(n) or t0 or 0
        return _iso(ms)

    checkpoints = {p: _Trace(f"checkpoint: {p}", "marker") for p in PURPOSE_SYMBOLS}
    node_events = _Trace("node state", "marker")
    run_events = _Trace("run", "marker")
    retries = _Trace(LATER_ATTEMPT, "marker")

    # attempt bars, one trace per state
    # (9,676 of them at 100,000 frames: three points each, so the loop stays plain)
    bars: dict[str, _Trace] = {}
    for a in found.attempts.values():
        state = "inherited" if a.inherited else a.state
        trace = bars.get(state)
        if trace is None:
            trace = bars[state] = _Trace(f"attempt: {state}", "bar")
        row = rows.of(a.node_id, a.iteration)
        if a.inherited:  # inside frame 0's slot: the axis never goes below frame 0
            start_frame = end_frame = 0
            start, end = (at(0), at(0)) if time_axis else (-0.45, -0.05)
            text = _attempt_text(a, None if a.end is None else int(a.end), aggregated)
        else:
            start_frame = int(a.start)
            if a.end is None:
                end, end_frame, text = last + 0.4, last, _attempt_text(a, None, aggregated)
            else:
                end = a.end
                end_frame = int(end)
                text = _attempt_text(a, end_frame, aggregated)
            start = a.start
            if time_axis:
                start, end = at(start), at(end)
        trace.bar(start, end, row, text, start_frame, end_frame)

    # markers: one per frame, or per bin of frames of a node and trace
    named = {"run": run_events, "node": node_events, "retry": retries}
    named.update({f"cp:{p}": t for p, t in checkpoints.items()})
    for (trace_key, row, _), b in found.bins:
        if b.count == 1:
            text = _frame_text(b.frame, t0)  # type: ignore[arg-type]
        else:
            what = named[trace_key].name
            text = f"<b>frames {b.first}-{b.last}</b><br>{b.count} x {esc(what)}"
        named[trace_key].point(at(b.last), row, text, b.last)

    traces: list[_Trace] = []
    order = ["inherited", "in_progress", "finished", "failed", "cancelled", "interrupted", "reset"]
    for state in order + sorted(set(bars) - set(order)):
        if state in bars:
            t = bars[state]
            colour = STATE_COLOURS.get(state, "#555")
            t.style = {"mode": "lines", "line": {"width": 12, "color": colour}, "opacity": 0.55}
            traces.append(t)
    for purpose, t in checkpoints.items():
        if t.x:
            t.style = {
                "mode": "markers",
                "marker": {
                    "symbol": PURPOSE_SYMBOLS[purpose],
                    "size": 11 if purpose == "schema-correction" else 8,
                    "color": "#e377c2" if purpose == "schema-correction" else theme["ink"],
                    "line": {"width": 1, "color": theme["panel"]},
                },
            }
            traces.append(t)
    if retries.x:
        retries.style = {
            "mode": "markers",
            # not red: a later attempt is a retry after a failure (its bar before is red) or a
            # re-run of a node a fork or a reset started again, which failed nothing
            "marker": {"symbol": "triangle-right", "size": 13, "color": STATE_COLOURS["running"]},
        }
        traces.append(retries)
    if node_events.x:
        node_events.style = {
            "mode": "markers",
            "marker": {"symbol": "line-ns-open", "size": 12, "color": theme["muted"]},
        }
        traces.append(node_events)
    if run_events.x:
        run_events.style = {
            "mode": "markers",
            "marker": {"symbol": "square", "size": 9, "color": theme["muted"]},
        }
        traces.append(run_events)

    points = sum(len(t.x) for t in traces)
    kind = "scattergl" if points > gl_at else "scatter"
    data = [
        {
            "type": kind,
            "name": esc(t.name),
            "x": _array(t.x, numbers=aggregated and not time_axis),
            "y": _array(t.y, numbers=aggregated),
            "hovertext": _array(t.text),
            "hoverinfo": "text",
            "showlegend": True,
            **t.style,
        }
        for t in traces
    ]

    gutter = breakpoint_gutter(rows, marks, theme) if marks is not None else None
    if gutter is not None:
        traces.append(gutter)
        data.append({"type": kind, "name": gutter.name, "x": gutter.x, "y": gutter.y,
                     "hovertext": gutter.text, "hoverinfo": "text", "showlegend": False,
                     "xaxis": "x2", **gutter.style})  # fmt: skip
    shapes, annotations = _fork_marks(model, theme, at)
    shapes.insert(0, selection_line(at(model.frame_no), theme))
    nrows = len(rows.labels)
    colours = plotly_theme(theme)
    if time_axis:
        # automargin: tilted time labels (a narrow cell) push the title below them; a
        # standoff puts it below all of them (without one, plotly may fit it in a gap
        # between two labels, over their lower ends: plotly.js issues 2575 and 6403)
        xaxis: dict[str, Any] = {
            "title": {"text": "time", "standoff": 4},
            "type": "date",
            "automargin": True,
            # a first label centred near the start reached over the gutter's captions
            "ticklabeloverflow": "hide past domain",
        }
    else:
        xaxis = {
            "title": {"text": "frame"},
            "range": [-0.5, max(last, 1) + 0.5],  # a one-frame run: frames 0 and 1, not -1.5
            "tick0": 0,
        }
        if last < SMALL_RUN:
            xaxis["dtick"] = 1  # else plotly may tick at halves of a frame
        # longer: plotly picks the step for the width (one a frame crowds a narrow cell)
    xaxis.update({"zeroline": False, "showgrid": True})
    if gutter is not None:  # the toggles' column, between the row labels and frame 0
        xaxis["domain"] = [GUTTER + 0.01, 1]
    top = 10 + LANE * len(annotations)  # the fork labels' lines, above the plot
    layout = {
        # the rows, the fork labels, and room for a legend wrapped in a narrow cell
        "height": max(200, min(640, 60 + 26 * nrows)) + top + LEGEND_ROOM,
        "autosize": True,
        "margin": {"l": 10, "r": 10, "t": top, "b": 30},
        "xaxis": {
            **colours["xaxis"],
            **xaxis,
            "title": {**colours["xaxis"]["title"], **xaxis["title"]},
        },
        "yaxis": {
            **colours["yaxis"],
            "tickvals": list(range(nrows)),
            "ticktext": [esc(label) for label in rows.labels],
            "range": [nrows - 0.5, -0.5],
            "automargin": True,
            "fixedrange": True,
            "zeroline": False,
            **({"anchor": "x2"} if gutter is not None else {}),
        },
        **({"xaxis2": gutter_axis(colours)} if gutter is not None else {}),
        "hovermode": "closest",
        "clickmode": "event",
        "legend": {
            **colours["legend"],
            "orientation": "h",
            "yref": "container",  # the bottom strip of the figure, never over the rows
            "y": 0,
            "yanchor": "bottom",
            "xref": "container",
            "x": 0,
            "itemwidth": 30,
            "tracegroupgap": 0,
        },
        "shapes": shapes,
        "annotations": annotations,
        "uirevision": run_id,
        "template": "none",  # the built-in templates cost more than the whole figure
        "plot_bgcolor": colours["plot_bgcolor"],
        "paper_bgcolor": colours["paper_bgcolor"],
        "font": colours["font"],
        "hoverlabel": colours["hoverlabel"],
    }
    return TimelineData(
        {"data": data, "layout": layout},
        [t.frames for t in traces],
        rows.labels,
        aggregated,
        gutter.toggles if gutter is not None else [],
    )


LEGEND_ROOM = 110
"""Pixels the figure adds for its legend, below the plot. plotly wraps a legend to the plot's
width in columns as wide as its widest entry: one entry a line in an 800 px window (five or
six lines); the figure grows by that much so the rows keep their height, and a wide window's
one line leaves the rows taller."""


def _array(values: list[Any], *, numbers: bool = False) -> Any:
    """An object array when numpy is there: plotly copies it instead of validating every
    element (four times faster for a long run); a list otherwise. With ``numbers`` (frame
    numbers and rows of a binned timeline), a float array whose gaps are NaN: plotly copies
    it in one block and sends it to the browser as binary, not as a list of numbers (the
    figure of a 100,000-frame run opens in a third of the time)."""
    if np is None:
        return values
    if numbers:
        return np.array(values, dtype=float)  # None is NaN
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def _iso(ms: float) -> str:
    """A wall-clock time as plotly reads dates (the kernel's time zone, milliseconds)."""
    moment = datetime.fromtimestamp(ms / 1000, tz=UTC).astimezone()
    return f"{moment:%Y-%m-%d %H:%M:%S}.{moment.microsecond // 1000:03d}"


def selection_line(x: Any, theme: dict[str, Any]) -> dict[str, Any]:
    """The dotted line at the selected frame."""
    return {
        "type": "line",
        "x0": x,
        "x1": x,
        "y0": 0,
        "y1": 1,
        "yref": "paper",
        "line": {"color": theme["ink"], "width": 1.5, "dash": "dot"},
    }


SMALL_RUN = 8
"""Runs with fewer frames than this have a tick at every frame: nine at most, which fit the
368 px cell of an 800 px JupyterLab window with the file browser open (a tick a frame up to
20 frames crowded 18 labels into about 250 px there)."""

LANE = 17
"""Pixels of one fork label's line above the plot (each label has a line of its own)."""

MAX_LANES = 6
"""Fork labels drawn at most; more forks get their dashed line and a "+n more" count."""


def _fork_marks(
    model: DebuggerModel, theme: dict[str, Any], at: Any
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The dashed line of each fork point and its label. Labels sit above the plot area,
    each on a line of its own (``LANE`` px apart, at most ``MAX_LANES``): labels of forks at
    one frame (or near frames) never draw over each other, nor over the run's markers (the
    top row). The figure's top margin makes room for them (``LANE`` px a label: :func:`_figure`)."""
    shapes: list[dict[str, Any]] = []
    annotations: list[dict[str, Any]] = []
    marks: list[tuple[int, str, str, str]] = []
    shown = model.short_ids()  # runs by their shortest unique prefix, whole on hover

    def mark(x: int, text: str, colour: str, run_id: str) -> None:
        shapes.append(
            {
                "type": "line",
                "x0": at(x),
                "x1": at(x),
                "y0": 0,
                "y1": 1,
                "yref": "paper",
                "line": {"color": colour, "width": 2, "dash": "dash"},
            }
        )
        marks.append((x, text, colour, esc(run_id)))

    edge = model.edge(model.run_id)
    if edge is not None and edge.parent_run_id is not None:
        parent = edge.parent_run_id
        text = f"fork of {esc(shown.get(parent, parent))} @ {edge.parent_frame_no}"
        mark(0, text, "#9467bd", parent)
    children = [e for e in model.tree if e.parent_run_id == model.run_id]
    for child in children[:20]:
        if (
            child.parent_frame_no is not None
            and child.parent_frame_no <= model.last_frame
            and not child.fork_point_rewound
        ):
            text = f"fork → {esc(shown.get(child.run_id, child.run_id))}"
            mark(int(child.parent_frame_no), text, theme["accent"], child.run_id)
    hidden = max(0, len(children) - 20)
    if hidden or len(marks) > MAX_LANES:  # the last line says how many more there are
        hidden += len(marks) - (MAX_LANES - 1)
        marks = marks[: MAX_LANES - 1]
    last = max(model.last_frame, 1)
    for lane, (x, text, colour, whole) in enumerate(marks):
        # begins at a fork in the left third, ends at one in the right third, else centred
        # on it: in a narrow cell the label stays inside the figure
        anchor = "left" if x < last / 3 else "right" if x > 2 * last / 3 else "center"
        annotations.append(
            {**label_at(at(x), lane, text, colour, theme, anchor), "hovertext": whole}
        )
    if hidden > 0:
        text = f"+{hidden} more fork{'s' if hidden > 1 else ''}"
        annotations.append(label_at(1, len(marks), text, theme["muted"], theme, "right", "paper"))
    return shapes, annotations


def label_at(
    x: Any, lane: int, text: str, colour: str, theme: dict[str, Any], anchor: str, xref: str = "x"
) -> dict[str, Any]:
    """A fork label on line ``lane`` above the plot area, at ``x`` (``anchor``: which of its
    sides is there)."""
    return {
        "x": x,
        "xref": xref,
        "y": 1,
        "yref": "paper",
        "yanchor": "bottom",
        "yshift": 2 + LANE * lane,
        "text": text,
        "showarrow": False,
        "xanchor": anchor,
        "font": {"size": 11, "color": colour},
        "bgcolor": theme["panel"],
        "borderpad": 0,
    }
