"""What the shown run holds at a frame: snapshots (folded by the scrub cache), the nodes'
rows and newest checkpoints, snapshots of other runs to compare with, and checkpoint
contents (cached by content hash) and their sizes.
"""

from __future__ import annotations

from collections.abc import Iterable

from smithers_tt.checkpoint import AgentCheckpoint, canonical_bytes
from smithers_tt.errors import InvalidArgument
from smithers_tt.store import CheckpointRef
from smithers_tt.store.for_widgets import content_sizes
from smithers_tt.timetravel import Snapshot
from smithers_tt.widgets._newest import NodeTable, node_table
from smithers_tt.widgets._state import DebuggerState

_PAYLOAD_CACHE = 64


class Content(DebuggerState):
    """Snapshots and checkpoint contents of the shown run."""

    @property
    def inherited(self) -> Snapshot | None:
        """What the shown run reads from its parent (a fork by reference), or None."""
        return self._base

    def snapshot_at(self, frame_no: int | None = None) -> Snapshot:
        """The snapshot of the shown run at a frame (default: the selected one), folded from
        the nearest one kept (:class:`~smithers_tt.widgets._scrub.FoldCache`)."""
        n = self.frame_no if frame_no is None else frame_no
        if not 0 <= n <= self.last_frame:
            raise InvalidArgument(f"run {self.run_id} has frames 0 to {self.last_frame}, not {n}")
        return self._fold.at(n)

    @property
    def snapshot(self) -> Snapshot:
        """The snapshot at the selected frame."""
        return self.snapshot_at()

    def _newest_refs(self, snap: Snapshot) -> dict[tuple[str, int], CheckpointRef]:
        """Each node's newest ref in a snapshot of the shown run."""
        return self._fold.newest(snap)

    def checkpointed_nodes(self) -> list[str]:
        """Ids of the nodes with a checkpoint visible at the selected frame, sorted."""
        if (newest := self._at_newest) is not None:
            return newest.checkpointed()
        return sorted({node_id for node_id, _ in self._newest_refs(self.snapshot)})

    def status_at(self) -> str:
        """The run's status at the selected frame."""
        if (newest := self._at_newest) is not None:
            return newest.status
        return self.snapshot.status

    def node_table(self, limit: int) -> NodeTable:
        """The first ``limit`` rows of the nodes table at the selected frame."""
        if (newest := self._at_newest) is not None:
            return newest.node_table(limit)
        snap = self.snapshot
        return node_table(snap, limit, self._fold.node_keys(snap))

    def node_states(self) -> dict[str, str]:
        """Each node's state at the selected frame, that of its highest iteration with a
        node row (every node, however many iterations a loop ran: the graph's colours)."""
        if (newest := self._at_newest) is not None:
            return newest.node_states()
        states: dict[str, tuple[int, str]] = {}
        for (node_id, iteration), view in self.snapshot.nodes.items():
            if node_id not in states or iteration > states[node_id][0]:
                states[node_id] = (iteration, view.state)
        return {node_id: state for node_id, (_, state) in states.items()}

    def other_snapshot(self, run_id: str, frame_no: int) -> Snapshot:
        """A snapshot of another run (for comparisons), cached."""
        if run_id == self.run_id:
            return self.snapshot_at(frame_no)
        key = (run_id, frame_no)
        snap = self._other_snapshots.get(key)
        if snap is None:
            snap = self.db.snapshot(run_id, frame_no)
            snap.loader = self.load
            self._other_snapshots[key] = snap
            while len(self._other_snapshots) > 8:
                self._other_snapshots.popitem(last=False)
        return snap

    def load(self, ref: CheckpointRef) -> AgentCheckpoint:
        """The verified checkpoint of a ref (cached by content hash: content is immutable)."""
        found = self._payloads.get(ref.content_hash)
        if found is not None:
            self._payloads.move_to_end(ref.content_hash)
            return found
        checkpoint = self.db.store.load(ref)
        self._sizes.setdefault(ref.content_hash, len(canonical_bytes(checkpoint.to_json())))
        self._payloads[ref.content_hash] = checkpoint
        while len(self._payloads) > _PAYLOAD_CACHE:
            self._payloads.popitem(last=False)
        return checkpoint

    def sizes(self, refs: Iterable[CheckpointRef]) -> dict[str, int]:
        """Stored sizes (canonical bytes) of the refs' contents, read in one query if needed."""
        wanted = {r.content_hash for r in refs}
        missing = [h for h in wanted if h not in self._sizes]
        if missing:
            self._sizes.update(content_sizes(self.db.engine, missing))
        return {h: self._sizes[h] for h in wanted if h in self._sizes}
