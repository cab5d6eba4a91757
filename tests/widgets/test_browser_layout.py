"""The debugger's layout in narrow JupyterLab windows (issue 33, item 5), in a real browser.

A notebook builds the demo database, forks the clean run three more times at the frame where
the demo's fork and replay start (five forks at one frame), and shows two debuggers: the
clean run (the forks) and the demo's fork (its "fork of ... @ n" label). In 800 px and 1024 px
windows, and in an 800 px window with the file browser open (a 368 px cell), for both: no
element of the debugger reaches past the cell; the fork labels' bounding boxes are pairwise
disjoint and cover no marker of the plot; the frame axis's labels do not overlap; the legend
takes at most 40% of the figure and the plot area stays at least 120 px tall; the breakpoint
toggles and their captions do not overlap; the frame table's first row is wholly inside its
box and its rows, and the checkpoint list's, end in an ellipsis when cut. Screenshots go to
``artifacts/`` (untracked).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from ._jupyter import (
    TIMEOUT_MS,
    Lab,
    cell_width,
    run_notebook_at,
    wait_cell_width_changed,
    wait_settled,
)
from ._jupyter import write_notebook as _write_notebook

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"

SETUP = """\
import smithers_tt as st
from smithers_tt.demo.showcase import build_demo
from smithers_tt.widgets import Debugger

db = st.connect({db_url!r})
made = {{r.label: r.run_id for r in build_demo(db)}}
clean = db.get_run(made["clean"])
at = db.get_run(made["fork"]).record.parent_frame_no
extra = [db.fork(clean.id, at, reason=f"probe {{i}}").id for i in range(3)]
print("forks at", at, extra)
"""

SHOW = """\
display(Debugger(db, clean.id))
display(Debugger(db, made["fork"]))
"""

MEASURE = r"""(index) => {
  const root = document.querySelectorAll('.jp-OutputArea-output .stt-debugger')[index];
  const cell = root.closest('.jp-OutputArea-output').getBoundingClientRect();
  const box = (e) => { const b = e.getBoundingClientRect();
    return {l: b.left, r: b.right, t: b.top, b: b.bottom, w: b.width, h: b.height}; };
  const past = [];
  for (const el of root.querySelectorAll('*')) {
    const b = el.getBoundingClientRect();
    if (b.width === 0 || b.height === 0 || el.ownerSVGElement) continue;
    if (b.right > cell.right + 1 || b.left < cell.left - 1)
      past.push(`${el.tagName}.${String(el.className).slice(0, 50)} ${b.right - cell.right}px`);
  }
  const gd = root.querySelector('.js-plotly-plot');
  const fig = gd.querySelector('.main-svg').getBoundingClientRect();
  const legend = gd.querySelector('g.legend');
  const labels = [...gd.querySelectorAll('g.annotation')]
    .filter(a => /fork/.test(a.textContent)).map(a => ({text: a.textContent, ...box(a)}));
  const points = [...gd.querySelectorAll('.subplot.xy .scatterlayer .points path')].map(box);
  const toggles = [...gd.querySelectorAll('.subplot.x2y .scatterlayer .points path')].map(box);
  const captions = [...gd.querySelectorAll('.x2tick text')].map(box);
  const ticks = [...gd.querySelectorAll('.xtick text')].map(box).filter(b => b.w > 0);
  const refs = root.querySelector('.stt-refs select option');
  const select = root.querySelector('.stt-frame-rows select');
  const inner = select.getBoundingClientRect().top + select.clientTop;
  // the first row seen: the first whose bottom is below the top of the list's inside
  const option = [...select.options].find(o => o.getBoundingClientRect().bottom > inner + 0.5);
  return {
    gd: [gd.getBoundingClientRect().width, gd.parentElement.getBoundingClientRect().width,
         gd._fullLayout.width, gd._fullLayout.autosize, gd._context.responsive,
         gd.layout.width, document.querySelectorAll('.js-plotly-plot').length],
    cell: cell.width, past: past.slice(0, 12), pastCount: past.length,
    figure: fig.height, svg: box(gd.querySelector('.main-svg')), legend: legend ? box(legend).h : 0,
    plot: gd._fullLayout._size.h, labels, points, toggles, captions, ticks,
    refsEllipsis: refs ? getComputedStyle(refs).textOverflow : null,
    first: option ? box(option) : null, inner,
    inside: select.getBoundingClientRect().top + select.clientTop + select.clientHeight,
    ellipsis: option ? getComputedStyle(option).textOverflow : null,
    clipped: option ? option.scrollWidth > option.clientWidth + 1 : null,
  };
}"""


WINDOWS = [(1024, False), (800, False), (800, True)]
"""JupyterLab windows measured: width, and whether the file browser is open (at 800 px it
leaves the cell 368 px)."""


FILE_BROWSER = "() => window.jupyterapp.commands.execute('filebrowser:activate')"
SIDE_PANEL_OPEN = "() => !window.jupyterapp.shell.leftCollapsed"
CLOSE_SIDE_PANEL = "() => window.jupyterapp.shell.collapseLeft()"


def _apart(a: dict[str, float], b: dict[str, float], slack: float = 0.5) -> bool:
    """Whether two boxes do not overlap (touching edges are fine)."""
    return (
        a["r"] <= b["l"] + slack
        or b["r"] <= a["l"] + slack
        or a["b"] <= b["t"] + slack
        or b["b"] <= a["t"] + slack
    )


def _check(page: Any, index: int, width: int, forks: int) -> dict[str, Any]:
    page.wait_for_function(  # a redraw (the theme, new frames) replaces the figure: drawn
        """(i) => { const r = document.querySelectorAll('.jp-OutputArea-output .stt-debugger')[i];
                    const gd = r && r.querySelector('.js-plotly-plot');
                    return !!gd && !!gd._fullLayout && !!gd.querySelector('g.legend'); }""",
        arg=index,
        timeout=TIMEOUT_MS,
    )
    found = page.evaluate(MEASURE, index)
    what = f"{width} px, debugger {index}: " + repr(
        {k: v for k, v in found.items() if k not in ("points",)}
    )
    assert found["pastCount"] == 0, what  # nothing reaches past the cell
    assert found["legend"] <= 0.4 * found["figure"], what  # the legend leaves room for the plot
    assert found["plot"] >= 120, what  # the rows stay readable
    labels = found["labels"]
    assert len(labels) >= forks, what
    for a in labels:  # inside the figure, not cut at its edge
        assert a["l"] >= found["svg"]["l"] - 0.5 and a["r"] <= found["svg"]["r"] + 0.5, what
    for i, a in enumerate(labels):
        for b in labels[i + 1 :]:
            assert _apart(a, b), f"labels overlap: {a} {b}; {what}"
        for p in found["points"]:
            assert _apart(a, p, slack=1), f"label covers a marker: {a} {p}; {what}"
    toggles, captions = found["toggles"], found["captions"]
    assert toggles, what
    for group in (toggles, captions):
        for i, a in enumerate(group):
            for b in group[i + 1 :]:
                assert _apart(a, b), f"toggles or captions overlap: {a} {b}; {what}"
    for c in captions:
        for t in toggles:
            assert _apart(c, t), f"caption over a toggle: {c} {t}; {what}"
    ticks = found["ticks"]
    assert len(ticks) >= 3, what  # the frame axis is labelled...
    for i, a in enumerate(ticks):  # ...with labels side by side, never on top of each other
        for b in ticks[i + 1 :]:
            assert _apart(a, b), f"frame axis labels overlap: {a} {b}; {what}"
    assert found["refsEllipsis"] == "ellipsis", what  # a cut checkpoint row says it is cut
    first = found["first"]
    assert first is not None, what
    # the first row seen is wholly inside the list, not cut in half at its top
    assert first["t"] >= found["inner"] - 0.5 and first["b"] <= found["inside"] + 0.5, what
    assert found["ellipsis"] == "ellipsis", what
    return found


def _shoot(page: Any, index: int, name: str) -> None:
    out = page.locator(".jp-OutputArea-output .stt-debugger").nth(index)
    out.scroll_into_view_if_needed()
    wait_settled(page)  # scrolled to and still: what the screenshot shows
    out.screenshot(path=str(ARTIFACTS / name))


def test_layout_in_narrow_windows(browser_lab: Lab, browser_chromium: Any) -> None:
    root = browser_lab.folder("layout")
    db_url = f"sqlite:///{root / 'demo.db'}"
    _write_notebook(root / "layout.ipynb", [SETUP.format(db_url=db_url), SHOW])
    ARTIFACTS.mkdir(exist_ok=True)

    # drawn at 1024 px: the figure takes the cell's width (not plotly's default 700 px)
    page = browser_chromium.new_page(viewport={"width": 1024, "height": 4000})
    page.set_default_timeout(TIMEOUT_MS)
    try:
        out = run_notebook_at(page, browser_lab.url(root / "layout.ipynb"))
        debuggers = page.locator(".jp-OutputArea-output .stt-debugger")
        debuggers.nth(1).wait_for(state="visible", timeout=TIMEOUT_MS)
        page.wait_for_function(
            """() => [...document.querySelectorAll('.stt-debugger .js-plotly-plot')]
                      .filter(g => g._fullLayout).length === 2""",
            timeout=TIMEOUT_MS,
        )
        assert out.count() == 2
        if page.evaluate(SIDE_PANEL_OPEN):  # a new workspace may show the file browser: the
            before = cell_width(page)  # windows without it are measured without it
            page.evaluate(CLOSE_SIDE_PANEL)
            wait_cell_width_changed(page, before, ".jp-OutputArea-output .stt-debugger")
        shown_at, cells = 1024, {}
        for width, browser_open in WINDOWS:
            before = cell_width(page)
            page.set_viewport_size({"width": width, "height": 4000})
            if width != shown_at:  # a narrower window reaches the notebook's cells
                wait_cell_width_changed(page, before, ".jp-OutputArea-output .stt-debugger")
                shown_at = width
            if browser_open:  # the file browser takes its 250 px of the window's left
                page.evaluate(FILE_BROWSER)  # (a new workspace may show it already)
                page.locator("#filebrowser").wait_for(state="visible", timeout=TIMEOUT_MS)
            wait_settled(page)  # plotly redrew at the new width, and nothing moves any more
            name = f"{width}{'-browser' if browser_open else ''}"
            for index, forks in ((0, 5), (1, 1)):
                found = _check(page, index, width, forks)
                if browser_open:
                    assert found["cell"] <= 400, found["cell"]  # the narrow case it is
                print(name, index, {k: found[k] for k in ("cell", "figure", "legend", "plot")})
                _shoot(page, index, f"layout-{name}-{index}.png")
                cells[name] = found["cell"]
        # three different widths were measured: the file browser took its panel's width
        assert cells["1024"] > cells["800"] > cells["800-browser"] + 200, cells
    except Exception:
        with contextlib.suppress(Exception):
            page.screenshot(path=str(ARTIFACTS / "layout-failure.png"), full_page=True)
            for index in (0, 1):
                _shoot(page, index, f"layout-failure-{index}.png")
        raise
    finally:
        page.close()
        browser_lab.end_sessions()
