"""The inspector: what the selected frame makes visible.

Nodes with their state, last attempt and output; the checkpoint refs (codec, version,
purpose, size, short hash); the selected ref's payload as a collapsible JSON tree, cut to a
budget with a "show more" button for large payloads. All text is escaped.
"""

from __future__ import annotations

from typing import Any

import ipywidgets as W

from smithers_tt.errors import SmithersError
from smithers_tt.widgets._html import badge, esc, human_bytes, json_tree, wrap
from smithers_tt.widgets._model import DebuggerModel, describe_frame, node_label, ref_label

PAYLOAD_BUDGET = 400
"""JSON values of a payload rendered before "show more"."""

REFS_LISTED = 300
"""Most checkpoint refs listed at once (a long run has thousands)."""


def shown_refs(model: DebuggerModel, limit: int = REFS_LISTED) -> list[tuple[str, int, int, int]]:
    """The refs the inspector lists, in key order: all of them when there are few, else the
    selected ref, the refs of the selected frame's node, then each node's newest ref."""
    snap = model.snapshot
    if len(snap.refs) <= limit:
        return sorted(snap.refs)
    frame = model.frame()
    chosen: dict[tuple[str, int, int, int], None] = {}
    if model.ref_key in snap.refs:
        chosen[model.ref_key] = None
    if frame.node_id is not None:
        here = (frame.node_id, frame.iteration or 0)
        for key in sorted((k for k in snap.refs if k[:2] == here), reverse=True):
            if len(chosen) >= limit // 2:
                break
            chosen.setdefault(key, None)
    newest: dict[tuple[str, int], tuple[str, int, int, int]] = {}
    for key in snap.refs:
        if key[:2] not in newest or newest[key[:2]] < key:
            newest[key[:2]] = key
    for key in sorted(newest.values(), key=lambda k: snap.refs[k].created_at_ms, reverse=True):
        if len(chosen) >= limit:
            break
        chosen.setdefault(key, None)
    return sorted(chosen)


class Inspector:
    """Nodes, outputs and checkpoint refs at the selected frame, and one ref's payload."""

    def __init__(self, model: DebuggerModel) -> None:
        self.model = model
        self.budget = PAYLOAD_BUDGET
        self.summary = W.HTML()
        self.nodes = W.HTML()
        self.refs = W.Select(
            options=[], rows=6, description="checkpoints", layout=W.Layout(width="98%")
        )
        self.refs.add_class("stt-refs")
        self.refs.observe(self._picked, names="value")
        self.refs_note = W.HTML()
        self.payload = W.HTML()
        self.more = W.Button(description="show more", tooltip="render more of this payload")
        self.more.add_class("stt-show-more")
        self.more.on_click(lambda _: self.show_more())
        self.widget = W.VBox(
            [self.summary, self.nodes, self.refs, self.refs_note, self.payload, self.more],
            layout=W.Layout(width="50%", padding="0 8px 0 0"),
        )
        self._updating = False
        self._shown: str | None = None
        model.on("frame", self.update)
        model.on("run", self.update)
        model.on("frames", self.update)
        model.on("ref", self.update_payload)
        self.update()

    # --- frame ----------------------------------------------------------------------------

    def update(self) -> None:
        """Redraw nodes and the list of refs for the selected frame."""
        m = self.model
        snap = m.snapshot
        frame = m.frame()
        self.summary.value = wrap(
            f"<h4>Frame {frame.frame_no} · run {esc(m.run_id)}</h4>"
            f"<div>{esc(describe_frame(frame))}</div>"
            f"<div>run status at this frame: {badge(snap.status)}</div>"
        )
        self.nodes.value = wrap(self._nodes_html())
        keys = shown_refs(m)
        sizes = m.sizes(snap.refs[k] for k in keys)
        options = [(ref_label(snap.refs[k], sizes.get(snap.refs[k].content_hash)), k) for k in keys]
        hidden = len(snap.refs) - len(keys)
        self.refs_note.value = (
            wrap(
                f'<div class="stt-muted">{len(keys)} of {len(snap.refs)} checkpoint refs listed '
                "(the selected frame's node and the newest of each node first); select a "
                "frame of another node to list its refs</div>"
            )
            if hidden > 0
            else ""
        )
        self._updating = True
        try:
            self.refs.options = options
            self.refs.value = m.ref_key if m.ref_key in snap.refs else None
        finally:
            self._updating = False
        self.update_payload()

    def _nodes_html(self) -> str:
        snap = self.model.snapshot
        if not snap.nodes and not snap.attempts:
            return '<div class="stt-muted">no node has started at this frame</div>'
        attempts: dict[tuple[str, int], list[str]] = {}
        for (node_id, iteration, attempt), view in sorted(snap.attempts.items()):
            text = f"#{attempt} {badge(view.state)}"
            if view.error:
                short = view.error if len(view.error) <= 160 else view.error[:160] + "…"
                text += f' <span class="stt-error">{esc(short)}</span>'
            attempts.setdefault((node_id, iteration), []).append(text)
        keys = sorted(set(snap.nodes) | set(attempts))
        rows = []
        for key in keys[:200]:
            node = snap.nodes.get(key)
            output = ""
            if node is not None and node.output is not None:
                tree, _ = json_tree(node.output, budget=60, open_depth=0)
                output = tree
            rows.append(
                "<tr>"
                f"<td>{esc(node_label(*key))}</td>"
                f"<td>{badge(node.state if node else 'pending')}</td>"
                f"<td>{'' if node is None or node.last_attempt is None else node.last_attempt}</td>"
                f"<td>{'<br>'.join(attempts.get(key, []))}</td>"
                f"<td>{output}</td>"
                "</tr>"
            )
        more = ""
        if len(keys) > 200:
            more = f'<div class="stt-muted">… {len(keys) - 200} more nodes</div>'
        return (
            "<table><tr><th>node</th><th>state</th><th>last attempt</th><th>attempts</th>"
            f"<th>output</th></tr>{''.join(rows)}</table>{more}"
        )

    # --- ref --------------------------------------------------------------------------

    def _picked(self, change: dict[str, Any]) -> None:
        if not self._updating and change["new"] is not None:
            self.model.select_ref(change["new"])

    def update_payload(self) -> None:
        """Show the selected ref's payload (as a tree cut to the current budget)."""
        m = self.model
        ref = m.ref
        if self.refs.value != m.ref_key and (m.ref_key is None or m.ref_key in m.snapshot.refs):
            self._updating = True
            try:
                self.refs.value = m.ref_key
            finally:
                self._updating = False
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
            checkpoint = m.load(ref)
        except SmithersError as error:
            self.payload.value = wrap(
                f'<div class="stt-error">cannot read this checkpoint: {esc(error.message)}</div>'
            )
            self.more.layout.display = "none"
            return
        size = m.sizes([ref]).get(ref.content_hash)
        tree, truncated = json_tree(checkpoint.payload, budget=self.budget)
        origin = f"agent {esc(ref.agent_id)} · " if ref.agent_id else ""
        self.payload.value = wrap(
            f"<h4>{esc(node_label(ref.node_id, ref.iteration))} attempt #{ref.attempt} "
            f"seq {ref.sequence}</h4>"
            f'<div class="stt-muted">{origin}{esc(ref.purpose)} · {esc(ref.codec)} '
            f"v{ref.version} · {esc(human_bytes(size))} · sha256 {esc(ref.content_hash[:12])}"
            f"</div>{tree}"
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
