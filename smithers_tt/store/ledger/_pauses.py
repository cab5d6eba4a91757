"""Pauses: the changes that stop a run durably (a breakpoint, a question for a person) and
let it go on (an answer, edited checkpoints, skipped nodes), written through the ledger.

A pause releases the run: :class:`RunPaused` makes it ``paused`` with no owner under a new
epoch, so whatever the pausing process still tries to write is fenced out, and no worker
claims it (the claim query picks only ``queued`` runs and ``running`` runs whose owner
stopped heartbeating). :class:`RunContinued` takes it out of the pause, only if it is still
paused under the epoch the continuer saw: of two continuers, the second finds another epoch
(the ledger locks the run row first, so they are serialised) and gets a
:class:`~smithers_tt.errors.ConcurrencyError` with nothing written.

A pause, a continue and a release hand the run back the same way: one prebuilt statement
(:attr:`~smithers_tt.store.backend._statements.Statements.hand_back_run`) with the status
they leave.
"""

from __future__ import annotations

from typing import Any

from smithers_tt.checkpoint import EncodedCheckpoint
from smithers_tt.errors import ConcurrencyError, InvalidArgument
from smithers_tt.store._records import CheckpointRef, Frame
from smithers_tt.store._ref_frame import ref_key
from smithers_tt.store.ledger._content import store_content
from smithers_tt.store.ledger._node_changes import AttemptEnded, AttemptStarted
from smithers_tt.store.ledger._write import Change, RunRow, Write, notify

ENDED = ("finished", "failed", "cancelled")
"""Statuses of a run that no executor takes up again (a breakpoint there means nothing)."""


class RunPaused(Change):
    """The run is ``paused`` (frame ``run_paused``; its data says why, at which node, and
    what it asks); its owner is released under a new epoch, fencing its late writes."""

    __slots__ = ("data", "iteration", "node_id", "run_id")

    def __init__(self, run_id: str, node_id: str | None, iteration: int | None, data: dict) -> None:
        self.run_id, self.node_id, self.iteration, self.data = run_id, node_id, iteration, data

    def apply(self, w: Write, frame_no: int, early: Any) -> Frame:
        w.db.count(w.sql.hand_back_run, ("paused", self.run_id))
        notify(w, self.run_id)
        return Frame(
            self.run_id, frame_no, "run_paused", self.node_id, self.iteration, state="paused",
            data=self.data, created_at_ms=w.stamp,
        )  # fmt: skip


class RunContinued(Change):
    """A paused run goes on (frame ``run_continued``, with the answer and what was edited):
    it becomes ``queued`` under a new epoch; a claim in the same write makes it ``running``.

    Raises (from :meth:`check`, before anything is written):
        ConcurrencyError: the run is no longer paused under ``epoch`` (another continuer, a
            cancel or a rewind got there first).
    """

    __slots__ = ("data", "epoch", "run_id")

    def __init__(self, run_id: str, epoch: int, data: dict) -> None:
        self.run_id, self.epoch, self.data = run_id, epoch, data

    def check(self, run: RunRow) -> None:
        status, epoch = run[0], run[1]
        if status != "paused" or epoch != self.epoch:
            raise ConcurrencyError(
                f"run {self.run_id} is no longer paused (it is {status} under epoch {epoch}, "
                f"not paused under epoch {self.epoch}): someone else continued, cancelled or "
                "rewound it first; nothing was written. Look at it with "
                f"`smithers-tt timeline {self.run_id}`",
                run_id=self.run_id,
                epoch=self.epoch,
            )

    def apply(self, w: Write, frame_no: int, early: Any) -> Frame:
        # check() saw it paused under self.epoch, in this locked row: the new one is +1.
        w.db.count(w.sql.hand_back_run, ("queued", self.run_id))
        notify(w, self.run_id)
        return Frame(
            self.run_id, frame_no, "run_continued", state="queued", data=self.data,
            created_at_ms=w.stamp,
        )  # fmt: skip


class BreakpointsSet(Change):
    """A person changed the run's breakpoints (frame ``breakpoints_set``, data
    ``{"breakpoints": {"before": [...], "after": [...]}}``), with no fence: it changes no row,
    only what the run's executor reads before its next pause (in any process).

    Raises (from :meth:`check`, before anything is written):
        InvalidArgument: the run ended (finished, failed or cancelled): nothing would read
            them; fork it instead (a fork inherits the breakpoints of its fork point).
    """

    __slots__ = ("marks", "run_id")

    def __init__(self, run_id: str, marks: dict[str, list[str]]) -> None:
        self.run_id, self.marks = run_id, marks

    def check(self, run: RunRow) -> None:
        if run[0] in ENDED:
            raise InvalidArgument(
                f"run {self.run_id} is {run[0]}: breakpoints set now would never pause it; "
                "fork it (the fork inherits the breakpoints) or replay it; nothing was written"
            )

    def apply(self, w: Write, frame_no: int, early: Any) -> Frame:
        notify(w, self.run_id)
        return Frame(
            self.run_id, frame_no, "breakpoints_set", data={"breakpoints": self.marks},
            created_at_ms=w.stamp,
        )  # fmt: skip


class CheckpointEdited(Change):
    """The edited checkpoint a person gave a node, as sequence 0 of the attempt ``started``
    opened in the same write (frame ``checkpoint``); its next attempt resumes from it."""

    __slots__ = ("agent_id", "encoded", "started")

    def __init__(
        self, started: AttemptStarted, encoded: EncodedCheckpoint, agent_id: str | None
    ) -> None:
        self.started, self.encoded, self.agent_id = started, encoded, agent_id

    def apply(self, w: Write, frame_no: int, early: Any) -> Frame:
        assert self.started.attempt is not None  # applied after the attempt it goes into
        key, enc = self.started.attempt.key, self.encoded
        if enc.content_hash not in w.contents:
            store_content(w.db, enc, w.stamp)
            w.contents.add(enc.content_hash)
        ref = CheckpointRef(
            key.run_id, key.node_id, key.iteration, key.attempt, 0, enc.content_hash,
            enc.codec, enc.version, "progress", self.agent_id, w.stamp,
        )  # fmt: skip
        w.db.count(w.sql.sequence_past, (1, key.run_id, key.node_id, key.iteration, key.attempt, 0))
        w.defer(w.sql.insert_ref, (*ref_key(ref), frame_no))
        return Frame(
            key.run_id, frame_no, "checkpoint", key.node_id, key.iteration, key.attempt, 0,
            None, enc.content_hash, enc.codec, enc.version, "progress", self.agent_id,
            {"size": enc.size, "edited": True}, w.stamp,
        )  # fmt: skip


class EditEnded(AttemptEnded):
    """The attempt that holds an edited checkpoint ends ``interrupted`` (code ``edited``):
    it ran no agent; the node's next attempt resumes from its checkpoint."""

    __slots__ = ("started",)

    def __init__(self, started: AttemptStarted) -> None:
        super().__init__(None, "interrupted", started.fence.epoch, error_code="edited")  # type: ignore[arg-type]
        self.started = started

    def apply(self, w: Write, frame_no: int, early: Any) -> Frame:
        assert self.started.attempt is not None
        self.key = self.started.attempt.key
        return super().apply(w, frame_no, early)
