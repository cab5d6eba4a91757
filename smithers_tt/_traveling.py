"""The time travel of a store, as :class:`~smithers_tt.database.Database` offers it: snapshot,
rewind and its undo, fork, reset, the timeline and materialising a fork (a part of the entry
object, kept in a module of its own so that ``database.py`` stays a readable size)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from smithers_tt import timetravel as tt
from smithers_tt._ids import check_id
from smithers_tt.runs import Run
from smithers_tt.store import Engine, Store, travel


class Traveling:
    """``db.snapshot``, ``rewind``, ``undo_rewind``, ``fork``, ``reset``, ``timeline`` and
    ``materialize`` (the time-travel part of :class:`~smithers_tt.database.Database`)."""

    engine: Engine
    store: Store

    if TYPE_CHECKING:  # pragma: no cover

        def resolve_run_id(self, run_id: str) -> str: ...

    def materialize(self, run_id: str) -> bool:
        """Give a fork by reference its own copy of what it inherits (base frames and live
        rows), so it reads nothing from its parent any more; False (nothing changed) for a
        run with a history of its own. Resuming, cancelling, resetting or rewinding a fork,
        and removing what it reads, do this first anyway; see
        :func:`smithers_tt.timetravel.materialize`."""
        return tt.materialize(self.store, self.resolve_run_id(run_id))

    def snapshot(self, run_id: str, frame_no: int | None = None) -> tt.Snapshot:
        """Exactly what frame ``frame_no`` (default: the newest) of a run makes visible.

        Raises:
            FrameNotFound: the run has no such frame.
        """
        run_id = self.resolve_run_id(run_id)
        snap = travel(self.engine, lambda tx: tt.snapshot_at(tx, run_id, frame_no), write=False)
        snap.loader = self.store.load
        return snap

    def rewind(
        self,
        run_id: str,
        frame_no: int,
        *,
        confirm: bool = False,
        force: bool = False,
        reason: str | None = None,
    ) -> tt.Snapshot:
        """Destructive: put a run back to frame ``frame_no`` in place (``confirm=True``);
        ``reason`` (why) is kept in the audit.

        See :func:`smithers_tt.timetravel.rewind`.
        """
        run_id = self.resolve_run_id(run_id)
        snap = tt.rewind(self.store, run_id, frame_no, confirm=confirm, force=force, reason=reason)
        snap.loader = self.store.load
        return snap

    def undo_rewind(
        self, run_id: str, *, force: bool = False, reason: str | None = None
    ) -> tt.Snapshot:
        """Put a run back exactly as it was before its newest rewind (frames, clock, output,
        error; every snapshot as before); ``reason`` (why) is kept in the audit.

        See :func:`smithers_tt.timetravel.undo_rewind`.
        """
        run_id = self.resolve_run_id(run_id)
        snap = tt.undo_rewind(self.store, run_id, force=force, reason=reason)
        snap.loader = self.store.load
        return snap

    def fork(
        self,
        run_id: str,
        frame_no: int,
        *,
        reset: list[str] | tuple[str, ...] = (),
        input: Any = None,
        checkpoints: dict[str, Any] | None = None,
        dependents: bool = True,
        allow_new_format: bool = False,
        reason: str | None = None,
        labels: Mapping[str, str | None] | None = None,
    ) -> Run:
        """A child run whose frame 0 is the parent's frame ``frame_no`` (``reason``, why, is
        kept in the audit) with its parent's labels and ``labels`` (None drops one) over them.

        See :func:`smithers_tt.timetravel.fork`; run it with :meth:`resume` (or use
        :meth:`replay`).
        """
        run_id = self.resolve_run_id(run_id)
        for node_id in [*reset, *(checkpoints or {})]:
            check_id(node_id, "node id")
        child = tt.fork(
            self.store,
            run_id,
            frame_no,
            reset=reset,
            input=input,
            checkpoints=checkpoints,
            dependents=dependents,
            allow_new_format=allow_new_format,
            reason=reason,
            labels=dict(labels or {}),
        )
        return Run(self, child)

    def reset(
        self,
        run_id: str,
        node_id: str,
        *,
        dependents: bool = False,
        force: bool = False,
        reason: str | None = None,
    ) -> list[str]:
        """Retry a node from scratch (and, with ``dependents``, what needs it); run it again
        with :meth:`resume`. Returns the reset node ids; ``reason`` is kept in the audit."""
        run_id = self.resolve_run_id(run_id)
        check_id(node_id, "node id")
        return tt.reset(
            self.store, run_id, node_id, dependents=dependents, force=force, reason=reason
        )

    def timeline(
        self, run_id: str, *, first: int | None = None, last: int | None = None
    ) -> tt.Timeline:
        """A run's frames (those numbered ``first`` to ``last`` when given, both included)
        plus the tree of runs forked from the same root."""
        return tt.timeline(self.store, self.resolve_run_id(run_id), first=first, last=last)
