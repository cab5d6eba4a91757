"""Executing one run: scheduling tasks, attempts, retries, schema correction, cancellation.

The store is synchronous; this module reaches it through :class:`AsyncStore`, the single
async adapter (each call runs in a worker thread, so concurrent tasks publish from several
threads and the store's group commit coalesces them). One attempt's agent calls and
publications are :mod:`._attempt`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import functools
import logging
import time
from collections.abc import Callable
from typing import Any

from smithers_tt._model_calls import ModelCall
from smithers_tt.checkpoint import (
    size_limit,
)
from smithers_tt.engine._agent import GenerateRequest
from smithers_tt.engine._astore import AsyncStore
from smithers_tt.engine._attempt import Publisher, cache_key, turns
from smithers_tt.engine._pauses import PauseHistory, pause_history
from smithers_tt.engine._pausing import Paused, Pausing
from smithers_tt.engine._resume import ResumePoint, fork_point, resume_point
from smithers_tt.engine._watch import Watching
from smithers_tt.engine._workflow import Task, TaskContext, Workflow
from smithers_tt.errors import (
    CheckpointCorrupt,
    CheckpointInvalid,
    CheckpointPoisoned,
    CheckpointTooLarge,
    FenceLost,
    ModelRequestRejected,
    StoreError,
    TaskFailed,
    TransientStoreError,
)
from smithers_tt.store import AttemptKey, Fence, Frame, Store, cache_lookup, cache_store

EventCallback = Callable[[Frame], None]

log = logging.getLogger(__name__)

CANCEL_GRACE = 3.0
"""Seconds cancelled agents get to publish a final checkpoint before writes are fenced."""

WATCHING = Watching()
"""How executors watch their run (read at each executor's making): poll every 0.1 s where the
store cannot wake them (SQLite), every 2 s where it can (PostgreSQL), heartbeat every 2 s."""

STORE_PATIENCE = 60.0
"""Seconds the engine keeps trying to record an attempt's, a node's or the run's end while the
store does not answer (beyond the store's own retries), before the run gives up."""

STORE_PAUSE = 0.5
"""Seconds between those tries."""

_NEVER_RETRY = (FenceLost, asyncio.CancelledError)

_UNSTORABLE = (CheckpointCorrupt, CheckpointInvalid, CheckpointTooLarge)
"""Why the store refuses a result checkpoint kept for the attempt's end."""


class RunExecutor(Pausing):
    """Executes one owned run of a workflow to its end (or until it is cancelled/fenced)."""

    def __init__(
        self,
        store: Store,
        wf: Workflow,
        fence: Fence,
        *,
        on_event: EventCallback | None = None,
        cancel_grace: float = CANCEL_GRACE,
        max_checkpoint_bytes: int | None = None,
        watching: Watching | None = None,
    ) -> None:
        self.store, self.astore, self.wf, self.fence = store, AsyncStore(store), wf, fence
        self.watching = WATCHING if watching is None else watching
        """How the watcher reads the run and heartbeats (:class:`Watching`)."""
        self.on_event = on_event
        self.cancel_grace = cancel_grace
        self.max_bytes = size_limit(max_checkpoint_bytes)
        self.run = store.get_run(fence.run_id)
        if self.run.max_checkpoint_bytes is not None:
            self.max_bytes = min(self.max_bytes, self.run.max_checkpoint_bytes)
        self.outputs: dict[str, Any] = {}
        self.final_iteration: dict[str, int] = {}
        self._ended: dict[tuple[str, int], Any] = {}
        """Output of every node (node, iteration) that had finished (or hit the cache) when
        execution started: it is not run again."""
        self._tried: dict[tuple[str, int], tuple[int, int | None]] = {}
        """(failed attempts, last attempt) of every node that had attempts when execution
        started; a node absent here has none, so it has no checkpoint to resume from."""
        self._node_tasks: dict[str, asyncio.Task[Any]] = {}
        self._pauses = PauseHistory()
        """What the run's pause frames said when execution started (its breakpoints kept up
        to date by the watcher: :meth:`_pick_up_breakpoints`)."""
        self._marks_seen = 0
        """The newest frame up to which breakpoint changes were read."""
        self._pause: tuple[str, int, dict[str, Any]] | None = None
        """The pause this execution is heading for: (node, iteration, frame data)."""
        self._blocked: set[str] = set()
        """Tasks whose agent waits for an answer (stopped when the run pauses)."""
        self._wake: asyncio.Event | None = None
        self._ran = 0
        """Nodes this execution ran to their end (a step pauses after the first)."""
        self._open: dict[AttemptKey, Publisher] = {}
        """The attempts started and not yet ended by this execution: a cancel stores the
        model calls they made since their last write with the ends it gives them."""
        self.ending = False
        """Set once this execution starts the write that ends its part (a pause, the run's
        end, a cancel): from then on the run leaves this owner by its own hand, so a
        heartbeat that finds the fence gone is no sign of another owner. That write is
        fenced, so an execution that did lose the run still learns it there."""

    # --- the run -------------------------------------------------------------------------

    async def execute(self) -> str:
        """Run every task that is not finished yet; return the run's final status.

        However it ends (finished, failed, cancelled, fenced out, or the caller cancelled
        it), the agents still running are stopped and the ``on_event`` listener is removed,
        so the :class:`Store` stays usable after the run's event loop has closed.
        """
        loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        listener = None
        if self.on_event is not None:
            callback = self.on_event

            def listener(frame: Frame) -> None:
                if frame.run_id == self.fence.run_id:
                    # A frame that a thread left behind commits after the loop closed: the
                    # write succeeded, so it must not raise for want of a listener.
                    with contextlib.suppress(RuntimeError):
                        loop.call_soon_threadsafe(callback, frame)

            self.store.listeners.append(listener)
        watcher = asyncio.create_task(self._watch(), name=f"smithers-watch:{self.fence.run_id}")
        try:
            return await self._schedule(watcher)
        finally:
            try:
                await self._stop(watcher)
            finally:
                if listener is not None:
                    self.store.listeners.remove(listener)

    async def _stop(self, watcher: asyncio.Task[Any]) -> None:
        """Stop the watcher and every agent still running; never raises their errors (the
        run's outcome was decided by :meth:`_schedule`)."""
        watcher.cancel()
        await asyncio.wait({watcher})
        if not watcher.cancelled():
            watcher.exception()  # seen: handled by _schedule, or the run ended first
        if self._node_tasks:  # ended early (fenced out, an error, the caller cancelled it)
            await self._abandon()

    async def _read_history(self) -> None:
        """Read the run's nodes and attempts once: while this executor owns the run under its
        fence, every later change to them is its own, which it tracks itself."""
        run_id = self.fence.run_id
        for node in await self.astore.list_nodes(run_id):
            if node.state in ("finished", "cached"):
                self._ended[node.node_id, node.iteration] = node.output
        for attempt in await self.astore.list_attempts(run_id):
            where = (attempt.key.node_id, attempt.key.iteration)
            failures, _ = self._tried.get(where, (0, None))
            failed = attempt.state == "failed"
            self._tried[where] = (failures + failed, attempt.key.attempt)  # in attempt order
        frames = await self.astore.pause_frames(run_id)
        self._pauses = pause_history(frames)
        self._marks_seen = max((f.frame_no for f in frames), default=0)

    def _pick_up_breakpoints(self, frames: list[Frame], clock: int) -> None:
        """Take the breakpoints a person set meanwhile (frames ``breakpoints_set`` past the
        newest one seen, read by the watcher with the run at ``clock``): the next node
        that starts or ends pauses at them."""
        for frame in frames:
            if frame.frame_no > self._marks_seen:
                self._pauses.set_breakpoints(frame.data)
                self._marks_seen = frame.frame_no
        self._marks_seen = max(self._marks_seen, clock)

    async def _schedule(self, watcher: asyncio.Task[Any]) -> str:
        await self._read_history()
        pending = dict(self.wf.tasks)
        failure: BaseException | None = None
        assert self._wake is not None
        while pending or self._node_tasks:
            if failure is None and self._pause is None:
                for task_id, task in list(pending.items()):
                    if self._pauses.step and self._node_tasks:
                        break  # a step runs one node at a time
                    if all(dep in self.outputs for dep in task.needs):
                        del pending[task_id]
                        self._node_tasks[task_id] = asyncio.create_task(
                            self._run_task(task), name=f"smithers:{task_id}"
                        )
            elif not self._node_tasks:
                break
            if not self._node_tasks:  # nothing runnable: a dependency failed, or a pause
                break
            if self._node_tasks.keys() <= self._blocked:
                break  # every agent left waits for an answer: pause (or fail) now
            wake = asyncio.ensure_future(self._wake.wait())
            done, _ = await asyncio.wait(
                {*self._node_tasks.values(), watcher, wake}, return_when=asyncio.FIRST_COMPLETED
            )
            wake.cancel()
            self._wake.clear()
            if watcher in done:
                watcher.result()  # FenceLost: a heartbeat found another owner
                return await self._finish_cancel()
            for task_id, node_task in list(self._node_tasks.items()):
                if node_task not in done:
                    continue
                del self._node_tasks[task_id]
                error = node_task.exception()
                if isinstance(error, FenceLost):
                    await self._abandon()
                    raise error
                if error is not None and failure is None and not isinstance(error, Paused):
                    failure = error
        if self._node_tasks:  # agents waiting for an answer that will come to another attempt
            await self._abandon()
        if failure is None and self._pause is not None:
            node_id, iteration, data = self._pause
            data["breakpoints"] = {
                "before": sorted(self._pauses.before),
                "after": sorted(self._pauses.after),
            }
            await self._end(
                self.astore.pause_run, self.fence, node_id, iteration, data, self._open_calls()
            )
            return "paused"
        if failure is not None:
            await self._end(self.astore.finish_run, self.fence, "failed", error=str(failure)[:4000])
            return "failed"
        await self._end(self.astore.finish_run, self.fence, "finished", output=self.outputs)
        return "finished"

    def _open_calls(self) -> dict[AttemptKey, list[ModelCall]]:
        """The model calls the attempts left open made since their last write, taken for the
        write that ends those attempts (a cancel, a pause)."""
        return {key: p.take_calls() for key, p in self._open.items() if p.calls}

    async def _abandon(self) -> None:
        for node_task in self._node_tasks.values():
            node_task.cancel()
        await asyncio.gather(*self._node_tasks.values(), return_exceptions=True)
        self._node_tasks.clear()

    async def _watch(self) -> None:
        """Return when the run is asked to cancel; heartbeat while it runs.

        It reads the run (its cancel request, the breakpoints set meanwhile, its owner) when
        the store wakes it (:meth:`Store.watch_changes`: at once, then on every change another
        writer commits to the run) and every :attr:`Watching.safety_poll` seconds, or, where
        the store cannot wake it, every :attr:`Watching.poll` seconds; and heartbeats every
        :attr:`Watching.heartbeat` seconds, or at once when the run it read has another owner.

        A store that does not answer (another process holds SQLite's write lock, PostgreSQL
        is unreachable for longer than the store's retries) is not a reason to stop a healthy
        run: the watcher logs it and tries again at its next poll, its heartbeat included,
        until the store answers. Only a heartbeat that finds another owner ends the run here
        (:class:`FenceLost`); the agents' own writes stay fenced either way.
        """
        loop = asyncio.get_running_loop()
        woken = asyncio.Event()

        def wake() -> None:  # called from the store's listening thread
            with contextlib.suppress(RuntimeError):  # the loop closed: the run is over
                loop.call_soon_threadsafe(woken.set)

        watching = self.watching
        stop = self.store.watch_changes(self.fence.run_id, wake) if watching.listen else None
        try:
            if stop is None:
                await self._poll(woken, watching.poll, loop.time() + watching.poll)
            else:  # read at once: what changed before the store listened for this run
                await self._poll(woken, watching.safety_poll, loop.time())
        finally:
            if stop is not None:
                stop()

    async def _poll(self, woken: asyncio.Event, every: float, next_read: float) -> None:
        """:meth:`_watch`'s loop: read the run when ``woken`` or at ``next_read`` (then every
        ``every`` seconds), heartbeat when due."""
        loop, fence = asyncio.get_running_loop(), self.fence
        next_beat, unreachable = loop.time() + self.watching.heartbeat, False
        while True:
            wait = min(next_read, next_beat) - loop.time()
            if wait > 0 and not woken.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(woken.wait(), wait)
            now = loop.time()
            read, beat = woken.is_set() or now >= next_read, now >= next_beat
            woken.clear()  # a change committed during the read below wakes it again
            try:
                if read:
                    next_read = now + every
                    run, marks = await self.astore.watch_run(fence.run_id, self._marks_seen)
                    self._pick_up_breakpoints(marks, run.clock)
                    if run.cancel_requested or run.status == "cancelled":
                        return
                    # Claimed, paused, reset or rewound elsewhere: the heartbeat tells now.
                    beat = beat or run.status != "running" or run.owner_epoch != fence.epoch
                if beat:
                    if not await self.astore.heartbeat(fence):
                        await self._lost_ownership()
                        return
                    next_beat = now + self.watching.heartbeat
            except StoreError as error:
                # Both go again at the next read (a heartbeat that was due stays due).
                next_read = now + every
                next_beat = max(next_beat, next_read) if beat else next_beat
                if not unreachable:
                    log.warning(
                        "run %s: the store did not answer the cancel/heartbeat watcher (%s); "
                        "the run goes on and the watcher keeps trying",
                        fence.run_id,
                        error,
                    )
                unreachable = True
                continue
            if unreachable:
                log.warning("run %s: the store answers the watcher again", fence.run_id)
                unreachable = False

    async def _patiently(self, write: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Await ``write(*args, **kwargs)`` (an :class:`AsyncStore` method that records an
        end), trying again for :data:`STORE_PATIENCE` seconds while the store does not answer.

        An agent that failed because the store was unreachable (its ``on_checkpoint`` raised
        :class:`TransientStoreError`) then gets its retry once the store is back, and a run
        that ends during an outage is recorded when it returns, instead of being left behind
        as ``running``. A write that lost ownership raises :class:`FenceLost` at once.
        """
        deadline = time.monotonic() + STORE_PATIENCE
        while True:
            try:
                return await write(*args, **kwargs)
            except TransientStoreError as error:
                if time.monotonic() >= deadline:
                    raise
                log.warning(
                    "run %s: the store did not answer (%s); trying again", self.fence.run_id, error
                )
            await asyncio.sleep(STORE_PAUSE)

    async def _end(self, write: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        """Record how this execution ends (:meth:`_patiently`), marked :attr:`ending` first."""
        self.ending = True
        await self._patiently(write, *args, **kwargs)

    async def _lost_ownership(self) -> None:
        """A heartbeat matched nothing: return if the run was cancelled meanwhile, else raise
        :class:`FenceLost` (another owner claimed it, or it was reset)."""
        run = await self.astore.get_run(self.fence.run_id)
        if run.cancel_requested or run.status == "cancelled":
            return
        raise FenceLost(
            f"run {self.fence.run_id} is {run.status} under epoch {run.owner_epoch}: this "
            f"executor (epoch {self.fence.epoch}) lost ownership and stopped its agents",
            run_id=self.fence.run_id,
            epoch=self.fence.epoch,
        )

    async def _finish_cancel(self) -> str:
        """Cancel running agents, give them the grace to publish, then fence everything."""
        for node_task in self._node_tasks.values():
            node_task.cancel()
        if self._node_tasks:
            await asyncio.wait(self._node_tasks.values(), timeout=self.cancel_grace)
        await self._end(self.astore.cancel_run, self.fence.run_id, self._open_calls())
        # Every later write is fenced now; an agent that swallows its cancellation is left
        # behind after one more grace instead of holding the run open forever.
        if self._node_tasks:
            await asyncio.wait(self._node_tasks.values(), timeout=self.cancel_grace)
        self._node_tasks.clear()
        return "cancelled"

    # --- one task (all its loop iterations) ----------------------------------------------

    async def _run_task(self, task: Task) -> None:
        iteration, previous = 0, None
        while True:
            if (task.id, iteration) in self._ended:
                output = self._ended[task.id, iteration]
            else:
                self._pause_before(task, iteration, previous)
                output = await self._run_node(task, iteration, previous)
                self._ran += 1
                self._pause_after(task, iteration)
            if (
                task.loop is None
                or iteration + 1 >= task.loop.max
                or (task.loop.until is not None and task.loop.until(output))
            ):
                break
            iteration, previous = iteration + 1, output
        self.outputs[task.id] = output
        self.final_iteration[task.id] = iteration

    def _context(self, iteration: int, previous: Any) -> TaskContext:
        return TaskContext(self.run.input, dict(self.outputs), iteration, previous)

    async def _run_node(self, task: Task, iteration: int, previous: Any) -> Any:
        ctx = self._context(iteration, previous)
        prompt = task.render_prompt(ctx)
        needs = {dep: self.outputs[dep] for dep in task.needs}
        cached_as = (
            cache_key(self.wf.name, task, iteration, self.run.input, prompt, needs)
            if task.cache
            else None
        )
        if cached_as is not None:
            hit = await asyncio.to_thread(cache_lookup, self.store, cached_as)
            if hit is not None:
                return await self._use_cache(task, iteration, hit)
        failures, last = self._tried.get((task.id, iteration), (0, None))
        running = False
        while True:
            try:
                point = await self._start_point(task, iteration, tried=last is not None)
            except Exception:
                # No usable start (ForkIncompatible, HistoryExhausted): the node fails before
                # its agent is called, instead of staying "running" in a failed run.
                await self._patiently(
                    self.astore.set_node,
                    self.fence,
                    task.id,
                    iteration,
                    "failed",
                    last_attempt=last,
                )
                raise
            # The node turns running in the transaction that starts its first attempt here.
            attempt = await self.astore.start_attempt(
                self.fence,
                task.id,
                iteration,
                resumed_from=point.ref,
                node_state=None if running else "running",
            )
            running = True
            key = attempt.key
            last = key.attempt
            publisher = Publisher(self.astore, self.fence, self.max_bytes, task, key)
            self._open[key] = publisher  # until its end is written (below, or by a cancel)
            ending = False
            try:
                output = await self._attempt(task, publisher, prompt, needs, point)
                ending = True
                # One transaction, with the result checkpoint: a crash between the attempt's
                # end and the node's would make the next owner run a finished node again.
                await self._patiently(
                    self.astore.finish_attempt,
                    self.fence,
                    key,
                    "finished",
                    node_state="finished",
                    output=output,
                    checkpoints=publisher.take(),
                    model_calls=publisher.take_calls(),
                )
                self._open.pop(key, None)
            except _NEVER_RETRY:
                raise
            except Exception as error:
                if ending and not isinstance(error, _UNSTORABLE):
                    raise  # the store could not record the end: not the agent's failure
                # The agent failed, or the store refused a result checkpoint kept for the end
                # (writing nothing of that end): the attempt failed, as on a refused publish.
                failures += 1
                retry = (
                    failures <= task.retry.count
                    and isinstance(error, task.retry.on)
                    and not isinstance(error, ModelRequestRejected)  # cannot succeed again
                )
                # The attempt's end and, without a retry, the node's end commit together.
                await self._patiently(
                    self.astore.finish_attempt,
                    self.fence,
                    key,
                    "failed",
                    error=f"{type(error).__name__}: {error}"[:4000],
                    error_code=getattr(error, "code", type(error).__name__),
                    discard_resume=isinstance(error, CheckpointPoisoned),
                    node_state=None if retry else "failed",
                    checkpoints=publisher.take(),
                    model_calls=publisher.take_calls(),
                )
                self._open.pop(key, None)
                if retry:
                    await asyncio.sleep(task.retry.delay(failures))
                    continue
                raise TaskFailed(
                    f"task {task.id!r} failed after {failures} attempt(s): {error}",
                    task=task.id,
                    iteration=iteration,
                ) from error
            if cached_as is not None:
                await asyncio.to_thread(
                    cache_store, self.store, cached_as, key, output, publisher.newest
                )
            return output

    async def _start_point(self, task: Task, iteration: int, *, tried: bool) -> ResumePoint:
        if task.fork is not None:
            # A forked task is always (re)seeded from its source, never from its own attempts.
            return await asyncio.to_thread(
                fork_point,
                self.store,
                task.agent,
                self.run.run_id,
                task.fork,
                self.final_iteration[task.fork],
                task.id,
            )
        return await asyncio.to_thread(
            functools.partial(
                resume_point,
                self.store,
                task.agent,
                self.run.run_id,
                task.id,
                iteration,
                tried=tried,
            )
        )

    async def _attempt(
        self,
        task: Task,
        publisher: Publisher,
        prompt: str | None,
        needs: dict[str, Any],
        point: ResumePoint,
    ) -> Any:
        """The attempt's output; its result checkpoints are kept in ``publisher``."""
        key = publisher.key
        request = GenerateRequest(
            run_id=key.run_id,
            node_id=key.node_id,
            iteration=key.iteration,
            attempt=key.attempt,
            prompt=prompt,
            input=self.run.input,
            needs=needs,
            on_checkpoint=publisher,
            on_model_call=publisher.record,
            resume_checkpoint=point.checkpoint.clone() if point.checkpoint else None,
            checkpoint_mode=point.mode,
            resume_session=point.session,
            max_checkpoint_bytes=self.max_bytes,
            answer=copy.deepcopy(self._pauses.answers.get((key.node_id, key.iteration))),
        )
        return await turns(
            task, publisher, request, point, functools.partial(self._asker, task, key.iteration)
        )

    # --- cache ---------------------------------------------------------------------------

    async def _use_cache(self, task: Task, iteration: int, hit: Any) -> Any:
        attempt = await self.astore.start_attempt(self.fence, task.id, iteration)
        kept = [] if hit.checkpoint is None else [(hit.checkpoint, "turn", task.agent.id)]
        await self.astore.finish_attempt(
            self.fence,
            attempt.key,
            "finished",
            error_code="cache_hit",
            node_state="cached",
            output=hit.output,
            checkpoints=kept,
        )
        return hit.output
