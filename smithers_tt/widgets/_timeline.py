"""The timeline: a plotly figure of a run, one row per node (and loop iteration).

Attempts are bars coloured by state; checkpoint publications are markers by purpose
(``progress`` circle, ``turn`` diamond, ``schema-correction`` star, ``session`` square);
retries are marked where the new attempt starts; fork points are dashed lines. Every point
knows its frame: a click selects it through the controller. Left of frame 0, each node row
has two breakpoint toggles, before and after the node (a column of its own, filled red when
set; every task of the run has a row, run or not): a click turns it on or off through
``model.breakpoints``.

:func:`build_timeline` is pure (a figure dict plus, per trace, the frame of every point);
:class:`TimelineView` wraps it in a ``FigureWidget``. Past ``AGGREGATE_AT`` frames the
markers are binned (one per node, purpose and bin of frames, with a count) and past
``GL_AT`` points the traces are WebGL (``scattergl``), so a 10,000-frame run stays light.

A binned timeline is gathered from counts the store makes and the few frames it draws one by
one (:func:`_gather_sql`), never from the run's whole history, which the debugger then need
not read to open; a short one walks the model's frames (:func:`_gather_rows`). Both gather
the same things through the same helpers (rows, markers, attempts), and one function makes
the figure of what they gather (:func:`_figure`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from smithers_tt.store import (
    AttemptFrame,
    FrameRow,
    attempt_frames,
    frame_bins,
    frame_rows,
    frame_times,
    node_level_pairs,
    numbered_frames,
)

try:  # optional: speeds up figures of long runs
    import numpy as np
except ImportError:  # pragma: no cover
    np = None  # type: ignore[assignment]
from smithers_tt.widgets._bulk import paused_gc
from smithers_tt.widgets._html import STATE_COLOURS, esc
from smithers_tt.widgets._model import (
    DebuggerModel,
    clock_time,
    describe_frame,
    duration,
    node_label,
)
from smithers_tt.widgets._theme import LIGHT, plotly_theme

AGGREGATE_AT = 2_000
"""Runs with more frames than this get binned markers."""

BINS = 400
"""About how many bins of frames an aggregated timeline has."""

GL_AT = 1_500
"""Past this many points the traces are drawn with WebGL."""

MAX_ROWS = 40
"""More (node, iteration) pairs than this: one row per node instead."""

PURPOSE_SYMBOLS = {
    "progress": "circle",
    "turn": "diamond",
    "schema-correction": "star",
    "session": "square",
}
RUN_KINDS = {
    "run_created",
    "run_claimed",
    "run_released",
    "run_finished",
    "run_failed",
    "run_cancelled",
    "cancel_requested",
    "forked",
    "reset",
    "run_paused",
    "run_continued",
    "breakpoints_set",
}


@dataclass
class TimelineData:
    """A figure (plain dict) and, per trace, the frame each point selects (None for gaps)."""

    figure: dict[str, Any]
    frames_of: list[list[int | None]]
    rows: list[str] = field(default_factory=list)
    aggregated: bool = False
    toggles: list[tuple[str, str]] = field(default_factory=list)
    """(node, ``before`` / ``after``) of each point of the breakpoints trace (the last)."""


@dataclass
class _Trace:
    name: str
    kind: str  # "bar" or "marker"
    x: list[Any] = field(default_factory=list)
    y: list[Any] = field(default_factory=list)
    text: list[str | None] = field(default_factory=list)
    frames: list[int | None] = field(default_factory=list)
    style: dict[str, Any] = field(default_factory=dict)

    def point(self, x: float, y: int, text: str, frame: int | None) -> None:
        self.x.append(x)
        self.y.append(y)
        self.text.append(text)
        self.frames.append(frame)

    def gap(self) -> None:
        self.point(None, None, None, None)  # type: ignore[arg-type]


@dataclass
class _Attempt:
    node_id: str
    iteration: int
    attempt: int
    start: float
    end: float | None = None
    state: str = "in_progress"
    error: str | None = None
    resumed_from: Any = None
    inherited: bool = False
    start_ms: int | None = None
    end_ms: int | None = None

    @property
    def took(self) -> str | None:
        """How long the attempt ran (wall clock), or None when unknown or still running."""
        if self.start_ms is None or self.end_ms is None:
            return None
        return duration(max(0, self.end_ms - self.start_ms))


LATER_ATTEMPT = "attempt #2+ started"
"""The timeline's trace of attempts after a node's first: retries and re-runs."""


def _with_tasks(
    pairs: Iterable[tuple[str, int]], nodes: list[str] | None
) -> dict[tuple[str, int], None]:
    """The distinct (node, iteration) pairs, then (task, 0) for each task none of them names
    (a task that has not run yet gets a row for its breakpoint toggles)."""
    seen: dict[tuple[str, int], None] = dict.fromkeys(pairs)
    named = {node_id for node_id, _ in seen}
    for node_id in nodes or ():
        if node_id not in named:
            seen[(node_id, 0)] = None
            named.add(node_id)
    return seen


class _Rows:
    """The rows of the figure: ``run``, then one per (node, iteration) in the order of
    ``pairs`` (that of their first frame), or one per node when there are more than
    ``MAX_ROWS`` of them or ``per_node`` says so."""

    def __init__(
        self,
        pairs: Iterable[tuple[str, int]],
        label: Any = node_label,
        nodes: list[str] | None = None,
        *,
        per_node: bool = False,
    ) -> None:
        seen = _with_tasks(pairs, nodes)
        self.by_iteration = not per_node and len(seen) <= MAX_ROWS
        self.labels = ["run"]
        self.index: dict[Any, int] = {}
        for node_id, iteration in seen:
            key = (node_id, iteration) if self.by_iteration else node_id
            if key not in self.index:
                self.index[key] = len(self.labels)
                self.labels.append(label(node_id, iteration if self.by_iteration else 0))

    def of(self, node_id: str | None, iteration: int | None) -> int:
        if node_id is None:
            return 0
        key = (node_id, iteration or 0) if self.by_iteration else node_id
        return self.index.get(key, 0)


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
        if a.took:
            text += f", took {a.took}"
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
    if isinstance(a.resumed_from, list) and len(a.resumed_from) == 5:
        src = a.resumed_from
        lines.append(f"resumed from {esc(src[1])} #{esc(src[3])} seq {esc(src[4])}")
    if a.error:
        text = a.error if len(a.error) <= 200 else a.error[:200] + "…"
        lines.append(f"error: {esc(text)}")
    return "<br>".join(lines)


def _marker_key(kind: str, node_id: str | None, purpose: str | None, later: int) -> str | None:
    """Which marker trace a frame is drawn on (``cp:<purpose>``, ``retry``, ``node``,
    ``run``), or None: the start of a first attempt and the end of any attempt are bars."""
    if kind == "checkpoint":
        return f"cp:{purpose}" if purpose in PURPOSE_SYMBOLS else "cp:progress"
    if node_id is not None and kind in ("attempt_started", "attempt_finished"):
        return "retry" if kind == "attempt_started" and later else None
    if kind in ("node_state", "cache_hit"):
        return "node"
    if kind in RUN_KINDS or node_id is None:
        return "run"
    return "node"


_TRACKED = frozenset(("attempt_started", "attempt_finished", "reset"))
"""Kinds of frame that start or end attempt bars (see :func:`_track`)."""


def _inherited(base: list[FrameRow], inherits: Any) -> dict[tuple[str, int, int], _Attempt]:
    """The attempts a fork starts from: those its base frames restate, or those it reads by
    reference from its parent (``inherits``, a snapshot, or None)."""
    found = [
        (f.node_id, f.iteration or 0, f.attempt or 0, f.state or "finished", f.data)
        for f in base
        if f.kind == "attempt_started" and f.node_id is not None
    ]
    if inherits is not None:
        found += [
            (
                a.node_id,
                a.iteration,
                a.attempt,
                a.state,
                {"error": a.error, "resumed_from": a.resumed_from},
            )
            for a in inherits.attempts.values()
        ]
    attempts: dict[tuple[str, int, int], _Attempt] = {}
    for node_id, iteration, attempt, state, data in found:
        data = data if isinstance(data, dict) else {}
        attempts[(node_id, iteration, attempt)] = _Attempt(
            node_id,
            iteration,
            attempt,
            -1.0,
            0.0,
            state,
            data.get("error"),
            data.get("resumed_from"),
            inherited=True,
        )
    return attempts


def _track(attempts: dict[tuple[str, int, int], _Attempt], f: FrameRow | AttemptFrame) -> None:
    """Start or end attempts at a frame (one of the ``_TRACKED`` kinds; others do nothing):
    a ``reset`` ends the open attempts of the nodes it names."""
    kind = f.kind
    data = f.data if isinstance(f.data, dict) else {}
    if kind == "reset":
        gone = set(data.get("nodes") or [])
        for a in attempts.values():
            if a.node_id in gone and a.end is None:
                a.end, a.state = float(f.frame_no), "reset"
                a.end_ms = f.created_at_ms
        return
    if f.node_id is None:
        return
    key = (f.node_id, f.iteration or 0, f.attempt or 0)
    if kind == "attempt_started":
        attempts[key] = _Attempt(
            *key,
            float(f.frame_no),
            resumed_from=data.get("resumed_from"),
            start_ms=f.created_at_ms,
        )
    elif kind == "attempt_finished":
        a = attempts.get(key)
        if a is None:
            a = attempts[key] = _Attempt(*key, float(f.frame_no))
        a.end, a.state, a.error = float(f.frame_no), f.state or "finished", data.get("error")
        a.end_ms = f.created_at_ms


@dataclass
class _Bin:
    """The marker frames of one trace, row and bin: how many, the first and last frame
    numbers, and the frame itself when there is only one."""

    count: int
    first: int
    last: int
    frame: FrameRow | None = None

    def add(self, count: int, first: int, last: int) -> None:
        self.count += count
        self.first = min(self.first, first)
        self.last = max(self.last, last)


_BinKey = tuple[str, int, int]
"""(marker trace key, row, bin number)."""


@dataclass
class _Gathered:
    """What the figure is made of: rows, attempts (in the order they appeared), markers
    binned (sorted by bin, then by first frame), the time of frame 0 and a lookup of frame
    times (``.get(n)``)."""

    rows: _Rows
    attempts: dict[tuple[str, int, int], _Attempt]
    bins: list[tuple[_BinKey, _Bin]]
    t0: int | None
    times: Any


def _put(
    bins: dict[_BinKey, _Bin], at: _BinKey, count: int, first: int, last: int, frame: Any = None
) -> None:
    """Count frames ``first`` to ``last`` (``count`` of them) in the bin ``at``; ``frame``, the
    frame itself when it is one."""
    found = bins.get(at)
    if found is None:
        bins[at] = _Bin(count, first, last, frame)
    else:
        found.add(count, first, last)


def _sorted_bins(bins: dict[_BinKey, _Bin]) -> list[tuple[_BinKey, _Bin]]:
    return sorted(bins.items(), key=lambda kv: (kv[0][2], kv[1].first))


def _gather_rows(
    model: DebuggerModel, width: int, nodes: list[str] | None, time_axis: bool
) -> _Gathered:
    """Gather by walking every frame of the model's history (a short run, or one whose
    frames are all in hand)."""
    frames = model.visible_rows
    every = model.frames.rows
    base = every[: len(every) - len(frames)]  # a fork's base frames, below 0
    pairs = ((f.node_id, f.iteration or 0) for f in every if f.node_id is not None)
    rows = _Rows(pairs, model.node_label, nodes)
    attempts = _inherited(base, model.inherited)
    bins: dict[_BinKey, _Bin] = {}
    for f in frames:
        kind = f.kind
        if kind in _TRACKED:
            _track(attempts, f)
        key = _marker_key(kind, f.node_id, f.purpose, (f.attempt or 0) > 1)
        if key is None:
            continue
        n = f.frame_no
        at = (key, 0 if key == "run" else rows.of(f.node_id, f.iteration), n // width)
        _put(bins, at, 1, n, n, f)
    times = {f.frame_no: f.created_at_ms for f in frames} if time_axis else {}
    t0 = frames[0].created_at_ms if frames else None
    return _Gathered(rows, attempts, _sorted_bins(bins), t0, times)


class _ReadTimes:
    """Frame times read from the store: those known in advance, any other when asked."""

    def __init__(self, engine: Any, run_id: str, known: dict[int, int | None]) -> None:
        self.engine, self.run_id, self.known = engine, run_id, known

    def get(self, n: int) -> int | None:
        if n not in self.known:
            self.known[n] = frame_times(self.engine, self.run_id, [n]).get(n)
        return self.known[n]


def _gather_sql(
    model: DebuggerModel, width: int, nodes: list[str] | None, time_axis: bool
) -> _Gathered:
    """Gather from counts the database makes and the few frames drawn one by one, without
    reading the run's whole history (what :func:`_gather_rows` gathers, equal)."""
    engine = model.db.store.engine
    run_id, last = model.run_id, model.last_frame
    base = frame_rows(engine, run_id, upto=-1)  # a fork's base frames: a few per node
    # Rows per node for sure when the pairs of the node frames alone are too many: then the
    # counts need not be split by iteration (a long loop has thousands of iterations).
    some = node_level_pairs(engine, run_id, upto=last, limit=MAX_ROWS + 1)
    per_node = len(_with_tasks(some, nodes)) > MAX_ROWS
    groups = frame_bins(
        engine, run_id, upto=last, width=width, by_iteration=not per_node, times=time_axis
    )
    first: dict[tuple[str, int], int] = {}  # each pair's first frame: the rows' order
    for f in base:
        if f.node_id is not None:
            first.setdefault((f.node_id, 0 if per_node else f.iteration or 0), f.frame_no)
    for g in groups:
        if g.node_id is not None:
            pair = (g.node_id, g.iteration or 0)
            if g.first < first.get(pair, g.first + 1):
                first[pair] = g.first
    rows = _Rows(sorted(first, key=first.__getitem__), model.node_label, nodes, per_node=per_node)

    attempts = _inherited(base, model.inherited)
    bins: dict[_BinKey, _Bin] = {}
    tracked = attempt_frames(engine, run_id, upto=last)
    for f in tracked:
        _track(attempts, f)
        # a retry: the one marker the counts cannot tell (a first attempt's start is none)
        if _marker_key(f.kind, f.node_id, None, (f.attempt or 0) > 1) == "retry":
            at = ("retry", rows.of(f.node_id, f.iteration), f.frame_no // width)
            _put(bins, at, 1, f.frame_no, f.frame_no)
    for g in groups:
        key = _marker_key(g.kind, g.node_id, g.purpose, False)  # retries: just above
        if key is not None:
            at = (key, 0 if key == "run" else rows.of(g.node_id, g.iteration), g.bin)
            _put(bins, at, g.count, g.first, g.last)
    # the frames of single-frame bins, whose own text is shown
    single = {b.first: b for b in bins.values() if b.count == 1}
    for f in numbered_frames(engine, run_id, single):
        single[f.frame_no].frame = f

    times: dict[int, int | None] = {g.last: g.last_ms for g in groups if g.last_ms is not None}
    if time_axis:  # what the bars and markers name is known; others are read when asked
        times.update((f.frame_no, f.created_at_ms) for f in tracked)
        ends = {0, last, min(max(model.frame_no, 0), last)}
    else:
        ends = {0}
    times.update(frame_times(engine, run_id, ends - times.keys()))
    return _Gathered(
        rows, attempts, _sorted_bins(bins), times.get(0), _ReadTimes(engine, run_id, times)
    )


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
    bars: dict[str, _Trace] = {}
    for a in found.attempts.values():
        state = "inherited" if a.inherited else a.state
        trace = bars.setdefault(state, _Trace(f"attempt: {state}", "bar"))
        row = rows.of(a.node_id, a.iteration)
        end = a.end if a.end is not None else last + 0.4
        start = a.start
        if a.inherited:  # inside frame 0's slot: the axis never goes below frame 0
            start, end = -0.45, -0.05
        text = _attempt_text(a, None if a.end is None else int(a.end), aggregated)
        start_frame = None if a.inherited else int(a.start)
        end_frame = None if a.inherited else (int(a.end) if a.end is not None else last)
        if a.inherited:
            start_frame = end_frame = 0
        trace.point(
            at(0 if time_axis else start) if a.inherited else at(start), row, text, start_frame
        )
        trace.point(at(0 if time_axis else end) if a.inherited else at(end), row, text, end_frame)
        trace.gap()

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
        xaxis: dict[str, Any] = {"title": {"text": "time"}, "type": "date"}
    else:
        xaxis = {
            "title": {"text": "frame"},
            "range": [-0.5, max(last, 1) + 0.5],  # a one-frame run: frames 0 and 1, not -1.5
            "tick0": 0,
        }
        if last < 20:
            xaxis["dtick"] = 1
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


GUTTER = 0.09
"""The width of the breakpoint toggles' column (a fraction of the plot's width: in an 800 px
window two toggles and their captions side by side)."""

BREAK_ON = "#d62728"


@dataclass
class _Gutter(_Trace):
    toggles: list[tuple[str, str]] = field(default_factory=list)
    """(node, ``before`` / ``after``) of each point."""


def breakpoint_gutter(rows: _Rows, marks: Any, theme: dict[str, Any]) -> _Gutter:
    """Two toggles on each node row, before and after the node (filled red when set): a
    click turns the breakpoint on or off for the node (all its iterations)."""
    gutter = _Gutter("breakpoints", "marker")
    colours, symbols = [], []
    for key, row in rows.index.items():
        node_id = key[0] if isinstance(key, tuple) else key
        for x, when in enumerate(("before", "after")):
            on = marks.is_set(node_id, when)
            state = "on: click to remove it" if on else "off: click to set it"
            text = f"<b>break {when} {esc(node_id)}</b><br>{state}"
            gutter.point(x, row, text, None)
            gutter.toggles.append((node_id, when))
            colours.append(BREAK_ON if on else theme["muted"])  # an open circle's ring
            symbols.append("circle" if on else "circle-open")
    gutter.style = {
        "mode": "markers",
        "marker": {
            "symbol": symbols,
            "size": 10,
            "color": colours,
            "line": {"width": 1.5, "color": colours},
        },
    }  # fmt: skip
    return gutter


def gutter_axis(colours: dict[str, Any]) -> dict[str, Any]:
    """The toggles' own x axis: "before" and "after" columns, left of the frames."""
    return {
        **colours["xaxis"],
        "domain": [0, GUTTER],
        "range": [-0.6, 1.6],
        "tickvals": [0, 1],
        "ticktext": ["before", "after"],
        "tickangle": -90,
        "tickfont": {"size": 9},
        "automargin": True,
        "fixedrange": True,
        "showgrid": False,
        "zeroline": False,
        "title": {**colours["xaxis"]["title"], "text": ""},
    }


def _array(values: list[Any], *, numbers: bool = False) -> Any:
    """An object array when numpy is there: plotly copies it instead of validating every
    element (four times faster for a long run); a list otherwise. With ``numbers`` (frame
    numbers and rows of a binned timeline), a float array whose gaps are NaN: plotly copies
    it in one block and sends it to the browser as binary, not as a list of numbers (the
    figure of a 100,000-frame run opens in a third of the time)."""
    if np is None:
        return values
    if numbers:
        return np.array([math.nan if v is None else v for v in values], dtype=float)
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
    top row). The figure's top margin makes room for them (:func:`fork_lanes`)."""
    shapes: list[dict[str, Any]] = []
    annotations: list[dict[str, Any]] = []
    marks: list[tuple[int, str, str]] = []

    def mark(x: int, text: str, colour: str) -> None:
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
        marks.append((x, text, colour))

    edge = model.edge(model.run_id)
    if edge is not None and edge.parent_run_id is not None:
        mark(0, f"fork of {esc(edge.parent_run_id)} @ {edge.parent_frame_no}", "#9467bd")
    children = [e for e in model.tree if e.parent_run_id == model.run_id]
    for child in children[:20]:
        if (
            child.parent_frame_no is not None
            and child.parent_frame_no <= model.last_frame
            and not child.fork_point_rewound
        ):
            mark(int(child.parent_frame_no), f"fork → {esc(child.run_id)}", theme["accent"])
    hidden = max(0, len(children) - 20)
    if hidden or len(marks) > MAX_LANES:  # the last line says how many more there are
        hidden += len(marks) - (MAX_LANES - 1)
        marks = marks[: MAX_LANES - 1]
    last = max(model.last_frame, 1)
    for lane, (x, text, colour) in enumerate(marks):
        # begins at a fork in the left third, ends at one in the right third, else centred
        # on it: in a narrow cell the label stays inside the figure
        anchor = "left" if x < last / 3 else "right" if x > 2 * last / 3 else "center"
        annotations.append(label_at(at(x), lane, text, colour, theme, anchor))
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


def _figure_widget(figure: dict[str, Any]) -> Any:
    """A ``FigureWidget`` whose comm opens with the figure already in its state.

    plotly opens the widget's comm first and sets ``_widget_data`` / ``_widget_layout`` in a
    second message; a view that renders in between (seen in JupyterLab under load, about one
    time in four) draws an empty plot and never recovers, because later trace messages only
    edit what it drew. Reopening the comm sends everything in the opening message.
    """
    import plotly.graph_objects as go

    fig = go.FigureWidget(figure)
    fig._config = {"responsive": True, "displaylogo": False}  # follows the cell's width
    fig.close()
    vars(fig).pop("_repr_mimebundle_", None)  # close() hides plotly's own display method
    fig.open()
    return fig


KEEP_OPEN = 4
"""Replaced figures kept open (their clicks still reach Python) until a view draws a newer
one; past this many the oldest is closed anyway (a debugger never displayed draws none)."""


class TimelineView:
    """The timeline as a plotly ``FigureWidget`` driven by (and driving) the model, with a
    switch between a frame axis and a wall-clock time axis.

    Every redraw (another run, new frames, a rewind, the theme, the axis, and a selection: the
    selected-frame line) replaces the ``FigureWidget`` inside :attr:`widget` by a new one that
    opens with the whole figure in its state, instead of editing the one shown. plotly's views
    apply edits (delete traces, add traces, relayout) to what they drew; a view that missed or
    could not apply one (a view rendered while the edits were in flight, a delete of traces it
    does not have, a relayout of the line that came before the view listened) kept drawing an
    old run or an old line for good, while every other part of the debugger showed the new
    one. A view of a new widget draws all of its state, so no earlier message can leave it
    behind.

    A replaced figure is not closed at once: the page shows it until it has drawn the new one
    (seconds, on a busy machine), and a click there (a person's, on what they see) must not be
    lost in a closed comm. Each figure's clicks are read against the figure data it was drawn
    from; older figures close once a view reports it drew a newer one (plotly's view sends its
    layout back after it plots), or when more than ``KEEP_OPEN`` wait.
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

    def _show(self, data: TimelineData) -> None:
        """Lay out a new figure of ``data`` in place of the one shown (see the class
        docstring)."""
        figure = _figure_widget(data.figure)
        run_id = self.model.run_id

        def clicked(trace: Any, points: Any, selector: Any = None) -> None:
            self._clicked(data, run_id, points)

        for trace in figure.data:
            trace.on_click(clicked)
        figure.observe(lambda change: self._drawn(figure, change), names="_js2py_layoutDelta")
        self.data, self.figure = data, figure
        self._open.append(figure)
        self.box.children = (figure,)
        while len(self._open) > KEEP_OPEN:
            self._open.pop(0).close()

    def _drawn(self, figure: Any, change: dict[str, Any]) -> None:
        """A view drew ``figure``: close the figures it replaced."""
        if change["new"] and figure in self._open:
            older = self._open[: self._open.index(figure)]
            del self._open[: len(older)]
            for old in older:
                old.close()

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

    def rebuild(self) -> None:
        """Redraw every trace (new frames, another run, a rewind, the theme, the axis)."""
        self._show(self._build())

    def show_selection(self) -> None:
        """Move the selected-frame line: a new figure of the same data whose line is at the
        selected frame (drawn whole, as every redraw is, so no view can keep an old line)."""
        n = self.model.frame_no
        x: Any = _iso(self.model.frame(n).created_at_ms or 0) if self.time_axis.value else n
        figure = self.data.figure
        shapes = list(figure["layout"]["shapes"])
        if not shapes or shapes[0]["x0"] == x:
            return
        shapes[0] = {**shapes[0], "x0": x, "x1": x}
        layout = {**figure["layout"], "shapes": shapes}
        self._show(replace(self.data, figure={**figure, "layout": layout}))
