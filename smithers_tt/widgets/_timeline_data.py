"""What a timeline figure is made of: its rows (one per node and loop iteration, or per node),
attempt bars, bins of marker frames, traces, and the figure with the frame of every point
(:class:`TimelineData`). Gathered by :mod:`~smithers_tt.widgets._timeline_gather`, drawn by
:mod:`~smithers_tt.widgets._timeline_figure`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from smithers_tt.store.for_widgets import FrameRow
from smithers_tt.widgets._layers import in_task_order
from smithers_tt.widgets._words import duration, node_label

MAX_ROWS = 40
"""More (node, iteration) pairs than this: one row per node instead."""

PURPOSE_SYMBOLS = {
    "progress": "circle",
    "turn": "diamond",
    "schema-correction": "star",
    "session": "square",
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

    def bar(self, x0: Any, x1: Any, y: int, text: str, frame0: int, frame1: int) -> None:
        """A bar from ``x0`` to ``x1``: its two ends (selecting ``frame0`` and ``frame1``),
        then a gap (what :meth:`point` twice and :meth:`gap` add, in one step)."""
        self.x += (x0, x1, None)
        self.y += (y, y, None)
        self.text += (text, text, None)
        self.frames += (frame0, frame1, None)


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
    """The rows of the figure: ``run``, then one per (node, iteration), or one per node when
    there are more than ``MAX_ROWS`` of them or ``per_node`` says so: the tasks of ``order``
    (the graph's, :func:`smithers_tt.widgets._layers.task_order`) in that order, then other
    nodes in the order of ``pairs`` (that of their first frame), loop turn by loop turn.
    So the rows keep their order whatever frames are in hand (a rewound run, a fork's base)."""

    def __init__(
        self,
        pairs: Iterable[tuple[str, int]],
        label: Any = node_label,
        nodes: list[str] | None = None,
        *,
        per_node: bool = False,
        order: Sequence[str] = (),
    ) -> None:
        seen = _with_tasks(pairs, nodes)
        self.by_iteration = not per_node and len(seen) <= MAX_ROWS
        self.labels = ["run"]
        self.index: dict[Any, int] = {}
        for node_id, iteration in in_task_order(seen, order, self.by_iteration):
            key = (node_id, iteration) if self.by_iteration else node_id
            if key not in self.index:
                self.index[key] = len(self.labels)
                self.labels.append(label(node_id, iteration if self.by_iteration else 0))

    def of(self, node_id: str | None, iteration: int | None) -> int:
        if node_id is None:
            return 0
        key = (node_id, iteration or 0) if self.by_iteration else node_id
        return self.index.get(key, 0)


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
