"""Live refresh: what changed in the database since the shown run was loaded, read in a
worker thread (:meth:`Refresh.fetch_update`) and applied in the thread that owns the widgets
(:meth:`Refresh.apply_update`, driven by :class:`~smithers_tt.widgets._live.LiveRefresh`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from smithers_tt import timetravel as tt
from smithers_tt.errors import SmithersError
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
    known: int | None = None
    """The newest frame the debugger held when this was read (what the update adds to)."""


def changed_elsewhere(run_id: str, last_frame: int) -> str:
    """What the debugger says when it finds the shown run's history rewritten elsewhere."""
    return (
        f"Run {run_id} changed in the database since it was read (rewound, undone or resumed "
        f"elsewhere): read again, with frames 0 to {last_frame}."
    )


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
            return Update(record, known=known)
        tree = tt.fork_tree(self.db.store, self.run_id)
        if record.clock < known or record.inherits != self.record.inherits:  # materialised
            return self._reload(record, tree)
        new = load_frames(self.db, self.run_id, after=known - 1)  # the newest known one again
        if new[:1] != self._last_row():  # history was rewritten under us (rewound, resumed)
            return self._reload(record, tree)
        return Update(record, new[1:], tree=tree, known=known)

    def _reload(self, record: RunRecord, tree: Any) -> Update:
        base = tt.inherited(self.db.store, self.run_id)  # before the frames: see _load_run
        return Update(record, load_frames(self.db, self.run_id), reload=True, tree=tree, base=base)

    def apply_update(self, update: Update) -> bool:
        """Apply a fetched update (in the thread that owns the widgets); True if it changed
        anything. A selection at the newest frame follows new frames."""
        if update.record.run_id != self.run_id:
            return False  # the person switched runs meanwhile
        if not update.reload and update.known != self.last_frame:
            return False  # read against frames changed since (a selection caught up): stale
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

    def catch_up(self) -> bool:
        """Before a selection or an action: read the shown run's record (one row) and apply
        whatever changed since it was read.

        A debugger that does not poll (the run is not live, or live refresh is off) would
        otherwise show, and act on, frames that another debugger or process has rewound
        away. True when the history was rewritten (a rewind, its undo, a resume after one):
        the debugger then shows the run as it is now and says so, and the caller does not
        act on what the person saw before.
        """
        if self._emitting:
            return False  # a view answering the debugger's own change, not a person
        try:
            update = self.fetch_update()
        except SmithersError as error:
            self._say("error", f"Run {self.run_id} could not be read again: {error.message}")
            return False
        if not self.apply_update(update) or not update.reload:
            return False
        self._say("info", changed_elsewhere(self.run_id, self.last_frame))
        return True

    def refresh(self) -> bool:
        """Read the database again now (fetch and apply in this thread)."""
        return self.apply_update(self.fetch_update())
