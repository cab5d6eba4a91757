"""What the debugger calls things: the lens's names (a framework's terms, a
:class:`~smithers_tt.widgets.FrameLens`), else smithers_tt's own
(:mod:`~smithers_tt.widgets._words`).
"""

from __future__ import annotations

import logging
from typing import Any

from smithers_tt.errors import SmithersError
from smithers_tt.store import CheckpointRef, Frame
from smithers_tt.widgets._lens import ask
from smithers_tt.widgets._state import DebuggerState
from smithers_tt.widgets._words import describe_frame, node_label, ref_label, run_status

log = logging.getLogger(__name__)


class Naming(DebuggerState):
    """Names of frames, nodes and refs, and what else the lens offers."""

    def frame_title(self, frame: Frame | None = None) -> str:
        """One line of plain text saying what a frame (default: the selected one) is."""
        frame = self.frame() if frame is None else frame
        return self._named("frame_title", frame) or describe_frame(frame)

    def run_status(self, at_frame: bool = False) -> str:
        """The shown run's status in words (a fork nothing ran yet is "not started"): now,
        or at the selected frame (``at_frame``)."""
        forked = self.record.parent_run_id is not None
        if at_frame:
            return run_status(self.status_at(), forked=forked, started=self.frame_no > 0)
        return run_status(self.record.status, forked=forked, started=self.record.clock > 0)

    def node_label(self, node_id: str, iteration: int) -> str:
        """What the debugger calls a node."""
        return self._named("node_label", node_id, iteration) or node_label(node_id, iteration)

    def ref_label(self, ref: CheckpointRef, size: int | None = None) -> str:
        """One line of plain text describing a checkpoint ref."""
        return self._named("ref_label", ref) or ref_label(ref, size)

    def _named(self, method: str, *args: Any) -> Any:
        """What the lens says, or None (a lens that cannot read what it names, say a corrupt
        checkpoint, leaves smithers_tt's own name; the inspector says why)."""
        try:
            return ask(self.lens, method, *args)
        except SmithersError as error:
            log.warning("the debugger's lens could not name this: %s", error.message)
            return None

    def view(self, ref: CheckpointRef) -> Any:
        """What the inspector shows of a checkpoint: the lens's view, else its payload."""
        shown = ask(self.lens, "view", ref)
        return self.load(ref).payload if shown is None else shown

    def outside_pause(self) -> dict[str, Any] | None:
        """A pause the lens's framework knows (a LangGraph interrupt), or None."""
        found = self._named("pause", self.run_id)
        return found if isinstance(found, dict) else None

    def related(self) -> list[tuple[str, str]]:
        """Other runs the lens offers to open from this one, as ``(label, run_id)``."""
        return list(self._named("related", self.run_id) or [])

    def lens_graph(self) -> dict[str, Any] | None:
        """The graph the lens knows for the shown run (a LangGraph thread's compiled graph:
        nodes and edges), or None: the graph view then draws the run's stored graph."""
        found = self._named("workflow_graph", self.run_id)
        return found if isinstance(found, dict) else None

    def lens_graph_state(self) -> dict[str, Any] | None:
        """The states of :meth:`lens_graph`'s nodes at the selected frame, and the nodes it
        touches (``{"states": ..., "current": [...]}``), or None."""
        found = self._named("graph_state", self.snapshot)
        return found if isinstance(found, dict) else None

    def fork_note(self) -> str | None:
        """Why the lens's framework branches this run itself, and how, at the selected frame
        (Fork… and Replay… are not offered), or None."""
        if self.lens is None or not callable(getattr(self.lens, "fork_note", None)):
            return None
        found = self._named("fork_note", self.snapshot)
        return str(found) if found else None

    def short_ids(self) -> dict[str, str]:
        """Each run of the fork tree as the widgets show it: its shortest unique prefix among
        the stored runs (at least 8 characters; the whole id goes on hover). Read once per
        tree, not on every frame."""
        ids = tuple(sorted({edge.run_id for edge in self.tree} | {self.run_id}))
        cached: tuple[tuple[str, ...], dict[str, str]] | None = getattr(self, "_shown_ids", None)
        if cached is None or cached[0] != ids:
            cached = (ids, self.db.store.short_run_ids(list(ids)))
            self._shown_ids = cached
        return cached[1]
