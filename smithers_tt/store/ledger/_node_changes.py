"""The ledger's changes to a run's attempts and nodes: an attempt started and ended, a node's
state set or cancelled (each a :class:`~smithers_tt.store.ledger._write.Change` that
:func:`~smithers_tt.store.ledger._write.write` applies and turns into frames)."""

from __future__ import annotations

from typing import Any

from smithers_tt.errors import AttemptNotFound, FenceLost
from smithers_tt.store._records import AttemptKey, AttemptRecord, Fence, Frame, stored_json
from smithers_tt.store.ledger._write import Change, Write, json_or_none, key_tuple


class AttemptStarted(Change):
    """The next attempt of a node opens under ``fence`` (its record is ``attempt`` after)."""

    __slots__ = ("attempt", "fence", "iteration", "node_id", "resumed")

    keeps_run = True

    def __init__(
        self, fence: Fence, node_id: str, iteration: int, resumed: tuple | None = None
    ) -> None:
        self.fence, self.node_id, self.iteration, self.resumed = fence, node_id, iteration, resumed
        self.attempt: AttemptRecord | None = None

    def apply(self, w: Write, frame_no: int, early: Any) -> Frame:
        fence, stamp = self.fence, w.stamp
        row = w.db.one(w.sql.next_attempt, (fence.run_id, self.node_id, self.iteration))
        key = AttemptKey(fence.run_id, self.node_id, self.iteration, row[0] if row else 1)
        resumed = self.resumed
        w.db.count(
            w.sql.insert_attempt,
            (*key_tuple(key), fence.epoch, False, *(resumed or (None,) * 5), stamp),
        )
        self.attempt = AttemptRecord(
            key, "in_progress", fence.epoch, 0, False, None, None, resumed, stamp, None
        )
        w.db.learn(("seq", *key_tuple(key)), 0)
        return Frame(
            key.run_id, frame_no, "attempt_started", self.node_id, self.iteration, key.attempt,
            state="in_progress", created_at_ms=stamp,
            data=None if resumed is None else {"resumed_from": list(resumed)},
        )  # fmt: skip


class AttemptEnded(Change):
    """An in-progress attempt (of owner ``epoch``) ends as ``state``.

    ``detail`` records why in the frame (error, code, discard flag): the engine's own ends
    do; the ends a claim or a cancel imposes on attempts left open do not.
    """

    __slots__ = ("detail", "discard", "epoch", "error", "error_code", "key", "state")

    keeps_run = True

    def __init__(
        self,
        key: AttemptKey,
        state: str,
        epoch: int,
        *,
        error: str | None = None,
        error_code: str | None = None,
        discard: bool = False,
        detail: bool = True,
    ) -> None:
        self.key, self.state, self.epoch, self.detail = key, state, epoch, detail
        self.error, self.error_code, self.discard = error, error_code, discard

    def apply(self, w: Write, frame_no: int, early: Any) -> Frame:
        key = self.key
        params = (self.state, self.error, self.error_code, self.discard, w.stamp)
        if not w.db.count(w.sql.end_attempt, (*params, *key_tuple(key), self.epoch)):
            if w.db.one(w.sql.attempt_state, key_tuple(key)) is None:
                raise AttemptNotFound(f"no attempt {key}")
            raise FenceLost(
                f"attempt {key} is no longer in progress under epoch {self.epoch}",
                run_id=key.run_id,
            )
        w.db.learn(("seq", *key_tuple(key)), None)
        data = None
        if self.detail:
            data = {
                "error": self.error,
                "error_code": self.error_code,
                "discard_resume": self.discard,
            }
        return Frame(
            key.run_id, frame_no, "attempt_finished", key.node_id, key.iteration, key.attempt,
            state=self.state, data=data, created_at_ms=w.stamp,
        )  # fmt: skip


class NodeSet(Change):
    """A node's state (and output, and last attempt) is recorded."""

    __slots__ = ("iteration", "last_attempt", "node_id", "output", "run_id", "state")

    keeps_run = True

    def __init__(
        self,
        run_id: str,
        node_id: str,
        iteration: int,
        state: str,
        output: Any = None,
        last_attempt: int | None = None,
    ) -> None:
        self.run_id, self.node_id, self.iteration = run_id, node_id, iteration
        self.state, self.output, self.last_attempt = state, output, last_attempt

    def apply(self, w: Write, frame_no: int, early: Any) -> Frame:
        output = self.output
        w.db.count(
            w.sql.put_node,
            (
                self.run_id, self.node_id, self.iteration, self.state, self.last_attempt,
                json_or_none(output), w.stamp,
            ),
        )  # fmt: skip
        return Frame(
            self.run_id, frame_no, "node_state", self.node_id, self.iteration,
            self.last_attempt, state=self.state,
            data=None if output is None else {"output": output}, created_at_ms=w.stamp,
        )  # fmt: skip


class NodeCancelled(Change):
    """A running node becomes ``cancelled`` (its output and last attempt stay, and its frame
    records the output, as a ``node_state`` frame that changes the state must)."""

    __slots__ = ("iteration", "last_attempt", "node_id", "run_id")

    keeps_run = True

    def __init__(self, run_id: str, node_id: str, iteration: int, last_attempt: int | None):
        self.run_id, self.node_id = run_id, node_id
        self.iteration, self.last_attempt = iteration, last_attempt

    def apply(self, w: Write, frame_no: int, early: Any) -> Frame:
        row = w.db.one(w.sql.node_state, ("cancelled", self.run_id, self.node_id, self.iteration))
        output = stored_json(
            row and row[0],
            lambda: (
                f"tt_nodes.output_json of node {self.node_id!r} (iteration "
                f"{self.iteration}) of run {self.run_id!r}"
            ),
        )
        return Frame(
            self.run_id, frame_no, "node_state", self.node_id, self.iteration,
            self.last_attempt, state="cancelled", created_at_ms=w.stamp,
            data=None if output is None else {"output": output},
        )  # fmt: skip
