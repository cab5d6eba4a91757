"""What-if sweeps: fork one frame of a run many ways, run the branches, compare outcomes.

``db.sweep(run_id, frame_no, variants, workflow=wf)`` records a sweep, makes one fork per
variant at that frame (labelled ``sweep=<id>``, ``variant=<name>``, with the variant's
edits) and runs them, ``concurrency`` at a time in this process, or queued for workers
(``workers=True``, or by default on PostgreSQL when a live worker serves the workflow).
It returns a :class:`Sweep`; ``db.get_sweep(id)`` reopens one from the store.

What is stored where (see ``docs/sweeps.md``): the branches are runs, found by their labels,
which are written in the fork's own transaction, so no crash leaves a branch the sweep
cannot find or makes a variant's fork twice; the sweep's row (``tt_sweeps``) keeps the
variants' edits (to make the forks a crash left unmade), whether the sweep was cancelled,
and the scores (``tt_sweep_scores``). Running a sweep again (``sweep.run(wf)``) makes only
the missing forks and runs only the branches that have not ended: a finished branch is never
run twice.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import secrets
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol

from smithers_tt import timetravel as tt
from smithers_tt._extras import require_extra
from smithers_tt._ids import owner_id
from smithers_tt._labels import check_labels
from smithers_tt._model_calls import totals_of
from smithers_tt._opened import OpenedDatabase
from smithers_tt._prices import PriceTable
from smithers_tt._sweep_drive import driving, wait_for_live_owner
from smithers_tt._sweep_promote import Promotion, promote
from smithers_tt.checkpoint import AgentCheckpoint, canonical_bytes
from smithers_tt.engine import Workflow, claim_unless_ended, run_sync
from smithers_tt.errors import InvalidArgument, WorkflowChanged
from smithers_tt.runs import Run
from smithers_tt.store import ENDED, WorkerRecord, now_ms, release_run

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

log = logging.getLogger("smithers_tt.sweeps")

SWEEP_LABEL = "sweep"
"""The label every branch of a sweep carries: the sweep's id."""
VARIANT_LABEL = "variant"
"""The label naming a branch's variant."""

EDITS = frozenset(
    {"input", "reset", "checkpoints", "dependents", "allow_new_format", "break_before",
     "break_after"}
)  # fmt: skip
"""What a variant may set: ``db.fork``'s keywords, and breakpoints for the branch."""

CALL_COLUMNS = ("model_calls", "prompt_tokens", "completion_tokens", "cost")
"""What a branch's own model calls add to its row (:meth:`Sweep.rows`)."""

DONE = frozenset({*ENDED, "paused"})
"""Branch statuses a sweep does not run again (a paused branch waits for a person)."""

Score = Callable[[Run], Any]
"""``score(run) -> float | dict``: a number, or a dict of numbers, for one branch."""


class SweepingDatabase(OpenedDatabase, Protocol):
    """What a sweep uses of an open :class:`smithers_tt.Database` (named by this protocol
    so that the database can import this module: no import cycle)."""

    def resolve_run_id(self, run_id: str) -> str: ...
    def fork(self, run_id: str, frame_no: int, **options: Any) -> Run: ...
    def set_breakpoints(self, run_id: str, wf: Workflow | None = None, *,
                        break_before: Iterable[str] = (),
                        break_after: Iterable[str] = ()) -> Run: ...  # fmt: skip
    def cancel(self, run_id: str) -> None: ...
    async def aresume(self, run_id: str, wf: Workflow, **options: Any) -> Run: ...
    def workers(self, *, stale_after: float = 10.0) -> list[WorkerRecord]: ...
    def gc(self, older_than: Any = None, *, run_ids: Any = None) -> Any: ...


def check_variants(variants: Any) -> dict[str, dict[str, Any]]:
    """``variants`` (name -> edits) as stored: each name a label value, each edit one of
    :data:`EDITS`, checkpoints as envelopes, everything strict JSON; or
    :class:`InvalidArgument` saying what is wrong."""
    if not isinstance(variants, Mapping) or not variants:
        raise InvalidArgument("variants must be a non-empty mapping of name -> edits (a dict)")
    checked: dict[str, dict[str, Any]] = {}
    for name, edits in variants.items():
        check_labels({VARIANT_LABEL: name})
        edits = {} if edits is None else edits
        if not isinstance(edits, Mapping):
            raise InvalidArgument(f"the edits of variant {name!r} must be a dict of fork options")
        unknown = sorted(set(edits) - EDITS)
        if unknown:
            raise InvalidArgument(
                f"variant {name!r}: {unknown} not known; a variant sets {sorted(EDITS)}"
            )
        spec = dict(edits)
        if "checkpoints" in spec:
            spec["checkpoints"] = {
                node: _envelope(name, node, cp) for node, cp in (spec["checkpoints"] or {}).items()
            }
        for key in ("reset", "break_before", "break_after"):
            if key in spec:
                spec[key] = list(spec[key])
        canonical_bytes(spec)  # strict JSON, or CheckpointInvalid naming the path
        checked[name] = spec
    return checked


def _envelope(variant: str, node_id: str, checkpoint: Any) -> dict[str, Any]:
    if isinstance(checkpoint, AgentCheckpoint):
        return {"codec": checkpoint.codec, "version": checkpoint.version,
                "payload": checkpoint.payload}  # fmt: skip
    try:
        return _envelope(variant, node_id, AgentCheckpoint(**checkpoint))
    except TypeError as error:
        raise InvalidArgument(
            f"variant {variant!r}: checkpoints[{node_id!r}] must be an AgentCheckpoint or its "
            f"envelope {{codec, version, payload}}"
        ) from error


class Sweep:
    """A what-if sweep: its variants and their branches, as last read from the store.

    Reopen one with ``db.get_sweep(id)``; run what is missing with :meth:`run`.
    """

    def __init__(self, db: SweepingDatabase, record: Any) -> None:
        self.db = db
        self.record = record
        self._tried: set[tuple[str, str]] = set()
        self._accept_changed = False
        self._held: Callable[[], bool] = lambda: True

    @property
    def id(self) -> str:
        """The sweep id (the value of every branch's ``sweep`` label)."""
        return self.record.sweep_id

    @property
    def run_id(self) -> str:
        """The run the sweep forks."""
        return self.record.run_id

    @property
    def frame_no(self) -> int:
        """The frame every branch starts from."""
        return self.record.frame_no

    @property
    def variants(self) -> dict[str, dict[str, Any]]:
        """Variant name -> its edits, in the order given."""
        return self.record.variants

    @property
    def scores(self) -> dict[str, Any]:
        """Variant name -> the score its branch was given (as far as scored)."""
        return self.record.scores

    @property
    def cancelled(self) -> bool:
        """Whether the sweep was cancelled (no branch starts any more)."""
        return self.record.cancel_requested

    @property
    def promoted(self) -> str | None:
        """The variant whose branch was promoted (:meth:`promote`), or None."""
        return self.record.promoted_variant

    def refresh(self) -> Sweep:
        """Read the sweep again from the store."""
        self.record = self.db.store.sweeps.get(self.id)
        return self

    def branches(self) -> dict[str, Run | None]:
        """Variant name -> its branch (a run), or None for a fork not made yet."""
        found: dict[str, Run] = {}
        cursor = None
        while True:
            page = self.db.store.list_runs(limit=1000, cursor=cursor, labels={SWEEP_LABEL: self.id})
            for record in page.items:
                # The oldest fork of a variant is its branch (only one is ever made); a run
                # forked from a branch carries its labels too, but not its parent.
                if record.parent_run_id == self.run_id:
                    found.setdefault(record.labels.get(VARIANT_LABEL, ""), Run(self.db, record))
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        return {name: found.get(name) for name in self.variants}

    def status(self) -> dict[str, str]:
        """Variant name -> its branch's status (``not made`` before its fork exists,
        ``deleted`` once deleted by :meth:`promote`)."""
        return {n: self._missing(n) if r is None else r.status for n, r in self.branches().items()}

    def _missing(self, name: str) -> str:
        return "deleted" if name in self.record.discarded else "not made"

    def done(self) -> bool:
        """Whether every branch ended (or paused), or the sweep was cancelled and nothing of
        it runs any more."""
        return all(status in DONE for status in self.status().values())

    # --- running -------------------------------------------------------------------------

    def run(self, wf: Workflow, **options: Any) -> Sweep:
        """Make the missing forks and run the branches that have not ended; see :meth:`arun`."""
        return run_sync(self.arun(wf, **options))

    async def arun(
        self,
        wf: Workflow,
        *,
        concurrency: int = 4,
        score: Score | None = None,
        progress: Callable[[int], None] | None = None,
        workers: bool | None = None,
        wait: bool = True,
        poll_interval: float = 0.2,
        accept_changed: bool = False,
    ) -> Sweep:
        """Make the forks not made yet and run every branch that has not ended (a branch
        that finished is never run again), then score each ended branch not scored yet.

        Args:
            wf: the workflow of the run swept (the same definition).
            concurrency: branches run at once in this process.
            score: ``score(run) -> float | dict`` for each branch; kept with the sweep.
            progress: called with ``n`` as ``n`` more branches end (a bar: see
                ``smithers_tt.widgets.notebook_progress``).
            workers: queue the branches for workers (``smithers-tt worker``) instead of
                running them here; default: on PostgreSQL when a live worker serves ``wf``.
            wait: with workers, wait until every branch ended (else return at once).
            poll_interval: seconds between looks at the branches while workers run them.
            accept_changed: run the branches under ``wf`` even when it differs from the
                definition the run was made with (a what-if over a changed workflow).

        Raises:
            WorkflowChanged: ``wf`` is not the definition the run was made with (and
                ``accept_changed`` is off); nothing was forked.
        """
        if wf.name != self.record.workflow:
            raise InvalidArgument(
                f"sweep {self.id} runs workflow {self.record.workflow!r}, not {wf.name!r}"
            )
        if type(concurrency) is not int or concurrency < 1:
            raise InvalidArgument(f"concurrency must be an int >= 1, got {concurrency!r}")
        await asyncio.to_thread(_check_definition, self.db, self.run_id, wf, accept_changed)
        self._accept_changed = accept_changed
        # One driver at a time (see smithers_tt._sweep_drive): a second waits here.
        async with driving(self.db.store.sweeps, self.id) as self._held:
            branches = await asyncio.to_thread(self._make_forks)
            if workers is None:
                workers = await asyncio.to_thread(self._workers_serve, wf)
            tally = _Tally(progress, sum(b.status in DONE for b in branches.values()))
            if workers:
                await asyncio.to_thread(self._queue, branches)
                if wait:
                    await self._watch(branches, tally, score, poll_interval)
            else:
                limit = asyncio.Semaphore(concurrency)
                await asyncio.gather(
                    *(
                        self._branch(name, run, wf, limit, tally, score)
                        for name, run in branches.items()
                    )
                )
            await asyncio.to_thread(self._score_ended, score)
        return await asyncio.to_thread(self.refresh)

    def _make_forks(self) -> dict[str, Run]:
        """Every variant's branch, forking those not made yet (labels written with each)
        unless the sweep was cancelled or a branch promoted (a decided sweep forks nothing)."""
        made = self.branches()
        for name, edits in self.variants.items():
            if made[name] is None and not _settled(self.refresh()):
                made[name] = self._fork(name, edits)
        return {name: run for name, run in made.items() if run is not None}

    def _fork(self, name: str, edits: dict[str, Any]) -> Run:
        options = dict(edits)
        marks = {k: options.pop(k) for k in ("break_before", "break_after") if k in options}
        if "checkpoints" in options:
            options["checkpoints"] = {
                node: AgentCheckpoint(**cp) for node, cp in options["checkpoints"].items()
            }
        child = self.db.fork(
            self.run_id,
            self.frame_no,
            labels={SWEEP_LABEL: self.id, VARIANT_LABEL: name},
            reason=f"sweep {self.id}, variant {name}",
            **options,
        )
        if marks:
            self.db.set_breakpoints(child.id, **marks)
        return child

    def _workers_serve(self, wf: Workflow) -> bool:
        if self.db.engine.dialect != "postgresql":
            return False
        return any(wf.name in w.workflows for w in self.db.workers() if w.state == "running")

    def _queue(self, branches: dict[str, Run]) -> None:
        """Queue for workers each branch nobody ran yet (a fork is ``interrupted`` until it
        is claimed): materialised, claimed and handed back to the queue in the ledger's
        ``run_released`` frame, so a worker claims it as any queued run."""
        for run in branches.values():
            if run.status != "interrupted" or self.cancelled:
                continue
            tt.materialize(self.db.store, run.id)
            fence = claim_unless_ended(self.db.store, run.id, owner_id())
            if fence is not None:
                release_run(self.db.store, fence)

    async def _watch(
        self,
        branches: dict[str, Run],
        tally: _Tally,
        score: Score | None,
        poll_interval: float,
    ) -> None:
        """Wait until every branch ended, advancing ``tally`` as they do."""
        waiting = {name for name, run in branches.items() if run.status not in DONE}
        while waiting:
            await asyncio.sleep(poll_interval)
            for name in sorted(waiting):
                run = await asyncio.to_thread(branches[name].refresh)
                if run.status in DONE:
                    waiting.discard(name)
                    await asyncio.to_thread(self._scored, name, run, score)
                    tally(1)

    async def _branch(
        self,
        name: str,
        run: Run,
        wf: Workflow,
        limit: asyncio.Semaphore,
        tally: _Tally,
        score: Score | None,
    ) -> None:
        """Run one branch here (unless it ended, or another live process runs it), so that
        its failure stops nothing else."""
        if run.status in DONE:
            return
        async with limit:
            sweep = await asyncio.to_thread(self.refresh)
            if sweep.cancelled or not self._held():
                return  # cancelled, or another driver took the sweep over (this one stalled)
            await asyncio.to_thread(run.refresh)  # as it is now, not when the sweep began
            await wait_for_live_owner(run)
            if run.status not in DONE:
                try:
                    run = await self.db.aresume(run.id, wf, accept_changed=self._accept_changed)
                except Exception:  # the branch's failure is its own: recorded, not raised
                    log.warning("sweep %s: branch %s raised", self.id, run.id, exc_info=True)
                    run = await asyncio.to_thread(run.refresh)
            await asyncio.to_thread(self._scored, name, run, score)
            tally(1)

    def _scored(self, name: str, run: Run, score: Score | None) -> None:
        if score is None or run.status not in ENDED or name in self.record.scores:
            return  # a paused branch is scored once it is continued to its end
        if (name, run.id) in self._tried:  # a score that raised is not asked twice a run
            return
        self._tried.add((name, run.id))
        try:
            value = score(run)
            self.db.store.sweeps.set_score(self.id, name, run.id, value)
        except Exception:  # the user's function (or a value not JSON): this branch unscored
            log.warning("sweep %s: scoring variant %r failed", self.id, name, exc_info=True)
            return
        self.record.scores[name] = value

    def _score_ended(self, score: Score | None) -> None:
        """Score every ended branch not scored yet (those a crash left unscored too)."""
        if score is None:
            return
        for name, run in self.branches().items():
            if run is not None:
                self._scored(name, run, score)

    def cancel(self) -> None:
        """Cancel the sweep: no branch starts from now on, and every branch that has not
        ended is cancelled (a running one after its agents' grace)."""
        self.db.store.sweeps.cancel(self.id)
        self.record = self.db.store.sweeps.get(self.id)
        for run in self.branches().values():
            if run is not None and run.status not in ENDED:
                self.db.cancel(run.id)

    def promote(self, variant: str, *, delete_others: bool = False) -> Promotion:
        """Keep ``variant``'s branch: record it with the sweep (``db.get_sweep(id).promoted``;
        promoting another one later replaces the choice), and with ``delete_others`` delete
        the other branches through ``db.gc(0, run_ids=...)`` (ended ones not forked from; the
        parent and the promoted branch are never deleted). A promoted sweep forks no branch
        any more.

        Returns:
            A :class:`~smithers_tt._sweep_promote.Promotion`: the branch kept, the branches
            deleted, and each other branch that stayed with why.

        Raises:
            InvalidArgument: no such variant, or its branch is not made (or was deleted).
        """
        return promote(self, variant, delete_others=delete_others)

    # --- outcomes ------------------------------------------------------------------------

    def outcomes(self, prices: Any = None) -> pd.DataFrame:
        """One row per variant: its branch, status, error, duration, frames, model calls,
        tokens and cost (by ``prices``), flattened output and score; see
        :func:`smithers_tt._sweep_outcomes.outcomes`."""
        from smithers_tt._sweep_outcomes import outcomes

        return outcomes(self, prices)

    def rows(self, prices: Any = None) -> list[dict[str, Any]]:
        """One dict per variant, in the order given (read afresh): ``variant``, ``run_id``
        (its branch; None before its fork is made), ``status``, ``error``, ``duration_s``
        (from the branch's first frame after the fork to its newest), ``frames`` (the
        branch's own frames after the fork), ``model_calls``, ``prompt_tokens``,
        ``completion_tokens`` and ``cost`` of the calls the branch made itself (not those it
        inherits from its parent up to the fork frame; ``cost`` by ``prices``, a
        :class:`~smithers_tt.PriceTable`, mapping or file, None when no call has a price),
        ``output``, ``score`` (None if unscored) and ``promoted`` (whether it is the branch
        promoted)."""
        self.refresh()
        table = PriceTable.of(prices)
        rows = []
        for name, run in self.branches().items():
            row: dict[str, Any] = dict.fromkeys(
                ("run_id", "error", "duration_s", "frames", *CALL_COLUMNS, "output"), None
            )
            row.update(variant=name, status=self._missing(name), score=self.scores.get(name),
                       promoted=name == self.promoted)  # fmt: skip
            if run is not None:
                frames = [f for f in run.frames() if f.frame_no > 0]
                row.update(run_id=run.id, status=run.status, error=run.error,
                           output=run.output, frames=len(frames))  # fmt: skip
                if frames:
                    row["duration_s"] = (frames[-1].created_at_ms - frames[0].created_at_ms) / 1000
                own = [c for c in run.model_call_records() if not c.inherited]
                calls = totals_of(own, table).run
                row.update(model_calls=calls.calls, prompt_tokens=calls.prompt_tokens,
                           completion_tokens=calls.completion_tokens, cost=calls.cost)  # fmt: skip
            rows.append(row)
        return rows

    def view(self, workflow: Workflow | None = None) -> Any:
        """The sweep view (``notebook`` extra): the branches side by side, a diff of any two,
        and any branch opened in its debugger; see :class:`smithers_tt.widgets.SweepView`."""
        require_extra("ipywidgets", "plotly", "anywidget", needed_for="the sweep view")
        from smithers_tt.widgets import SweepView  # optional dependency: import on use

        return SweepView(self.db, self.id, workflow=workflow)

    def plot(self) -> Any:
        """A plotly figure of the scores and durations per variant."""
        from smithers_tt._sweep_outcomes import plot

        return plot(self)

    def _repr_html_(self) -> str:
        return self.outcomes().to_html(escape=True)

    def __repr__(self) -> str:
        return f"<Sweep {self.id} of run {self.run_id} at frame {self.frame_no}: " + (
            f"{len(self.variants)} variants>"
        )


class _Tally:
    """Counts ended branches and reports each to ``progress``."""

    def __init__(self, progress: Callable[[int], None] | None, already: int) -> None:
        self.progress = progress
        if progress is not None and already:
            progress(already)

    def __call__(self, n: int) -> None:
        if self.progress is not None:
            self.progress(n)


def _settled(sweep: Sweep) -> bool:
    """Whether the sweep was decided (cancelled, or a branch promoted): it forks no more."""
    return sweep.cancelled or sweep.promoted is not None


class Sweeping:
    """``db.sweep``, ``db.get_sweep`` and ``db.sweeps`` (the sweeps part of
    :class:`~smithers_tt.database.Database`, in a module of its own)."""

    def sweep(
        self: SweepingDatabase,
        run_id: str,
        frame_no: int,
        variants: Mapping[str, Mapping[str, Any] | None],
        *,
        workflow: Workflow,
        sweep_id: str | None = None,
        progress: Callable[[int], None] | bool | None = True,
        **run_options: Any,
    ) -> Sweep:
        """Fork frame ``frame_no`` of a run once per variant, run the branches, return the
        :class:`Sweep` (``sweep.outcomes()`` compares them).

        Args:
            run_id: the run (its id or a unique prefix).
            frame_no: the frame every branch starts from.
            variants: name -> edits: ``db.fork``'s keywords (``input``, ``reset``,
                ``checkpoints``, ``dependents``, ``allow_new_format``) and ``break_before``
                / ``break_after`` (the branch pauses there).
            workflow: the run's workflow (the same definition).
            sweep_id: the id to record it under (default: a new one); calling again with
                the id of a sweep that a crash interrupted, and the same variants, makes
                only the missing forks and runs only the branches that did not end.
            progress: a callback ``progress(n)`` (``n`` more branches ended); ``True``
                (default) draws a bar in a notebook, nothing elsewhere.
            run_options: :meth:`Sweep.arun`'s (``concurrency``, ``score``, ``workers``,
                ``wait``).

        Raises:
            InvalidArgument: a variant is refused (nothing was forked), or ``sweep_id`` is
                a sweep with other variants.
            WorkflowChanged: ``workflow`` is not the run's definition (pass
                ``accept_changed=True`` to sweep under it); nothing was recorded.
            FrameNotFound: the run has no such frame.
        """
        run_id = self.resolve_run_id(run_id)
        checked = check_variants(variants)
        self.snapshot(run_id, frame_no)  # FrameNotFound before anything is recorded
        _check_definition(self, run_id, workflow, run_options.get("accept_changed", False))
        record = self.store.sweeps.create(
            sweep_id or new_sweep_id(), run_id, frame_no, workflow.name, checked
        )
        sweep = Sweep(self, record)
        with _bar(progress, len(checked)) as advance:
            return sweep.run(workflow, progress=advance, **run_options)

    def get_sweep(self: SweepingDatabase, sweep_id: str) -> Sweep:
        """The sweep ``sweep_id`` as stored (raises ``SweepNotFound``)."""
        return Sweep(self, self.store.sweeps.get(sweep_id))

    def sweeps(
        self: SweepingDatabase, run_id: str | None = None, *, limit: int = 100
    ) -> list[Sweep]:
        """The newest ``limit`` sweeps (of the run ``run_id`` when given), newest first."""
        of = None if run_id is None else self.resolve_run_id(run_id)
        return [
            Sweep(self, self.store.sweeps.get(i))
            for i in self.store.sweeps.list(run_id=of, limit=limit)
        ]


def _check_definition(db: SweepingDatabase, run_id: str, wf: Workflow, accept: bool) -> None:
    """Refuse (:class:`WorkflowChanged`) a workflow other than the run's definition unless
    ``accept``."""
    parent = db.store.get_run(run_id)
    if parent.workflow_hash not in (None, wf.signature()) and not accept:
        raise WorkflowChanged(
            f"run {run_id} was made with another definition of workflow {wf.name!r}; "
            "sweep with the same definition, or pass accept_changed=True",
            run_id=run_id,
        )


def new_sweep_id() -> str:
    """A new sweep id: creation time in hex then randomness (sorts by age, as run ids)."""
    return f"sw{now_ms():011x}{secrets.token_hex(4)}"


@contextmanager
def _bar(
    progress: Callable[[int], None] | bool | None, total: int
) -> Iterator[Callable[[int], None] | None]:
    """The progress callback asked for: ``True`` is a bar in a notebook (a Jupyter kernel
    with the ``notebook`` extra), none elsewhere."""
    if progress is not True:
        yield progress or None
        return
    shell = sys.modules.get("IPython")  # imported by a kernel; never imported here
    kernel = shell is not None and getattr(shell.get_ipython(), "kernel", None) is not None
    if not kernel or importlib.util.find_spec("ipywidgets") is None:
        yield None
        return
    from smithers_tt.widgets import notebook_progress  # optional dependency: import on use

    with notebook_progress("sweep", total=total, unit="branches") as bar:
        yield bar
