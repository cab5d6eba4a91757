"""The failure triage view: the store's failures grouped across runs, in the notebook.

``TriageView(db, workflows=[wf])`` (from ``smithers_tt.widgets``) lists the
groups of :func:`smithers_tt.triage.failures`, largest first: count, runs, kind, workflow,
node, error, the example's run and when last seen (runs are named by their shortest unique
prefix, whole on hover, in the rows and in the reports). Per group, **Open example** shows
the newest failure's run in a debugger in place, at the frame where it failed (**Back to
failures** returns to the list), and **Retry…** (for a group with failed or interrupted
runs, when its workflow was given) asks first, then resets the failing node of each of those
runs and resumes it, reporting each run's result as it comes, and reads the groups again.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import ipywidgets as W

from smithers_tt._prices import PriceTable
from smithers_tt.errors import SmithersError
from smithers_tt.store.for_widgets import attempt_span
from smithers_tt.triage import FailureGroup, Failures, RetryResult
from smithers_tt.widgets._html import CSS, badge, esc, run_ref, wrap
from smithers_tt.widgets._inplace import InPlace
from smithers_tt.widgets._rows import cells, header, line, stamp

MAX_GROUPS = 50
"""Groups listed; the rest are counted in a note (narrow with ``since`` / ``workflow``)."""

_COLUMNS = ("count", "runs", "kind", "workflow", "node", "example", "last seen")
_WIDTHS = ("3.5em", "3.5em", "5em", "auto", "auto", "7.5em", "7.5em")
_OPEN, _RETRY = "9.5em", "7em"


class TriageView(W.VBox):
    """Failure groups with Open example / Retry… per group (see the module's docstring).

    Args:
        db: a :class:`smithers_tt.Database`.
        workflows: the workflow definitions a retry resumes with and the debugger replays
            with (by name); a group of a workflow not given cannot be retried here.
        prices: what model calls cost in the debugger Open example shows (a
            :class:`~smithers_tt.PriceTable`, mapping or ``.json``/``.toml`` file), as
            ``db.debug(run, prices=...)``; a model it does not name shows no cost.
        options: what :func:`smithers_tt.triage.failures` takes (``since``, ``workflow``,
            ``stuck_after``, ``limit``).
    """

    def __init__(
        self, db: Any, workflows: Iterable[Any] = (), *, prices: Any = None, **options: Any
    ) -> None:
        self.db = db
        self.workflows = {wf.name: wf for wf in workflows}
        self.options = options
        self.failures: Failures | None = None
        self._short: dict[str, str] = {}
        self.title = W.HTML()
        self.refresh_button = W.Button(description="Refresh", tooltip="read the failures again")
        self.refresh_button.on_click(lambda _: self.refresh())
        self.rows = W.VBox()
        self.note = W.HTML()
        self.confirm_text = W.HTML()
        self.confirm_button = W.Button(description="Retry", button_style="primary")
        self.confirm_button.add_class("stt-confirm")
        self.cancel_button = W.Button(description="Cancel")
        self.confirm_button.on_click(lambda _: self.carry_out())
        self.cancel_button.on_click(lambda _: self.ask(None))
        self.confirm_box = W.VBox(
            [self.confirm_text, W.HBox([self.confirm_button, self.cancel_button])],
            layout=W.Layout(display="none"),
        )
        self.report = W.HTML()
        self.pending: FailureGroup | None = None
        self.list_box = W.VBox(
            [
                W.HBox([self.title, self.refresh_button], layout=W.Layout(align_items="center")),
                self.rows,
                self.note,
                self.confirm_box,
                self.report,
            ]
        )
        self.in_place = InPlace(db, self.list_box, "failures", self.refresh, PriceTable.of(prices))
        super().__init__(
            [W.HTML(CSS), self.in_place.widget],
            layout=W.Layout(width="100%", max_width="100%", overflow="hidden"),
        )
        self.add_class("stt-triage")
        self.refresh()

    # --- the list -------------------------------------------------------------------------

    def refresh(self) -> None:
        """Read the failures again and redraw the list."""
        try:
            self.failures = self.db.failures(**self.options)
        except SmithersError as error:
            self.note.value = wrap(f'<div class="stt-error">{esc(error.message)}</div>')
            return
        f = self.failures
        examples = [g.example.run_id for g in f.groups[:MAX_GROUPS] if g.example]
        self._short = self.db.store.short_run_ids(examples)
        total = sum(g.count for g in f)
        stuck = sum(g.count for g in f if g.kind == "stuck")
        self.title.value = wrap(
            f"<h4>Failures: {len(f)} group(s), {total} failure(s)"
            + (f", {stuck} stuck run(s)" if stuck else "")
            + "</h4>"
        )
        top = header([], cells(_COLUMNS, _WIDTHS, header=True), [_OPEN, _RETRY])
        self.rows.children = [
            top,
            *(self._row(n, g) for n, g in enumerate(f.groups[:MAX_GROUPS])),
        ]
        notes = []
        if len(f) > MAX_GROUPS:
            notes.append(f"… {len(f) - MAX_GROUPS} more group(s)")
        if f.truncated:
            notes.append("more failures than were read: narrow with since= or workflow=")
        if not len(f):
            notes.append("no failures: every attempt finished, and no run is stuck")
        self.note.value = wrap("".join(f'<div class="stt-muted">{esc(n)}</div>' for n in notes))

    def _row(self, number: int, g: FailureGroup) -> W.HBox:
        error = f"{g.error_class}: {g.message}" if g.message else g.error_class
        values = (
            str(g.count),
            str(len(g.run_ids)),
            esc(g.kind),
            esc(g.workflow),
            esc(g.node_id or "-"),
            self._run(g.example.run_id) if g.example else "-",
            stamp(g.last_ms),
        )
        open_button = W.Button(
            description="Open example",
            tooltip=f"open run {g.example.run_id if g.example else ''} in the debugger",
            layout=W.Layout(width=_OPEN),
        )
        open_button.on_click(lambda _, n=number: self.open_example(n))
        retry_button = W.Button(
            description=f"Retry {len(g.retryable)}…", layout=W.Layout(width=_RETRY)
        )
        why = self._why_not(g)
        retry_button.disabled = why is not None
        retry_button.tooltip = why or f"reset {g.node_id} of {len(g.retryable)} run(s), resume"
        retry_button.on_click(lambda _, n=number: self.ask(n))
        if not g.retryable:  # its runs finished or were cancelled since: no "Retry 0…"
            retry_button.layout.visibility = "hidden"  # its column stays, aligned
        what = f'<div class="stt-error" style="padding:0 4px">{esc(error)}</div>'
        table = cells(values, _WIDTHS)
        return line([], wrap(what) + table, [open_button, retry_button], "stt-triage-group")

    def _run(self, run_id: str) -> str:
        """A run as the view names it: its short id, whole on hover."""
        return run_ref(run_id, self._short.get(run_id, run_id))

    def _why_not(self, g: FailureGroup) -> str | None:
        if g.node_id is None:
            return "these runs failed outside a node: there is no step to retry"
        if not g.retryable:
            return "no run of this group is failed or interrupted now"
        if g.workflow not in self.workflows:
            return f"pass workflows=[...] with the workflow {g.workflow!r} to retry"
        return None

    # --- open an example ------------------------------------------------------------------

    def open_example(self, number: int) -> Any:
        """Show the group's newest failure in a debugger, at the frame where it happened
        (``in_place.back()``, the Back button, returns to the list read again)."""
        assert self.failures is not None
        g = self.failures[number]
        if g.example is None:
            return None
        ex = g.example
        frame = self._failure_frame(ex.run_id, g)
        return self.in_place.open(ex.run_id, self.workflows.get(g.workflow), frame)

    def _failure_frame(self, run_id: str, g: FailureGroup) -> int | None:
        """Where the example's attempt ended (a stuck one: where it started), found in the
        database (:func:`attempt_span`), not by reading the run's frames."""
        ex = g.example
        assert ex is not None
        if ex.node_id is None or ex.iteration is None or ex.attempt is None:
            return None
        span = attempt_span(self.db.engine, run_id, ex.node_id, ex.iteration, ex.attempt)
        started, finished = span
        return finished if finished is not None or ex.kind != "stuck" else started

    # --- retry a group --------------------------------------------------------------------

    def ask(self, number: int | None) -> None:
        """Ask before retrying group ``number`` (None: forget the question)."""
        if number is None or self.failures is None:
            self.pending = None
            self.confirm_box.layout.display = "none"
            return
        g = self.pending = self.failures[number]
        self.confirm_text.value = wrap(
            f"<div>Reset node <b>{esc(g.node_id)}</b> (and what needs it) of "
            f"{len(g.retryable)} run(s) of {esc(g.workflow)} and resume them here?</div>"
        )
        self.confirm_button.description = f"Retry {len(g.retryable)} run(s)"
        self.confirm_box.layout.display = None

    def carry_out(self) -> None:
        """Retry the group asked about, reporting each run as it ends."""
        g, f = self.pending, self.failures
        if g is None or f is None:
            return
        self.ask(None)
        lines: list[str] = []
        self._short.update(self.db.store.short_run_ids(g.retryable))

        def report(result: RetryResult) -> None:
            detail = f" ({esc(result.detail)})" if result.detail else ""
            lines.append(
                f"<div>run {self._run(result.run_id)} {esc(result.outcome)}: "
                f"{badge(result.status)}{detail}</div>"
            )
            self.report.value = wrap("".join(lines))

        self.report.value = wrap(f"<div>retrying {len(g.retryable)} run(s)…</div>")
        try:
            f.retry(g, self.workflows[g.workflow], on_result=report)
        except SmithersError as error:
            lines.append(f'<div class="stt-error">{esc(error.message)}</div>')
            self.report.value = wrap("".join(lines))
        self.refresh()
