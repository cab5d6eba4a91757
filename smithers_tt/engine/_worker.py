"""Workers: processes that share the runs of one database (PostgreSQL, or SQLite slowly).

A worker registers the workflows it can execute, claims queued runs and runs whose owner
stopped heartbeating (bumping the owner epoch, so the old owner is fenced out), heartbeats
while it works, resumes claimed runs from their newest acknowledged checkpoints, and on
shutdown finishes what it holds within a drain timeout, then releases the rest to the queue.

A worker that learns from a heartbeat that another owner took one of its runs over (it hung
longer than ``stale_after``) cancels its own execution of that run at once: its agents stop
instead of working on in the background while the new owner repeats their work (their writes
would fail with :class:`~smithers_tt.errors.FenceLost` anyway).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import socket
import time
from collections.abc import Iterable

from smithers_tt._ids import owner_id
from smithers_tt.engine._executor import RunExecutor
from smithers_tt.engine._watch import Watching
from smithers_tt.engine._workflow import Workflow
from smithers_tt.errors import FenceLost, InvalidArgument, OutcomeUnknown, TransientStoreError
from smithers_tt.store import (
    ENDED,
    Claim,
    Fence,
    Store,
    claim_next,
    register_worker,
    release_run,
    worker_heartbeat,
)

log = logging.getLogger("smithers_tt.worker")

_MAX_BACKOFF = 5.0


def positive_seconds(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
        raise InvalidArgument(f"{name} must be a finite number of seconds > 0, got {value!r}")
    return float(value)


class Worker:
    """Executes runs of known workflows claimed from the database, ``concurrency`` at a time.

    Args:
        store: the store of the shared database.
        workflows: the workflows this worker can execute (by name; the definition must match
            the one a run was submitted with, or the run is left for another worker).
        concurrency: runs executed at once.
        worker_id: a name for this worker (default ``host:pid``).
        stale_after: seconds without heartbeat after which a running run is taken over.
            Runs executed outside workers (``db.run``) heartbeat about every 2 s: keep it
            well above that when such runs share the database, or workers take them over.
        poll_interval: seconds between claims when idle.
        heartbeat_interval: seconds between heartbeats (default: a quarter of ``stale_after``,
            at most one second); must be shorter than ``stale_after``.
        drain_timeout: seconds a stopping worker lets its runs finish before releasing them.
        watching: how each run it executes watches the store (see
            :class:`~smithers_tt.engine.Watching`; None: the engine's default).
    """

    def __init__(
        self,
        store: Store,
        workflows: Iterable[Workflow],
        *,
        concurrency: int = 1,
        worker_id: str | None = None,
        stale_after: float = 10.0,
        poll_interval: float = 0.2,
        heartbeat_interval: float | None = None,
        drain_timeout: float = 10.0,
        watching: Watching | None = None,
    ) -> None:
        self.store = store
        self.watching = watching
        self.workflows = {wf.name: wf for wf in workflows}
        if not self.workflows:
            raise InvalidArgument("a worker needs at least one workflow")
        if type(concurrency) is not int or concurrency < 1:
            raise InvalidArgument(f"concurrency must be an int >= 1, got {concurrency!r}")
        self.concurrency = concurrency
        self.worker_id = worker_id or owner_id()
        self.stale_after = positive_seconds("stale_after", stale_after)
        self.poll_interval = positive_seconds("poll_interval", poll_interval)
        if heartbeat_interval is None:
            heartbeat_interval = min(1.0, self.stale_after / 4)
        self.heartbeat_interval = positive_seconds("heartbeat_interval", heartbeat_interval)
        if self.heartbeat_interval >= self.stale_after:
            raise InvalidArgument(
                f"heartbeat_interval ({heartbeat_interval}) must be shorter than stale_after "
                f"({stale_after}), or other workers take over runs this one is executing"
            )
        if isinstance(drain_timeout, bool) or not isinstance(drain_timeout, int | float):
            raise InvalidArgument(
                f"drain_timeout must be a number of seconds, got {drain_timeout!r}"
            )
        if not drain_timeout >= 0:
            raise InvalidArgument(f"drain_timeout must be >= 0, got {drain_timeout!r}")
        self.drain_timeout = float(drain_timeout)
        self.completed = 0
        """Runs this worker brought to an end (finished, failed or cancelled)."""
        self.lost = 0
        """Runs another owner took over while this worker executed them."""
        self._active: dict[asyncio.Task[str], Fence] = {}
        self._executors: dict[Fence, RunExecutor] = {}
        self._lost: set[Fence] = set()
        self._signatures = {name: wf.signature() for name, wf in self.workflows.items()}
        self._last_beat = float("-inf")

    # --- claiming and executing ----------------------------------------------------------

    async def _claim(self) -> Claim | None:
        claim = await asyncio.to_thread(
            claim_next,
            self.store,
            self.worker_id,
            self._signatures,
            stale_after_ms=max(1, int(self.stale_after * 1000)),
        )
        if claim is None:
            return None
        fence = claim.fence
        if claim.takeover:
            log.warning(
                "worker %s took run %s over from %s (epoch %d)",
                self.worker_id,
                fence.run_id,
                claim.previous_owner,
                fence.epoch,
            )
        else:
            log.info(
                "worker %s claimed run %s (epoch %d)", self.worker_id, fence.run_id, fence.epoch
            )
        return claim

    async def _execute(self, wf: Workflow, fence: Fence) -> str:
        try:
            executor = await asyncio.to_thread(
                RunExecutor, self.store, wf, fence, watching=self.watching
            )
            self._executors[fence] = executor
            return await executor.execute()
        except FenceLost:
            return "lost"
        finally:
            self._executors.pop(fence, None)

    def _start(self, claim: Claim) -> None:
        fence = claim.fence
        task = asyncio.create_task(
            self._execute(self.workflows[claim.workflow], fence),
            name=f"smithers-worker:{fence.run_id}",
        )
        self._active[task] = fence

    def _ended(self, task: asyncio.Task[str]) -> None:
        """Account for an execution task that ended."""
        fence = self._active.pop(task)
        self._lost.discard(fence)
        if task.cancelled() or (task.exception() is None and task.result() == "lost"):
            self.lost += 1
            log.warning(
                "worker %s lost run %s (epoch %d) to another owner",
                self.worker_id,
                fence.run_id,
                fence.epoch,
            )
        elif task.exception() is not None:
            # The run stays ours without heartbeats: it is taken over after stale_after.
            log.error(
                "run %s failed inside worker %s",
                fence.run_id,
                self.worker_id,
                exc_info=task.exception(),
            )
        elif task.result() == "paused":  # released: claimed again once it is continued
            log.info("worker %s: run %s paused", self.worker_id, fence.run_id)
        elif task.result() in ENDED:
            self.completed += 1
            log.info("worker %s: run %s %s", self.worker_id, fence.run_id, task.result())

    async def _heartbeat(self, state: str = "running") -> None:
        """Heartbeat this worker and its runs; stop executing the runs it no longer owns."""
        self._last_beat = time.monotonic()
        fences = [f for f in self._active.values() if f not in self._lost]
        lost = await asyncio.to_thread(worker_heartbeat, self.store, self.worker_id, fences, state)
        for fence in lost:
            self._lost.add(fence)
            executor = self._executors.get(fence)
            if executor is not None and executor.ending:
                continue  # it paused or ended the run itself: the task returns how
            for task, owned in self._active.items():
                if owned == fence:
                    task.cancel()

    async def _beat_if_due(self, state: str = "running") -> None:
        if time.monotonic() - self._last_beat >= self.heartbeat_interval:
            try:
                await self._heartbeat(state)
            except (TransientStoreError, OutcomeUnknown) as error:  # a heartbeat may repeat
                log.warning("worker %s could not heartbeat: %s", self.worker_id, error)

    # --- the loop ------------------------------------------------------------------------

    async def run(
        self,
        stop: asyncio.Event | None = None,
        *,
        max_runs: int | None = None,
        idle_exit: float | None = None,
    ) -> int:
        """Work until ``stop`` is set (or ``max_runs`` ended, or idle for ``idle_exit`` s).

        Returns how many runs this worker brought to an end.
        """
        stop = stop or asyncio.Event()
        await asyncio.to_thread(
            register_worker,
            self.store,
            self.worker_id,
            socket.gethostname(),
            os.getpid(),
            sorted(self.workflows),
        )
        self._last_beat = time.monotonic()
        idle_since, backoff, pause = time.monotonic(), 0.0, self.poll_interval
        try:
            while not stop.is_set():
                if max_runs is not None and self.completed >= max_runs and not self._active:
                    break
                pause = self.poll_interval
                try:
                    while len(self._active) < self.concurrency and (
                        max_runs is None or self.completed + len(self._active) < max_runs
                    ):
                        claim = await self._claim()
                        if claim is None:
                            break
                        if claim.cancel_requested:  # its owner died before cancelling it
                            await asyncio.to_thread(self.store.cancel_run, claim.fence.run_id)
                            self.completed += 1
                            log.info(
                                "worker %s cancelled run %s", self.worker_id, claim.fence.run_id
                            )
                            continue
                        self._start(claim)
                    backoff = 0.0
                except (TransientStoreError, OutcomeUnknown) as error:
                    # The database is away: keep the runs we have, try again later. A claim
                    # whose outcome is unknown is safe to leave: if it happened, the run's
                    # heartbeat goes stale and a worker takes it over.
                    backoff = min(_MAX_BACKOFF, max(self.poll_interval, backoff * 2))
                    pause = backoff
                    log.warning(
                        "worker %s could not claim (retrying in %.1f s): %s",
                        self.worker_id,
                        backoff,
                        error,
                    )
                await self._beat_if_due()
                if self._active:
                    idle_since = time.monotonic()
                elif idle_exit is not None and time.monotonic() - idle_since > idle_exit:
                    break
                waiter = asyncio.create_task(stop.wait())
                done, _ = await asyncio.wait(
                    {*self._active, waiter},
                    timeout=min(pause, self.heartbeat_interval),
                    return_when=asyncio.FIRST_COMPLETED,
                )
                waiter.cancel()
                for task in done - {waiter}:
                    self._ended(task)
        finally:
            await self._drain()
        return self.completed

    async def _drain(self) -> None:
        """Let active runs finish for ``drain_timeout`` s (heartbeating), then release the rest."""
        deadline = time.monotonic() + self.drain_timeout
        while self._active and time.monotonic() < deadline:
            done, _ = await asyncio.wait(
                set(self._active),
                timeout=max(0.0, min(self.heartbeat_interval, deadline - time.monotonic())),
                return_when=asyncio.FIRST_COMPLETED,
            )
            for task in done:
                self._ended(task)
            with contextlib.suppress(Exception):
                await self._beat_if_due("stopping")
        for task in list(self._active):
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
            fence = self._active.pop(task)
            if not task.cancelled() and task.exception() is None and task.result() in ENDED:
                self.completed += 1  # it ended just now, after all
                continue
            try:
                if await asyncio.to_thread(release_run, self.store, fence):
                    log.info("worker %s released run %s to the queue", self.worker_id, fence.run_id)
            except Exception as error:  # the run is taken over after stale_after instead
                log.warning(
                    "worker %s could not release run %s: %s", self.worker_id, fence.run_id, error
                )
        self._lost.clear()
        with contextlib.suppress(Exception):
            await asyncio.to_thread(worker_heartbeat, self.store, self.worker_id, [], "stopped")
