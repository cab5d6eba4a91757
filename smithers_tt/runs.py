"""A handle on one run: its record, nodes, attempts, checkpoints and frames."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from smithers_tt.checkpoint import AgentCheckpoint
from smithers_tt.engine import Pause, pause_history
from smithers_tt.store import AttemptRecord, CheckpointRef, Frame, NodeRecord, RunRecord
from smithers_tt.timetravel import Snapshot, run_html

if TYPE_CHECKING:
    from smithers_tt.database import Database


class Run:
    """One run, as last read from the database (call :meth:`refresh` to read it again)."""

    def __init__(self, db: Database, record: RunRecord) -> None:
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

    def nodes(self) -> list[NodeRecord]:
        """Every node (task iteration) with its state, last attempt and output."""
        return self.db.store.list_nodes(self.id)

    def attempts(self, node_id: str | None = None) -> list[AttemptRecord]:
        """Every attempt, optionally of one node."""
        return self.db.store.list_attempts(self.id, node_id)

    def checkpoints(self, node_id: str | None = None) -> list[CheckpointRef]:
        """Every checkpoint ref of the run (or of one node), in key order."""
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
        ref = self.db.store.newest_ref(self.id, node_id, iteration)
        return None if ref is None else self.db.store.load(ref)

    def snapshot(self, frame_no: int | None = None) -> Snapshot:
        """Exactly what frame ``frame_no`` (default: the newest) makes visible."""
        return self.db.snapshot(self.id, frame_no)

    def frames(self) -> list[Frame]:
        """Every frame (state change) of the run in order."""
        return self.db.store.frames(self.id, after=-1)

    def _repr_html_(self) -> str:
        """The run as an escaped HTML table in notebooks."""
        return run_html(self.record)

    def __repr__(self) -> str:
        return f"<Run {self.id} {self.record.workflow!r} {self.status}>"
