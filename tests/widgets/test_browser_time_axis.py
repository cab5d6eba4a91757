"""The timeline's time axis in a real browser: its title "time" is drawn below the tick labels,
never over them (a replay shown at 1280 px had "time" over "07:59:20.39"), and no tick label
reaches over the breakpoint column's "before" and "after" (the clean run's first label did, at
400-420 px).

The figure the debugger draws with "time axis" ticked, in JupyterLab's font, plotted by the
plotly.js that plotly ships (no JupyterLab: the axis is plotly's alone) at widths from narrow
to wide (plotly tilts the tick labels at some of them: where depends on the run's times); the
title's box and each tick label's are measured at each width.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import plotly
import pytest
from plotly.io.json import to_json_plotly

import smithers_tt as st
from smithers_tt.widgets import DebuggerModel
from smithers_tt.widgets._theme import clean_theme
from smithers_tt.widgets._timeline_figure import build_timeline

PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
LAB_FONT = "system-ui, -apple-system, blinkmacsystemfont, 'Segoe UI', helvetica, arial, sans-serif"
"""JupyterLab's ``--jp-ui-font-family``, which the debugger's theme hands the figure."""
WIDTHS = range(380, 1300, 20)

DRAW_AND_MEASURE = """async (width) => {
  const box = (e) => { const b = e.getBoundingClientRect();
    return {l: b.left, r: b.right, t: b.top, b: b.bottom, w: b.width, text: e.textContent}; };
  const gd = document.getElementById('figure');
  gd.style.width = width + 'px';
  await Plotly.newPlot(gd, window.fig.data, window.fig.layout, {responsive: true});
  const measure = () => JSON.stringify({width, title: box(gd.querySelector('.g-xtitle text')),
      ticks: [...gd.querySelectorAll('.xtick text')].map(box).filter(b => b.w > 0),
      captions: [...gd.querySelectorAll('.x2tick text')].map(box).filter(b => b.w > 0)});
  const frame = () => new Promise((done) => requestAnimationFrame(() => done()));
  // What a person sees: the figure once it stops moving. Automargin lays the axis out again
  // after newPlot resolves (tilted labels push the margin, then the title), so a busy machine
  // could measure a frame in between.
  let seen = measure();
  for (let i = 0; i < 40; i++) {
    await frame(); await frame();
    const now = measure();
    if (now === seen) break;
    seen = now;
  }
  return JSON.parse(seen);
}"""


def _overlap(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return not (a["r"] <= b["l"] or b["r"] <= a["l"] or a["b"] <= b["t"] or b["b"] <= a["t"])


@pytest.mark.parametrize("case", ["replay", "clean"])
def test_the_time_axis_title_is_below_its_tick_labels_at_every_width(
    tmp_path: Path, demo_copy: Path, browser_chromium: Any, case: str
) -> None:
    db = st.connect(f"sqlite:///{demo_copy}")  # build_demo's store, built once per test run
    (replay,) = db.runs(labels={"case": case})
    theme = clean_theme({"font": LAB_FONT})
    figure = build_timeline(DebuggerModel(db, replay.id), time_axis=True, theme=theme)
    db.close()
    page_file = tmp_path / "time-axis.html"
    page_file.write_text(
        f'<html><body style="margin:0"><script src="{PLOTLY_JS.as_uri()}"></script>'
        f'<div id="figure"></div><script>window.fig = {to_json_plotly(figure.figure)};'
        "</script></body></html>"
    )
    page = browser_chromium.new_page(viewport={"width": max(WIDTHS) + 40, "height": 900})
    try:
        page.goto(page_file.as_uri())
        covered = []
        for width in WIDTHS:
            found = page.evaluate(DRAW_AND_MEASURE, width)
            title, ticks = found["title"], found["ticks"]
            # At 380-420 px plotly may space the ticks wider than a short run's span and
            # draw one label (seen for a demo whose replay lasted 0.08 s): what matters here
            # is that every label drawn clears the title and the captions.
            assert title["text"] == "time" and ticks, found
            covered += [(width, t["text"]) for t in ticks if _overlap(title, t)]
            # nor does a label reach over the breakpoint column's "before" and "after"
            captions = found["captions"]
            assert [c["text"] for c in captions] == ["before", "after"], found
            covered += [(width, t["text"]) for t in ticks for c in captions if _overlap(c, t)]
            if covered and covered[0][0] == width:
                page.screenshot(path=str(tmp_path / f"time-axis-{width}.png"))
    finally:
        page.close()
    assert covered == [], f"tick labels under 'time' or a caption (width, label): {covered}"
