"""Gathering what a timeline shows (rows, attempts, binned markers, frame times) from a run.

A binned timeline is gathered from counts the store makes and the few frames it draws one by
one (:func:`_gather_sql`), never from the run's whole history, which the debugger then need
not read to open; a short one walks the model's frames (:func:`_gather_rows`). Both gather
the same things through the same helpers (rows, markers, attempts).
"""

from __future__ import annotations

from typing import Any

from smithers_tt.store.for_widgets import (
    AttemptFrame,
    FrameRow,
    attempt_frames,
    choices_of_bins,
    frame_bins,
    frame_rows,
    frame_times,
    node_level_pairs,
    numbered_frames,
)
from smithers_tt.widgets._model import DebuggerModel
from smithers_tt.widgets._timeline_data import (
    MAX_ROWS,
    PURPOSE_SYMBOLS,
    _Attempt,
    _Bin,
    _BinKey,
    _Gathered,
    _Rows,
    _with_tasks,
)

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
    rows = _Rows(pairs, model.node_label, nodes, order=model.task_order)
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
    # what the frame table's filters offer, from these counts (see FrameSearch.choices)
    model.counted_choices = (run_id, last, choices_of_bins(groups))
    first: dict[tuple[str, int], int] = {}  # each pair's first frame: the rows' order
    for f in base:
        if f.node_id is not None:
            first.setdefault((f.node_id, 0 if per_node else f.iteration or 0), f.frame_no)
    for g in groups:
        if g.node_id is not None:
            pair = (g.node_id, g.iteration or 0)
            if g.first < first.get(pair, g.first + 1):
                first[pair] = g.first
    rows = _Rows(
        sorted(first, key=first.__getitem__),
        model.node_label,
        nodes,
        per_node=per_node,
        order=model.task_order,
    )

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
