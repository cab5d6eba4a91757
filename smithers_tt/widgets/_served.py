"""The page ``smithers-tt serve`` shows: the run browser, or one run's debugger at a frame.

Voila runs a notebook of ours whose one cell calls :func:`served_page` with the request's
query string (Voila gives it to the kernel as ``$QUERY_STRING``): ``?run=<id or prefix>``
opens that run's debugger, ``&frame=N`` at that frame; without ``run``, the run browser
(opening a row shows its debugger in place). An address that names no run or frame the store
has says why, above the run browser. Whether the page may change the store is the store's
own: opened read-only, every action is off with the reason shown, and the store refuses a
write anyway.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import ipywidgets as W

from smithers_tt._links import read_query, shared_url
from smithers_tt._prices import PriceTable
from smithers_tt.errors import SmithersError
from smithers_tt.widgets._html import CSS, esc, wrap
from smithers_tt.widgets._state import read_only_reason


def served_page(
    db: Any, query: str = "", workflows: Iterable[Any] = (), prices: Any = None
) -> W.VBox:
    """The page for one request: the debugger of the run ``query`` names (``run=...`` and
    optionally ``frame=...``), else the run browser; ``workflows`` are what Replay and Resume
    run with, ``prices`` what model calls cost (a :class:`~smithers_tt.PriceTable`, mapping
    or ``.json``/``.toml`` file: ``smithers-tt serve --prices FILE``), in the debugger of the
    address and in every debugger the run browser opens."""
    workflows, prices = list(workflows), PriceTable.of(prices)
    mode = "read-only" if read_only_reason(db) else "actions allowed"
    head = f"<b>smithers_tt</b> · {esc(shared_url(db.url))} · {mode}"
    problem = ""
    try:
        run, frame = read_query(query)
        if run is not None:
            by_name = {wf.name: wf for wf in workflows}
            workflow = by_name.get(db.get_run(run).record.workflow)
            debugger = db.debug(run, frame=frame, workflow=workflow, prices=prices)
            # a plain link: the page without a query is the run browser
            head += ' · <a class="stt-all-runs" href="?">all runs</a>'
            return _page(head, debugger)
    except SmithersError as error:
        problem = f'<div class="stt-error stt-served-problem">{esc(error.message)}</div>'
    return _page(head + problem, db.browse(workflows, prices=prices))


def _page(head: str, body: W.Widget) -> W.VBox:
    page = W.VBox(
        [W.HTML(CSS + wrap(f"<div>{head}</div>")), body],
        layout=W.Layout(width="100%", max_width="100%"),
    )
    page.add_class("stt-served")
    return page
