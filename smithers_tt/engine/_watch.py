"""How a running run's executor watches its store: for a cancel, breakpoints set by someone
else and the loss of its ownership, while it heartbeats.

Where the store can wake it (PostgreSQL: ``LISTEN``/``NOTIFY``, see
:meth:`~smithers_tt.store.Store.watch_changes`), the executor reads its run when woken and
otherwise only every :attr:`Watching.safety_poll` seconds, which covers a notice lost with a
dropped connection; elsewhere (SQLite) it reads its run every :attr:`Watching.poll` seconds.
The heartbeat goes every :attr:`Watching.heartbeat` seconds either way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from smithers_tt.errors import InvalidArgument


@dataclass(frozen=True, slots=True)
class Watching:
    """The intervals (in seconds) of a run's watcher.

    The engine's default is :data:`smithers_tt.engine._executor.WATCHING`, read when an
    executor is made; a :class:`~smithers_tt.engine.RunExecutor` also takes one of its own.
    """

    poll: float = 0.1
    """Between reads of the run where the store cannot wake the watcher (SQLite), or when
    :attr:`listen` is off: how soon a cancel or a breakpoint from elsewhere is seen."""
    safety_poll: float = 2.0
    """Between reads of the run where the store wakes the watcher (PostgreSQL): only for a
    notice lost while the listening connection was down."""
    heartbeat: float = 2.0
    """Between heartbeats (how a worker sees that the owner is alive; claims take over runs
    whose heartbeat is older than their ``stale_after``)."""
    listen: bool = True
    """Let the store wake the watcher when it can (False: poll every :attr:`poll` seconds)."""

    def __post_init__(self) -> None:
        for name in ("poll", "safety_poll", "heartbeat"):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
                or value <= 0
            ):
                raise InvalidArgument(f"Watching.{name} must be a number of seconds > 0")
