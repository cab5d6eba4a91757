"""Live refresh: what changed in the database since the shown run was loaded, read in a
worker thread (:meth:`Refresh.fetch_update`) and applied in the thread that owns the widgets
(:meth:`Refresh.apply_update`, driven by :class:`~smithers_tt.widgets._live.LiveRefresh`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from smithers_tt import timetravel as tt
from smithers_tt.store import RunRecord
from smithers_tt.store.for_widgets import PAUSE_KINDS, FrameRow
from smithers_tt.timetravel import ForkEdge, Snapshot
from smithers_tt.widgets._loading import load_frames
from smithers_tt.widgets._state import DebuggerState


@dataclass
class Update:
    """What one poll of the database found (read in a worker thread, applied in the loop)."""

    record: RunRecord
    frames: list[FrameRow] | None = None
    reload: bool = False
    tree: tuple[str, list[ForkEdge]] | None = None
    base: Snapshot | None = None
    """With ``reload``: what the run inherits, if it is a fork by reference."""


class Refresh(DebuggerState):
    """Reading the shown run again as it changes."""

    def fetch_update(self) -> Update:
        """Read what changed since the last load (safe to call from a worker thread)."""
        record = self.db.store.get_run(self.run_id)
        known = self.last_frame
        if self._stale:
            return self._reload(record, tt.fork_tree(self.db.store, self.run_id))
        if (record.clock, record.status, record.owner_epoch, record.inherits) == (
            known,
            self.record.status,
            self.record.owner_epoch,
            self.record.inherits,
        ):  # a rewind (and a resume after it) gives the run a new epoch
            return Update(record)
        tree = tt.fork_tree(self.db.store, self.run_id)
        if record.clock < known or record.inherits != self.record.inherits:  # materialised
            return self._reload(record, tree)
        new = load_frames(self.db, self.run_id, after=known - 1)  # the newest known one again
        if new[:1] != self._last_row():  # history was rewritten under us (rewound, resumed)
            return self._reload(record, tree)
        return Update(record, new[1:], tree=tree)

    def _reload(self, record: RunRecord, tree: Any) -> Update:
        base = tt.inherited(self.db.store, self.run_id)  # before the frames: see _load_run
        return Update(record, load_frames(self.db, self.run_id), reload=True, tree=tree, base=base)

    def apply_update(self, update: Update) -> bool:
        """Apply a fetched update (in the thread that owns the widgets); True if it changed
        anything. A selection at the newest frame follows new frames."""
        if update.record.run_id != self.run_id:
            return False  # the person switched runs meanwhile
        status_changed = update.record.status != self.record.status
        self.record = update.record
        events: list[str] = []
        if update.tree is not None and update.tree[1] != self.tree:
            self.root, self.tree = update.tree
            events.append("tree")
        if update.reload and update.frames is not None:
            following = self.frame_no == self.last_frame
            self._base = update.base
            self._set_history(update.frames, update.base)
            self.frame_no = self.last_frame if following else min(self.frame_no, self.last_frame)
            self._default_ref()
            events = ["run", "tree", "frame", "ref", "diff"]
        elif update.frames:
            following = self.frame_no == self.last_frame
            self._loaded().frames.rows.extend(update.frames)  # the run changes: fold it
            self._note_frames(update.frames)
            events.append("frames")
            if following:
                self.frame_no = self.last_frame
                self._default_ref()
                events += ["frame", "ref"]
        elif status_changed:
            events.append("frames")
        if update.reload or any(f.kind in PAUSE_KINDS for f in update.frames or ()):
            self.breakpoints.load()  # another process (or a continue) changed them
        if events:
            self._emit(*events)
        return bool(events)

    def refresh(self) -> bool:
        """Read the database again now (fetch and apply in this thread)."""
        return self.apply_update(self.fetch_update())
