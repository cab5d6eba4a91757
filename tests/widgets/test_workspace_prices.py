"""A price table reaches every debugger of the workspace (issue 35): the one a run browser's
row opens, the one the triage view's Open example shows and the one a served page shows price
model calls as ``db.debug(run, prices=...)`` does, on SQLite and PostgreSQL; without a table
no cost is shown anywhere, and a model the table does not name is never given one."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

import pytest

import smithers_tt as st
from smithers_tt.demo import demo_workflow
from smithers_tt.widgets import Debugger, TriageView, served_page
from smithers_tt.widgets._calls import money

LARGE = {"demo-large": {"input": 1.0, "output": 2.0}}
"""A table naming one of the demo's models: the others' calls stay without a cost."""


@pytest.fixture
def demo_run(db: st.Database) -> st.Run:
    """A finished demo run with calls of several models and a failed attempt (a 429 then a
    connection error in research), so it is a failure group's example too."""
    wf, _ = demo_workflow(flaky=True, invalid_first_draft=True)
    run = db.run(wf, {"topic": "bee"})
    assert run.status == "finished"
    return run


def _totals(dbg: Debugger) -> str:
    """The header's model-call totals as a person reads them."""
    text = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", dbg.header.value)).split())
    found = re.search(r"model calls at frame .*", text)
    assert found, text
    return found.group(0)


def _priced(db: st.Database, run: st.Run, frame: int | None, prices: Any) -> str:
    dbg = db.debug(run.id, frame, live=False, prices=prices)
    try:
        return _totals(dbg)
    finally:
        dbg.close()


def _large_cost(run: st.Run, frame: int | None = None) -> float:
    df = run.model_calls(frame_no=frame)
    large = df[df.model == "demo-large"]
    return float((large.prompt_tokens * 1.0 + large.completion_tokens * 2.0).sum()) / 1e6


@pytest.mark.parametrize("prices", [LARGE, None], ids=["table", "none"])
def test_the_run_browsers_debugger_prices_calls_as_db_debug_does(
    db: st.Database, demo_run: st.Run, prices: Any
) -> None:
    browser = db.browse(prices=prices)
    dbg = browser.open_run(demo_run.id)
    try:
        seen = _totals(dbg)
        assert seen == _priced(db, demo_run, None, prices)
        if prices:
            assert money(_large_cost(demo_run)) in seen
            assert "call(s) of models without a price" in seen  # the others: no guess
        else:
            assert "no cost" in seen and "$" not in seen
    finally:
        browser.in_place.back()


def test_the_triage_views_example_prices_calls_as_db_debug_does(
    db: st.Database, demo_run: st.Run
) -> None:
    view = TriageView(db, prices=LARGE)
    (number,) = [n for n, g in enumerate(view.failures) if g.example.run_id == demo_run.id]
    dbg = view.open_example(number)
    try:
        frame = dbg.model.frame_no
        assert _totals(dbg) == _priced(db, demo_run, frame, LARGE)
        if _large_cost(demo_run, frame):
            assert money(_large_cost(demo_run, frame)) in _totals(dbg)
    finally:
        view.in_place.back()


def test_a_served_page_prices_calls_from_a_file_as_db_debug_does(
    db: st.Database, demo_run: st.Run, tmp_path: Path
) -> None:
    table = tmp_path / "prices.json"
    table.write_text(json.dumps(LARGE))
    clock = demo_run.record.clock

    page = served_page(db, f"run={demo_run.id[:8]}&frame={clock}", prices=str(table))
    shown = page.children[1]
    try:
        assert isinstance(shown, Debugger)
        assert _totals(shown) == _priced(db, demo_run, clock, LARGE)
        assert money(_large_cost(demo_run)) in _totals(shown)
    finally:
        shown.close()
    browser = served_page(db, "", prices=str(table)).children[1]
    dbg = browser.open_run(demo_run.id)
    try:
        assert _totals(dbg) == _priced(db, demo_run, None, LARGE)
    finally:
        browser.in_place.back()
