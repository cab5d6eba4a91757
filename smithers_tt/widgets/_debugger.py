"""``Debugger(db, run_id)``: the whole notebook debugger in one widget."""

from __future__ import annotations

from typing import Any

import ipywidgets as W

from smithers_tt.errors import SmithersError
from smithers_tt.widgets._actions import Actions
from smithers_tt.widgets._bulk import one_read, paused_gc
from smithers_tt.widgets._calls import CallsView
from smithers_tt.widgets._close import close_all, held
from smithers_tt.widgets._diffview import DiffView
from smithers_tt.widgets._export import ExportBox
from smithers_tt.widgets._forktree import ForkTree
from smithers_tt.widgets._frametable import FrameTable
from smithers_tt.widgets._graph import GraphView
from smithers_tt.widgets._html import CSS, badge, esc, run_ref, wrap
from smithers_tt.widgets._inspector import Inspector
from smithers_tt.widgets._link import LinkView
from smithers_tt.widgets._live import LiveRefresh
from smithers_tt.widgets._model import DebuggerModel
from smithers_tt.widgets._pausebar import PauseBar
from smithers_tt.widgets._scrubber import Scrubber
from smithers_tt.widgets._theme import ThemeProbe, clean_theme
from smithers_tt.widgets._timeline import TimelineView


class Debugger(W.VBox):
    """Timeline, scrubber, inspector, diff, actions and fork tree of one run.

    Args:
        db: a :class:`smithers_tt.Database`.
        run_id: the run to show.
        frame: the frame to open at (default: the newest); one the run does not have is an
            ``InvalidArgument`` that says which frames it has.
        workflow: the run's workflow definition; Replay needs it (disabled otherwise), and
            Continue / Step execute a paused run here with it (without it, a worker does).
        live: follow the run while it executes (default True).
        interval: seconds between live polls.
        lens: what to call the run's frames and checkpoints, and what to diff, for a run an
            integration wrote (a :class:`~smithers_tt.widgets.FrameLens`, e.g.
            ``smithers_tt.integrations.langgraph_view.lens(saver)``); None: smithers_tt's terms.
        prices: what model calls cost (a :class:`~smithers_tt.PriceTable`, mapping or file);
            None: no table, so every call shows its tokens and no cost (the demo's made-up
            models are priced by ``smithers_tt.demo.DEMO_PRICES``). A model it does not name
            shows no cost.

    Everything happens through ``debugger.model`` (a :class:`DebuggerModel`), which the parts
    observe; ``debugger.timeline``, ``.scrubber``, ``.inspector``, ``.diff``, ``.actions``,
    ``.fork_tree``, ``.frame_table``, ``.graph`` (the workflow's tasks at the selected frame),
    ``.export``, ``.link`` (the code and ``smithers-tt serve`` address of the selected
    frame), ``.theme_probe``, ``.live`` and
    ``.open_related`` (the lens's related runs, such as a LangGraph thread's subgraphs),
    ``.calls`` (the selected frame's model calls, their totals in the header) and
    ``.pause_bar`` (the Paused banner, Continue / Step / Abort) are the parts; the breakpoint
    toggles are on the timeline's node rows (``debugger.model.breakpoints``).
    """

    def __init__(
        self,
        db: Any,
        run_id: str,
        workflow: Any = None,
        *,
        live: bool = True,
        interval: float = 1.0,
        lens: Any = None,
        frame: int | None = None,
        prices: Any = None,
        **kwargs: Any,
    ) -> None:
        self._prices = prices
        # the parts make tens of thousands of objects at once (figure points, rows): without
        # the collector walking them every few thousand, a long run opens in two thirds of
        # the time (measured); what they leave for it is collected at its next pass. The
        # parts' reads (about 30) share one transaction: one round trip each, not three.
        with one_read(db):
            with paused_gc():
                self._build(db, run_id, workflow, live, interval, lens, frame, **kwargs)
            if frame is not None:
                self.model.select_frame(frame)
        self.live.maybe_start()
        self.model.read_history_behind()  # a long run opened on its newest frame

    def _build(
        self,
        db: Any,
        run_id: str,
        workflow: Any,
        live: bool,
        interval: float,
        lens: Any,
        frame: int | None,
        **kwargs: Any,
    ) -> None:
        self.model = DebuggerModel(db, run_id, workflow, lens)
        if frame is not None:
            self.model.check_frame(frame)  # before a widget is made
        self.header = W.HTML(layout=W.Layout(flex="1 1 300px", min_width="0"))
        self.refresh_button = W.Button(
            description="Refresh", tooltip="read the run again from the database"
        )
        self.refresh_button.on_click(lambda _: self.refresh())
        self.open_related = W.Dropdown(
            description="open", layout=W.Layout(width="auto", max_width="100%")
        )
        self.open_related.observe(self._open_related, names="value")
        self.model.on("run", self.update_related)
        self.update_related()
        self.theme_probe = ThemeProbe()
        self.timeline = TimelineView(self.model)
        self.graph = GraphView(self.model, layout=W.Layout(flex="1 1 240px", overflow="auto"))
        self.theme_probe.observe(self._theme_reported, names="theme")
        self.scrubber = Scrubber(self.model)
        self.inspector = Inspector(self.model)
        self.diff = DiffView(self.model)
        self.actions = Actions(self.model)
        self.fork_tree = ForkTree(self.model)
        self.frame_table = FrameTable(self.model)
        self.export = ExportBox(self.model)
        self.link = LinkView(self.model)
        self.live = LiveRefresh(self.model, interval, on_change=self.update_header)
        self.live.enabled = live
        self.pause_bar = PauseBar(self.model, on_started=self.live.maybe_start)
        self.calls = CallsView(self.model, self._prices, on_change=self.update_header)
        for event in ("run", "frames", "tree"):
            self.model.on(event, self.update_header)
        self.update_header()
        wrapping = {"flex_flow": "row wrap", "width": "100%", "align_items": "flex-start"}
        # the graph beside the timeline when both fit, under it when not (set in place: a
        # replaced layout would stay open)
        box = self.timeline.widget.layout
        box.flex, box.min_width, box.width = "3 1 600px", "0", "auto"
        super().__init__(
            [
                W.HTML(CSS),
                self.theme_probe,
                W.HBox(
                    [self.header, self.open_related, self.timeline.time_axis, self.refresh_button],
                    layout=W.Layout(**{**wrapping, "align_items": "center"}),
                ),
                self.link,
                self.pause_bar.widget,
                W.HBox([self.timeline.widget, self.graph], layout=W.Layout(**wrapping)),
                self.scrubber.widget,
                self.frame_table.widget,
                self.calls.widget,
                W.HBox([self.inspector.widget, self.diff.widget], layout=W.Layout(**wrapping)),
                W.HBox([self.actions.widget, self.fork_tree.widget], layout=W.Layout(**wrapping)),
                self.export.widget,
            ],
            layout=W.Layout(width="100%", max_width="100%", overflow="hidden"),
            **kwargs,
        )
        self.add_class("stt-debugger")

    def _theme_reported(self, change: dict[str, Any]) -> None:
        """A view reported the theme: colour the figure for it, and send the selected-frame
        line again (a view drawn from state older than a selection made before display
        missed the message that moved it)."""
        self.timeline.set_theme(clean_theme(change["new"]))
        self.timeline.resend_selection()

    def update_header(self) -> None:
        """Show the run's id, workflow, status, frames and lineage."""
        m = self.model
        r = m.record
        shown = m.short_ids()
        lineage = ""
        if r.parent_run_id:
            parent = run_ref(r.parent_run_id, shown.get(r.parent_run_id, r.parent_run_id))
            lineage = f" · fork of {parent} @ frame {r.parent_frame_no}"
            gap = m.fork_gap(m.run_id)
            if gap is not None:
                lineage += (
                    f' <span class="stt-error">(the parent now ends at frame {gap[1]}: it was '
                    f"rewound past this fork's frame {gap[0]})</span>"
                )
        children = sum(1 for e in m.tree if e.parent_run_id == m.run_id)
        if children:
            lineage += f" · {children} fork(s)"
        live = " · <b>live</b>" if self.live.running else ""
        run = run_ref(r.run_id, shown.get(r.run_id, r.run_id))
        self.header.value = wrap(
            f"<h4>Run {run} · workflow {esc(r.workflow)} · {badge(m.run_status())} · "
            f"frames 0 to {m.last_frame}{lineage}{live}</h4>{self.calls.header_html()}"
        )

    def update_related(self) -> None:
        """Offer the runs the lens relates to this one (hidden when there are none)."""
        related = self.model.related()
        self._relating = True
        try:
            self.open_related.options = [("this run", None), *related]
            self.open_related.value = None
        finally:
            self._relating = False
        self.open_related.layout.display = None if related else "none"

    def _open_related(self, change: dict[str, Any]) -> None:
        if not self._relating and change["new"] is not None:
            self.model.switch_run(change["new"])

    def refresh(self) -> None:
        """Read the run again now."""
        try:
            self.model.refresh()
        except SmithersError as error:
            self.model.message = None
            self.header.value += wrap(f'<div class="stt-error">{esc(error.message)}</div>')
        self.update_header()
        self.live.maybe_start()

    def select_frame(self, frame_no: int) -> None:
        """Select a frame (as a click on the timeline or the slider would)."""
        self.model.select_frame(frame_no)

    def close(self) -> None:
        """Stop live refresh and close the debugger and every widget it made (its parts,
        their layouts and styles, and the figures the timeline keeps open for the page)."""
        live = getattr(self, "live", None)  # None when __init__ failed half-way
        if live is not None:
            live.stop()
        model = getattr(self, "model", None)
        if model is not None:
            model.drop_caches()
        for part in (getattr(self, "timeline", None), getattr(self, "actions", None)):
            if part is not None:  # what they made that the layout may not hold
                part.close()
        close_all(held(self))
        super().close()
