"""Workers: processes that share the runs of one database (PostgreSQL, or SQLite slowly).

A worker registers the workflows it can execute, claims queued runs and runs whose owner
stopped heartbeating (bumping the owner epoch, so the old owner is fenced out), heartbeats
while it works, resumes claimed runs from their newest acknowledged checkpoints, and on
shutdown finishes what it holds within a drain timeout, then releases the rest to the queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from collections.abc import Iterable

from smithers_tt.engine._executor import RunExecutor
from smithers_tt.engine._workflow import Workflow
from smithers_tt.errors import FenceLost, InvalidArgument
from smithers_tt.store import Fence, Store
from smithers_tt.store._claims import claim_next, register_worker, release_run, worker_heartbeat

log = logging.getLogger("smithers_tt.worker")


class Worker:
    """Executes runs of known workflows claimed from the database, ``concurrency`` at a time.

    Args:
        store: the store of the shared database.
        workflows: the workflows this worker can execute (by name; the definition must match
            the one a run was submitted with, or the run is left for another worker).
        concurrency: runs executed at once.
        worker_id: a name for this worker (default ``host:pid``).
        stale_after: seconds without heartbeat after which a running run is taken over.
        poll_interval: seconds between claims when idle.
        heartbeat_interval: seconds between heartbeats.
        drain_timeout: seconds a stopping worker lets its runs finish before releasing them.
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
        heartbeat_interval: float = 1.0,
        drain_timeout: float = 10.0,
    ) -> None:
        self.store = store
        self.workflows = {wf.name: wf for wf in workflows}
        if not self.workflows:
            raise InvalidArgument("a worker needs at least one workflow")
        if type(concurrency) is not int or concurrency < 1:
            raise InvalidArgument(f"concurrency must be an int >= 1, got {concurrency!r}")
        self.concurrency = concurrency
        self.worker_id = worker_id or f"{socket.gethostname()}:{os.getpid()}"
        self.stale_after = stale_after
        self.poll_interval = poll_interval
        self.heartbeat_interval = heartbeat_interval
        self.drain_timeout = drain_timeout
        self.completed = 0
        self._active: dict[asyncio.Task[str], Fence] = {}
        self._signatures = {name: wf.signature() for name, wf in self.workflows.items()}

    async def _claim(self) -> tuple[Fence, Workflow] | None:
        fence = await asyncio.to_thread(
            claim_next,
            self.store,
            self.worker_id,
            self._signatures,
            stale_after_ms=int(self.stale_after * 1000),
        )
        if fence is None:
            return None
        run = await asyncio.to_thread(self.store.get_run, fence.run_id)
        return fence, self.workflows[run.workflow]

    async def _execute(self, wf: Workflow, fence: Fence) -> str:
        try:
            return await RunExecutor(self.store, wf, fence).execute()
        except FenceLost:
            log.warning("worker %s lost run %s to another owner", self.worker_id, fence.run_id)
            return "lost"

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
        last_beat, idle_since = 0.0, time.monotonic()
        try:
            while not stop.is_set():
                if max_runs is not None and self.completed >= max_runs and not self._active:
                    break
                while len(self._active) < self.concurrency and (
                    max_runs is None or self.completed + len(self._active) < max_runs
                ):
                    claimed = await self._claim()
                    if claimed is None:
                        break
                    fence, wf = claimed
                    self._active[asyncio.create_task(self._execute(wf, fence))] = fence
                    idle_since = time.monotonic()
                if time.monotonic() - last_beat >= self.heartbeat_interval:
                    last_beat = time.monotonic()
                    await asyncio.to_thread(
                        worker_heartbeat, self.store, self.worker_id, list(self._active.values())
                    )
                if (
                    not self._active
                    and idle_exit is not None
                    and time.monotonic() - idle_since > idle_exit
                ):
                    break
                waiter = asyncio.create_task(stop.wait())
                done, _ = await asyncio.wait(
                    {*self._active, waiter},
                    timeout=self.poll_interval,
                    return_when=asyncio.FIRST_COMPLETED,
                )
                waiter.cancel()
                for task in done - {waiter}:
                    self._active.pop(task)
                    if task.exception() is None and task.result() in (
                        "finished",
                        "failed",
                        "cancelled",
                    ):
                        self.completed += 1
                    elif task.exception() is not None:
                        log.error(
                            "run failed inside worker %s: %s", self.worker_id, task.exception()
                        )
        finally:
            await self._drain()
        return self.completed

    async def _drain(self) -> None:
        """Let active runs finish for ``drain_timeout`` s, then release the rest."""
        if self._active:
            done, pending = await asyncio.wait(set(self._active), timeout=self.drain_timeout)
            self.completed += sum(
                1
                for t in done
                if not t.cancelled()
                and t.exception() is None
                and t.result() in ("finished", "failed", "cancelled")
            )
            for task in pending:
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
                await asyncio.to_thread(release_run, self.store, self._active[task])
            self._active.clear()
        with contextlib.suppress(Exception):
            await asyncio.to_thread(worker_heartbeat, self.store, self.worker_id, [], "stopped")
