"""A handle on one run: its record, nodes, attempts, checkpoints and frames."""

from __future__ import annotations

from typing import Any

from smithers_tt._model_calls import ModelCallRecord, RunCallTotals, calls_frame
from smithers_tt._opened import OpenedDatabase
from smithers_tt.checkpoint import AgentCheckpoint
from smithers_tt.engine import Pause, pause_history
from smithers_tt.store import (
    AttemptKey,
    AttemptRecord,
    CheckpointRef,
    Frame,
    NodeRecord,
    RunRecord,
)
from smithers_tt.timetravel import Snapshot, live_rows, run_html


class Run:
    """One run, as last read from the database (call :meth:`refresh` to read it again)."""

    def __init__(self, db: OpenedDatabase, record: RunRecord) -> None:
        self.db = db
        self.record = record

    @property
    def id(self) -> str:
        """The run id."""
        return self.record.run_id

    @property
    def status(self) -> str:
        """queued, running, paused, finished, failed, cancelled or interrupted."""
        return self.record.status

    @property
    def labels(self) -> dict[str, str]:
        """The run's labels (``{"case": "retry"}``), given when it was made or forked."""
        return self.record.labels

    @property
    def pause(self) -> Pause | None:
        """Where the run is paused, why, and what it asks (None unless it is ``paused``);
        continue it with ``db.resume(run.id, wf, answer=...)``."""
        if self.status != "paused":
            return None
        return pause_history(self.db.store.pause_frames(self.id)).current

    @property
    def input(self) -> Any:
        """The run input."""
        return self.record.input

    @property
    def output(self) -> Any:
        """The outputs of every task by task id, once the run finished."""
        return self.record.output

    @property
    def error(self) -> str | None:
        """Why the run failed, if it did."""
        return self.record.error

    def refresh(self) -> Run:
        """Read the run again from the database."""
        self.record = self.db.store.get_run(self.id)
        return self

    def _inherited(self) -> Snapshot | None:
        """The newest snapshot of a fork by reference, whose nodes, attempts and refs are
        read from its parent's history (it has no live rows until it is materialised)."""
        return self.snapshot() if self.record.inherits else None

    def nodes(self) -> list[NodeRecord]:
        """Every node (task iteration) with its state, last attempt and output."""
        snap = self._inherited()
        if snap is None:
            return self.db.store.list_nodes(self.id)
        return [
            NodeRecord(n.node_id, n.iteration, n.state, n.last_attempt, n.output, run_id=self.id)
            for _, n in sorted(snap.nodes.items())
        ]

    def attempts(self, node_id: str | None = None) -> list[AttemptRecord]:
        """Every attempt, optionally of one node."""
        snap = self._inherited()
        if snap is None:
            return self.db.store.list_attempts(self.id, node_id)
        _, rows = live_rows(snap, self.id)
        found = [_attempt(r) for r in rows if node_id is None or r["node_id"] == node_id]
        return sorted(found, key=lambda a: (a.key.node_id, a.key.iteration, a.key.attempt))

    def checkpoints(self, node_id: str | None = None) -> list[CheckpointRef]:
        """Every checkpoint ref of the run (or of one node), in key order."""
        snap = self._inherited()
        if snap is not None:
            return [ref for key, ref in sorted(snap.refs.items()) if node_id in (None, key[0])]
        refs: list[CheckpointRef] = []
        cursor = None
        while True:
            page = self.db.store.list_refs(self.id, node_id=node_id, limit=1000, cursor=cursor)
            refs.extend(page.items)
            if page.next_cursor is None:
                return refs
            cursor = page.next_cursor

    def checkpoint(self, node_id: str, iteration: int = 0) -> AgentCheckpoint | None:
        """The newest checkpoint of a node, verified, or None."""
        snap = self._inherited()
        if snap is None:
            ref = self.db.store.newest_ref(self.id, node_id, iteration)
        else:
            ref = snap.newest_ref(node_id, iteration)
        return None if ref is None else self.db.store.load(ref)

    def snapshot(self, frame_no: int | None = None) -> Snapshot:
        """Exactly what frame ``frame_no`` (default: the newest) makes visible."""
        return self.db.snapshot(self.id, frame_no)

    def frames(self) -> list[Frame]:
        """Every frame (state change) of the run in order."""
        return self.db.store.frames(self.id, after=-1)

    def model_calls(self, prices: Any = None, *, frame_no: int | None = None) -> Any:
        """Every model call the run's agents made, as frame ``frame_no`` (default: the
        newest) sees them: a pandas DataFrame (``lineage`` extra), one row per call (each HTTP
        try, continuation and streamed reply), in the columns of the lineage view
        ``model_calls`` (run, node, attempt, frame, model, tokens, ``ttft_ms``,
        ``latency_ms``, ``status``, ``error``, ``cost`` ...). A fork's calls start with its
        parent's up to the fork frame (``inherited``, their ``run_id`` the parent's).

        Args:
            prices: what calls cost: a :class:`~smithers_tt.PriceTable`, a mapping of model
                to ``{"input", "output", "cached_input"}`` per million tokens, or a ``.json``
                / ``.toml`` file; a model it does not name costs NaN (never guessed).
            frame_no: the frame whose calls to show.
        """
        return calls_frame(self.model_call_records(frame_no), prices)

    def model_call_records(self, frame_no: int | None = None) -> list[ModelCallRecord]:
        """The calls of :meth:`model_calls` as records (no pandas needed)."""
        return self.db.store.model_calls(self.id, frame_no)

    def model_call_totals(
        self, prices: Any = None, *, frame_no: int | None = None
    ) -> RunCallTotals:
        """Calls, tokens, cost and model time against wall time, for the run and per node,
        of the calls frame ``frame_no`` (default: the newest) sees."""
        return self.db.store.model_call_totals(self.id, prices, frame_no)

    def reused_model_calls(self) -> list[ModelCallRecord]:
        """The calls this fork did not make again: its parent's, up to the fork frame, of the
        nodes it has not run since (what a replay saved; empty for a run that is no fork)."""
        ran = {f.node_id for f in self.frames() if f.kind == "attempt_started" and f.frame_no > 0}
        calls = self.db.store.model_calls(self.id)
        return [c for c in calls if c.inherited and c.node_id not in ran]

    def _repr_html_(self) -> str:
        """The run as an escaped HTML table in notebooks."""
        return run_html(self.record)

    def __repr__(self) -> str:
        return f"<Run {self.id} {self.record.workflow!r} {self.status}>"


def _attempt(row: dict[str, Any]) -> AttemptRecord:
    """An attempt record from a :func:`~smithers_tt.timetravel.live_rows` row."""
    source = row["resumed_run_id"]
    return AttemptRecord(
        AttemptKey(row["run_id"], row["node_id"], row["iteration"], row["attempt"]),
        row["state"],
        row["owner_epoch"],
        row["next_sequence"],
        row["discard_resume"],
        row["error"],
        row["error_code"],
        None
        if source is None
        else (
            source,
            row["resumed_node_id"],
            row["resumed_iteration"],
            row["resumed_attempt"],
            row["resumed_sequence"],
        ),
        row["started_at_ms"],
        row["finished_at_ms"],
    )
