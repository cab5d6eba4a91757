"""The model-calls table shows each cell's whole text, in a real browser: no "+927.0 …",
"(inher…" or "429 HTT…" at any width a debugger is shown at (a newcomer saw those at 848 px),
and each number on one line (no "+1,19" over "6.0 ms"), each heading too from 480 px (no
"token" over "s").

The table the debugger shows for a fork (inherited calls, a failed call, starts a second
after the first call), in the debugger's stylesheet and JupyterLab's font, drawn by Chromium
(no JupyterLab: the table is plain HTML) in boxes from a narrow cell to a wide window; each
text cell's content is measured against its box, and the table against the box it is in.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import smithers_tt as st
from smithers_tt.demo import DEMO_PRICES, demo_workflow
from smithers_tt.widgets import Debugger
from smithers_tt.widgets._html import CSS

LAB_FONT = "system-ui, -apple-system, blinkmacsystemfont, 'Segoe UI', helvetica, arial, sans-serif"
WIDTHS = (360, 480, 600, 760, 1000, 1240)

MEASURE = r"""(width) => {
  const box = document.getElementById('box');
  box.style.width = width + 'px';
  const table = box.querySelector('table.stt-waterfall');
  const cut = [];
  for (const td of table.querySelectorAll('tr[data-call] td')) {
    if (td.querySelector('.stt-call-bar')) continue;  // the latency bar: a drawing, no text
    if (td.scrollWidth > td.clientWidth + 1)
      cut.push(td.textContent);
  }
  // a number ("+1,196.0" of "+1,196.0 ms", "429" of "429 HTTP 429") split over two lines:
  // the cell's text read line by line, as drawn (its unit may go to the next line)
  const broken = [];
  for (const td of table.querySelectorAll('tr[data-call] td')) {
    const number = td.innerText.trim().match(/^[#+]?\d[\d,.]*/);
    if (!number) continue;
    const lines = new Map();
    const walker = document.createTreeWalker(td, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (let i = 0; i < node.length; i++) {
        const range = document.createRange();
        range.setStart(node, i);
        range.setEnd(node, i + 1);
        const box = range.getClientRects()[0];
        if (!box) continue;
        const top = Math.round(box.top);
        lines.set(top, (lines.get(top) || '') + node.data[i]);
      }
    }
    if (![...lines.values()].some(line => line.includes(number[0])))
      broken.push(td.innerText);
  }
  // a heading ("tokens") drawn over two lines ("token" over "s")
  const split = [];
  for (const th of table.querySelectorAll('th')) {
    const range = document.createRange();
    range.selectNodeContents(th);
    const tops = new Set([...range.getClientRects()].map(r => Math.round(r.top)));
    if (tops.size > 1) split.push(th.textContent);
  }
  return {cut, broken, split, rows: table.querySelectorAll('tr[data-call]').length,
          table: table.getBoundingClientRect().width, box: box.getBoundingClientRect().width,
          texts: [...table.querySelectorAll('tr[data-call] td')].map(td => td.innerText)};
}"""


def test_every_cell_of_the_calls_table_shows_its_whole_text(
    tmp_path: Path, browser_chromium: Any
) -> None:
    db = st.connect(f"sqlite:///{tmp_path / 'calls.db'}")
    run = db.run(demo_workflow(flaky=True)[0], {"topic": "bee"})  # a 429, then a 200
    time.sleep(1.1)  # the fork's own calls start a second after the inherited ones: "+1,0…"
    research_done = max(c.frame_no for c in run.model_call_records() if c.node_id == "research")
    fork = db.resume(db.fork(run.id, research_done + 1).id, demo_workflow(flaky=True)[0])
    debugger = Debugger(db, fork.id, live=False, prices=DEMO_PRICES)
    table = debugger.calls.waterfall.value
    debugger.close()
    db.close()
    assert "(inherited)" in table and "HTTP 429" in table
    page_file = tmp_path / "calls.html"
    page_file.write_text(
        f'<html><body style="margin:0;--jp-ui-font-size1:13px;--jp-ui-font-family:{LAB_FONT}">{CSS}'
        f'<div id="box">{table}</div></body></html>'
    )
    page = browser_chromium.new_page(viewport={"width": max(WIDTHS) + 40, "height": 900})
    try:
        page.goto(page_file.as_uri())
        for width in WIDTHS:
            found = page.evaluate(MEASURE, width)
            assert found["rows"] >= 5, found
            assert found["cut"] == [], f"cut at {width} px: {found['cut']}"
            assert found["broken"] == [], f"numbers split at {width} px: {found['broken']}"
            if width > 440:  # narrower, a heading may wrap rather than the table overflow
                assert found["split"] == [], f"headings split at {width} px: {found['split']}"
            assert found["table"] <= found["box"] + 0.5, found  # nothing reaches past the box
            shown = " ".join(found["texts"])
            assert "(inherited)" in shown and "HTTP 429" in shown, found
            assert re.search(r"\+\d{1,3}(,\d{3})+\.\d ms", shown), found  # "+1,003.0 ms"
            if width in (360, 480, 760):
                page.screenshot(path=str(tmp_path / f"calls-{width}.png"), full_page=True)
    finally:
        page.close()
