"""Reading a long run's history behind the debugger, while a person looks at its newest frame.

A long finished run opens on its newest frame without its history
(:class:`~smithers_tt.widgets._newest.NewestView`); another frame needs the frames up to it
read and folded (seconds for all of a 100,000-frame run). :class:`HistoryRead` does that in
a thread as soon as the debugger is open, a step of frames at a time, in order; the model
takes what it made over once it has finished. Before that, a selection need not wait for the
whole history: the frames read so far and their fold are shared (:class:`SharedFold`) and
the thread takes turns with the model: it waits between its steps while the model uses them,
and reads up to a frame the model waits for in one step. If the thread fails (the database
was closed, the run deleted), the model reads again itself, where the error is raised and
shown.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Generic, TypeVar

from smithers_tt.timetravel import Snapshot
from smithers_tt.widgets._scrub import AttemptKey, FoldCache, NodeKey
from smithers_tt.widgets._trim import Touched

T = TypeVar("T")

TURN_LOOK = 0.1
"""Seconds between the looks of a thread waiting for its turn at whether it was cancelled
(it is woken at once, unless the cancel came in the middle of a step)."""


class HistoryRead(Generic[T]):
    """``read(job)`` run in a daemon thread; :meth:`result` waits for what it returned.

    ``read`` does each step inside ``with job.turn() as go`` (it stops, returning None, when
    ``go`` is false: :meth:`cancel` was called, a debugger closed or switched to another
    run), says how far it folded with :meth:`reached`, and reads up to :attr:`wanted` in its
    next step when that is further (the model waits for it). The model holds the turn
    (:meth:`holding`) while it uses what the thread shares, and waits for a frame with
    :meth:`reach`."""

    def __init__(self, read: Callable[[HistoryRead[T]], T | None]) -> None:
        self._read = read
        self._turns = threading.Condition(threading.RLock())
        self._cancelled = False
        self._done = threading.Event()
        self._asking = 0  # the model's holds (changed by the thread that owns the model only)
        self._waiting: Callable[[], bool] | None = None  # what the model waits for, if it does
        self._result: T | None = None
        self.progress = -1
        """The newest frame folded so far."""
        self.wanted = -1
        """The newest frame the model waited for."""
        self.asked = False
        """Whether the model used what the thread shares (it selected another frame)."""
        self.failed: BaseException | None = None
        """What the thread raised, if it did (the model then reads again itself)."""
        self._thread = threading.Thread(target=self._run, name="smithers-tt history", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._result = self._read(self)
        except BaseException as error:
            self.failed = error
        finally:
            with self._turns:
                self._done.set()
                self._turns.notify_all()

    # --- the thread's side ------------------------------------------------------------------

    @contextmanager
    def turn(self) -> Iterator[bool]:
        """A step of the thread: waits while the model holds its turn; whether to go on."""
        with self._turns:
            while not self._turns.wait_for(self._may_go, TURN_LOOK):
                pass
            yield not self._cancelled

    def _may_go(self) -> bool:
        """Whether the thread may take its next step: the model does not hold its turn, or
        waits for what that step would bring (and not for anything already there)."""
        waiting = self._waiting
        return self._cancelled or self._asking == 0 or (waiting is not None and not waiting())

    def reached(self, frame_no: int) -> None:
        """Frames up to ``frame_no`` are folded (inside :meth:`turn`)."""
        self.progress = frame_no
        self._turns.notify_all()

    # --- the model's side -------------------------------------------------------------------

    @property
    def done(self) -> bool:
        """Whether the thread has finished."""
        return self._done.is_set()

    def cancel(self) -> None:
        """Ask the thread to stop at its next step (what it read is let go). Never waits
        for a step to end (it looks again every ``TURN_LOOK`` seconds when not woken)."""
        self._cancelled = True
        if self._turns.acquire(blocking=False):
            try:
                self._turns.notify_all()
            finally:
                self._turns.release()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the thread to finish (at most ``timeout`` seconds); whether it has."""
        return self._done.wait(timeout)

    @contextmanager
    def holding(self) -> Iterator[None]:
        """Keep the thread waiting between its steps for the block (nested blocks share it)."""
        self._asking += 1
        try:
            with self._turns:
                self.asked = True
                yield
        finally:
            self._asking -= 1
            with self._turns:
                self._turns.notify_all()

    def _wait_for(self, ready: Callable[[], bool]) -> None:
        """Wait until ``ready()``, letting the thread take its turns meanwhile (also when the
        model holds them: it gives them back while it waits)."""
        with self._turns:
            self._waiting = ready
            self._turns.notify_all()
            try:
                self._turns.wait_for(ready)
            finally:
                self._waiting = None

    def reach(self, frame_no: int) -> bool:
        """Wait until the thread folded frame ``frame_no`` (its next step reads up to it);
        False when it stopped before (failed, gave up, or the history is shorter)."""
        with self._turns:
            self.asked = True
            if self.progress < frame_no:
                self.wanted = max(self.wanted, frame_no)
                self._wait_for(lambda: self.progress >= frame_no or self._done.is_set())
            return self.progress >= frame_no and self.failed is None

    def result(self) -> T | None:
        """What ``read`` returned, once it has (None if it raised or gave up)."""
        self._wait_for(self._done.is_set)
        return self._result


class SharedFold:
    """The fold a :class:`HistoryRead` is making, used by the model while it is made: each
    call waits for the frames it needs and holds the thread's turn (the methods of
    :class:`~smithers_tt.widgets._scrub.FoldCache` the model uses)."""

    def __init__(self, fold: FoldCache, job: HistoryRead[Any], whole: Callable[[], FoldCache]):
        self.fold, self.job, self._whole = fold, job, whole

    def _upto(self, frame_no: int) -> FoldCache:
        """The fold, once it holds frame ``frame_no`` (the whole history's when the thread
        stopped before: the model reads it then)."""
        return self.fold if self.job.reach(frame_no) else self._whole()

    def at(self, n: int) -> Snapshot:
        with self.job.holding():
            return self._upto(n).at(n)

    def touched(self, after: int, upto: int) -> Touched | None:
        with self.job.holding():
            return self._upto(upto).touched(after, upto)

    def newest(self, snap: Snapshot) -> dict[NodeKey, Any]:
        with self.job.holding():
            return self._upto(snap.frame_no).newest(snap)

    def sorted_ref_keys(self, snap: Snapshot) -> Sequence[Any]:
        with self.job.holding():
            return self._upto(snap.frame_no).sorted_ref_keys(snap)

    def node_keys(self, snap: Snapshot) -> tuple[Sequence[NodeKey], Sequence[AttemptKey]] | None:
        with self.job.holding():
            return self._upto(snap.frame_no).node_keys(snap)

    def attempts_by_node(self, snap: Snapshot) -> list[tuple[str, int, list[int]]]:
        with self.job.holding():
            return self._upto(snap.frame_no).attempts_by_node(snap)
