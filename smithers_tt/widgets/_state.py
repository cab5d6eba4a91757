"""The one state of a debugger, and the changes it announces.

Everything a view shows is drawn from this state: the run and its fork tree, the selected
frame, the selected (or pinned) checkpoint ref, what the diff compares, the action waiting for
confirmation and the message about the last one. No view keeps its own copy. Views subscribe
with :meth:`DebuggerState.on` and redraw from the state when it announces a change:

``run``      another run is shown, or its history was reloaded (rewind)
``frames``   new frames arrived (live refresh)
``frame``    the selected frame changed
``ref``      the selected checkpoint ref changed
``diff``     the diff settings changed
``pending``  an action waits for confirmation (or no longer does)
``message``  an action reported what it did, or why it could not
``tree``     the fork tree changed
``breakpoints`` a breakpoint was toggled (``model.breakpoints``)

The roles that read and change the state are modules of their own, each a part of
:class:`~smithers_tt.widgets._model.DebuggerModel`: loading (``_loading``), live refresh
(``_refresh``), content (``_content``), names (``_naming``), selection (``_selection``),
diffs (``_diffs``), the fork form (``_forms``) and the actions (``_control``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from smithers_tt.store import RunRecord
from smithers_tt.timetravel import ForkEdge
from smithers_tt.widgets._breakpoints import Breakpoints
from smithers_tt.widgets._records import ActionResult, Message, Pending, RefKey

READ_ONLY = (
    "the store is opened read-only, so nothing here can change it or write a file (a page of "
    "smithers-tt serve: start it with --allow-actions to allow that)"
)
"""Why the actions are off on a store opened read-only."""


def read_only_reason(db: Any) -> str | None:
    """Why the actions on ``db`` are off (:data:`READ_ONLY`), or None when they are on."""
    return READ_ONLY if db.engine.read_only else None


class DebuggerState:
    """The state of one debugger (set by :class:`~smithers_tt.widgets._model.DebuggerModel`),
    and its observers."""

    db: Any
    """The :class:`smithers_tt.Database` read and changed."""
    workflow: Any
    """The workflow definition (Replay needs it), or None."""
    lens: Any
    """What to call the run's frames, nodes and checkpoints, or None (smithers_tt's terms)."""
    run_id: str
    """The run shown."""
    record: RunRecord
    """Its record, as last read."""
    root: str
    """The root run of its fork tree."""
    tree: list[ForkEdge]
    """Its fork tree."""
    frame_no: int
    """The selected frame."""
    ref_key: RefKey | None
    """The selected checkpoint ref (node, iteration, attempt, sequence), or None."""
    ref_pinned: bool
    """Whether the selected ref stays selected on every frame."""
    diff_mode: str
    """What the diff compares: ``frames``, ``runs`` or ``attempts``."""
    compare_frame: int | None
    """The frame compared in ``frames`` mode (None: the previous one)."""
    compare_run: str | None
    """The run compared in ``runs`` mode (None: the parent, else the first child)."""
    compare_run_frame: int | None
    """Its frame (None: the fork point for the parent, else its newest frame)."""
    attempt_pair: tuple[str, int, int, int] | None
    """``(node_id, iteration, attempt_a, attempt_b)`` compared in ``attempts`` mode."""
    pending: Pending | None
    """The action waiting for Confirm or Cancel."""
    message: Message | None
    """What the debugger tells the person about the last action."""
    last_result: ActionResult | None
    """What the last confirmed action did."""
    background: asyncio.Task[Any] | None
    """A replay running in the notebook's event loop."""
    breakpoints: Breakpoints
    """The shown run's breakpoints."""
    _observers: dict[str, list[Callable[[], None]]]
    _emitting: int = 0
    """How many announcements are under way (a view that answers one is not a person)."""

    @property
    def read_only(self) -> str | None:
        """Why nothing here may write (the store is opened read-only), or None when it may."""
        return read_only_reason(self.db)

    def short_ids(self) -> dict[str, str]:
        """How the widgets show each run id of the fork tree (see
        :meth:`~smithers_tt.widgets._naming.Naming.short_ids`)."""
        return {}

    def catch_up(self) -> bool:
        """Read the shown run again if it changed in the database; True when its history was
        rewritten meanwhile (see :meth:`~smithers_tt.widgets._refresh.Refresh.catch_up`)."""
        return False

    def on(self, event: str, callback: Callable[[], None]) -> None:
        """Call ``callback()`` whenever ``event`` happens (see the module docstring)."""
        self._observers.setdefault(event, []).append(callback)

    def _emit(self, *events: str) -> None:
        """Call the observers of ``events``, each callback once however many of them it
        observes (a run switch announces ``run`` and ``tree``: the timeline lays out one new
        figure, not one per event), in the order of their first event."""
        callbacks = dict.fromkeys(c for e in events for c in self._observers.get(e, ()))
        self._emitting += 1
        try:
            for callback in callbacks:
                callback()
        finally:
            self._emitting -= 1

    def _say(self, kind: str, text: str) -> None:
        self.message = Message(kind, text)
        self._emit("message")
