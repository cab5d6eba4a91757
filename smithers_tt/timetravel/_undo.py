"""Whether a run's newest rewind can be undone, and if not, why: one answer for
:func:`~._ops.undo_rewind`, which refuses with it, and for the debugger, whose Undo rewind
button is disabled with it as its tooltip."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from smithers_tt.errors import RunNotFound
from smithers_tt.store import Store, travel
from smithers_tt.store.for_timetravel import Travel, undoable


def refusal(run_id: str, clock: int, kept: Sequence[Any]) -> str | None:
    """Why undo cannot take back a rewind of ``run_id`` (at ``clock``, with ``kept`` rewinds,
    newest first), or None when it can."""
    if not kept:
        return (
            f"run {run_id} has no rewind to undo (never rewound, undone already, or collected "
            "by retention)"
        )
    if not undoable(clock, kept):
        to = kept[0].to_frame
        return (
            f"run {run_id} has new frames ({to + 1} to {clock}) written after its rewind to "
            f"frame {to}: the frames that rewind removed (and those of any rewind before it) "
            "followed a history that is gone, so they cannot be restored; `smithers-tt gc` "
            "releases what they keep"
        )
    return None


def undo_refusal(store: Store, run_id: str) -> str | None:
    """Why :func:`~smithers_tt.timetravel.undo_rewind` would refuse on ``run_id`` now, or None
    when it would undo its newest rewind.

    Raises:
        RunNotFound: there is no such run.
    """

    def read(tx: Travel) -> str | None:
        run = tx.run_state(run_id)
        if run is None:
            raise RunNotFound(f"no run {run_id!r}")
        return refusal(run_id, run.clock, tx.kept_rewinds(run_id))

    result: str | None = travel(store.engine, read, write=False)
    return result
