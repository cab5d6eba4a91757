"""The entry object: ``db = smithers_tt.connect(url)``; everything else is reached from it."""

from __future__ import annotations

import asyncio
import datetime
import os
import socket
from typing import TYPE_CHECKING, Any

from smithers_tt import timetravel as tt
from smithers_tt.engine import RunExecutor, Workflow, run_sync
from smithers_tt.engine._executor import CANCEL_GRACE, EventCallback
from smithers_tt.engine._worker import Worker, positive_seconds
from smithers_tt.errors import WorkflowChanged
from smithers_tt.runs import Run
from smithers_tt.store import (
    Engine,
    GcReport,
    RetryPolicy,
    Store,
    VerifyReport,
    collect_garbage,
    migrate,
    verify,
)
from smithers_tt.store._claims import WorkerRecord, list_workers
from smithers_tt.store._maintenance import Progress
from smithers_tt.store._records import Fence, now_ms
from smithers_tt.timetravel import _ops as tt_ops
from smithers_tt.timetravel._retention import duration_ms

if TYPE_CHECKING:  # pragma: no cover
    from smithers_tt.lineage import Lineage

DEFAULT_URL = "sqlite:///smithers.db"


def owner_id() -> str:
    """Who executes a run: ``host:pid``, recorded on the run for people to read."""
    return f"{socket.gethostname()}:{os.getpid()}"


class Database:
    """A smithers_tt database: SQLite file or PostgreSQL, migrated and ready.

    Use :func:`connect` to make one. ``db.store`` is the durable storage layer (runs,
    attempts, fenced checkpoint publication, verified reads).
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.store = Store(engine)

    @property
    def url(self) -> str:
        """The database URL this object was opened with."""
        return self.engine.url

    # --- runs ----------------------------------------------------------------------------

    def get_run(self, run_id: str) -> Run:
        """A handle on an existing run.

        Raises:
            RunNotFound: no run has this id.
        """
        return Run(self, self.store.get_run(run_id))

    def runs(self, *, status: str | None = None, limit: int = 100) -> list[Run]:
        """The oldest ``limit`` runs (optionally with one status); see ``store.list_runs``."""
        page = self.store.list_runs(limit=limit, status=status)
        return [Run(self, record) for record in page.items]

    def run(self, wf: Workflow, input: Any = None, **options: Any) -> Run:
        """Run a workflow here and now, blocking until it ends; see :meth:`arun`.

        Works in scripts and inside Jupyter (where the run gets a loop in a helper thread).
        """
        return run_sync(self.arun(wf, input, **options))

    async def arun(
        self,
        wf: Workflow,
        input: Any = None,
        *,
        on_event: EventCallback | None = None,
        max_checkpoint_bytes: int | None = None,
        cancel_grace: float = CANCEL_GRACE,
        run_id: str | None = None,
    ) -> Run:
        """Create a run of ``wf`` with ``input`` and execute it to its end.

        Args:
            wf: the workflow.
            input: the run input (strict JSON).
            on_event: called in the event loop with every :class:`Frame` the run commits.
            max_checkpoint_bytes: lower the 16 MiB checkpoint ceiling for this run.
            cancel_grace: seconds cancelled agents get to publish a final checkpoint.
            run_id: choose the run id (default: a new time-ordered id).

        Raises:
            FenceLost: another process took the run over while it executed here.
        """
        wf.check()
        _, fence = await asyncio.to_thread(
            self.store.create_run,
            wf.name,
            input,
            workflow_hash=wf.signature(),
            owner_id=owner_id(),
            max_checkpoint_bytes=max_checkpoint_bytes,
            run_id=run_id,
            graph={t.id: list(t.needs) for t in wf.tasks.values()},
        )
        return await self._execute(wf, fence, on_event, cancel_grace)

    def submit(
        self, wf: Workflow, input: Any = None, *, max_checkpoint_bytes: int | None = None
    ) -> Run:
        """Record a queued run of ``wf`` for a worker to execute; return it without running.

        Workers (``smithers-tt worker`` or :meth:`worker`) that know ``wf`` claim it.
        """
        wf.check()
        record, _ = self.store.create_run(
            wf.name,
            input,
            workflow_hash=wf.signature(),
            status="queued",
            max_checkpoint_bytes=max_checkpoint_bytes,
            graph={t.id: list(t.needs) for t in wf.tasks.values()},
        )
        return Run(self, record)

    def worker(self, workflows: list[Workflow], **options: Any) -> Worker:
        """A :class:`~smithers_tt.engine.Worker` executing queued runs of ``workflows``;
        start it with ``await worker.run()``."""
        return Worker(self.store, workflows, **options)

    def workers(self, *, stale_after: float = 10.0) -> list[WorkerRecord]:
        """Registered workers, their state, last heartbeat and the runs each owns.

        A ``running`` worker silent for more than ``stale_after`` seconds (the workers'
        takeover timeout; default 10 s) is reported as ``unresponsive``.
        """
        seconds = positive_seconds("stale_after", stale_after)
        return list_workers(self.store, silent_after_ms=max(1, int(seconds * 1000)))

    def resume(self, run_id: str, wf: Workflow, **options: Any) -> Run:
        """Continue an unfinished run (after a crash, in a new process); see :meth:`aresume`."""
        return run_sync(self.aresume(run_id, wf, **options))

    async def aresume(
        self,
        run_id: str,
        wf: Workflow,
        *,
        accept_changed: bool = False,
        on_event: EventCallback | None = None,
        cancel_grace: float = CANCEL_GRACE,
    ) -> Run:
        """Claim an unfinished run under a new epoch and execute what is left of it.

        Completed nodes are not run again; interrupted attempts end as ``interrupted`` and
        their nodes resume from their newest acknowledged checkpoint. A run that already
        ended is returned as it is, without calling any agent.

        Raises:
            WorkflowChanged: ``wf`` differs from the definition the run started with (pass
                ``accept_changed=True`` to resume anyway).
        """
        record = await asyncio.to_thread(self.store.get_run, run_id)
        if record.status in ("finished", "failed", "cancelled"):
            return Run(self, record)
        if record.workflow_hash != wf.signature() and not accept_changed:
            raise WorkflowChanged(
                f"run {run_id} started with another definition of workflow "
                f"{record.workflow!r}; resume with the same definition, or pass "
                "accept_changed=True to continue under the new one",
                run_id=run_id,
            )
        fence = await asyncio.to_thread(self.store.claim_run, run_id, owner_id())
        if record.cancel_requested:
            await asyncio.to_thread(self.store.cancel_run, run_id)
        if on_event is not None:  # the claim's frames come before the executor listens
            for frame in await asyncio.to_thread(self.store.frames, run_id, after=record.clock):
                on_event(frame)
        if record.cancel_requested:
            return self.get_run(run_id)
        return await self._execute(wf, fence, on_event, cancel_grace)

    async def _execute(
        self, wf: Workflow, fence: Fence, on_event: EventCallback | None, cancel_grace: float
    ) -> Run:
        executor = RunExecutor(self.store, wf, fence, on_event=on_event, cancel_grace=cancel_grace)
        await executor.execute()
        return Run(self, await asyncio.to_thread(self.store.get_run, fence.run_id))

    def cancel(self, run_id: str) -> None:
        """Cancel a run. A running run's owner cancels its agents, gives them a short grace to
        publish a final checkpoint, then fences every later write; a run nobody executes
        (queued, interrupted, or running with an owner that stopped heartbeating) is
        cancelled at once."""
        record = self.store.get_run(run_id)
        if record.status in ("finished", "failed", "cancelled"):
            return
        alive = now_ms() - (record.heartbeat_at_ms or 0) < tt_ops.LIVE_OWNER_MS
        if record.status == "running" and alive:
            self.store.request_cancel(run_id)
        else:
            self.store.cancel_run(run_id)

    # --- time travel ---------------------------------------------------------------------

    def snapshot(self, run_id: str, frame_no: int | None = None) -> tt.Snapshot:
        """Exactly what frame ``frame_no`` (default: the newest) of a run makes visible.

        Raises:
            FrameNotFound: the run has no such frame.
        """
        snap = self.engine.transaction(
            lambda conn: tt_ops.snapshot_at(conn, run_id, frame_no), write=False
        )
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
        snap = tt.rewind(self.store, run_id, frame_no, confirm=confirm, force=force, reason=reason)
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
    ) -> Run:
        """A child run whose frame 0 is the parent's frame ``frame_no`` (``reason``, why, is
        kept in the audit).

        See :func:`smithers_tt.timetravel.fork`; run it with :meth:`resume` (or use
        :meth:`replay`).
        """
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
        )
        return self.get_run(child)

    def replay(self, run_id: str, frame_no: int, wf: Workflow, **fork_options: Any) -> Run:
        """Fork at ``frame_no`` and execute the child with ``wf``; completed nodes are kept,
        reset and later nodes run again."""
        child = self.fork(run_id, frame_no, **fork_options)
        return self.resume(child.id, wf)

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
        return tt.reset(
            self.store, run_id, node_id, dependents=dependents, force=force, reason=reason
        )

    def timeline(self, run_id: str) -> tt.Timeline:
        """A run's frames plus the tree of runs forked from the same root."""
        return tt.timeline(self.store, run_id)

    def debug(self, run_id: str, **kw: Any) -> Any:
        """The notebook debugger of a run: ``Debugger(db, run_id, **kw)`` (needs the
        ``notebook`` extra; imported only when called)."""
        from smithers_tt.widgets import Debugger  # optional dependency: import on use

        return Debugger(self, run_id, **kw)

    # --- maintenance ---------------------------------------------------------------------

    def verify(self, *, page_size: int = 200, progress: Progress | None = None) -> VerifyReport:
        """Check every stored checkpoint's SHA-256 and size; see :func:`store.verify`."""
        return verify(self.engine, page_size=page_size, progress=progress)

    def collect_garbage(self, **options: Any) -> GcReport:
        """Delete checkpoint content nothing reaches; see :func:`store.collect_garbage`."""
        return collect_garbage(self.engine, **options)

    def gc(
        self,
        older_than: datetime.timedelta | float | None = None,
        *,
        keep_forks: bool = True,
        progress: Progress | None = None,
    ) -> tt.PruneReport:
        """Delete the history of runs that ended longer than ``older_than`` ago (a timedelta
        or seconds), leaves of the fork tree first, then the content nothing reaches.

        With ``keep_forks`` (default) a run stays while a run forked from it remains. With
        ``older_than=None`` no run is deleted: only unreachable content is collected. See
        :func:`smithers_tt.timetravel.prune_runs`.
        """
        if older_than is None:
            return tt.PruneReport(content=collect_garbage(self.engine, progress=progress))
        return tt.prune_runs(
            self.store,
            older_than_ms=duration_ms(older_than),
            keep_forks=keep_forks,
            progress=progress,
        )

    # --- analytics -----------------------------------------------------------------------

    def lineage(self, **options: Any) -> Lineage:
        """Read-only DuckDB analytics over this store, answered as pandas DataFrames.

        Needs the ``lineage`` extra; duckdb and pandas are imported only here. Options are
        those of :class:`smithers_tt.lineage.Lineage` (``snapshot``, ``reader``, ``threads``).
        Close it (or use ``with db.lineage() as lin:``) when done.
        """
        from smithers_tt.lineage import Lineage

        return Lineage(self, **options)

    def close(self) -> None:
        """Release every connection."""
        self.engine.dispose()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<smithers_tt.Database {self.engine.sa.url.render_as_string(hide_password=True)}>"


def connect(
    url: str | None = None,
    *,
    migrate_schema: bool = True,
    retry: RetryPolicy | None = None,
    busy_timeout_ms: int = 5000,
) -> Database:
    """Open (and by default migrate) a smithers_tt database.

    Args:
        url: ``sqlite:///path/to/file.db`` (the default is ``$SMITHERS_TT_DB`` or
            ``sqlite:///smithers.db``) or ``postgresql+psycopg://user@host:5432/dbname``.
        migrate_schema: apply pending migrations and check the schema (default True).
        retry: how transient errors are retried inside the store.
        busy_timeout_ms: SQLite's wait for a lock before a retry.

    Raises:
        InvalidArgument: the URL is not a supported database.
        SchemaMismatch: the database has tables of a shape smithers_tt does not recognise.
    """
    url = url or os.environ.get("SMITHERS_TT_DB") or DEFAULT_URL
    if "://" not in url:  # a bare path means an SQLite file
        url = f"sqlite:///{url}"
    engine = Engine(url, retry=retry, busy_timeout_ms=busy_timeout_ms)
    if migrate_schema:
        try:
            migrate(engine)
        except BaseException:
            engine.dispose()
            raise
    return Database(engine)
