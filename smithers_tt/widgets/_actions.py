"""Rewind, Fork and Replay from the selected frame, each behind a Confirm / Cancel step.

The fork form (shared by Replay): nodes to reset, an input override (JSON), and an editor for
one node's checkpoint payload, validated as an ``AgentCheckpoint`` before anything is written.
Outcomes and expected errors are reported in plain words (escaped), never as a traceback.
"""

from __future__ import annotations

from typing import Any

import ipywidgets as W

from smithers_tt.widgets._close import close_all
from smithers_tt.widgets._control import REPLAY_NEEDS_WORKFLOW
from smithers_tt.widgets._editor import CheckpointEditor
from smithers_tt.widgets._html import esc, read_only_note, run_ref, wrap
from smithers_tt.widgets._model import DebuggerModel
from smithers_tt.widgets._progress import ProgressBar

_NO_EDIT = "(no edit)"
_UNDO_TIP = "put this run back as it was before its newest rewind (asks first)"
_FORK_TIP = "a new run whose frame 0 is the selected frame (asks first)"
_REPLAY_TIP = "fork at the selected frame and execute the new run (asks first)"


_UNDER_WAY = {
    "rewind": "rewinding",
    "undo_rewind": "undoing the rewind",
    "fork": "forking",
    "replay": "replaying",
}


class Actions:
    """The action buttons, the fork form, the confirmation row and the report line."""

    def __init__(self, model: DebuggerModel) -> None:
        self.model = model
        self.title = W.HTML()
        self.rewind = W.Button(
            description="Rewind…",
            button_style="danger",
            tooltip="put this run back to the selected frame, in place (asks first)",
        )
        self.undo = W.Button(description="Undo rewind…", tooltip=_UNDO_TIP)
        self.undo.add_class("stt-undo-rewind")
        self.undo.on_click(lambda _: model.request_undo_rewind(self.reason.value))
        self.fork = W.Button(description="Fork…", button_style="primary", tooltip=_FORK_TIP)
        self.replay = W.Button(description="Replay…", button_style="warning", tooltip=_REPLAY_TIP)
        for button, name in ((self.rewind, "rewind"), (self.fork, "fork"), (self.replay, "replay")):
            button.add_class(f"stt-{name}")
        self.rewind.on_click(lambda _: model.request_rewind(self.reason.value))
        self.fork.on_click(lambda _: model.request_fork(**self.form()))
        self.replay.on_click(lambda _: model.request_replay(**self.form()))
        self.replay_note = W.HTML()
        if model.read_only is not None:  # the store refuses them anyway: say so up front
            self.rewind.disabled, self.rewind.tooltip = True, model.read_only

        wide = {"description_width": "initial"}
        self.reason = W.Text(
            value="",
            placeholder="why (kept in the audit with the rewind, fork or replay)",
            description="reason",
            layout=W.Layout(width="100%"),
        )
        self.reason.add_class("stt-reason")
        self.reset = W.SelectMultiple(options=[], rows=4, description="reset nodes", style=wide)
        self.input = W.Textarea(
            value="",
            placeholder="input override as JSON (empty: keep the run input)",
            description="input",
            layout=W.Layout(width="100%", height="48px"),
        )
        self.edit_node = W.Dropdown(
            options=[_NO_EDIT], description="edit checkpoint of", style=wide
        )
        self.edit_node.observe(self._edit_node_changed, names="value")
        self.checkpoint_editor = CheckpointEditor(model)
        self.editor = self.checkpoint_editor.editor
        self._prefilled = ""

        self.confirm_text = W.HTML()
        self.confirm = W.Button(description="Confirm", button_style="danger")
        self.cancel = W.Button(description="Cancel")
        self.confirm.add_class("stt-confirm")
        self.cancel.add_class("stt-cancel")
        self.confirm.on_click(lambda _: self.carry_out())
        self.cancel.on_click(lambda _: model.cancel())
        self.confirm_box = W.VBox(
            [self.confirm_text, W.HBox([self.confirm, self.cancel])],
            layout=W.Layout(display="none", border="1px solid #d62728", padding="4px"),
        )
        self.report = W.HTML()
        self.report.add_class("stt-report")
        self.progress = W.Box()
        """While an action runs, a bar saying so; afterwards, how long it took."""
        self._bar: ProgressBar | None = None
        self.widget = W.VBox(
            [
                self.title,
                W.HBox(
                    [self.rewind, self.undo, self.fork, self.replay],
                    layout=W.Layout(flex_flow="row wrap"),
                ),
                self.replay_note,
                self.reason,
                self.reset,
                self.input,
                self.edit_node,
                self.checkpoint_editor.widget,
                self.confirm_box,
                self.progress,
                self.report,
            ],
            layout=W.Layout(flex="3 1 300px", min_width="0", padding="0 8px 0 0"),
        )
        for event in ("frame", "run", "frames"):
            model.on(event, self.update)
        for event in ("run", "frames"):  # what undo can do changes with them, not with a frame
            model.on(event, self.update_undo)
        self.update_undo()
        model.on("pending", self.show_pending)
        model.on("message", self.show_message)
        self.update()
        self.show_pending()
        self.show_message()

    def form(self) -> dict[str, Any]:
        """The fork form's values, as :meth:`DebuggerModel.fork_options` takes them."""
        edit = self.edit_node.value
        return {
            "reset": list(self.reset.value),
            "input_text": self.input.value,
            "edit_node": None if edit in (None, _NO_EDIT) else edit,
            "edit_text": self.editor.value,
            "reason": self.reason.value,
        }

    def _edit_node_changed(self, change: dict[str, Any]) -> None:
        self._prefill(force=True)

    def _prefill(self, force: bool = False) -> None:
        node = self.edit_node.value
        if node in (None, _NO_EDIT):
            self.checkpoint_editor.open(None, "")
            return
        if force or self.editor.value == self._prefilled:  # never overwrite a person's edits
            self._prefilled = self.model.checkpoint_text(node)
            self.checkpoint_editor.open(node, self._prefilled)
        else:
            self.checkpoint_editor.update_preview()  # the "before" is this frame's payload

    def update(self) -> None:
        """Follow the selected frame: node lists and the editor's default payload; where the
        lens's framework branches the run itself, no Fork… or Replay…, and how to branch it."""
        m = self.model
        shown = run_ref(m.run_id, m.short_ids()[m.run_id])
        self.title.value = wrap(f"<h4>Actions at frame {m.frame_no} of run {shown}</h4>")
        if not self._offer_forks():
            return
        names = m.node_ids
        kept = [n for n in self.reset.value if n in names]
        self.reset.options = names
        self.reset.value = tuple(kept)
        editable = m.checkpointed_nodes()
        current = self.edit_node.value
        self.edit_node.options = [_NO_EDIT, *editable]
        self.edit_node.value = current if current in editable else _NO_EDIT
        self._prefill()

    def _offer_forks(self) -> bool:
        """Offer Fork… and Replay… as the shown run allows, and say why not where it does not
        (a read-only store, no workflow to replay, a framework that branches the run itself:
        then no fork form either); False when the form is not shown."""
        m = self.model
        branched = m.fork_note()
        note = m.read_only or branched
        self.fork.disabled = note is not None
        self.replay.disabled = note is not None or m.workflow is None
        self.fork.tooltip = note or _FORK_TIP
        self.replay.tooltip = note or _REPLAY_TIP
        for part in (self.reset, self.input, self.edit_node):
            part.layout.display = "none" if branched is not None else None
        if m.read_only is not None:
            self.replay_note.value = read_only_note(m.read_only)
        elif note is not None or m.workflow is None:
            why = note or REPLAY_NEEDS_WORKFLOW
            self.replay_note.value = wrap(f'<div class="stt-muted">{esc(why)}</div>')
        else:
            self.replay_note.value = ""
        return branched is None

    def update_undo(self) -> None:
        """Enable Undo rewind when the run has a rewind undo can take back; else disable it,
        with the reason as its tooltip."""
        why = self.model.undo_refusal()
        self.undo.disabled = why is not None
        self.undo.tooltip = _UNDO_TIP if why is None else why

    def carry_out(self) -> None:
        """Carry out the confirmed action under a bar that shows it is under way (a replay
        runs the whole child run) and then how long it took."""
        pending = self.model.pending
        if pending is None:
            return
        bar = ProgressBar(_UNDER_WAY[pending.action], unit="")
        self.progress.children = (bar,)
        self.close()  # the bar of the action before (shown, or hidden by a message)
        self._bar = bar
        result = None
        try:
            result = self.model.confirm()
        finally:
            if result is not None and result.ok:
                bar.finish()
                self.progress.children = (bar,)  # a fork or replay moved to the new run
            else:  # no green "done" over work that failed: the report line says why
                self.progress.children = ()

    def close(self) -> None:
        """Close the progress bar of the last action (hidden or not): the only widget of the
        actions that is not always in :attr:`widget`."""
        if self._bar is not None:
            close_all([self._bar])
            self._bar = None

    def show_pending(self) -> None:
        """Show or hide the Confirm / Cancel row."""
        pending = self.model.pending
        if pending is None:
            self.confirm_box.layout.display = "none"
            self.confirm_text.value = ""
            return
        self.confirm.description = f"Confirm {pending.action.replace('_', ' ')}"
        self.confirm.button_style = "danger" if pending.action == "rewind" else "primary"
        self.confirm_text.value = wrap(f"<div>{esc(pending.summary)}</div>")
        self.confirm_box.layout.display = None

    def show_message(self) -> None:
        """Show what the last action did, or why it could not."""
        message = self.model.message
        if message is None:  # nothing to report (another run is shown): nor a bar of its work
            self.report.value = ""
            self.progress.children = ()
            return
        css = {"error": "stt-error", "success": "stt-ok"}.get(message.kind, "stt-muted")
        self.report.value = wrap(f'<div class="{css}">{esc(message.text)}</div>')
