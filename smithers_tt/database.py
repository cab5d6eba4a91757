"""The entry object: ``db = smithers_tt.connect(url)``; everything else is reached from it."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from smithers_tt import timetravel as tt
from smithers_tt._extras import require_extra
from smithers_tt._ids import check_id, owner_id
from smithers_tt._labels import REPLAY_OF
from smithers_tt._open import DEFAULT_URL as DEFAULT_URL
from smithers_tt._open import open_engine, resolve_url
from smithers_tt._traveling import Traveling
from smithers_tt._upkeep import Upkeep
from smithers_tt.engine import (
    CANCEL_GRACE,
    ContinueOptions,
    EventCallback,
    RunExecutor,
    Watching,
    Worker,
    Workflow,
    action_of,
    breakpoints,
    claim_unless_ended,
    continue_paused,
    positive_seconds,
    prepare_continue,
    run_sync,
)
from smithers_tt.errors import InvalidArgument, WorkflowChanged
from smithers_tt.runs import Run
from smithers_tt.store import (
    ENDED,
    Engine,
    Fence,
    RetryPolicy,
    Store,
    WorkerRecord,
    list_workers,
    now_ms,
)
from smithers_tt.sweeps import Sweeping
from smithers_tt.triage import Failures, failures

if TYPE_CHECKING:  # pragma: no cover
    from smithers_tt.lineage import Lineage


class Database(Upkeep, Sweeping, Traveling):
    """A smithers_tt database: SQLite file or PostgreSQL, migrated and ready.

    Use :func:`connect` to make one. ``db.store`` is the durable storage layer (runs,
    attempts, fenced checkpoint publication, verified reads).
    """

    def __init__(self, engine: Engine, *, watching: Watching | None = None) -> None:
        self.engine = engine
        self.store = Store(engine)
        self.watching = watching  # how its runs watch the store (see connect)

    @property
    def url(self) -> str:
        """The database URL this object was opened with."""
        return self.engine.url

    # --- runs ----------------------------------------------------------------------------

    def resolve_run_id(self, run_id: str) -> str:
        """The full id of the run ``run_id`` names: its id, or a prefix of at least 6
        characters only its id starts with (every method here taking a run id calls this).
        Raises ``RunNotFound`` (no such run; a prefix under 6 characters) or
        ``AmbiguousRunId`` (several runs start with it: the error lists them)."""
        return self.store.resolve_run_id(check_id(run_id, "run_id"))

    def get_run(self, run_id: str) -> Run:
        """A handle on an existing run (its id or a unique prefix: :meth:`resolve_run_id`)."""
        return Run(self, self.store.get_run(self.resolve_run_id(run_id)))

    def runs(
        self,
        *,
        status: str | None = None,
        labels: Mapping[str, str] | None = None,
        limit: int = 100,
    ) -> list[Run]:
        """The oldest ``limit`` runs; with ``status="failed"`` only those with that status,
        with ``labels={"case": "retry"}`` only those carrying every one of those labels."""
        page = self.store.list_runs(limit=limit, status=status, labels=labels)
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
        break_before: Iterable[str] = (),
        break_after: Iterable[str] = (),
        labels: Mapping[str, str] | None = None,
    ) -> Run:
        """Create a run of ``wf`` with ``input`` and execute it to its end or its first pause.

        A paused run is returned with status ``paused`` (``run.pause`` says where and what
        it asks); continue it with :meth:`resume` (``answer=...``), here or in any process.

        Args:
            wf: the workflow.
            input: the run input (strict JSON).
            on_event: called in the event loop with every :class:`Frame` the run commits.
            max_checkpoint_bytes: lower the 16 MiB checkpoint ceiling for this run.
            cancel_grace: seconds cancelled agents get to publish a final checkpoint.
            run_id: choose the run id (default: a new time-ordered id); a non-empty string
                of at most 200 characters, without NUL or lone surrogates.
            break_before: pause the run before these tasks (once per iteration); kept in
                the run's history, so any process that executes it pauses there.
            break_after: pause the run after these tasks.
            labels: ``str -> str`` labels to find the run by (``{"case": "retry"}``; bounds
                in :mod:`smithers_tt._labels`); forks inherit them.

        Raises:
            FenceLost: another process took the run over while it executed here.
            InvalidArgument: ``run_id`` cannot be an id, or a label is refused.
        """
        wf.check()
        marks = breakpoints(wf, break_before, break_after) if break_before or break_after else None
        _, fence = await asyncio.to_thread(
            self.store.create_run,
            wf.name,
            input,
            workflow_hash=wf.signature(),
            owner_id=owner_id(),
            max_checkpoint_bytes=max_checkpoint_bytes,
            run_id=run_id,
            graph={t.id: list(t.needs) for t in wf.tasks.values()},
            breakpoints=marks,
            labels=labels,
        )
        return await self._execute(wf, fence, on_event, cancel_grace)

    def submit(
        self,
        wf: Workflow,
        input: Any = None,
        *,
        max_checkpoint_bytes: int | None = None,
        break_before: Iterable[str] = (),
        break_after: Iterable[str] = (),
        labels: Mapping[str, str] | None = None,
    ) -> Run:
        """Record a queued run of ``wf`` (with ``labels``) for a worker to execute; return it
        without running. Workers (``smithers-tt worker`` or :meth:`worker`) that know ``wf``
        claim it; they pause it at ``break_before`` / ``break_after`` (see :meth:`arun`) and
        never claim it while it is paused."""
        wf.check()
        marks = breakpoints(wf, break_before, break_after) if break_before or break_after else None
        record, _ = self.store.create_run(
            wf.name,
            input,
            workflow_hash=wf.signature(),
            status="queued",
            max_checkpoint_bytes=max_checkpoint_bytes,
            graph={t.id: list(t.needs) for t in wf.tasks.values()},
            breakpoints=marks,
            labels=labels,
        )
        return Run(self, record)

    def worker(self, workflows: list[Workflow], **options: Any) -> Worker:
        """A :class:`~smithers_tt.engine.Worker` executing queued runs of ``workflows``;
        start it with ``await worker.run()``; its runs watch the store as this object's do
        (``watching`` of :func:`connect`) unless ``options`` say otherwise."""
        return Worker(self.store, workflows, **{"watching": self.watching, **options})

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
        answer: Any = None,
        checkpoints: Mapping[str, Any] | None = None,
        skip: Mapping[str, Any] | None = None,
        step: bool = False,
        abort: bool = False,
        break_before: Iterable[str] | None = None,
        break_after: Iterable[str] | None = None,
    ) -> Run:
        """Claim an unfinished run under a new epoch and execute what is left of it.

        Completed nodes are not run again; interrupted attempts end as ``interrupted`` and
        their nodes resume from their newest acknowledged checkpoint. A run that already
        ended is returned as it is, without calling any agent.

        A ``paused`` run is continued (see ``docs/breakpoints.md``), in one transaction that
        also claims it: of two continuers, one wins and the other gets ``ConcurrencyError``.

        Args:
            answer: the answer to the pause's question (strict JSON): what the agent's
                ``await request.ask(...)`` returns, or ``request.answer`` after a pause
                before its node.
            checkpoints: node id -> edited checkpoint (an ``AgentCheckpoint`` or its
                envelope) the node's next attempt resumes from; refused, with nothing
                written, unless its agent accepts that codec and version in mode
                ``resume``.
            skip: node id -> output: the node is marked finished with that output (checked
                against its schema) and its agent is not called.
            step: run one node, then pause again.
            abort: cancel the paused run instead.
            break_before: replace the run's breakpoints before nodes (``break_after``: after).

        Raises:
            WorkflowChanged: ``wf`` differs from the definition the run started with (pass
                ``accept_changed=True`` to resume anyway).
            InvalidArgument: a continue option for a run that is not paused, or a refused
                answer, edit or skip; nothing was written.
            ConcurrencyError: another process continued (or cancelled) the run first.
        """
        run_id = await asyncio.to_thread(self.resolve_run_id, run_id)
        record = await asyncio.to_thread(self.store.get_run, run_id)
        continuing = record.status == "paused"
        asked = ContinueOptions(
            answer=answer, checkpoints=checkpoints, skip=skip, break_before=break_before,
            break_after=break_after,
        )  # fmt: skip
        if not continuing and (step or abort or asked.given):
            prepare_continue(self.store, record, wf, asked)  # raises: the run is not paused
        if record.status in ENDED:
            return Run(self, record)
        if record.workflow_hash != wf.signature() and not accept_changed:
            raise WorkflowChanged(
                f"run {run_id} started with another definition of workflow "
                f"{record.workflow!r}; resume with the same definition, or pass "
                "accept_changed=True to continue under the new one",
                run_id=run_id,
            )
        if continuing:
            options = replace(asked, action=action_of(step, abort))
            fence = await asyncio.to_thread(continue_paused, self.store, record, wf, options, True)
            if fence is None:  # aborted
                return self.get_run(run_id)
        else:
            if record.inherits:  # a fork by reference gets its own live state first
                await asyncio.to_thread(tt.materialize, self.store, run_id)
            fence = await asyncio.to_thread(claim_unless_ended, self.store, run_id, owner_id())
            if fence is None:  # it ended after it was read: returned as it is
                return self.get_run(run_id)
        if record.cancel_requested:
            await asyncio.to_thread(self.store.cancel_run, run_id)
        if on_event is not None:  # the claim's frames come before the executor listens
            for frame in await asyncio.to_thread(self.store.frames, run_id, after=record.clock):
                on_event(frame)
        if record.cancel_requested:
            return self.get_run(run_id)
        return await self._execute(wf, fence, on_event, cancel_grace)

    def continue_run(
        self,
        run_id: str,
        wf: Workflow | None = None,
        *,
        answer: Any = None,
        checkpoints: Mapping[str, Any] | None = None,
        skip: Mapping[str, Any] | None = None,
        step: bool = False,
        abort: bool = False,
        break_before: Iterable[str] | None = None,
        break_after: Iterable[str] | None = None,
    ) -> Run:
        """Continue a paused run without executing it here: it becomes ``queued`` for a
        worker (``smithers-tt worker``) to claim; options as in :meth:`aresume` (``wf`` is
        needed to check ``checkpoints`` and ``skip``).

        Raises:
            InvalidArgument: the run is not paused, or a refused answer, edit or skip.
            ConcurrencyError: another process continued (or cancelled) the run first.
        """
        record = self.store.get_run(run_id := self.resolve_run_id(run_id))
        options = ContinueOptions(
            action_of(step, abort), answer, checkpoints, skip, break_before, break_after
        )
        continue_paused(self.store, record, wf, options, False)
        return self.get_run(run_id)

    def set_breakpoints(
        self,
        run_id: str,
        wf: Workflow | None = None,
        *,
        break_before: Iterable[str] = (),
        break_after: Iterable[str] = (),
    ) -> Run:
        """Replace a run's breakpoints now, while it is queued, running or paused: whoever
        executes it (here, another process, a worker) pauses at them from its next node on
        (frame ``breakpoints_set``). ``wf`` checks the node ids (else the run's graph does).

        Raises:
            InvalidArgument: a node that is not a task of the run, or the run ended.
        """
        record = self.store.get_run(self.resolve_run_id(run_id))
        marks = breakpoints(wf, break_before, break_after)
        assert marks is not None
        known = set(record.graph or ())
        for node_id in (*marks["before"], *marks["after"]):
            if wf is None and known and node_id not in known:
                raise InvalidArgument(
                    f"{node_id!r} is not a task of run {record.run_id} (its tasks: "
                    f"{', '.join(sorted(known))}); nothing was written"
                )
        self.store.set_breakpoints(record.run_id, marks)
        return self.get_run(record.run_id)

    async def _execute(
        self, wf: Workflow, fence: Fence, on_event: EventCallback | None, cancel_grace: float
    ) -> Run:
        executor = RunExecutor(
            self.store,
            wf,
            fence,
            on_event=on_event,
            cancel_grace=cancel_grace,
            watching=self.watching,
        )
        await executor.execute()
        return Run(self, await asyncio.to_thread(self.store.get_run, fence.run_id))

    def cancel(self, run_id: str) -> None:
        """Cancel a run. A running run's owner cancels its agents, gives them a short grace to
        publish a final checkpoint, then fences every later write; a run nobody executes
        (queued, interrupted, or running with an owner that stopped heartbeating) is
        cancelled at once."""
        record = self.store.get_run(run_id := self.resolve_run_id(run_id))
        if record.status in ENDED:
            return
        alive = now_ms() - (record.heartbeat_at_ms or 0) < tt.LIVE_OWNER_MS
        if record.status == "running" and alive:
            self.store.request_cancel(run_id)
        else:
            if record.inherits:  # a fork by reference: its in-progress attempts end too
                tt.materialize(self.store, run_id)
            self.store.cancel_run(run_id)

    # --- time travel (the rest is Traveling's) -----------------------------------------

    def replay(self, run_id: str, frame_no: int, wf: Workflow, **fork_options: Any) -> Run:
        """Fork at ``frame_no`` and execute the child with ``wf``; completed nodes are kept,
        reset and later nodes run again. The child is labelled ``replay_of=<run id>``."""
        run_id = self.resolve_run_id(run_id)
        labels = {**(fork_options.pop("labels", None) or {}), REPLAY_OF: run_id}
        child = self.fork(run_id, frame_no, labels=labels, **fork_options)
        return self.resume(child.id, wf)

    def browse(
        self, workflows: Iterable[Workflow] = (), *, prices: Any = None, **filters: Any
    ) -> Any:
        """The run browser (``notebook`` extra): runs newest first, filtered, opened in place
        (the debugger it opens prices model calls by ``prices``, as :meth:`debug` does); see
        :class:`smithers_tt.widgets.RunBrowser` for the ``filters``."""
        require_extra("ipywidgets", "plotly", "anywidget", needed_for="the run browser")
        from smithers_tt.widgets import RunBrowser  # optional dependency: import on use

        return RunBrowser(self, workflows, prices=prices, **filters)

    def debug(self, run_id: str, frame: int | None = None, **kw: Any) -> Any:
        """The notebook debugger of a run (its id or a unique prefix), at ``frame`` (default:
        the newest): ``Debugger(db, run_id, frame=frame, **kw)`` (needs the ``notebook``
        extra; imported only when called). A frame the run does not have is an
        ``InvalidArgument`` that says which frames it has."""
        require_extra("ipywidgets", "plotly", "anywidget", needed_for="the notebook debugger")
        from smithers_tt.widgets import Debugger  # optional dependency: import on use

        return Debugger(self, self.resolve_run_id(run_id), frame=frame, **kw)

    # --- analytics -----------------------------------------------------------------------

    def failures(self, **options: Any) -> Failures:
        """The store's failures grouped across runs: see :func:`smithers_tt.triage.failures`
        for the options (``workflow``, ``since``, ``stuck_after``, ``limit``)."""
        return failures(self, **options)

    def lineage(self, **options: Any) -> Lineage:
        """Read-only DuckDB analytics over this store, answered as pandas DataFrames.

        Needs the ``lineage`` extra; duckdb and pandas are imported only here. Options are
        those of :class:`smithers_tt.lineage.Lineage` (``snapshot``, ``reader``, ``threads``).
        Close it (or use ``with db.lineage() as lin:``) when done.
        """
        from smithers_tt.lineage import Lineage

        if self.engine.immutable:
            # DuckDB's SQLite scanner needs the -shm file that read-only media cannot hold;
            # the arrow reader reads through this (immutable) connection instead.
            options.setdefault("reader", "arrow")
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
    create: bool | None = None,
    read_only: bool = False,
    beside_other_tables: bool = True,
    migrate_schema: bool = True,
    retry: RetryPolicy | None = None,
    busy_timeout_ms: int = 5000,
    watching: Watching | None = None,
) -> Database:
    """Open a smithers_tt store; by default create it when there is none, and migrate it.

    Args:
        url: ``sqlite:///path/to/file.db`` (the default is ``$SMITHERS_TT_DB`` or
            ``sqlite:///smithers.db``), a bare file path, or
            ``postgresql+psycopg://user@host:5432/dbname``.
        create: make the store when there is none (default: yes, unless ``read_only``). A
            missing folder is never created.
        read_only: only read: never create, migrate or write (SQLite opens the file
            read-only, ``immutable`` on read-only media; PostgreSQL sessions are read-only
            on the server). Writes raise ``StoreReadOnly``.
        beside_other_tables: whether a new store may be created in a database (or
            PostgreSQL schema) that already holds other tables (the CLI asks for a flag).
        migrate_schema: apply pending migrations and check the schema (default True);
            with False, nothing is looked at (the caller knows the store is current).
        retry: how transient errors are retried inside the store.
        busy_timeout_ms: SQLite's wait for a lock before a retry.
        watching: how its runs (and its workers' runs) watch the store for a cancel,
            breakpoints and lost ownership, and heartbeat: a ``smithers_tt.engine.Watching``
            (default ``Watching(poll=0.1, safety_poll=2.0, heartbeat=2.0, listen=True)``).

    Raises:
        InvalidArgument: the URL is not a supported database, or the folder of a new SQLite
            file does not exist.
        StoreNotFound: there is no store and ``create`` is off.
        StoreReadOnly: the SQLite file cannot be written, and ``read_only`` is off.
        SchemaMismatch: the database has tables of a shape smithers_tt does not recognise,
            other tables where a store was to be created (``beside_other_tables=False``), or
            (``read_only``) a store that needs migrating first.
    """
    if watching is not None and not isinstance(watching, Watching):  # before anything is made
        raise InvalidArgument(
            f"watching must be a smithers_tt.engine.Watching, got {type(watching).__name__}"
        )
    engine = open_engine(
        resolve_url(url),
        create=create,
        read_only=read_only,
        beside_other_tables=beside_other_tables,
        migrate_schema=migrate_schema,
        retry=retry,
        busy_timeout_ms=busy_timeout_ms,
    )
    return Database(
        engine, watching=watching
    )  # the entry object: everything else is reached from it
