"""Escaped HTML for the debugger: every string from a payload, output, error or id goes
through :func:`esc` before it reaches an HTML widget or plotly's hover text.

Payloads are untrusted text (they come from language models): ``<img src=x onerror=...>``
must show as text and execute nothing. Nothing here emits a tag built from data; tags are
fixed strings and data only ever appears escaped between them.
"""

from __future__ import annotations

import difflib
import html
import json
from typing import Any

STATE_COLOURS = {
    "in_progress": "#1f77b4",
    "running": "#1f77b4",
    "pending": "#aec7e8",
    "finished": "#2ca02c",
    "failed": "#d62728",
    "cancelled": "#7f7f7f",
    "interrupted": "#ff7f0e",
    "reset": "#9467bd",
    "cached": "#17becf",
    "skipped": "#bcbd22",
    "queued": "#aec7e8",
    "not started": "#6b8fb3",
    "paused": "#e377c2",
    "inherited": "#c7c7c7",
}
"""Colour of each run, node and attempt state (the same in the timeline and the tables)."""

STRING_LIMIT = 2_000
"""Characters of one string shown before it is cut (the rest is announced, not dropped)."""

CSS = """
<style>
.stt { font-family: var(--jp-ui-font-family, sans-serif); font-size: var(--jp-ui-font-size1, 13px);
  line-height: 1.45; color: var(--jp-ui-font-color1, #1f1f1f); min-width: 0; max-width: 100%; }
.stt table { border-collapse: collapse; max-width: 100%; }
.stt th, .stt td { border-bottom: 1px solid var(--jp-border-color2, #e0e0e0); padding: 2px 6px;
  text-align: left; vertical-align: top; }
.stt th { color: var(--jp-ui-font-color2, #555); font-weight: 600; }
.stt table.stt-waterfall { width: 100%; }
.stt-waterfall th, .stt-waterfall td { padding: 2px 4px; overflow-wrap: anywhere; }
.stt-waterfall-box { container-type: inline-size; }
.stt-scrub-line.widget-label { white-space: normal; overflow-wrap: anywhere; height: auto;
  line-height: 1.4; }
.stt-waterfall th { overflow-wrap: normal; }
@container (max-width: 440px) { .stt-waterfall th { overflow-wrap: anywhere; } }
.stt-waterfall .stt-call-num { white-space: nowrap; }
.stt-waterfall tr[data-call] { cursor: pointer; }
.stt-waterfall tr[data-call]:hover { background: var(--jp-layout-color2, #eee); }
.stt-waterfall tr[data-call]:focus-visible { outline: 2px solid var(--jp-brand-color1, #1976d2);
  outline-offset: -2px; }
.stt-waterfall tr.stt-call-selected { background: var(--jp-layout-color3, #ddd);
  box-shadow: inset 3px 0 var(--jp-brand-color1, #1976d2); }
.stt .stt-badge { border-radius: 3px; color: #fff; padding: 0 4px; white-space: nowrap; }
.stt .stt-nowrap { white-space: nowrap; }
.stt .stt-muted { color: var(--jp-ui-font-color2, #666); }
.stt .stt-key { color: var(--jp-mirror-editor-property-color, #7a3e9d); overflow-wrap: anywhere; }
.stt .stt-str { color: var(--jp-mirror-editor-string-color, #1a7f37); white-space: pre-wrap;
  overflow-wrap: break-word; }
.stt .stt-num { color: var(--jp-mirror-editor-number-color, #0550ae); }
.stt .stt-lit { color: var(--jp-mirror-editor-keyword-color, #cf222e); }
.stt details { margin-left: 12px; }
.stt details > summary { cursor: pointer; margin-left: -12px; }
.stt .stt-kids { margin-left: 4px; border-left: 1px dotted var(--jp-border-color1, #ccc);
  padding-left: 6px; }
.stt .stt-add { background: rgba(46, 160, 67, 0.16); }
.stt .stt-remove { background: rgba(248, 81, 73, 0.16); }
.stt .stt-change { background: rgba(210, 153, 34, 0.16); }
.stt ins { background: rgba(46, 160, 67, 0.35); color: inherit; text-decoration: none; }
.stt del { background: rgba(248, 81, 73, 0.35); color: inherit; }
.stt .stt-path { font-family: var(--jp-code-font-family, monospace); overflow-wrap: anywhere; }
.stt .stt-value { font-family: var(--jp-code-font-family, monospace); white-space: pre-wrap;
  overflow-wrap: break-word; }
.stt .stt-error { color: var(--jp-error-color1, #b00020); }
.stt .stt-ok { color: var(--jp-success-color1, #1a7f37); }
.stt .stt-pin { background: var(--jp-warn-color3, #fff3cd); color: var(--jp-ui-font-color1, #222);
  border: 1px solid var(--jp-warn-color1, #e0a800); border-radius: 3px; padding: 0 4px; }
.stt h4 { margin: 6px 0 2px 0; font-size: var(--jp-ui-font-size1, 13px); }
.stt .stt-changes { display: flex; flex-direction: column; gap: 2px; }
.stt .stt-chg { border-radius: 3px; padding: 2px 4px; }
.stt .stt-chg-head { display: flex; flex-wrap: wrap; gap: 6px; align-items: baseline; }
.stt .stt-op { font-weight: 600; min-width: 56px; }
.stt .stt-sides { display: grid; grid-template-columns: repeat(auto-fit, minmax(160px, 1fr));
  gap: 2px 8px; }
.stt .stt-side-label { color: var(--jp-ui-font-color2, #666); font-size: 90%; }
.stt .stt-whole { max-height: 320px; overflow: auto; margin: 2px 0 0 0;
  background: var(--jp-layout-color2, #f3f3f3); padding: 2px 4px; }
.stt .stt-conversation { display: flex; flex-direction: column; gap: 4px; }
.stt .stt-msg { border-left: 3px solid var(--jp-border-color1, #bbb); padding: 2px 6px;
  background: var(--jp-layout-color2, #f5f5f5); border-radius: 0 3px 3px 0; }
.stt .stt-msg-role { font-weight: 600; color: var(--jp-ui-font-color2, #555); }
.stt .stt-msg-text { white-space: pre-wrap; overflow-wrap: break-word; }
.stt .stt-role-user { border-left-color: var(--jp-brand-color1, #1976d2); }
.stt .stt-role-assistant { border-left-color: var(--jp-success-color1, #388e3c); }
.stt .stt-role-system, .stt .stt-role-developer {
  border-left-color: var(--jp-ui-font-color3, #999); }
.stt .stt-role-tool, .stt .stt-role-function { border-left-color: var(--jp-warn-color1, #f57c00); }
.stt .stt-role-note { border-left-color: var(--jp-info-color1, #0097a7); }
.stt .stt-msg-add { background: rgba(46, 160, 67, 0.16); }
.stt .stt-msg-remove { background: rgba(248, 81, 73, 0.16); text-decoration: line-through; }
.stt .stt-frames { font-family: var(--jp-code-font-family, monospace); }
.stt-debugger { max-width: 100%; min-width: 0; box-sizing: border-box; }
.stt-debugger .widget-box { min-width: 0; max-width: 100%; }
.stt-debugger .stt-wrap { flex-wrap: wrap; }
.stt-debugger button.stt-run, .stt-debugger button.stt-sweep-group {
  white-space: normal !important; overflow-wrap: anywhere;
  text-overflow: clip !important; text-align: left; height: auto !important; line-height: 1.3;
  padding-top: 2px; padding-bottom: 2px; }
.stt-debugger .widget-select, .stt-debugger .widget-textarea, .stt-debugger .widget-label,
.stt-debugger .widget-dropdown, .stt-debugger .widget-text {
  max-width: calc(100% - 2 * var(--jp-widgets-margin, 2px)); }
.stt-debugger .widget-select select { font-family: var(--jp-code-font-family, monospace); }
.stt-debugger .stt-timeline > .js-plotly-plot { flex: 1 1 100%; width: 100%; min-width: 0; }
.stt-debugger .stt-frame-rows select { height: calc(10 * 18px + 2px); padding: 0;
  box-sizing: border-box; border-width: 1px;
  overflow-y: auto; }
.stt-debugger .stt-frame-rows option { height: 18px; line-height: 18px; padding: 0 4px;
  box-sizing: border-box; white-space: pre; overflow: hidden; text-overflow: ellipsis; }
.stt-debugger .stt-refs option { white-space: pre; overflow: hidden; text-overflow: ellipsis; }
</style>
"""


def esc(value: Any) -> str:
    """``value`` as text, HTML-escaped (quotes too): safe inside tags and attributes."""
    return html.escape(value if isinstance(value, str) else str(value), quote=True)


def run_ref(run_id: str, shown: str) -> str:
    """A run id as the widgets show it: ``shown`` (its shortest unique prefix), the whole id
    on hover (the ``title``), both escaped."""
    return f'<code class="stt-id" title="{esc(run_id)}">{esc(shown)}</code>'


def wrap(body: str) -> str:
    """Put already-escaped HTML in the debugger's styled container."""
    return f'<div class="stt">{body}</div>'


def badge(state: str | None) -> str:
    """A coloured state label."""
    found = _BADGES.get(state)
    if found is None:
        label = "none" if state is None else str(state)
        colour = STATE_COLOURS.get(label, "#555")
        found = f'<span class="stt-badge" style="background:{colour}">{esc(label)}</span>'
        if len(_BADGES) < 256:  # the states a store writes are few; others are not kept
            _BADGES[state] = found
    return found


_BADGES: dict[str | None, str] = {}
"""Badges made so far (a nodes table draws hundreds per frame selected)."""


def compact(value: Any, limit: int = 300) -> str:
    """A one-line JSON rendering of ``value`` (plain text, not escaped), cut at ``limit``."""
    try:
        text = json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(", ", ": "))
    except (TypeError, ValueError):
        text = repr(value)
    if len(text) > limit:
        text = f"{text[:limit]}… ({len(text) - limit} more characters)"
    return text


WHOLE_LIMIT = 200_000
"""Characters of a value shown when a person opens it whole."""


def value_html(value: Any, limit: int = 160) -> str:
    """A value in one short line; a long or nested one opens to the whole of it, indented."""
    short = compact(value, limit)
    if not isinstance(value, dict | list) and len(short) <= limit:
        return f'<span class="stt-value">{esc(short)}</span>'
    try:
        whole = json.dumps(value, ensure_ascii=False, sort_keys=True, indent=1)
    except (TypeError, ValueError):
        whole = repr(value)
    note = ""
    if len(whole) > WHOLE_LIMIT:
        note = f'<div class="stt-muted">… {len(whole) - WHOLE_LIMIT} more characters</div>'
        whole = whole[:WHOLE_LIMIT]
    return (
        f'<details class="stt-long"><summary><span class="stt-value">{esc(short)}</span>'
        f'</summary><pre class="stt-value stt-whole">{esc(whole)}</pre>{note}</details>'
    )


def human_bytes(size: int | None) -> str:
    """``1.2 KiB`` style sizes."""
    if size is None:
        return "?"
    value = float(size)
    for unit in ("B", "KiB", "MiB"):
        if value < 1024 or unit == "MiB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"  # pragma: no cover


# --- a collapsible JSON tree -----------------------------------------------------------------


class _Budget:
    def __init__(self, nodes: int) -> None:
        self.left = nodes
        self.truncated = False


def _scalar(value: Any) -> str:
    if isinstance(value, str):
        if len(value) <= STRING_LIMIT:
            return f'<span class="stt-str">"{esc(value)}"</span>'
        whole = value[:WHOLE_LIMIT]
        rest = len(value) - len(whole)
        cut = f' <span class="stt-muted">… {rest} more characters</span>' if rest else ""
        return (  # the first part, and the whole string (to a bound) a click away
            f'<details class="stt-long"><summary><span class="stt-str">'
            f'"{esc(value[:STRING_LIMIT])}…"</span> <span class="stt-muted">'
            f"{len(value) - STRING_LIMIT} more characters: open to read all</span></summary>"
            f'<pre class="stt-str stt-whole">{esc(whole)}</pre>{cut}</details>'
        )
    if value is None or isinstance(value, bool):
        return f'<span class="stt-lit">{esc(json.dumps(value))}</span>'
    if isinstance(value, int | float):
        return f'<span class="stt-num">{esc(repr(value))}</span>'
    return f'<span class="stt-muted">{esc(repr(value))}</span>'


def _label(key: str | int | None) -> str:
    if key is None:
        return ""
    if isinstance(key, int):
        return f'<span class="stt-muted">[{key}]</span> '
    return f'<span class="stt-key">{esc(json.dumps(key, ensure_ascii=False))}</span>: '


def _tree(value: Any, key: str | int | None, depth: int, open_depth: int, budget: _Budget) -> str:
    budget.left -= 1
    if isinstance(value, dict | list):
        items: list[tuple[str | int, Any]] = (
            list(value.items()) if isinstance(value, dict) else list(enumerate(value))
        )
        kind = f"{{…}} {len(items)} keys" if isinstance(value, dict) else f"[…] {len(items)} items"
        if not items:
            return f"<div>{_label(key)}{'{}' if isinstance(value, dict) else '[]'}</div>"
        parts: list[str] = []
        for index, (k, v) in enumerate(items):
            if budget.left <= 0:
                budget.truncated = True
                parts.append(f'<div class="stt-muted">… {len(items) - index} more not shown</div>')
                break
            parts.append(_tree(v, k, depth + 1, open_depth, budget))
        state = " open" if depth < open_depth else ""
        return (
            f'<details{state}><summary>{_label(key)}<span class="stt-muted">{kind}</span>'
            f'</summary><div class="stt-kids">{"".join(parts)}</div></details>'
        )
    return f"<div>{_label(key)}{_scalar(value)}</div>"


def json_tree(value: Any, *, budget: int = 400, open_depth: int = 2) -> tuple[str, bool]:
    """A collapsible (``<details>``) tree of a JSON value, every key and string escaped.

    At most ``budget`` values are rendered; returns the HTML and whether some were left out
    (the caller offers a "show more" control that asks again with a bigger budget).
    """
    counter = _Budget(budget)
    return _tree(value, None, 0, open_depth, counter), counter.truncated


# --- text differences ------------------------------------------------------------------------


def is_long_text(old: Any, new: Any) -> bool:
    """Whether two values are strings worth a text diff rather than old -> new."""
    return (
        isinstance(old, str)
        and isinstance(new, str)
        and (len(old) > 80 or len(new) > 80 or "\n" in old or "\n" in new)
    )


def text_diff(old: str, new: str, limit: int = 6_000) -> str:
    """An inline diff of two strings (by line when multi-line, else by word), escaped."""
    if "\n" in old or "\n" in new:
        a, b, joiner = old.splitlines(keepends=True), new.splitlines(keepends=True), ""
    else:
        a, b, joiner = old.split(" "), new.split(" "), " "
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    out: list[str] = []
    shown = 0
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if shown > limit:
            out.append('<span class="stt-muted"> … (diff cut)</span>')
            break
        if tag == "equal":
            chunk = joiner.join(a[i1:i2])
            if len(chunk) > 200:  # keep context short around the changes
                chunk = f"{chunk[:80]} … {chunk[-80:]}"
            out.append(esc(chunk))
            shown += len(chunk)
            continue
        if i2 > i1:
            removed = joiner.join(a[i1:i2])
            out.append(f"<del>{esc(removed)}</del>")
            shown += len(removed)
        if j2 > j1:
            added = joiner.join(b[j1:j2])
            out.append(f"<ins>{esc(added)}</ins>")
            shown += len(added)
        out.append(joiner)
    return f'<span class="stt-value">{"".join(out)}</span>'


def read_only_note(reason: str) -> str:
    """The line that says why the actions are off (a store opened read-only)."""
    return wrap(f'<div class="stt-muted stt-read-only">Actions are off: {esc(reason)}.</div>')
