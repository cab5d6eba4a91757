"""The model calls of the selected frame: a waterfall, one call's request and reply, and the
totals the header shows.

What is drawn follows the debugger's state like every other part: the calls the selected frame
of the shown run sees (``ModelCallReads.model_calls``: a fork's inherited calls first, a rewound
run without the calls of the frames it removed). The waterfall is HTML (one row per call: its
start after the first call, its latency as a bar, its tokens; a failed call, such as a 429, in
the error colour with its status), drawn by :class:`~smithers_tt.widgets._waterfall.Waterfall`:
a click on a row (or Enter on it) chooses the call whose request and reply show below it, in
the conversation view, with the request's diff against the previous call of the same node.
The choice follows the frame: a call the newly selected frame does not see (after a scrub, a
run switch or a rewind) is unchosen. Everything a call holds (model, node, error, messages)
is untrusted and escaped.

Costs come from the price table the debugger was given (``db.debug(run, prices=...)``; the
demo's made-up models are priced by :data:`smithers_tt.demo.DEMO_PRICES`), as everywhere else
(``run.model_calls``, ``smithers-tt calls``): without one, or for a model the table does not
name, a call shows its tokens and no cost, never a guessed one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ipywidgets as W

from smithers_tt._model_calls import CallTotals, ModelCallRecord, RunCallTotals
from smithers_tt._prices import PriceTable
from smithers_tt.errors import SmithersError
from smithers_tt.store.for_widgets import ModelCallReads
from smithers_tt.widgets._conversation import (
    ChatMessage,
    find_transcript,
    transcript_diff,
    transcript_diff_html,
    transcript_html,
)
from smithers_tt.widgets._html import esc, value_html, wrap
from smithers_tt.widgets._state import DebuggerState
from smithers_tt.widgets._waterfall import Waterfall

ROWS_SHOWN = 200
"""Calls drawn in the waterfall (the newest)."""


INHERITED = ' <span class="stt-muted">(inherited)</span>'
"""The mark of a call a fork inherited from its parent."""


def money(cost: float | None) -> str:
    """A cost as the debugger shows it; None (no price known) is ``no cost``."""
    return "no cost" if cost is None else f"${cost:,.6f}"


def millis(ms: float | None) -> str:
    """A duration in milliseconds, or ``?`` when it is not known."""
    if ms is None:
        return "?"
    return f"{ms / 1000:,.2f} s" if ms >= 10_000 else f"{ms:,.1f} ms"


def failed(call: ModelCallRecord) -> bool:
    """Whether the call failed (an error, or an HTTP status of 400 or more)."""
    return call.error is not None or (call.status is not None and call.status >= 400)


def totals_line(label: str, t: CallTotals) -> str:
    """One line of totals, escaped HTML: calls, tokens, cost, model time against wall time."""
    unpriced = (
        f' <span class="stt-muted">({t.unpriced} call(s) of models without a price)</span>'
        if t.unpriced
        else ""
    )
    errors = f' · <span class="stt-error">{t.errors} failed</span>' if t.errors else ""
    return (
        f"<b>{esc(label)}</b>: {t.calls} call(s){errors} · {t.total_tokens:,} tokens "
        f"({t.prompt_tokens:,} in, {t.completion_tokens:,} out, {t.cached_tokens:,} cached) · "
        f"{money(t.cost)}{unpriced} · model time {millis(t.model_ms)} of wall "
        f"{millis(t.wall_ms)}"
    )


def totals_html(totals: RunCallTotals | None, frame_no: int) -> str:
    """The header's totals: the run's, then each node's (escaped HTML; empty without calls)."""
    if totals is None or not totals.run.calls:
        return ""
    nodes = "".join(
        f"<li>{totals_line(node_id, t)}</li>" for node_id, t in sorted(totals.nodes.items())
    )
    run = totals_line(f"model calls at frame {frame_no}", totals.run)
    return f'<div class="stt-call-totals">{run}<ul class="stt-call-nodes">{nodes}</ul></div>'


def whole(text: str) -> str:
    """``text`` (escaped) for a cell that may wrap, its first word kept on one line: a number
    ("+1,196.0" of "+1,196.0 ms"), a status code ("429" of "429 HTTP 429": the error after it
    wraps as any text)."""
    first, space, rest = text.partition(" ")
    return f'<span class="stt-call-num">{esc(first)}</span>{space}{esc(rest)}'


def waterfall_html(calls: list[ModelCallRecord], first: int = 1) -> str:
    """The waterfall of ``calls`` (numbered from ``first``): one row per call, its latency a
    bar placed at its start on a scale shared by all rows."""
    if not calls:
        return '<div class="stt-muted">no model calls at this frame</div>'
    start = min(c.started_at_ms for c in calls)
    end = max(c.started_at_ms + (c.latency_ms or 0.0) for c in calls)
    span = max(end - start, 1e-9)
    rows = []
    for number, call in enumerate(calls, first):
        offset = call.started_at_ms - start
        left = 100 * offset / span
        width = max(100 * (call.latency_ms or 0.0) / span, 0.5)
        bad = failed(call)
        colour = "var(--jp-error-color1, #b00020)" if bad else "var(--jp-brand-color1, #1976d2)"
        status = " ".join(str(t) for t in (call.status, call.error) if t is not None)
        tokens = call.total_tokens
        node = f"{call.node_id} a{call.attempt}"
        rows.append(
            f'<tr class="stt-call-row{" stt-call-failed" if bad else ""}" '
            f'data-call="{esc(call.call_id)}">'
            f'<td>{whole(f"#{number}")}</td><td title="{esc(node)}">{esc(node)}'
            f"{INHERITED if call.inherited else ''}</td>"
            f'<td title="{esc(call.model or "?")}">{esc(call.model or "?")}</td>'
            f"<td>{whole(f'+{millis(offset)}')}</td>"
            f'<td><div style="position:relative;height:10px">'
            f'<div class="stt-call-bar" style="position:absolute;left:{left:.3f}%;'
            f'width:{min(width, 100 - left):.3f}%;height:10px;background:{colour}"></div>'
            f"</div></td><td>{whole(millis(call.latency_ms))}</td>"
            f"<td>{whole('?' if tokens is None else f'{tokens:,}')}</td>"
            f'<td class="{"stt-error" if bad else "stt-ok"}" title="{esc(status)}">'
            f"{'' if call.status is None else whole(str(call.status))}"
            f"{'' if call.error is None else f' {esc(call.error)}'}</td></tr>"
        )
    head = (  # "latency" over its bar and its figure
        "<th></th><th>node</th><th>model</th><th>start</th>"
        '<th colspan="2">latency</th><th>tokens</th><th>status</th>'
    )
    # room for "+1,003.0 ms" and "429 HTTP 429" on one line from about 700 px; narrower,
    # the texts wrap (whole, never cut: the stylesheet's overflow-wrap), numbers whole (their
    # columns widen past these widths when they must: the table's layout is not fixed)
    widths = "".join(f'<col style="width:{w}%">' for w in (5, 20, 13, 12, 14, 10, 10, 16))
    return (  # in a box its headings measure themselves against (see the stylesheet)
        f'<div class="stt-waterfall-box"><table class="stt-waterfall"><colgroup>{widths}'
        f"</colgroup><tr>{head}</tr>{''.join(rows)}</table></div>"
    )


def _messages(value: Any) -> list[ChatMessage] | None:
    """A request's or reply's messages: a transcript, or one message (a reply)."""
    if isinstance(value, dict) and isinstance(value.get("role"), str):
        value = [value]
    return find_transcript(value)


def exchange_html(
    call: ModelCallRecord, request: Any, reply: Any, previous: tuple[int, Any] | None
) -> str:
    """One call's request and reply in the conversation view, and its request's diff against
    the previous call's (``(its number, its request)``; None: there is none)."""

    def shown(value: Any) -> str:
        if value is None:
            return '<div class="stt-muted">not recorded</div>'
        messages = _messages(value)
        return transcript_html(messages) if messages is not None else value_html(value)

    if previous is None:
        diff = '<div class="stt-muted">no earlier call of this node to compare with</div>'
    else:
        diff = transcript_diff_html(transcript_diff(_messages(previous[1]), _messages(request)))
        diff = f'<div class="stt-muted">against call #{previous[0]}</div>{diff}'
    error = (
        f'<div class="stt-error">{esc(call.status or "")} {esc(call.error)}</div>'
        if call.error is not None
        else ""
    )
    finish = f" · finished with {esc(call.finish_reason)}" if call.finish_reason else ""
    return (
        f"<b>{esc(call.model or '?')}</b> · {esc(call.node_id)} attempt {call.attempt} · "
        f"frame {call.frame_no}{finish} · time to first token {millis(call.ttft_ms)}{error}"
        f"<h5>Request</h5>{shown(request)}<h5>Reply</h5>{shown(reply)}"
        f"<h5>Request changes since the previous call</h5>{diff}"
    )


class CallsView:
    """The selected frame's model calls: :attr:`waterfall` (the calls; a click on one
    chooses it) and :attr:`detail` (the chosen one's request and reply), in :attr:`widget`;
    :attr:`totals` and :meth:`header_html` for the debugger's header, which ``on_change``
    redraws."""

    def __init__(
        self,
        model: DebuggerState,
        prices: Any = None,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        self.model = model
        self.prices = PriceTable.of(prices)
        self.reads = ModelCallReads(model.db.store.engine)
        self.on_change: Callable[[], None] | None = None  # told from the first change on
        self.calls: list[ModelCallRecord] = []
        """The calls the waterfall shows (the newest :data:`ROWS_SHOWN` of the frame's)."""
        self.first = 1
        """The number of the first of them among all the frame's calls."""
        self.totals: RunCallTotals | None = None
        self.shown: tuple[str, int] | None = None
        """The run and frame drawn."""
        self.error = ""
        self.waterfall = Waterfall()
        self.waterfall.observe(lambda _: self.show_call(), names="selected")
        self.detail = W.HTML()
        self.detail.add_class("stt-call-detail")
        self.widget = W.Accordion(
            [W.VBox([self.waterfall, self.detail])],
            layout=W.Layout(width="auto", max_width="100%"),  # 100% plus its border overflowed
        )
        self.widget.set_title(0, "Model calls")
        self.widget.selected_index = 0  # open: the waterfall shows without a click
        for event in ("run", "frames"):
            model.on(event, self.update)
        model.on("frame", self.follow)
        self.update()
        self.on_change = on_change

    def follow(self) -> None:
        """Another frame was selected: redraw unless it is the one drawn (a run switched or
        rewound announces its frame after it, and was drawn then)."""
        if self.shown != (self.model.run_id, self.model.frame_no):
            self.update()

    def update(self) -> None:
        """Read the calls of the selected frame again (when run or frame changed) and redraw;
        the chosen call stays chosen if this frame sees it, else none is."""
        m = self.model
        where = (m.run_id, m.frame_no)
        try:
            calls, totals = self.reads.calls_with_totals(m.run_id, self.prices, m.frame_no)
            self.totals = totals if calls else None
            self.error = ""
        except SmithersError as error:
            calls, self.totals, self.error = [], None, error.message
        self.first = max(len(calls) - ROWS_SHOWN, 0) + 1
        self.calls = calls[-ROWS_SHOWN:]
        self.shown = where
        more = self.first - 1
        note = f'<div class="stt-muted">{more} earlier call(s) not shown</div>' if more else ""
        error = f'<div class="stt-error">{esc(self.error)}</div>' if self.error else ""
        self.waterfall.value = wrap(f"{error}{note}{waterfall_html(self.calls, self.first)}")
        if self.chosen() is None and self.waterfall.selected:
            self.waterfall.selected = ""  # observed: clears the detail
        else:
            self.show_call()  # its number and the call it is compared with may have moved
        if self.on_change is not None:
            self.on_change()

    def chosen(self) -> int | None:
        """The index in :attr:`calls` of the chosen call (None: none, or not shown here)."""
        wanted = self.waterfall.selected
        return next((i for i, c in enumerate(self.calls) if c.call_id == wanted), None)

    def show_call(self, call_id: str | None = None) -> None:
        """Choose the call ``call_id`` (``""``: none), as a click on its row does; without it,
        draw the chosen call's request and reply."""
        if call_id is not None and call_id != self.waterfall.selected:
            self.waterfall.selected = call_id  # observed: shows it
            return
        index = self.chosen()
        if index is None:
            if self.waterfall.selected:  # a click that arrived after its row went away
                self.waterfall.selected = ""
            self.detail.value = ""
            return
        call = self.calls[index]
        before = next(
            (
                (self.first + i, c)
                for i, c in reversed(list(enumerate(self.calls[:index])))
                if c.node_id == call.node_id
            ),
            None,
        )
        try:
            request, reply = self.reads.model_call_exchange(call)
            previous = None
            if before is not None:
                previous = (before[0], self.reads.model_call_exchange(before[1])[0])
            body = exchange_html(call, request, reply, previous)
        except SmithersError as error:
            body = f'<div class="stt-error">{esc(error.message)}</div>'
        number = self.first + index
        self.detail.value = wrap(f"<h4>Call #{number}</h4>{body}")

    def header_html(self) -> str:
        """The totals of the calls drawn (escaped HTML), or why they could not be read."""
        if self.error:
            return f'<div class="stt-error">model calls: {esc(self.error)}</div>'
        frame_no = self.shown[1] if self.shown else self.model.frame_no
        return totals_html(self.totals, frame_no)
