"""The debugger's hook for runs that a person knows in another vocabulary.

A run written by an integration (say a LangGraph thread written by ``SmithersSaver``) is a
run of smithers_tt nodes and checkpoint documents; its person thinks in that framework's
terms. A *lens* says what the debugger shows for such a run's frames and checkpoints::

    db.debug(run_id, lens=my_lens)          # or Debugger(db, run_id, lens=my_lens)

Any object with some of :class:`FrameLens`'s methods is a lens (duck typing: an integration
need not import the widgets); a method it lacks, or one that returns None, leaves the
debugger's own display of that thing. Whatever a lens returns is shown escaped.
"""

from __future__ import annotations

from typing import Any, Protocol

from smithers_tt.store import CheckpointRef, Frame
from smithers_tt.timetravel import Change, Snapshot


class FrameLens(Protocol):
    """What a lens may say about a run's frames (every method optional, None: the default).

        The scrubber and the inspector title a frame with :meth:`frame_title`; the inspector
        names nodes with :meth:`node_label`, lists checkpoints with :meth:`ref_label` and shows
        :meth:`view` instead of a checkpoint's payload; the diff of two frames or runs shows
        the sections of :meth:`diff` instead of the documents' changes; the header offers the runs
    of :meth:`related` to open; the graph view draws :meth:`workflow_graph` coloured by
    :meth:`graph_state`.
    """

    def frame_title(self, frame: Frame) -> str | None:
        """One line of plain text saying what the frame is."""

    def node_label(self, node_id: str, iteration: int) -> str | None:
        """What to call a node of the run."""

    def ref_label(self, ref: CheckpointRef) -> str | None:
        """One line of plain text describing a checkpoint."""

    def view(self, ref: CheckpointRef) -> Any:
        """JSON to show in place of the checkpoint's payload."""

    def diff(self, a: Snapshot, b: Snapshot) -> list[tuple[str, list[Change]]] | None:
        """Titled sections of changes from snapshot ``a`` to snapshot ``b``."""

    def related(self, run_id: str) -> list[tuple[str, str]] | None:
        """Other runs a person opens from this one, as ``(label, run_id)`` (the debugger's
        "open" menu; a LangGraph thread's subgraph namespaces)."""

    def workflow_graph(self, run_id: str) -> dict[str, Any] | None:
        """The graph the framework knows for the run, for the graph view to draw instead of
        the run's stored one: ``{"nodes": [id, ...], "edges": [{"from", "to",
        "conditional"}, ...]}`` (a LangGraph thread's compiled graph)."""

    def graph_state(self, snap: Snapshot) -> dict[str, Any] | None:
        """The state of each node of :meth:`workflow_graph` at a snapshot, and the nodes the
        snapshot's frame touches: ``{"states": {node: state}, "current": [node, ...]}``."""

    def fork_note(self, snap: Snapshot) -> str | None:
        """Why the run is not forked or replayed here, and how the framework branches it
        from the snapshot's frame instead (Fork… and Replay… are then not offered: a fork
        would be a run the framework cannot read); None: they are."""

    def pause(self, run_id: str) -> dict[str, Any] | None:
        """A pause of the run the framework knows (a LangGraph interrupt waiting): a dict
        with ``reason``, ``question`` and ``hint`` (how to continue it), for the Paused
        banner; None when it waits on nothing."""


def ask(lens: Any, method: str, *args: Any) -> Any:
    """What ``lens.method(*args)`` says, or None when there is no lens or no such method."""
    found = getattr(lens, method, None) if lens is not None else None
    return found(*args) if callable(found) else None
