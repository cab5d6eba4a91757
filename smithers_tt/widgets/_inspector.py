"""The inspector: what the selected frame makes visible.

Nodes with their state, last attempt and output; the checkpoint refs (codec, version,
purpose, size, short hash); the selected ref's payload as a collapsible JSON tree, cut to a
budget with a "show more" button for large payloads. All text is escaped.
"""

from __future__ import annotations

import operator
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import ipywidgets as W

from smithers_tt.errors import SmithersError
from smithers_tt.timetravel import AttemptView, NodeView
from smithers_tt.widgets._conversation import find_transcript, transcript_html
from smithers_tt.widgets._html import badge, esc, human_bytes, json_tree, run_ref, wrap
from smithers_tt.widgets._layers import in_task_order
from smithers_tt.widgets._model import DebuggerModel
from smithers_tt.widgets._timeline_data import MAX_ROWS
from smithers_tt.widgets._words import frame_time

PAYLOAD_BUDGET = 400
"""JSON values of a payload rendered before "show more"."""

NODE_ROWS = 200
"""Rows of the nodes table shown (the count of the others follows)."""


class Inspector:
    """Nodes, outputs and checkpoint refs at the selected frame, and one ref's payload.

    The refs are listed in key order, a page at a time, filtered by the search box; the
    selected ref follows the selected frame unless the person pins it (the pin button).
    A payload holding a chat transcript can be shown as messages ("conversation").
    """

    def __init__(self, model: DebuggerModel) -> None:
        self.model = model
        self.budget = PAYLOAD_BUDGET
        self.page: int | None = None  # None: the page of the selected ref
        self.summary = W.HTML()
        # a long loop's 200 rows scroll in place, the checkpoints and actions below stay near
        self.nodes = W.HTML(layout=W.Layout(max_height="28em", overflow="auto"))
        self.nodes.add_class("stt-nodes")
        self.search = W.Text(
            placeholder="search checkpoints (node, purpose, codec, hash)",
            continuous_update=True,
            layout=W.Layout(flex="1 1 160px", min_width="0", width="auto"),
        )
        self.search.add_class("stt-ref-search")
        self.search.observe(self._searched, names="value")
        self.prev_page = W.Button(description="◀", tooltip="previous page of checkpoints")
        self.next_page = W.Button(description="▶", tooltip="next page of checkpoints")
        for b in (self.prev_page, self.next_page):
            b.layout.width = "auto"  # the layout it has (a new one would leave that open)
        self.prev_page.on_click(lambda _: self.turn(-1))
        self.next_page.on_click(lambda _: self.turn(1))
        self.page_label = W.Label()
        self.refs = W.Select(options=[], rows=6, layout=W.Layout(width="100%"))
        self.refs.add_class("stt-refs")
        self.refs.observe(self._picked, names="value")
        self.pin = W.ToggleButton(
            value=False,
            description="pin",
            tooltip="keep showing this checkpoint while other frames are selected",
            layout=W.Layout(width="auto"),
        )
        self.pin.add_class("stt-pin-button")
        self.pin.observe(self._pinned, names="value")
        self.view = W.ToggleButtons(
            options=[("tree", "tree"), ("conversation", "conversation")],
            value="tree",
            style={"button_width": "auto"},
            tooltips=["the payload as a JSON tree", "the chat transcript in the payload"],
        )
        self.view.add_class("stt-payload-view")
        self.view.observe(lambda _: self.update_payload(), names="value")
        self.payload = W.HTML()
        self.payload.add_class("stt-payload")
        self.more = W.Button(description="show more", tooltip="render more of this payload")
        self.more.add_class("stt-show-more")
        self.more.on_click(lambda _: self.show_more())
        row = W.Layout(flex_flow="row wrap", align_items="center", width="100%")
        self.widget = W.VBox(
            [
                self.summary,
                self.nodes,
                W.HBox([self.search, self.prev_page, self.page_label, self.next_page], layout=row),
                self.refs,
                W.HBox([self.pin, self.view], layout=row),
                self.payload,
                self.more,
            ],
            layout=W.Layout(flex="1 1 300px", min_width="0", padding="0 8px 0 0"),
        )
        self.widget.add_class("stt-inspector")
        self._updating = False
        self._shown: str | None = None
        self._outputs: OrderedDict[int, tuple[Any, str]] = OrderedDict()
        self._rows: OrderedDict[tuple[str, int], tuple[Any, str, tuple[Any, ...], str]] = (
            OrderedDict()
        )
        self._drawn: tuple[Any, ...] | None = None
        model.on("frame", self._frame_changed)
        model.on("run", self._frame_changed)
        model.on("frames", self.update)
        model.on("ref", self.update_refs)
        self.update()

    # --- frame ----------------------------------------------------------------------------

    def _frame_changed(self) -> None:
        self.page = None
        self.update()

    def update(self) -> None:
        """Redraw the frame summary, nodes and the list of refs for the selected frame."""
        m = self.model
        frame = m.frame()
        self.summary.value = wrap(
            f"<h4>Frame {frame.frame_no} · run {run_ref(m.run_id, m.short_ids()[m.run_id])}</h4>"
            f"<div>{esc(m.frame_title(frame))}</div>"
            f"<div>{esc(frame_time(frame))} · run status at this frame: "
            f"{badge(m.run_status(at_frame=True))}</div>"
        )
        self.nodes.value = wrap(self._nodes_html())
        self._drawn = None
        self.update_refs()

    def update_refs(self) -> None:
        """Redraw the page of refs and the pin, then the payload."""
        m = self.model
        drawn = (m.run_id, m.frame_no, m.ref_key, m.ref_pinned, self.search.value, self.page)
        if drawn == self._drawn:
            return  # a frame selection announces "frame" then "ref": draw once
        self._drawn = drawn
        page = m.ref_page(self.search.value, self.page)
        sizes = m.sizes(page.refs)
        options = [
            (m.ref_label(ref, sizes.get(ref.content_hash)), key)
            for key, ref in zip(page.keys, page.refs, strict=True)
        ]
        self.page_label.value = (
            f"page {page.page + 1} of {page.pages} · {page.matched} of {page.total} checkpoints"
            if page.query.strip()
            else f"page {page.page + 1} of {page.pages} · {page.total} checkpoints"
        )
        self.prev_page.disabled = page.page == 0
        self.next_page.disabled = page.page >= page.pages - 1
        self._updating = True
        try:
            self.refs.options = options
            self.refs.value = m.ref_key if m.ref_key in page.keys else None
            self.pin.value = m.ref_pinned
            self.pin.description = "pinned (unpin)" if m.ref_pinned else "pin"
            self.pin.button_style = "warning" if m.ref_pinned else ""
        finally:
            self._updating = False
        self.update_payload()

    def turn(self, delta: int) -> None:
        """Show the next (1) or previous (-1) page of refs."""
        current = self.model.ref_page(self.search.value, self.page)
        self.page = current.page + delta
        self.update_refs()

    def _searched(self, change: dict[str, Any]) -> None:
        self.page = None
        self.update_refs()

    def _output_html(self, output: Any) -> str:
        """A node output's tree, kept per output object (outputs never change once made, and
        snapshots of nearby frames share them)."""
        found = self._outputs.get(id(output))
        if found is not None and found[0] is output:
            return found[1]
        tree, _ = json_tree(output, budget=60, open_depth=0)
        self._outputs[id(output)] = (output, tree)
        while len(self._outputs) > 2_000:
            self._outputs.popitem(last=False)
        return tree

    def _nodes_html(self) -> str:
        m = self.model
        table = m.node_table(NODE_ROWS)  # the rows shown only: the table costs what it shows
        if not table.total:
            return '<div class="stt-muted">no node has started at this frame</div>'
        attempts: dict[tuple[str, int], list[AttemptView]] = {}
        for (node_id, iteration, _), view in sorted(table.attempts.items()):
            attempts.setdefault((node_id, iteration), []).append(view)
        # in the timeline's order of rows (the graph's), not by name; a long loop's newest
        # turns (all it shows of it) the newest first
        cut = table.total > len(table.keys)
        keys = in_task_order(table.keys, m.node_ids, by_iteration=cut or table.total <= MAX_ROWS)
        if cut:
            keys.sort(key=lambda key: -key[1])  # stable: a turn's tasks stay in graph order
        rows = [self._node_row(key, table.nodes.get(key), attempts.get(key, ())) for key in keys]
        while len(self._rows) > 4 * NODE_ROWS:
            self._rows.popitem(last=False)
        more = ""
        if table.total > len(table.keys):
            more = (
                f'<div class="stt-muted">… and {table.total - len(table.keys)} older loop '
                "turns (each node's newest are shown)</div>"
            )
        return (
            "<table><tr><th>node</th><th>state</th><th>last attempt</th><th>attempts</th>"
            f"<th>output</th></tr>{''.join(rows)}</table>{more}"
        )

    def _node_row(
        self, key: tuple[str, int], node: NodeView | None, attempts: Sequence[AttemptView]
    ) -> str:
        """One row of the nodes table, kept while its views are the same objects (views are
        immutable, and the snapshots of a run share those of the rows a frame leaves as
        they were: most rows of one frame are drawn again as they are at the next)."""
        label = self.model.node_label(*key)
        kept = self._rows.get(key)
        if (
            kept is not None
            and kept[0] is node
            and kept[1] == label
            and len(kept[2]) == len(attempts)
            and all(map(operator.is_, kept[2], attempts))
        ):
            return kept[3]
        texts = []
        for view in attempts:
            text = f"#{view.attempt} {badge(view.state)}"
            if view.error:
                short = view.error if len(view.error) <= 160 else view.error[:160] + "…"
                text += f' <span class="stt-error">{esc(short)}</span>'
            texts.append(text)
        output = ""
        if node is not None and node.output is not None:
            output = self._output_html(node.output)
        row = (
            "<tr>"
            f"<td>{esc(label)}</td>"
            f"<td>{badge(node.state if node else 'pending')}</td>"
            f"<td>{'' if node is None or node.last_attempt is None else node.last_attempt}</td>"
            f"<td>{'<br>'.join(texts)}</td>"
            f"<td>{output}</td>"
            "</tr>"
        )
        self._rows[key] = (node, label, tuple(attempts), row)
        return row

    # --- ref --------------------------------------------------------------------------

    def _picked(self, change: dict[str, Any]) -> None:
        if not self._updating and change["new"] is not None:
            self.model.select_ref(change["new"])

    def _pinned(self, change: dict[str, Any]) -> None:
        if not self._updating:
            self.model.pin_ref(change["new"])

    def update_payload(self) -> None:
        """Show the selected ref's payload (as a tree cut to the current budget, or as a
        conversation), marked when it is pinned."""
        m = self.model
        ref = m.ref
        if m.ref_hidden:
            key = m.ref_key
            self.payload.value = wrap(
                f'<div><span class="stt-pin">pinned</span> '
                f"{esc(m.node_label(key[0], key[1]))} attempt #{key[2]} seq {key[3]} is not "
                f"visible at frame {m.frame_no}; unpin to see this frame's checkpoint</div>"
            )
            self.more.layout.display = "none"
            return
        if ref is None:
            self.payload.value = wrap(
                '<div class="stt-muted">no checkpoint selected (none is visible at this frame, '
                "or pick one above)</div>"
            )
            self.more.layout.display = "none"
            return
        if ref.content_hash != self._shown:
            self._shown, self.budget = ref.content_hash, PAYLOAD_BUDGET
        try:
            shown = m.view(ref)
        except SmithersError as error:
            self.payload.value = wrap(
                f'<div class="stt-error">cannot read this checkpoint: {esc(error.message)}</div>'
            )
            self.more.layout.display = "none"
            return
        size = m.sizes([ref]).get(ref.content_hash)
        messages = find_transcript(shown)
        self.view.layout.display = None if messages is not None else "none"
        truncated = False
        if messages is not None and self.view.value == "conversation":
            body = transcript_html(messages)
        else:
            body, truncated = json_tree(shown, budget=self.budget)
        origin = f"agent {esc(ref.agent_id)} · " if ref.agent_id else ""
        pin = ""
        if m.ref_pinned:
            pin = '<span class="stt-pin">pinned</span> '
            own = m.frame_ref_key()
            if own is not None and own != m.ref_key:
                pin_note = (
                    f"this frame published {esc(m.node_label(own[0], own[1]))} attempt "
                    f"#{own[2]} seq {own[3]}; unpin to see it"
                    if m.frame().kind == "checkpoint"
                    else f"this frame's checkpoint is {esc(m.node_label(own[0], own[1]))} "
                    f"attempt #{own[2]} seq {own[3]}; unpin to see it"
                )
                pin += f'<span class="stt-muted">{pin_note}</span>'
        self.payload.value = wrap(
            f"<div>{pin}</div>"
            f"<h4>{esc(m.node_label(ref.node_id, ref.iteration))} attempt #{ref.attempt} "
            f"seq {ref.sequence}</h4>"
            f'<div class="stt-muted">{origin}{esc(ref.purpose)} · {esc(ref.codec)} '
            f"v{ref.version} · {esc(human_bytes(size))} · sha256 {esc(ref.content_hash[:12])}"
            f"</div>{body}"
            + (
                f'<div class="stt-muted">payload cut after {self.budget} values; '
                "press show more</div>"
                if truncated
                else ""
            )
        )
        self.more.layout.display = None if truncated else "none"

    def show_more(self) -> None:
        """Render a larger part of the payload."""
        self.budget *= 4
        self.update_payload()
