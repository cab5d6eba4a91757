"""What the debugger calls frames, nodes, checkpoints, times and durations, in plain text
(not escaped: each view escapes what it shows).

These are smithers_tt's own words; a :class:`~smithers_tt.widgets.FrameLens` may say others
(:mod:`~smithers_tt.widgets._naming` asks it first).
"""

from __future__ import annotations

import json
import math
import time
from typing import Any

from smithers_tt.store import CheckpointRef, Frame
from smithers_tt.store.for_widgets import FrameRow
from smithers_tt.timetravel import NOT_STARTED


def run_status(status: str, *, forked: bool, started: bool) -> str:
    """A run's status as the debugger says it (plain text).

    A fork gets the status ``interrupted`` (work left, nobody executing it) until a resume
    or a replay runs it; before that it reads "not started" (ready to run), never
    "interrupted", which people take for a crash. ``started``: the run (or the frame shown)
    is past its frame 0.
    """
    return NOT_STARTED if forked and not started and status == "interrupted" else status


def describe_frame(frame: Frame | FrameRow) -> str:
    """One line of plain text (not escaped) saying what a frame changed."""
    kind = frame.kind
    data = frame.data if isinstance(frame.data, dict) else {}
    where = ""
    if frame.node_id is not None:
        where = frame.node_id if not frame.iteration else f"{frame.node_id}[{frame.iteration}]"
    if kind == "checkpoint":
        size = data.get("size")
        extra = f", {size} B" if size is not None else ""
        return (
            f"checkpoint of {where} attempt #{frame.attempt} seq {frame.sequence} "
            f"({frame.purpose}, {frame.codec} v{frame.version}{extra}, "
            f"{(frame.content_hash or '')[:12]})"
        )
    if kind == "attempt_started":
        began = began_from(frame.node_id, data.get("resumed_from"))
        attempt = f"attempt #{frame.attempt} of {where}"
        if began is None:
            return f"{attempt} started"
        if began.startswith("resumed"):  # "... started, resumed from research #1 seq 1"
            return f"{attempt} started, {began}"
        return f"{attempt} {began}"  # "... started from write #1 seq 0"
    if kind == "attempt_finished":
        error = data.get("error")
        return f"attempt #{frame.attempt} of {where} {frame.state}" + (
            f": {error}" if error else ""
        )
    if kind in ("node_state", "cache_hit"):
        return f"{where} is {frame.state}" + (" (cache hit)" if kind == "cache_hit" else "")
    if kind == "forked":
        forked = (
            f"forked from run {data.get('parent_run_id')} at frame {data.get('parent_frame_no')}"
        )
        if frame.state == "interrupted":  # the status a fork has until something runs it
            return f"{forked}: {NOT_STARTED}, ready to run (Replay or resume runs what is left)"
        return forked
    if kind == "reset":
        return f"reset {', '.join(map(str, data.get('nodes') or []))}"
    if kind == "run_claimed":
        return f"run claimed by {data.get('owner_id')} (epoch {data.get('epoch')})"
    if kind == "run_released":
        return "run given back to the queue"
    if kind in ("run_finished", "run_failed", "run_cancelled"):
        error = data.get("error")
        return f"run {kind[4:]}" + (f": {error}" if error else "")
    if kind == "run_created":
        return "run created"
    if kind == "cancel_requested":
        return "cancel requested"
    if kind == "run_paused":
        when = "while running" if data.get("when") == "ask" else data.get("when", "at")
        question = data.get("question")
        asked = "" if question is None else f": {json.dumps(question, ensure_ascii=False)}"
        return f"paused ({data.get('reason')}) {when} {where}{asked}"
    if kind == "breakpoints_set":
        marks = data.get("breakpoints") or {}
        said = [f"{w} {', '.join(marks.get(w) or [])}" for w in ("before", "after") if marks.get(w)]
        return "breakpoints set: " + ("; ".join(said) if said else "none")
    if kind == "run_continued":
        answer = data.get("answer")
        said = "" if answer is None else f" with {json.dumps(answer, ensure_ascii=False)}"
        return f"run continued ({data.get('action')}){said}"
    return kind


def began_from(node_id: str | None, src: Any) -> str | None:
    """Where an attempt of ``node_id`` began, from its ``resumed_from`` key ``[run, node,
    iteration, attempt, seq]``: "resumed from research #1 seq 1" (its own node's checkpoint),
    "started from write[2] #1 seq 0" (a task fork: another node's); None when it has none."""
    if not (isinstance(src, list) and len(src) == 5):
        return None
    source = f"{src[1]}[{src[2]}]" if src[2] else f"{src[1]}"
    verb = "resumed" if src[1] == node_id else "started"
    return f"{verb} from {source} #{src[3]} seq {src[4]}"


def clock_time(ms: int | None) -> str:
    """A wall-clock time in the kernel's time zone, to the millisecond (plain text)."""
    if ms is None:
        return "?"
    # the C library's local time: a quarter of the cost of ``datetime.astimezone()`` (a
    # frame table page and a timeline's markers format thousands), the same text
    whole = math.floor(ms)
    local = time.localtime(whole // 1000)
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", local)
    return f"{stamp}.{whole % 1000:03d} {local.tm_zone or ''}".strip()


def duration(ms: int | float | None) -> str:
    """``850 ms``, ``12.3 s``, ``4 min 05 s`` style durations (plain text)."""
    if ms is None:
        return "?"
    if ms < 1000:
        return f"{int(ms)} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    minutes, seconds = divmod(int(ms // 1000), 60)
    return f"{minutes} min {seconds:02d} s"


def frame_time(frame: Frame | FrameRow) -> str:
    """When a frame was committed (wall clock, for people; frames are ordered by number)."""
    return f"at {clock_time(frame.created_at_ms)}"


def node_label(node_id: str, iteration: int) -> str:
    """``node`` or ``node[2]`` for loop iterations."""
    return node_id if iteration == 0 else f"{node_id}[{iteration}]"


def ref_label(ref: CheckpointRef, size: int | None = None) -> str:
    """One line of plain text describing a checkpoint ref."""
    size_text = "?" if size is None else f"{size} B"
    return (
        f"{node_label(ref.node_id, ref.iteration)} #{ref.attempt}.{ref.sequence} "
        f"{ref.purpose} · {ref.codec} v{ref.version} · {size_text} · {ref.short_hash}"
    )
