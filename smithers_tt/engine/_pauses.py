"""Pauses: what a run's ``run_paused`` and ``run_continued`` frames mean to whoever runs it.

Three things pause a run: a breakpoint before or after a node (``db.run(wf, input,
break_before=[...], break_after=[...])``, kept in the run's history), a task's own
``interrupt`` (``wf.task(..., interrupt="before")``), and an agent that asks a person
(``await request.ask(question)``). A pause is durable: frame ``run_paused`` says where, why
and what it asks, the run is ``paused`` with no owner, and the process that paused it is
fenced out. Continuing records ``run_continued`` with the answer; the history is all an
executor needs to know which breakpoints were passed and which questions were answered, in
this process or any other.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from smithers_tt.store import Frame

REASONS = ("breakpoint", "interrupt", "ask", "step")
"""Why a run paused: a breakpoint, a task's interrupt, an agent's question, or a step."""


@dataclass(frozen=True)
class Pause:
    """Where and why a run paused, and what it asks (from its ``run_paused`` frame)."""

    run_id: str
    frame_no: int
    reason: str
    """``breakpoint``, ``interrupt``, ``ask`` or ``step`` (see :data:`REASONS`)."""
    when: str
    """``before`` or ``after`` the node, or ``ask`` (while its agent runs)."""
    node_id: str | None
    iteration: int | None
    question: Any = None
    """What the agent (or the task's interrupt) asks; None for a plain breakpoint."""


def pause_of(frame: Frame) -> Pause:
    """The :class:`Pause` a ``run_paused`` frame records."""
    data = frame.data if isinstance(frame.data, dict) else {}
    return Pause(
        frame.run_id,
        frame.frame_no,
        str(data.get("reason", "breakpoint")),
        str(data.get("when", "before")),
        frame.node_id,
        frame.iteration,
        data.get("question"),
    )


@dataclass
class PauseHistory:
    """What the pause frames of a run say (:func:`pause_history`)."""

    before: frozenset[str] = frozenset()
    """Breakpoints before these nodes (the newest set recorded: frame 0, a continue, a
    ``breakpoints_set`` frame, or for a fork its parent's at the fork point)."""
    after: frozenset[str] = frozenset()
    passed: set[tuple[str, str, int]] = field(default_factory=set)
    """``(when, node, iteration)`` of every breakpoint the run already paused at: never again."""
    asks: dict[tuple[str, int], list[Any]] = field(default_factory=dict)
    """The answers to the questions a node's agent asked, in the order it asked them."""
    answers: dict[tuple[str, int], Any] = field(default_factory=dict)
    """The answer given when the run paused before a node (its agent's ``request.answer``)."""
    step: bool = False
    """The newest continue was a step: pause again after the next node."""
    current: Pause | None = None
    """The pause the run is in (a ``run_paused`` frame with no ``run_continued`` after it)."""

    def set_breakpoints(self, data: Any) -> None:
        """Take the breakpoints a frame's data holds (``{"breakpoints": {...}}``), if any."""
        if isinstance(data, dict) and "breakpoints" in data:
            marks = data["breakpoints"] or {}
            self.before = frozenset(marks.get("before") or ())
            self.after = frozenset(marks.get("after") or ())

    def answers_for(self, node_id: str, iteration: int) -> list[Any]:
        """Copies of the answers to a node's questions (agents may mutate them)."""
        return copy.deepcopy(self.asks.get((node_id, iteration), []))


def pause_history(frames: Iterable[Frame]) -> PauseHistory:
    """Fold a run's frame 0 and its ``run_paused`` / ``run_continued`` frames, in order."""
    history = PauseHistory()
    for frame in frames:
        data = frame.data if isinstance(frame.data, dict) else {}
        if frame.kind == "run_paused":
            pause = pause_of(frame)
            history.current = pause
            if pause.when in ("before", "after") and pause.node_id is not None:
                history.passed.add((pause.when, pause.node_id, pause.iteration or 0))
            continue
        history.set_breakpoints(data)
        if frame.kind != "run_continued":
            continue
        pause, history.current = history.current, None
        history.step = data.get("action") == "step"
        if pause is None or pause.node_id is None:
            continue
        where = (pause.node_id, pause.iteration or 0)
        if pause.when == "ask":
            history.asks.setdefault(where, []).append(data.get("answer"))
        elif pause.when == "before":
            history.answers[where] = data.get("answer")
    return history
