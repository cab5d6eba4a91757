"""The waterfall of model calls as a small anywidget: the rows are clickable, and the call
clicked is :attr:`Waterfall.selected`, synced to the kernel, which shows its request and reply.

The table itself is the escaped HTML :func:`smithers_tt.widgets._calls.waterfall_html` builds
(every text in it went through ``esc``; each row names its call in ``data-call``), drawn as an
``ipywidgets.HTML`` would draw it; the view only adds what a person does with it: a click on a
row (its bar, its text) selects that call, and so do Enter or Space on a row reached with Tab;
the arrow keys move between rows, Escape unselects. No JavaScript build, nothing fetched: the
view is the string below.
"""

from __future__ import annotations

import anywidget
import traitlets

_ESM = """
function rows(el) { return [...el.querySelectorAll("tr[data-call]")]; }
function mark(model, el) {
  const chosen = model.get("selected");
  for (const row of rows(el)) {
    const on = row.dataset.call === chosen;
    row.classList.toggle("stt-call-selected", on);
    row.setAttribute("aria-pressed", on ? "true" : "false");
  }
}
function pick(model, id) {
  model.set("selected", id);
  model.save_changes();
}
function draw(model, el) {
  const focused = document.activeElement;
  const had = focused && el.contains(focused) && focused.dataset ? focused.dataset.call : null;
  el.innerHTML = model.get("value");  // escaped in Python: data only ever appears as text
  for (const row of rows(el)) {
    row.tabIndex = 0;
    row.setAttribute("role", "button");
    if (had && row.dataset.call === had) row.focus();
  }
  mark(model, el);
}
export default {
  render({ model, el }) {
    el.classList.add("stt-waterfall-view");
    const click = (event) => {
      const row = event.target.closest("tr[data-call]");
      if (row && el.contains(row)) pick(model, row.dataset.call);
    };
    const key = (event) => {
      const row = event.target.closest("tr[data-call]");
      if (!row || !el.contains(row)) return;
      const all = rows(el), at = all.indexOf(row);
      if (event.key === "Enter" || event.key === " ") pick(model, row.dataset.call);
      else if (event.key === "Escape") pick(model, "");
      else if (event.key === "ArrowDown" && at + 1 < all.length) all[at + 1].focus();
      else if (event.key === "ArrowUp" && at > 0) all[at - 1].focus();
      else return;
      event.preventDefault();
    };
    el.addEventListener("click", click);
    el.addEventListener("keydown", key);
    const redraw = () => draw(model, el), remark = () => mark(model, el);
    redraw();
    model.on("change:value", redraw);
    model.on("change:selected", remark);
    return () => {
      model.off("change:value", redraw);
      model.off("change:selected", remark);
      el.removeEventListener("click", click);
      el.removeEventListener("keydown", key);
    };
  },
};
"""


class Waterfall(anywidget.AnyWidget):
    """The waterfall's table (:attr:`value`, escaped HTML) and the call chosen in it."""

    _esm = _ESM
    value = traitlets.Unicode("").tag(sync=True)
    """The table: escaped HTML whose rows carry their call's id in ``data-call``."""
    selected = traitlets.Unicode("").tag(sync=True)
    """The id of the call chosen (a click or a key in the view, or the kernel); ``""``: none."""
