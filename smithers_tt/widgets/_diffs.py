"""The diff: what it compares (frames of the shown run, another run of the fork tree, or
two attempts of a node) and the differences it shows, computed here, in Python.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from smithers_tt import timetravel as tt
from smithers_tt.errors import InvalidArgument, SmithersError
from smithers_tt.store import CheckpointRef
from smithers_tt.timetravel import Change, Snapshot
from smithers_tt.widgets._conversation import ChatMessage, find_transcript, transcript_diff
from smithers_tt.widgets._lens import ask
from smithers_tt.widgets._records import DiffResult
from smithers_tt.widgets._state import DebuggerState
from smithers_tt.widgets._trim import Touched, newest_refs, trimmed
from smithers_tt.widgets._words import node_label

NOTHING_BEFORE = "frame 0 of a fork: nothing before it in this run"
"""The diff's note for frame 0 of a fork whose parent no longer has the fork frame."""

FIRST_FRAME = "frame 0 is the run's first frame: nothing before it to compare with"
"""The diff's note for frame 0 of a run that is no fork, with the previous frame."""


class Diffs(DebuggerState):
    """The diff settings and the differences they ask for."""

    def set_diff(self, mode: str | None = None, **settings: Any) -> None:
        """Change what the diff compares; settings left out keep their value.

        ``mode`` is ``frames`` (another frame of this run, by default the previous one, with
        the selected frame), ``runs`` (another run of the fork tree at a frame, with the
        selected frame) or ``attempts`` (the newest checkpoints of two attempts of a node).
        Settings: ``compare_frame`` (None: the previous frame), ``compare_run`` and
        ``compare_run_frame`` (None: the fork point for the parent, else its newest frame),
        ``attempt_pair`` ``(node_id, iteration, attempt_a, attempt_b)``.
        """
        if mode is not None and mode not in ("frames", "runs", "attempts"):
            raise InvalidArgument(f"diff mode is frames, runs or attempts, not {mode!r}")
        known = ("compare_frame", "compare_run", "compare_run_frame", "attempt_pair")
        unknown = sorted(set(settings) - set(known))
        if unknown:  # refused before anything changes
            raise InvalidArgument(f"unknown diff settings {unknown}; use {list(known)}")
        if mode is not None:
            self.diff_mode = mode
        for name, value in settings.items():
            setattr(self, name, value)
        self._emit("diff")

    def default_compare_run(self) -> tuple[str, int] | None:
        """The run compared in ``runs`` mode when none was chosen: the parent at the fork
        frame, else the first child at its newest frame."""
        edge = self.edge(self.run_id)
        if edge is not None and edge.parent_run_id and self.edge(edge.parent_run_id):
            return edge.parent_run_id, int(edge.parent_frame_no or 0)
        for child in self.tree:
            if child.parent_run_id == self.run_id:
                return child.run_id, self._clock_of(child.run_id)
        return None

    def default_frame_of(self, run_id: str) -> int:
        """The frame of another run compared by default: the fork point when it is this
        run's parent, else its newest frame."""
        edge = self.edge(self.run_id)
        if edge is not None and edge.parent_run_id == run_id and edge.parent_frame_no is not None:
            return int(edge.parent_frame_no)
        return self._clock_of(run_id)

    def fork_gap(self, run_id: str) -> tuple[int, int] | None:
        """``(fork frame, parent's newest frame)`` when ``run_id`` was forked at a frame its
        parent no longer has (the parent was rewound past the fork point), else None."""
        edge = self.edge(run_id)
        if edge is None or edge.parent_run_id is None or edge.parent_frame_no is None:
            return None
        try:
            clock = self._clock_of(edge.parent_run_id)
        except SmithersError:  # the parent is gone: the child's own history still stands
            return None
        return (int(edge.parent_frame_no), clock) if clock < edge.parent_frame_no else None

    def _clock_of(self, run_id: str) -> int:
        return self.db.store.get_run(run_id).clock

    def attempts_with_history(self, least: int = 1) -> list[tuple[str, int, list[int]]]:
        """Nodes (and iterations) with at least ``least`` attempts at the selected frame, and
        their attempt numbers."""
        rows = self._fold.attempts_by_node(self.snapshot)
        return [row for row in rows if len(row[2]) >= least]

    def default_attempt_pair(self) -> tuple[str, int, int, int] | None:
        """The last two attempts of the selected frame's node, else of any node with two."""
        nodes = self.attempts_with_history(2)
        frame = self.frame()
        preferred = [n for n in nodes if n[0] == frame.node_id and len(n[2]) >= 2]
        candidates = preferred or [n for n in nodes if len(n[2]) >= 2]
        if not candidates:
            return None
        node_id, iteration, attempts = candidates[0]
        return node_id, iteration, attempts[-2], attempts[-1]

    def fork_point(self) -> tuple[str, int] | str | None:
        """What frame 0 of the shown run follows: ``(parent run, fork frame)`` for a fork
        whose parent still has that frame, :data:`NOTHING_BEFORE` for a fork whose parent
        is gone or was rewound past it, None for a run that is no fork."""
        parent, at = self.record.parent_run_id, self.record.parent_frame_no
        if parent is None or at is None:
            return None
        try:
            clock = self._clock_of(parent)
        except SmithersError:  # the parent is gone: the child's own history still stands
            return NOTHING_BEFORE
        return NOTHING_BEFORE if clock < at else (parent, int(at))

    def diff(self) -> DiffResult:
        """The differences the diff settings ask for (computed here, in Python): with the
        previous frame, frame 0 of a fork is compared with its parent's frame at the fork
        point (the frame it restates), never with itself; frame 0 of any other run has
        nothing before it, and says so; a checkpoint that stored again the content its node
        had changes nothing, and says that."""
        result = self._diff()
        if result.empty and result.note is None and self.diff_mode == "frames":
            frame = self.frame()
            if frame.kind == "checkpoint" and self.compare_frame in (None, frame.frame_no - 1):
                node = self.node_label(frame.node_id or "", frame.iteration or 0)
                result.note = (
                    f"no differences: this checkpoint of {node} stored the same content as "
                    f"its node's checkpoint before it ({(frame.content_hash or '')[:12]})"
                )
        return result

    def _diff(self) -> DiffResult:
        note = None
        before = None
        if self.diff_mode == "frames" and self.compare_frame is None and self.frame_no == 0:
            before = self.fork_point()
            if before is None or isinstance(before, str):
                return DiffResult("", "", note=before or FIRST_FRAME)
            note = (
                f"frame 0 of a fork: compared with its parent's frame {before[1]}, "
                "where it was forked"
            )
        newest = self._at_newest
        if (
            before is None
            and newest is not None
            and self.diff_mode == "frames"
            and self.compare_frame in (None, newest.frame_no - 1)
            and self.lens is None
        ):
            change = newest.last_change()
            if change is not None:
                return self._frames_diff(*change)
        if self.diff_mode == "attempts":
            return self._attempt_diff()
        if self.diff_mode == "runs":
            other = (
                (self.compare_run, self.compare_run_frame)
                if self.compare_run is not None
                else self.default_compare_run()
            )
            if other is None:
                return DiffResult("", "", note="this run has no parent or forks to compare with")
            run_id, frame_no = other
            if frame_no is None:
                frame_no = self.default_frame_of(run_id)
            a = self.other_snapshot(run_id, int(frame_no))
        elif before is not None:
            a = self.other_snapshot(*before)
        else:
            a_no = self.compare_frame
            if a_no is None:
                a_no = max(self.frame_no - 1, 0)
            a_no = max(0, min(a_no, self.last_frame))
            a = self.snapshot_at(a_no)
        b = self.snapshot
        sections = ask(self.lens, "diff", a, b)
        if sections is not None:
            result = self._labelled(DiffResult("", "", sections=list(sections)), a, b)
        else:
            touched = None
            if self.diff_mode == "frames" and before is None:
                touched = self._fold.touched(
                    min(a.frame_no, b.frame_no), max(a.frame_no, b.frame_no)
                )
            result = self._frames_diff(a, b, touched, self._newest_refs)
        result.note = note or result.note
        return result

    def _frames_diff(
        self,
        a: Snapshot,
        b: Snapshot,
        touched: Touched | None,
        newest: Callable[[Snapshot], dict[tuple[str, int], CheckpointRef]] = newest_refs,
    ) -> DiffResult:
        """The diff of two snapshots, of only what ``touched`` names when given."""
        ta, tb = trimmed(a, b, newest(a), newest(b), touched)
        result = _sections(tt.diff(ta, tb, load=self.load))
        result.conversations = self._conversations(ta, tb)
        return self._labelled(result, a, b)

    def _labelled(self, result: DiffResult, a: Snapshot, b: Snapshot) -> DiffResult:
        shown = self.short_ids()
        if missing := [s.run_id for s in (a, b) if s.run_id not in shown]:  # a run off the tree
            shown = {**shown, **self.db.store.short_run_ids(missing)}
        result.a, result.b = (
            f"run {shown.get(s.run_id, s.run_id)} frame {s.frame_no}" for s in (a, b)
        )
        result.whole = (f"run {a.run_id} frame {a.frame_no}", f"run {b.run_id} frame {b.frame_no}")
        if self.diff_mode == "frames" and (a.run_id, a.frame_no) == (b.run_id, b.frame_no):
            result.note = "both sides are the same frame; pick another frame to compare with"
        return result

    def _conversations(
        self, a: Snapshot, b: Snapshot
    ) -> list[tuple[str, list[tuple[str, ChatMessage]]]]:
        """Transcript diffs of the nodes whose newest checkpoints differ (either side a chat)."""
        na, nb = newest_refs(a), newest_refs(b)
        out = []
        for key in sorted(set(na) | set(nb)):
            sides = [self.load(s[key]).payload if key in s else None for s in (na, nb)]
            old, new = (find_transcript(p) for p in sides)
            if old is None and new is None:
                continue
            out.append((node_label(*key), transcript_diff(old, new)))
        return out

    def _attempt_diff(self) -> DiffResult:
        pair = self.attempt_pair or self.default_attempt_pair()
        if pair is None:
            return DiffResult("", "", note="no node has two attempts at this frame")
        node_id, iteration, first, second = pair
        snap = self.snapshot
        label = node_label(node_id, iteration)
        result = DiffResult(f"{label} attempt #{first}", f"{label} attempt #{second}")
        views = [snap.attempts.get((node_id, iteration, n)) for n in (first, second)]
        if views[0] is None or views[1] is None:
            result.note = f"{label} has no attempts #{first} and #{second} at frame {snap.frame_no}"
            return result
        a, b = views
        changes = [
            Change("change", f"${'.' + name}", getattr(a, name), getattr(b, name))
            for name in ("state", "error", "error_code", "resumed_from")
            if getattr(a, name) != getattr(b, name)
        ]
        result.sections.append(("attempt", changes))
        payloads = []
        for n in (first, second):
            keys = [k for k in snap.refs if k[:3] == (node_id, iteration, n)]
            payloads.append(self.load(snap.refs[max(keys)]).to_json() if keys else None)
        result.sections.append((f"checkpoint {label}", tt.json_diff(payloads[0], payloads[1])))
        return result


def _sections(d: tt.SnapshotDiff) -> DiffResult:
    result = DiffResult("", "")
    if d.status:
        result.sections.append(("run status", [Change("change", "$", d.status[0], d.status[1])]))
    result.sections.append(("nodes", d.nodes))
    result.sections.append(("attempts", d.attempts))
    result.sections.append(("outputs", d.outputs))
    for label, changes in d.checkpoints.items():
        result.sections.append((f"checkpoint {label}", changes))
    return result
