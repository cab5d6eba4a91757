"""The debugger's link to the selected frame: the code that reopens it, and its address in
``smithers-tt serve`` (both written by :func:`smithers_tt._links.frame_link`), each with a Copy
button.

A small anywidget (no JavaScript build, nothing fetched) whose view draws the whole state on
every change, and whose state is set from the model on every ``run`` and ``frame`` change, so
the link always names the run and frame every other part shows. Text is set as text, never
as HTML.
"""

from __future__ import annotations

import anywidget
import traitlets

from smithers_tt._links import FrameLink, frame_link
from smithers_tt.widgets._model import DebuggerModel

_ESM = """
function copier(label, text) {
  const button = document.createElement("button");
  button.className = "jupyter-widgets jupyter-button widget-button stt-copy";
  button.textContent = label;
  button.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(text);
      button.textContent = "Copied";
    } catch (e) {  // no clipboard here (an http page on another host): select it to copy
      button.textContent = "Select and copy (Ctrl+C)";
    }
    setTimeout(() => { button.textContent = label; }, 1500);
  });
  return button;
}
function block(cls, text, label) {
  const row = document.createElement("div");
  row.className = "stt-link-row";
  const pre = document.createElement("pre");
  pre.className = cls;
  pre.textContent = text;
  row.append(pre, copier(label, text));
  return row;
}
function draw(model, el, details) {
  const summary = document.createElement("summary");
  summary.className = "stt-link-title";
  summary.textContent = model.get("title");
  const url = document.createElement("a");
  url.href = model.get("url");
  url.target = "_blank";
  url.rel = "noopener";
  url.textContent = model.get("url");
  const line = document.createElement("div");
  line.className = "stt-link-row";
  const code = document.createElement("code");
  code.className = "stt-link-url";
  code.appendChild(url);
  line.append(code, copier("Copy URL", model.get("url")));
  const note = document.createElement("div");
  note.className = "stt-muted";
  note.textContent = "served by: " + model.get("command");
  details.replaceChildren(summary, block("stt-link-code", model.get("code"), "Copy code"),
                          line, note);
}
export default {
  render({ model, el }) {
    el.classList.add("stt", "stt-link");
    const details = document.createElement("details");
    el.appendChild(details);
    const redraw = () => draw(model, el, details);
    redraw();
    for (const name of ["title", "code", "url", "command"]) model.on(`change:${name}`, redraw);
  }
};
"""

_CSS = """
.stt-link details { margin: 2px 0 2px 12px; }  /* the summary's marker sits in the margin */
.stt-link summary { cursor: pointer; color: var(--jp-ui-font-color1, #1f1f1f); }
.stt-link .stt-link-row { display: flex; flex-wrap: wrap; align-items: center; gap: 6px;
  margin: 4px 0; }
.stt-link pre, .stt-link code { margin: 0; padding: 2px 4px; overflow-wrap: anywhere;
  white-space: pre-wrap; background: var(--jp-layout-color2, #eee); min-width: 0;
  max-width: 100%; color: var(--jp-content-font-color1, #1f1f1f); }
.stt-link a { color: var(--jp-content-link-color, #1a73e8); }
"""


class LinkView(anywidget.AnyWidget):
    """ "Link to frame N": the code and the served address of the model's run and frame."""

    _esm = _ESM
    _css = _CSS
    title = traitlets.Unicode("").tag(sync=True)
    code = traitlets.Unicode("").tag(sync=True)
    url = traitlets.Unicode("").tag(sync=True)
    command = traitlets.Unicode("").tag(sync=True)

    def __init__(self, model: DebuggerModel, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.model = model
        # "tree": a new fork can lengthen the run's shortest unique prefix
        for event in ("run", "frame", "frames", "tree"):
            model.on(event, self.update)
        self.update()

    @property
    def link(self) -> FrameLink:
        """The link to the model's run and selected frame, as shown."""
        m = self.model
        return frame_link(m.db.url, m.run_id, m.frame_no)

    def update(self) -> None:
        """Follow the model: its run and selected frame."""
        link = self.link
        short = self.model.short_ids().get(link.run_id, link.run_id)
        with self.hold_sync():
            self.title = f"Link to frame {link.frame_no} of run {short}"
            self.code, self.url, self.command = link.code, link.url, link.command
