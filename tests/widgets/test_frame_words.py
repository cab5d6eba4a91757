"""The words the debugger uses for a frame, a time and a duration: the frame table, the
timeline's hover texts and the inspector's title all show them, so each kind of frame must
read as what happened, with the details a person needs (who, which attempt, why)."""

from __future__ import annotations

from dataclasses import astuple
from datetime import datetime
from typing import Any

import pytest

from smithers_tt.store import CheckpointRef, Frame
from smithers_tt.store.for_widgets import FrameRow
from smithers_tt.widgets._words import (
    clock_time,
    describe_frame,
    duration,
    frame_time,
    node_label,
    ref_label,
)


def _frame(kind: str, data: Any = None, **fields: Any) -> Frame:
    return Frame("run-1", 7, kind, data=data, created_at_ms=0, **fields)


AT = {"node_id": "draft", "iteration": 0, "attempt": 2}
LOOPED = {"node_id": "draft", "iteration": 3, "attempt": 1}


@pytest.mark.parametrize(
    ("frame", "words"),
    [
        (
            _frame(
                "checkpoint",
                {"size": 512},
                **AT,
                sequence=4,
                content_hash="ab" * 32,
                codec="demo.notes",
                version=3,
                purpose="turn",
            ),
            f"checkpoint of draft attempt #2 seq 4 (turn, demo.notes v3, 512 B, {'ab' * 6})",
        ),
        (
            _frame(
                "checkpoint",
                {},
                **LOOPED,
                sequence=0,
                content_hash="cd" * 32,
                codec="c",
                version=1,
                purpose="progress",
            ),
            f"checkpoint of draft[3] attempt #1 seq 0 (progress, c v1, {'cd' * 6})",
        ),
        (_frame("attempt_started", None, **AT), "attempt #2 of draft started"),
        (
            _frame("attempt_started", {"resumed_from": ["r", "draft", 0, 1, 5]}, **LOOPED),
            "attempt #1 of draft[3] started, resumed from draft #1 seq 5",
        ),
        (  # a task fork: review starts from write's checkpoint, and says so
            _frame("attempt_started", {"resumed_from": ["r", "write", 2, 1, 0]}, **AT),
            "attempt #2 of draft started from write[2] #1 seq 0",
        ),
        (
            _frame("attempt_started", {"resumed_from": "not a key"}, **AT),
            "attempt #2 of draft started",
        ),
        (
            _frame("attempt_finished", {"error": "timed out"}, **AT, state="failed"),
            "attempt #2 of draft failed: timed out",
        ),
        (
            _frame("attempt_finished", {}, **LOOPED, state="finished"),
            "attempt #1 of draft[3] finished",
        ),
        (_frame("node_state", None, **AT, state="running"), "draft is running"),
        (_frame("cache_hit", None, **LOOPED, state="finished"), "draft[3] is finished (cache hit)"),
        (
            _frame("forked", {"parent_run_id": "p-9", "parent_frame_no": 12}),
            "forked from run p-9 at frame 12",
        ),
        (  # a fork that nothing ran yet: not "interrupted", which reads as a crash
            _frame("forked", {"parent_run_id": "p-9", "parent_frame_no": 12}, state="interrupted"),
            "forked from run p-9 at frame 12: not started, ready to run "
            "(Replay or resume runs what is left)",
        ),
        (_frame("reset", {"nodes": ["draft", "review"]}), "reset draft, review"),
        (_frame("reset", {}), "reset "),
        (
            _frame("run_claimed", {"owner_id": "worker-3", "epoch": 4}),
            "run claimed by worker-3 (epoch 4)",
        ),
        (_frame("run_released", {}), "run given back to the queue"),
        (_frame("run_finished", {"output": {"x": 1}}), "run finished"),
        (_frame("run_failed", {"error": "agent crashed"}), "run failed: agent crashed"),
        (_frame("run_cancelled", None), "run cancelled"),
        (_frame("run_created", None), "run created"),
        (_frame("cancel_requested", {}), "cancel requested"),
        (
            _frame("run_paused", {"reason": "breakpoint", "when": "before"}, **AT),
            "paused (breakpoint) before draft",
        ),
        (
            _frame(
                "run_paused",
                {"reason": "question", "when": "ask", "question": {"q": "é?"}},
                **LOOPED,
            ),
            'paused (question) while running draft[3]: {"q": "é?"}',
        ),
        (_frame("run_paused", {"reason": "asked"}), "paused (asked) at "),
        (
            _frame("breakpoints_set", {"breakpoints": {"before": ["a", "b"], "after": ["c"]}}),
            "breakpoints set: before a, b; after c",
        ),
        (_frame("breakpoints_set", {"breakpoints": {"after": ["c"]}}), "breakpoints set: after c"),
        (_frame("breakpoints_set", {}), "breakpoints set: none"),
        (
            _frame("run_continued", {"action": "answer", "answer": "teal ✓"}),
            'run continued (answer) with "teal ✓"',
        ),
        (_frame("run_continued", {"action": "step"}), "run continued (step)"),
        (_frame("something_new", {}), "something_new"),
        (
            _frame("attempt_finished", ["not", "an", "object"], **AT, state="failed"),
            "attempt #2 of draft failed",
        ),
    ],
)
def test_each_kind_of_frame_reads_as_what_happened(frame: Frame, words: str) -> None:
    assert describe_frame(frame) == words
    assert describe_frame(FrameRow(*astuple(frame))) == words  # as the model's rows too


@pytest.mark.parametrize(
    ("ms", "words"),
    [
        (None, "?"),
        (0, "0 ms"),
        (999, "999 ms"),
        (999.7, "999 ms"),
        (1_000, "1.0 s"),
        (12_345, "12.3 s"),
        (59_999, "60.0 s"),
        (60_000, "1 min 00 s"),
        (245_000, "4 min 05 s"),
        (3_725_000, "62 min 05 s"),
    ],
)
def test_durations_read_in_the_unit_that_fits(ms: float | None, words: str) -> None:
    assert duration(ms) == words


def test_clock_times_are_local_to_the_millisecond_and_unknown_is_a_question_mark() -> None:
    assert clock_time(None) == "?"
    ms = 1_796_299_103_448
    local = datetime.fromtimestamp(ms / 1000).astimezone()
    shown = clock_time(ms)
    assert shown.startswith(f"{local:%Y-%m-%d %H:%M:%S}.448")
    assert shown == f"{local:%Y-%m-%d %H:%M:%S}.448 {local:%Z}".strip()
    assert clock_time(ms - 448).startswith(f"{local:%Y-%m-%d %H:%M:%S}.000")
    assert frame_time(Frame("r", 1, "run_created", created_at_ms=ms)) == f"at {shown}"


def test_nodes_and_refs_are_named_with_iteration_attempt_sequence_and_size() -> None:
    assert node_label("draft", 0) == "draft"
    assert node_label("draft", 2) == "draft[2]"
    ref = CheckpointRef("r", "draft", 2, 3, 1, "ef" * 32, "demo.notes", 4, "turn", None, 0)
    assert ref_label(ref) == f"draft[2] #3.1 turn · demo.notes v4 · ? · {'ef' * 6}"
    assert ref_label(ref, 2048) == f"draft[2] #3.1 turn · demo.notes v4 · 2048 B · {'ef' * 6}"
