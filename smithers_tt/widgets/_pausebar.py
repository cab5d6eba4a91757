"""The debugger's Paused banner with the question, an answer editor and Continue / Step /
Abort (the breakpoints themselves are toggled on the timeline's node rows: they are
``model.breakpoints``, written to the run as they change). A pause an integration
reports through the debugger's lens (``lens.pause(run_id)``: a LangGraph interrupt) shows
its banner too, without the controls (it is continued in that framework).

Continuing executes the run here when the debugger has the workflow (in the background
inside a running loop, as a Jupyter kernel has, so live refresh follows it to its next
pause); without it, the run is left queued for a worker. Questions and answers are untrusted
text: everything shown is escaped.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from typing import Any

import ipywidgets as W

from smithers_tt.checkpoint import read_json
from smithers_tt.engine import Pause, pause_history
from smithers_tt.errors import InvalidArgument, SmithersError
from smithers_tt.widgets._html import esc, wrap
from smithers_tt.widgets._model import DebuggerModel


class PauseBar:
    """Paused banner, answer editor and Continue / Step / Abort."""

    def __init__(self, model: DebuggerModel, on_started: Callable[[], Any] | None = None) -> None:
        self.model = model
        self.on_started = on_started
        self.banner = W.HTML()
        self.banner.add_class("stt-paused")
        self.answer = W.Textarea(
            value="",
            placeholder="the answer, as JSON (empty: no answer)",
            description="answer",
            layout=W.Layout(width="100%", height="56px"),
        )
        self.answer.add_class("stt-answer")
        self.continue_button = W.Button(
            description="Continue", button_style="success", tooltip="go on to the next pause"
        )
        self.step_button = W.Button(
            description="Step", button_style="info", tooltip="run one node, then pause again"
        )
        self.abort_button = W.Button(
            description="Abort", button_style="danger", tooltip="cancel the paused run"
        )
        for button, action in (
            (self.continue_button, "continue"),
            (self.step_button, "step"),
            (self.abort_button, "abort"),
        ):
            button.add_class(f"stt-{action}")
        if model.read_only is not None:  # the store refuses them anyway: say so up front
            for button in (self.continue_button, self.step_button, self.abort_button):
                button.disabled, button.tooltip = True, model.read_only
        self.continue_button.on_click(lambda _: self.go("continue"))
        self.step_button.on_click(lambda _: self.go("step"))
        self.abort_button.on_click(lambda _: self._ask_abort(True))
        # Abort asks first, as every other destructive button does
        self.abort_question = W.HTML()
        self.abort_confirm = W.Button(description="Abort the run", button_style="danger")
        self.abort_keep = W.Button(description="Keep it paused")
        self.abort_confirm.add_class("stt-abort-confirm")
        self.abort_confirm.on_click(lambda _: self.abort())
        self.abort_keep.on_click(lambda _: self._ask_abort(False))
        self.abort_form = W.VBox(
            [self.abort_question, W.HBox([self.abort_confirm, self.abort_keep])]
        )
        self.abort_form.layout.display = "none"
        self.report = W.HTML()
        self.report.add_class("stt-pause-report")
        self._report_run: str | None = None
        self.task: asyncio.Task[Any] | None = None
        self._continued: str | None = None
        """The run :attr:`task` continues."""
        self.controls = W.VBox(
            [
                self.answer,
                W.HBox([self.continue_button, self.step_button, self.abort_button]),
                self.abort_form,
            ]
        )
        self.paused = W.VBox([self.banner, self.controls])
        # the report stays in sight once the run is no longer paused: it says how it went on
        self.widget = W.VBox([self.paused, self.report])
        for event in ("run", "frames"):
            model.on(event, self.update)
        self.update()

    # --- what is shown ----------------------------------------------------------------

    @property
    def continuing(self) -> bool:
        """Whether this bar's Continue or Step of the shown run goes on in the background."""
        task = self.task
        return task is not None and not task.done() and self._continued == self.model.run_id

    @property
    def pause(self) -> Pause | None:
        """The pause the shown run is in, or None (also while it is being continued here:
        the record says ``paused`` until the continued run is claimed)."""
        if self.model.record.status != "paused" or self.continuing:
            return None
        return pause_history(self.model.db.store.pause_frames(self.model.run_id)).current

    def update(self) -> None:
        """Show the banner and the controls while the run is paused; hide them otherwise."""
        pause = self.pause
        outside = None if pause is not None else self.model.outside_pause()
        if self._report_run not in (None, self.model.run_id):  # about a run no longer shown
            self.report.value, self._report_run = "", None
        self.paused.layout.display = None if pause is not None or outside else "none"
        self.report.layout.display = None if self.report.value else "none"
        self.widget.layout.display = (
            None if pause is not None or outside or self.report.value else "none"
        )
        self.controls.layout.display = None if pause is not None else "none"
        if pause is None:
            self._ask_abort(False)
            self.banner.value = "" if not outside else self._outside(outside)
            return
        # a breakpoint asks nothing: no answer to give
        self.answer.layout.display = None if pause.question is not None else "none"
        if pause.question is None:
            self.answer.value = ""
        where = "while running" if pause.when == "ask" else pause.when
        question = ""
        if pause.question is not None:
            text = json.dumps(pause.question, ensure_ascii=False, indent=2, sort_keys=True)
            question = f"<pre class='stt-question'>{esc(text)}</pre>"
        self.banner.value = wrap(
            f"<div><b>Paused</b> ({esc(pause.reason)}) {esc(where)} "
            f"<code>{esc(pause.node_id or '')}</code> at frame {pause.frame_no}</div>{question}"
        )

    @staticmethod
    def _outside(pause: dict[str, Any]) -> str:
        """The banner of a pause an integration reports (a LangGraph interrupt): continued
        in that framework, so without the controls."""
        text = json.dumps(pause.get("question"), ensure_ascii=False, indent=2, sort_keys=True)
        return wrap(
            f"<div><b>Paused</b> ({esc(pause.get('reason', 'paused'))})</div>"
            f"<pre class='stt-question'>{esc(text)}</pre>"
            f"<div class='stt-muted'>{esc(pause.get('hint', ''))}</div>"
        )

    def _say(self, kind: str, text: str) -> None:
        css = {"error": "stt-error", "success": "stt-ok"}.get(kind, "stt-muted")
        self.report.value = wrap(f'<div class="{css}">{esc(text)}</div>')
        self._report_run = self.model.run_id
        self.report.layout.display = None
        self.widget.layout.display = None

    def _ask_abort(self, asking: bool) -> None:
        """Show (or put away) the question Abort asks before it cancels the run."""
        self.abort_form.layout.display = None if asking else "none"
        for button in (self.continue_button, self.step_button, self.abort_button):
            button.disabled = asking or self.model.read_only is not None
        if asking:
            self.abort_question.value = wrap(
                f"<div>Abort run <code>{esc(self.model.run_id)}</code>? It is cancelled where "
                "it is paused: nothing after this pause runs; its frames stay.</div>"
            )

    def abort(self) -> None:
        """Cancel the paused run (what Abort's question confirms)."""
        self._ask_abort(False)
        self.go("abort")

    # --- continuing -------------------------------------------------------------------

    def go(self, action: str) -> None:
        """Continue, step or abort the paused run (see the module docstring)."""
        m = self.model
        if m.read_only is not None:
            self._say("error", f"Nothing was done: {m.read_only}.")
            return
        try:
            text = self.answer.value
            answer = read_json(text, "The answer") if text.strip() else None
        except InvalidArgument as error:
            self._say("error", f"{error.message}; nothing was written.")
            return
        options: dict[str, Any] = {
            "answer": answer,
            "step": action == "step",
            "abort": action == "abort",
            **m.breakpoints.options(),  # as the timeline's toggles show them
        }
        if action == "abort" or m.workflow is None:
            try:
                m.db.continue_run(m.run_id, m.workflow, **options)
            except SmithersError as error:
                self._say("error", error.message)
                return
            self._refresh()
            done = (
                f"aborted: {m.record.status} at frame {m.record.clock}"
                if action == "abort"
                else "queued for a worker (no workflow here)"
            )
            self._say("success", f"Run {m.run_id} {done}.")
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is None:
            try:
                run = m.db.resume(m.run_id, m.workflow, **options)
            except SmithersError as error:
                self._say("error", error.message)
                self._refresh()
                return
            self._refresh()
            self._say("success", f"Run {run.id} is {run.status} at frame {run.record.clock}.")
            return
        task = loop.create_task(m.db.aresume(m.run_id, m.workflow, **options))
        self.task, self._continued = task, m.run_id
        m.background = task
        task.add_done_callback(self._done)
        self._say("info", f"Run {m.run_id} goes on; the timeline follows it live.")
        self.update()  # the controls go at once: a second click would continue it twice
        m._emit("frames")  # live refresh sees the background task and starts following
        if self.on_started is not None:
            self.on_started()

    def _done(self, task: asyncio.Task[Any]) -> None:
        if task.cancelled():
            self._say("error", f"Continuing run {self.model.run_id} was cancelled.")
            return
        self._refresh()
        error = task.exception()
        if isinstance(error, SmithersError):
            self._say("error", error.message)
        elif error is not None:
            self._say("error", f"{type(error).__name__}: {error}")
        else:
            run = task.result()
            self._say("success", f"Run {run.id} is {run.status} at frame {run.record.clock}.")

    def _refresh(self) -> None:
        with contextlib.suppress(SmithersError):
            self.model.refresh()
        self.update()
