"""The run browser: the store's runs, newest first, a page at a time, to find one and open it.

``db.browse(workflows=[wf])`` (or ``RunBrowser(db)``) shows a table of runs read a page at a
time in the database (:func:`smithers_tt.store.run_listing`: it opens at once on a store of
100,000 runs): id (shortened, whole on hover), workflow, status, labels, start, duration,
frames, forks and error, filtered by status, workflow, a label (``case=retry``), start time
(the last hour, day or week, or "between…" two moments: from, until) and text in inputs,
outputs and errors.
**Open** shows that run's debugger in place; **Back to runs** returns to the list with its
filters and page. Tick runs to act on them together, each action asked first and reported
run by run: **Cancel** (runs not ended yet), **Resume** (interrupted runs of a workflow
given in ``workflows``, executed here one after another), **Delete** (by retention's rules,
``db.gc(0, run_ids=...)``: ended runs go, with their history and the content nothing else
reaches; a run with forks stays while they do) and **Export** (their histories, as JSON
lines, to one new file: :func:`~smithers_tt.widgets._export.export_runs`).
"""

from __future__ import annotations

import datetime
import threading
from collections.abc import Callable, Iterable
from typing import Any

import ipywidgets as W

from smithers_tt._labels import parse_label
from smithers_tt._prices import PriceTable
from smithers_tt.errors import SmithersError
from smithers_tt.store import ENDED, RunRecord, now_ms
from smithers_tt.store.for_widgets import RunFilter, RunListing, run_listing, run_workflows
from smithers_tt.widgets._export import export_runs
from smithers_tt.widgets._html import CSS, badge, esc, read_only_note, run_ref, wrap
from smithers_tt.widgets._inplace import InPlace
from smithers_tt.widgets._rows import cells, header, line, stamp, titled
from smithers_tt.widgets._state import read_only_reason

PAGE = 25
"""Runs per page."""
ANY = ""
"""The value of a dropdown's "any" choice (not None: a Dropdown whose value is None shows an
empty box, as if nothing were chosen, while the table shows every run)."""

BETWEEN = "between…"
"""The "started" choice that shows the from / until pickers (a time range of its own)."""
SINCE = {
    "any time": None,
    "last hour": 3600,
    "last 24 hours": 86_400,
    "last 7 days": 604_800,
    BETWEEN: None,
}
STATUSES = ("queued", "running", "paused", "finished", "failed", "cancelled", "interrupted")
NAMED = 10
"""Ticked runs a question names (the rest are counted)."""
RESUMABLE = frozenset({"interrupted"})
"""What Resume runs: a failed run's failed node stays failed on a resume (retry its step from
the triage view, ``TriageView``, which resets it first)."""
_WIDTHS = ("7.5em", "7em", "6em", "8em", "7em", "3.5em", "4.5em", "3.5em", "auto")
_HEAD = ("run", "workflow", "status", "labels", "started", "took", "frames", "forks", "error")
_TICK, _OPEN = "2em", "5em"
_VERBS = {"cancel": "Cancel", "resume": "Resume", "delete": "Delete", "export": "Export"}
_ASK = {
    "cancel": "Cancel {n} run(s)? Each is reported.",
    "resume": "Resume here {n} run(s)? Each is reported.",
    "delete": "Delete {n} run(s) with their history? Retention's rules hold: only finished, "
    "failed and cancelled runs go, a run stays while runs forked from it do, and the content "
    "nothing else reaches is collected. This cannot be undone.",
    "export": "Export the history of {n} run(s), as JSON lines, to a new file:",
}
_CONFIRM = {"cancel": "Cancel", "resume": "Resume here", "delete": "Delete", "export": "Export"}


def _took(run: RunRecord) -> str:
    if run.status not in ENDED:
        return "…"
    seconds = max(0, run.updated_at_ms - run.created_at_ms) / 1000
    return f"{seconds:.1f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


class RunBrowser(W.VBox):
    """The run browser (see the module's docstring).

    Args:
        db: a :class:`smithers_tt.Database`.
        workflows: workflow definitions, by name: what Resume runs with and what the debugger
            replays with.
        prices: what model calls cost in the debugger a row opens (a
            :class:`~smithers_tt.PriceTable`, mapping or ``.json``/``.toml`` file), as
            ``db.debug(run, prices=...)``; a model it does not name shows no cost.
        status, workflow, label, since, text: the filters to start with (``label`` as
            ``key=value``; ``since`` one of :data:`SINCE`'s keys).
        started_from, started_until: a time range of starts (timezone-aware datetimes, either
            may be None: open on that side); giving one chooses "between…".
    """

    def __init__(
        self,
        db: Any,
        workflows: Iterable[Any] = (),
        *,
        prices: Any = None,
        status: str | None = None,
        workflow: str | None = None,
        label: str = "",
        since: str = "any time",
        text: str = "",
        started_from: datetime.datetime | None = None,
        started_until: datetime.datetime | None = None,
    ) -> None:
        self.db = db
        self.workflows = {wf.name: wf for wf in workflows}
        self.listing: RunListing | None = None
        self.cursors: list[str | None] = [None]
        """The cursor of each page up to the one shown (the first page's is None)."""
        self.selected: set[str] = set()
        self._short: dict[str, str] = {}
        self._drawing = threading.RLock()
        self._asked = 0
        """How many pages were asked for: only the newest request's page is drawn."""
        self.status = W.Dropdown(
            description="status", options=[("any", ANY), *[(s, s) for s in STATUSES]]
        )
        self.workflow = W.Dropdown(description="workflow")
        self.label = W.Text(description="label", placeholder="key=value", continuous_update=False)
        self.since = W.Dropdown(description="started", options=list(SINCE))
        self.started_from = W.DatetimePicker(description="from", value=started_from)
        self.started_until = W.DatetimePicker(description="until", value=started_until)
        if started_from is not None or started_until is not None:
            since = BETWEEN
        self.text = W.Text(
            description="text", placeholder="in input, output or error", continuous_update=False
        )
        names = run_workflows(db.engine)
        self.workflow.options = [("any", ANY), *[(w, w) for w in names]]
        self.status.value, self.since.value, self.text.value = status or ANY, since, text
        self.label.value = label
        self.workflow.value = workflow if workflow in names else ANY
        filters = (self.status, self.workflow, self.label, self.since, self.text)
        for control in (*filters, self.started_from, self.started_until):
            control.layout = W.Layout(width="auto", min_width="0")
            control.observe(lambda _: self.first_page(), names="value")
        self.since.observe(lambda _: self._show_range(), names="value")
        self._show_range()
        self.header = header([_TICK], cells(_HEAD, _WIDTHS, header=True), [_OPEN])
        self.rows = W.VBox()
        self.note = W.HTML()
        self.newer = W.Button(description="← Newer", layout=W.Layout(width="auto"))
        self.older = W.Button(description="Older →", layout=W.Layout(width="auto"))
        self.newer.on_click(lambda _: self.turn(-1))
        self.older.on_click(lambda _: self.turn(1))
        self.page_label = W.HTML()
        self.action_buttons = {
            action: W.Button(description=f"{verb}…", layout=W.Layout(width="auto"))
            for action, verb in _VERBS.items()
        }
        for action, button in self.action_buttons.items():
            button.add_class(f"stt-bulk-{action}")
            button.on_click(lambda _, a=action: self.ask(a))
        self.cancel_runs = self.action_buttons["cancel"]
        self.resume_runs = self.action_buttons["resume"]
        self.delete_runs = self.action_buttons["delete"]
        self.export_runs = self.action_buttons["export"]
        self.confirm_text = W.HTML()
        self.export_path = W.Text(
            description="to file",
            value="runs-export.jsonl",
            layout=W.Layout(width="auto", min_width="0", display="none"),
        )
        self.confirm_button = W.Button(description="Confirm", button_style="danger")
        self.confirm_button.add_class("stt-confirm")
        self.dismiss = W.Button(description="Keep them")
        self.confirm_button.on_click(lambda _: self.carry_out())
        self.dismiss.on_click(lambda _: self.ask(None))
        self.confirm_box = W.VBox(
            [self.confirm_text, self.export_path, W.HBox([self.confirm_button, self.dismiss])],
            layout=W.Layout(display="none"),
        )
        self.pending: tuple[str, list[str]] | None = None
        self.read_only = read_only_reason(db)
        """Why Cancel and Resume are off (the store is opened read-only), or None."""
        self.report = W.HTML(read_only_note(self.read_only) if self.read_only else "")
        wrapping = W.Layout(flex_flow="row wrap", align_items="center", width="100%")
        self.list_box = W.VBox(
            [
                W.HTML(wrap("<h4>Runs</h4>")),
                W.HBox([*filters, self.started_from, self.started_until], layout=wrapping),
                self.header,
                self.rows,
                self.note,
                W.HBox(
                    [self.newer, self.page_label, self.older, *self.action_buttons.values()],
                    layout=wrapping,
                ),
                self.confirm_box,
                self.report,
            ]
        )
        self.in_place = InPlace(db, self.list_box, "runs", self.show_page, PriceTable.of(prices))
        super().__init__(
            [W.HTML(CSS), self.in_place.widget],
            layout=W.Layout(width="100%", max_width="100%", overflow="hidden"),
        )
        self.add_class("stt-browser")
        self.first_page()

    # --- the list -------------------------------------------------------------------------

    @property
    def filter(self) -> RunFilter:
        """The filters as set now."""
        seconds = SINCE[self.since.value]
        label = self.label.value.strip()
        since = until = None
        if self.since.value == BETWEEN:
            since, until = _ms(self.started_from.value), _ms(self.started_until.value)
        elif seconds is not None:
            since = now_ms() - seconds * 1000
        return RunFilter(
            statuses=(self.status.value,) if self.status.value else (),
            workflow=self.workflow.value or None,
            labels=dict([parse_label(label)]) if label else {},
            since_ms=since,
            until_ms=until,
            text=self.text.value.strip() or None,
        )

    def _show_range(self) -> None:
        """Show the from / until pickers only while "between…" is chosen."""
        shown = "" if self.since.value == BETWEEN else "none"
        self.started_from.layout.display = self.started_until.layout.display = shown

    def first_page(self) -> None:
        """Show the newest runs that match the filters."""
        with self._drawing:
            self.cursors = [None]
        self.show_page()

    def turn(self, delta: int) -> None:
        """Show the older (1) or newer (-1) page."""
        with self._drawing:
            if delta > 0 and self.listing is not None and self.listing.older is not None:
                self.cursors.append(self.listing.older)
            elif delta < 0 and len(self.cursors) > 1:
                self.cursors.pop()
        self.show_page()

    def show_page(self) -> None:
        """Read the page shown again and draw it, unless a newer request to show a page came
        meanwhile (then that one draws: the table always shows the newest filters' runs).

        The kernel may handle two widgets' messages at once, on two threads (ipykernel 7
        does: seen with a label cleared and a status picked at once), so a page read for the
        older filters could end last and be drawn over the newer one's. Each request takes a
        number; only the newest request's read is drawn, and rows, page counter, buttons and
        note are drawn together, under one lock."""
        with self._drawing:
            self._asked += 1
            mine, page, before = self._asked, len(self.cursors), self.cursors[-1]
        try:
            listing = run_listing(self.db.engine, self.filter, before=before, limit=PAGE)
            short = self.db.store.short_run_ids([run.run_id for run in listing.runs])
        except SmithersError as error:  # a filter being typed (a label without "="):
            with self._drawing:  # said, and the page shown stays
                if mine == self._asked:
                    self.note.value = wrap(f'<div class="stt-error">{esc(error.message)}</div>')
            return
        with self._drawing:
            if mine == self._asked:
                self._draw(listing, short, page)

    def _draw(self, listing: RunListing, short: dict[str, str], page: int) -> None:
        """Draw ``listing`` as page ``page``: rows, page counter, buttons and note together."""
        self.listing, self._short, runs = listing, short, listing.runs
        self.rows.children = [self._row(run, listing) for run in runs]
        self.page_label.value = wrap(f"page {page}") if runs else ""
        self.newer.disabled = page == 1
        self.older.disabled = listing.older is None
        self.note.value = "" if runs else wrap('<div class="stt-muted">no run matches</div>')
        self._update_actions()

    def _row(self, run: RunRecord, listing: RunListing) -> W.HBox:
        tick = W.Checkbox(value=run.run_id in self.selected, indent=False)
        tick.layout = W.Layout(width=_TICK)
        tick.observe(lambda c, r=run.run_id: self._tick(r, c["new"]), names="value")
        error = (run.error or "").splitlines()[0] if run.error else ""
        values = (
            run_ref(run.run_id, self._short.get(run.run_id, run.run_id)),
            esc(run.workflow),
            badge(run.status),
            titled(" ".join(f"{k}={v}" for k, v in run.labels.items())),
            stamp(run.created_at_ms),
            esc(_took(run)),
            str(run.clock + 1),
            str(listing.forks.get(run.run_id, 0)),
            titled(error),
        )
        open_button = W.Button(description="Open", tooltip=f"open run {run.run_id} here")
        open_button.layout = W.Layout(width=_OPEN)
        open_button.on_click(lambda _, r=run: self.open_run(r.run_id))
        return line([tick], cells(values, _WIDTHS), [open_button], "stt-browser-run")

    def open_run(self, run_id: str) -> Any:
        """Show ``run_id``'s debugger in place of the list (Back returns to it)."""
        workflow = self.db.get_run(run_id).record.workflow
        return self.in_place.open(run_id, self.workflows.get(workflow))

    # --- acting on ticked runs ------------------------------------------------------------

    def _tick(self, run_id: str, on: bool) -> None:
        (self.selected.add if on else self.selected.discard)(run_id)
        self._update_actions()

    def _update_actions(self) -> None:
        n = len(self.selected)
        for action, button in self.action_buttons.items():
            button.disabled = n == 0 or bool(self.read_only)
            if self.read_only:
                button.tooltip = self.read_only
            button.description = f"{_VERBS[action]} {n}…" if n else f"{_VERBS[action]}…"

    def ask(self, action: str | None) -> None:
        """Ask before ``action`` (``cancel``, ``resume``, ``delete``, ``export``) on the ticked
        runs (None: forget the question). A read-only store refuses every action."""
        if action is not None and self.read_only:
            self.report.value = read_only_note(self.read_only)
            action = None
        if action is None or not self.selected:
            self.pending = None
            self.confirm_box.layout.display = "none"
            self.confirm_text.value = ""  # a closed question names no runs
            return
        runs = sorted(self.selected, reverse=True)
        self.pending = (action, runs)
        question = esc(_ASK[action].format(n=len(runs)))
        self.confirm_text.value = wrap(f"<div>{question}</div>{self._naming(runs)}")
        self.export_path.layout.display = None if action == "export" else "none"
        self.confirm_button.description = f"{_CONFIRM[action]} {len(runs)} run(s)"
        self.confirm_button.button_style = "primary" if action == "export" else "danger"
        self.confirm_box.layout.display = None

    def _naming(self, runs: list[str]) -> str:
        """The ticked runs a question is about, by short id (the first :data:`NAMED`), and how
        many of them the rows shown now do not include (ticked on another page, or before a
        filter hid them): a person confirms what they can see."""
        shown = self.db.store.short_run_ids(runs[:NAMED])
        names = ", ".join(run_ref(r, shown.get(r, r)) for r in runs[:NAMED])
        more = f" and {len(runs) - NAMED} more" if len(runs) > NAMED else ""
        on_page = {run.run_id for run in self.listing.runs} if self.listing else set()
        hidden = sum(r not in on_page for r in runs)
        away = f" ({hidden} of them not shown with these filters and page)" if hidden else ""
        return f'<div class="stt-muted">runs: {names}{more}{away}</div>'

    def carry_out(self) -> None:
        """Do the action asked about to each run, reporting each, then read the page again."""
        if self.pending is None:
            return
        action, runs = self.pending
        self.ask(None)
        shown = self.db.store.short_run_ids(runs)  # before a delete: the ids are read here
        lines: list[str] = []

        def report(run_id: str, result: str) -> None:
            lines.append(f"<div>run {run_ref(run_id, shown.get(run_id, run_id))}: {result}</div>")
            self.report.value = wrap("".join(lines))

        if action == "delete":
            self._delete(runs, report)
        elif action == "export":
            self._export(runs, report, lines)
        else:
            self._act_on(action, runs, report)
        self.selected.clear()
        self.show_page()

    def _delete(self, runs: list[str], report: Callable[[str, str], None]) -> None:
        try:
            done = self.db.gc(0, run_ids=runs)
        except SmithersError as error:
            self.report.value = wrap(f'<div class="stt-error">{esc(error.message)}</div>')
            return
        deleted = set(done.deleted)
        for run_id in runs:
            if run_id in deleted:
                report(run_id, "deleted")
            else:
                why = done.kept.get(run_id, "it is not in the store any more")
                report(run_id, f'<span class="stt-muted">kept: {esc(why)}</span>')

    def _export(
        self, runs: list[str], report: Callable[[str, str], None], lines: list[str]
    ) -> None:
        path = self.export_path.value.strip()

        def result(run_id: str, found: int | SmithersError) -> None:
            if isinstance(found, SmithersError):
                report(run_id, f'<span class="stt-error">left out: {esc(found.message)}</span>')
            else:
                report(run_id, f"{found} line(s)")

        try:
            written = export_runs(self.db, runs, path, result)
        except (SmithersError, OSError) as error:
            why = error.message if isinstance(error, SmithersError) else str(error)
            lines.append(f'<div class="stt-error">export failed: {esc(why)}</div>')
        else:
            lines.append(f'<div class="stt-ok">wrote {written} lines to {esc(path)}</div>')
        self.report.value = wrap("".join(lines))

    def _act_on(self, action: str, runs: list[str], report: Callable[[str, str], None]) -> None:
        """Cancel or resume each run, the runs' rows read together first (one read, not one
        per run), reporting each: a resume as it ends; the cancels once the cancelled runs'
        statuses were read again together."""
        try:
            found = self.db.store.get_runs(runs)
        except SmithersError as error:
            self.report.value = wrap(f'<div class="stt-error">{esc(error.message)}</div>')
            return
        said: dict[str, str | None] = {}
        for run_id in runs:
            run = found.get(run_id)
            said[run_id] = (
                '<span class="stt-muted">skipped: it is not in the store any more</span>'
                if run is None
                else self._act(action, run)
            )
            if action != "cancel":
                report(run_id, said[run_id] or "")
        if action == "cancel":
            now = self.db.store.get_runs([r for r, result in said.items() if result is None])
            for run_id, result in said.items():
                status = now[run_id].status if run_id in now else "deleted"
                report(run_id, result or "cancel requested; now " + badge(status))

    def _act(self, action: str, run: RunRecord) -> str | None:
        """What ``action`` did to ``run`` (None: a cancel was requested; its status is read
        with the others')."""
        try:
            if action == "cancel":
                if run.status in ENDED:
                    return f"skipped: it is {esc(run.status)}"
                self.db.cancel(run.run_id)
                return None
            wf = self.workflows.get(run.workflow)
            if wf is None:
                return f"skipped: pass workflows=[...] with the workflow {esc(run.workflow)}"
            if run.status == "failed":
                return "skipped: it failed; retry its failed step from TriageView (the failures)"
            if run.status not in RESUMABLE:
                return f"skipped: it is {esc(run.status)}"
            return "resumed; now " + badge(self.db.resume(run.run_id, wf).status)
        except SmithersError as error:
            return f'<span class="stt-error">{esc(error.message)}</span>'


def _ms(moment: datetime.datetime | None) -> int | None:
    """Milliseconds since the epoch of a picked moment (None: open on that side); a naive
    one is taken as the kernel's local time."""
    return None if moment is None else round(moment.timestamp() * 1000)
