"""Reading a long run's history behind the debugger, while a person looks at its newest frame.

A long finished run opens on its newest frame without its history
(:class:`~smithers_tt.widgets._newest.NewestView`); the first step to another frame needs every
frame read and folded (seconds at 100,000 frames). :class:`HistoryRead` does that in a thread
as soon as the debugger is open, on objects nobody else holds yet; the model takes them over
the first time it needs them (waiting for the thread if it has not finished). If the thread
fails (the database was closed, the run deleted), the model reads again itself, where the
error is raised and shown.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class HistoryRead(Generic[T]):
    """``read(cancelled)`` run in a daemon thread; :meth:`result` waits for what it returned.
    ``read`` checks ``cancelled()`` between its steps and gives up (returns None) once
    :meth:`cancel` was called: a debugger closed or switched to another run stops reading."""

    def __init__(self, read: Callable[[Callable[[], bool]], T | None]) -> None:
        self._read = read
        self._cancelled = threading.Event()
        self._done = threading.Event()
        self._result: T | None = None
        self.failed: BaseException | None = None
        """What the thread raised, if it did (the model then reads again itself)."""
        self._thread = threading.Thread(target=self._run, name="smithers-tt history", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._result = self._read(self._cancelled.is_set)
        except BaseException as error:
            self.failed = error
        finally:
            self._done.set()

    @property
    def done(self) -> bool:
        """Whether the thread has finished."""
        return self._done.is_set()

    def cancel(self) -> None:
        """Ask the thread to stop at its next step (what it read is let go)."""
        self._cancelled.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the thread to finish (at most ``timeout`` seconds); whether it has."""
        return self._done.wait(timeout)

    def result(self) -> T | None:
        """What ``read`` returned, once it has (None if it raised or gave up)."""
        self._done.wait()
        return self._result
