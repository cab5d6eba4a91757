"""The store's pauses: a run paused durably at a breakpoint or a question to a person,
taken out of its pause (with edits, skips or a cancel), and breakpoints replaced while it
runs. A part of :class:`~smithers_tt.store._store.Store`, which supplies ``_change``."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from sqlalchemy.engine import Connection

from smithers_tt._model_calls import ModelCall
from smithers_tt.checkpoint import EncodedCheckpoint
from smithers_tt.errors import RunNotFound
from smithers_tt.store._frames import Frame
from smithers_tt.store._records import AttemptKey, Fence, now_ms
from smithers_tt.store.backend import driver
from smithers_tt.store.ledger import (
    AttemptStarted,
    BreakpointsSet,
    Change,
    CheckpointEdited,
    EditEnded,
    Entry,
    NodeCancelled,
    NodeSet,
    RunCancelled,
    RunClaimed,
    RunContinued,
    RunPaused,
    open_ends,
    with_calls,
    write,
)

T = TypeVar("T")


class Pausing:
    """Pauses and breakpoints (questions to a person), written through the ledger."""

    def _change(self, work: Callable[[Connection, list[Frame]], T]) -> T:
        raise NotImplementedError  # the Store's: one write transaction, then its frames

    def pause_run(
        self,
        fence: Fence,
        node_id: str | None,
        iteration: int | None,
        data: dict[str, Any],
        model_calls: Mapping[AttemptKey, Sequence[ModelCall]] | None = None,
    ) -> Frame:
        """Pause an owned run durably (frame ``run_paused`` with ``data``: why, and what it
        asks): no owner, a new epoch fencing ``fence``, attempts left in progress end
        ``interrupted``, each with the ``model_calls`` it made since its last write (by
        attempt). Continue it with :meth:`continue_run`.

        Raises:
            FenceLost: ``fence`` no longer owns the run; nothing was written.
        """

        def work(conn: Connection, frames: list[Frame]) -> Frame:
            with driver(conn) as db:
                if db.one(db.sql.lock_run, (fence.run_id,)) is None:
                    raise RunNotFound(f"no run {fence.run_id!r}")
                # Locked: no attempt starts meanwhile; the ledger checks the fence first.
                changes = with_calls(open_ends(db, fence.run_id, "interrupted"), model_calls or {})
                changes.append(RunPaused(fence.run_id, node_id, iteration, data))
                (entry,) = write(db, [Entry(fence.run_id, fence, changes)], now_ms())
            frames += entry.frames
            return entry.frames[-1]

        return self._change(work)

    def continue_run(
        self,
        run_id: str,
        epoch: int,
        data: dict[str, Any],
        *,
        owner_id: str | None = None,
        claim: bool = False,
        edits: Sequence[tuple[str, int, EncodedCheckpoint, str | None]] = (),
        skips: Sequence[tuple[str, int, Any]] = (),
        abort: bool = False,
    ) -> Fence | None:
        """Take a run out of a pause seen under ``epoch``, in one transaction: frame
        ``run_continued`` (with ``data``), then the ``edits`` (node, iteration, checkpoint,
        agent id: each in an attempt of its own that its next attempt resumes from), the
        ``skips`` (node, iteration, output: the node is ``finished`` with that output), and
        either a cancel (``abort``), a claim by ``owner_id`` (``claim``: returns its fence),
        or nothing more (the run waits ``queued`` for a worker; returns None).

        Raises:
            ConcurrencyError: the run is no longer paused under ``epoch``; nothing was written.
        """

        def work(conn: Connection, frames: list[Frame]) -> Fence | None:
            with driver(conn) as db:
                if db.one(db.sql.lock_run, (run_id,)) is None:
                    raise RunNotFound(f"no run {run_id!r}; list runs with `smithers-tt runs`")
                changes: list[Change] = [RunContinued(run_id, epoch, data)]
                fence = Fence(run_id, epoch + 2)
                if claim and not abort:
                    claimed = {"epoch": fence.epoch, "owner_id": owner_id}
                    changes.append(RunClaimed(run_id, fence.epoch, owner_id, claimed))
                for node_id, iteration, encoded, agent_id in edits:
                    started = AttemptStarted(Fence(run_id, epoch + 1), node_id, iteration)
                    changes += [started, CheckpointEdited(started, encoded, agent_id)]
                    changes.append(EditEnded(started))
                for node_id, iteration, output in skips:
                    changes.append(NodeSet(run_id, node_id, iteration, "finished", output))
                if abort:
                    changes += [
                        NodeCancelled(run_id, node_id, iteration, last_attempt)
                        for node_id, iteration, last_attempt in db.all(
                            db.sql.running_nodes, (run_id,)
                        )
                    ]
                    changes.append(RunCancelled(run_id))
                (entry,) = write(db, [Entry(run_id, None, changes)], now_ms())
            frames += entry.frames
            return fence if claim and not abort else None

        return self._change(work)

    def set_breakpoints(self, run_id: str, marks: dict[str, list[str]]) -> Frame:
        """Replace a run's breakpoints (``{"before": [...], "after": [...]}`` node ids) now,
        with frame ``breakpoints_set``: a queued or paused run uses them when it goes on, a
        running one at its next node (its executor reads them as it goes).

        Raises:
            RunNotFound: there is no such run.
            InvalidArgument: the run ended; nothing was written.
        """

        def work(conn: Connection, frames: list[Frame]) -> Frame:
            with driver(conn) as db:
                (entry,) = write(
                    db, [Entry(run_id, None, [BreakpointsSet(run_id, marks)])], now_ms()
                )
            frames += entry.frames
            return entry.frames[-1]

        return self._change(work)
