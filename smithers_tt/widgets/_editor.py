"""The editor of the checkpoint a fork starts from: fields, raw JSON and a live preview.

The raw JSON text (``editor``) is what the fork uses. For an object payload, ``fields``
shows one box per top-level key (a one-line box for a scalar, a larger one for a nested
value, each holding that value's JSON); editing a field rewrites the raw text and editing the
raw text refills the fields. Under them, every change is validated at once (JSON, strict
JSON, the format the agent declares) and previewed as a before/after diff; nothing is
written before Fork or Replay is confirmed.
"""

from __future__ import annotations

import json
from typing import Any

import ipywidgets as W

from smithers_tt.checkpoint import read_json
from smithers_tt.errors import InvalidArgument
from smithers_tt.widgets._close import show_only
from smithers_tt.widgets._diffview import render_diff
from smithers_tt.widgets._html import esc, wrap
from smithers_tt.widgets._model import DebuggerModel
from smithers_tt.widgets._records import DiffResult

FIELDS_AT_MOST = 40
"""An object payload with more keys than this is edited as raw JSON only."""


def _dump(value: Any, indent: int | None = 2) -> str:
    return json.dumps(value, indent=indent, ensure_ascii=False)


class CheckpointEditor:
    """Field boxes, the raw JSON text and the preview of one node's edited checkpoint."""

    def __init__(self, model: DebuggerModel) -> None:
        self.model = model
        self.node: str | None = None
        self.editor = W.Textarea(
            value="",
            placeholder="the payload of the node's newest checkpoint, as JSON",
            description="payload",
            layout=W.Layout(width="100%", height="160px"),
        )
        self.editor.add_class("stt-editor")
        self.editor.observe(self._raw_changed, names="value")
        self.fields = W.VBox(layout=W.Layout(width="100%"))
        self.fields.add_class("stt-fields")
        self.preview = W.HTML()
        self.preview.add_class("stt-edit-preview")
        self.widget = W.VBox(
            [self.fields, self.editor, self.preview],
            layout=W.Layout(width="100%", min_width="0", display="none"),
        )
        self._boxes: dict[str, W.Textarea | W.Text] = {}
        self._syncing = False

    @property
    def value(self) -> str:
        """The raw JSON text the fork uses."""
        return self.editor.value

    def open(self, node: str | None, text: str) -> None:
        """Edit ``node``'s checkpoint starting from ``text`` (None hides the editor)."""
        self.node = node
        self.widget.layout.display = "none" if node is None else None
        self._syncing = True
        try:
            self.editor.value = text
        finally:
            self._syncing = False
        self._build_fields()
        self.update_preview()

    def _build_fields(self) -> None:
        try:
            text = self.editor.value
            payload = read_json(text, "the checkpoint") if text.strip() else None
        except InvalidArgument:
            return  # keep the fields as they are while the raw text is broken
        if not isinstance(payload, dict) or len(payload) > FIELDS_AT_MOST:
            self._boxes = {}
            show_only(self.fields, ())
            return
        if set(payload) == set(self._boxes):
            self._fill(payload)
            return
        boxes: dict[str, W.Textarea | W.Text] = {}
        rows = []
        for key, value in payload.items():
            nested = isinstance(value, dict | list) or (isinstance(value, str) and len(value) > 60)
            box: W.Textarea | W.Text = (
                W.Textarea(layout=W.Layout(flex="1 1 200px", min_width="0", height="64px"))
                if nested
                else W.Text(layout=W.Layout(flex="1 1 200px", min_width="0", width="auto"))
            )
            box.add_class("stt-field")
            box.observe(lambda change, key=key: self._field_changed(key, change), names="value")
            boxes[key] = box
            label = W.HTML(
                wrap(f'<span class="stt-key">{esc(key)}</span>'),
                layout=W.Layout(width="120px", min_width="60px"),
            )
            rows.append(W.HBox([label, box], layout=W.Layout(flex_flow="row wrap", width="100%")))
        self._boxes = boxes
        show_only(self.fields, rows)
        self._fill(payload)

    def _fill(self, payload: dict[str, Any]) -> None:
        was, self._syncing = self._syncing, True
        try:
            for key, box in self._boxes.items():
                box.value = _dump(payload[key], 2 if isinstance(box, W.Textarea) else None)
        finally:
            self._syncing = was

    def set_field(self, key: str, text: str) -> None:
        """Put the JSON ``text`` into the field ``key`` (as typing into its box would)."""
        self._boxes[key].value = text

    def _field_changed(self, key: str, change: dict[str, Any]) -> None:
        if self._syncing:
            return
        try:
            payload = read_json(self.editor.value, "the checkpoint")
            value = read_json(change["new"], f"field {key}")
        except InvalidArgument as error:
            self.preview.value = wrap(
                f'<div class="stt-error">{esc(error.message)} (a text needs quotes)</div>'
            )
            return
        payload[key] = value
        self._syncing = True
        try:
            self.editor.value = _dump(payload)
        finally:
            self._syncing = False
        self.update_preview()

    def _raw_changed(self, change: dict[str, Any]) -> None:
        if self._syncing:
            return
        self._build_fields()
        self.update_preview()

    def update_preview(self) -> None:
        """Validate the edit and show what it changes."""
        if self.node is None:
            self.preview.value = ""
            return
        p = self.model.preview_edit(self.node, self.editor.value)
        if not p.ok:
            self.preview.value = wrap(
                f'<div class="stt-error">not valid: {esc(p.error)}</div>'
                f'<div class="stt-muted">{esc(p.format_note)}</div>'
            )
            return
        head = (
            f'<div class="stt-ok">valid · {esc(p.format_note)}</div>'
            if p.changes
            else f'<div class="stt-muted">unchanged · {esc(p.format_note)}</div>'
        )
        body = ""
        if p.changes:
            body = render_diff(DiffResult("before", "after", [("edited checkpoint", p.changes)]))
        self.preview.value = wrap(head) + body
