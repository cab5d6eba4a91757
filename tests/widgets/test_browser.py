"""The debugger in a real browser: JupyterLab 4 and Debian's chromium, driven by Playwright.

The JupyterLab server the browser tests of a worker share (``browser_lab``; the dark theme this
test switches to is put back to the default at its end); a notebook builds the
demo database, adds a run whose checkpoint holds hostile markup, and shows
``Debugger(db, run_id)``. In a wide window the test clicks a frame point, opens the
conversation view, searches the frame table and picks a row, forks with confirmation (checked
in the database from this process) and checks no markup executed. Then, in a 1024 px window
(a ~590 px cell), no element of the debugger reaches past the cell and the fork's progress
line is read whole; then, in JupyterLab Dark, the text, the diff rows and the plotly figure
take the dark theme's colours.

Screenshots go to ``artifacts/`` (untracked), never over tracked files: the README's image is
made on purpose by ``docs/hero_image.py``. Without ``/usr/bin/chromium`` (or the
``playwright`` package) the test skips and says why; with ``SMITHERS_TT_REQUIRE_BROWSER=1``
(set by ``.ci/run``) it fails instead.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from pathlib import Path
from typing import Any

import pytest

import smithers_tt as st

from ._jupyter import (
    CHROMIUM,
    TIMEOUT_MS,
    Lab,
    cell_width,
    click_point,
    run_notebook_at,
    wait_cell_width_changed,
    wait_settled,
)
from ._jupyter import write_notebook as _write_notebook
from ._support import HOSTILE, SCRIPT

REQUIRE = os.environ.get("SMITHERS_TT_REQUIRE_BROWSER") == "1"
REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "artifacts"
THEMES = "@jupyterlab/apputils-extension:themes"
"""The settings that hold JupyterLab's theme (the shared ``browser_lab``'s, put back after)."""


def _unavailable(reason: str) -> None:
    if REQUIRE:
        pytest.fail(f"{reason} (SMITHERS_TT_REQUIRE_BROWSER=1: the browser test must run)")
    pytest.skip(reason)


NOTEBOOK_SETUP = """\
import smithers_tt as st
from smithers_tt import AgentCheckpoint
from smithers_tt.demo import demo_workflow
from smithers_tt.demo.agents import NOTES
from smithers_tt.demo.showcase import build_demo
from smithers_tt.widgets import Debugger

db = st.connect({db_url!r})
made = {{r.label: r.run_id for r in build_demo(db)}}
clean = db.get_run(made["clean"])
frame = max(
    f.frame_no
    for f in clean.frames()
    if f.kind == "node_state" and f.node_id == "research" and f.state == "finished"
)
notes = dict(db.snapshot(clean.id, frame).payload("research"))
notes["notes"] = [{hostile!r}, {script!r}, *notes["notes"][2:]]
hostile = db.fork(clean.id, frame, checkpoints={{"research": AgentCheckpoint(NOTES, 1, notes)}})
wf, _ = demo_workflow()
db.resume(hostile.id, wf)
open("hostile_id.txt", "w").write(hostile.id)
print("hostile run", hostile.id)
"""

NOTEBOOK_SHOW = """\
dbg = Debugger(db, hostile.id)
display(dbg)
"""


def _luminance(css: str) -> float:
    """Relative luminance (0 black .. 1 white) of an ``rgb(...)`` / ``rgba(...)`` colour."""
    r, g, b = (int(float(v)) for v in re.findall(r"[\d.]+", css)[:3])

    def lin(c: int) -> float:
        c = c / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    return 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b)


OVERFLOW = """(sel) => {
  const root = document.querySelector(sel);
  const cell = root.closest('.jp-OutputArea-output').getBoundingClientRect();
  const bad = [];
  for (const el of root.querySelectorAll('*')) {
    const b = el.getBoundingClientRect();
    if (b.width === 0 || b.height === 0) continue;
    if (el.ownerSVGElement) continue;  // drawn inside an svg, which clips it
    if (b.right > cell.right + 1 || b.left < cell.left - 1) {
      const name = `${el.tagName}.${String(el.className).slice(0, 60)}`;
      bad.push(`${name} right ${Math.round(b.right - cell.right)}px`);
    }
  }
  const r = root.getBoundingClientRect();
  return {cell: cell.width, root: r.width, scroll: root.scrollWidth, client: root.clientWidth,
          bad: bad.slice(0, 12), count: bad.length};
}"""

PROGRESS_TEXT = """() => [...document.querySelectorAll('.stt-debugger .stt-progress')].map(p => {
  // the text beside (or under) an action's bar: whole, not cut by its own box or a parent's
  const t = p.lastElementChild, b = t.getBoundingClientRect(), cut = [];
  for (let e = t.parentElement; e && !e.classList.contains('stt-debugger'); e = e.parentElement) {
    if (b.right > e.getBoundingClientRect().right + 1) cut.push(String(e.className).slice(0, 60));
  }
  if (t.scrollWidth > t.clientWidth + 1) cut.push('the text itself');
  return {text: t.textContent, cut};
})"""

ROWS = """() => [...document.querySelectorAll('.stt-debugger .js-plotly-plot .ytick text')]
  .map(t => [t.getBoundingClientRect().top, t.textContent])
  .sort((a, b) => a[0] - b[0]).map(([, text]) => text)"""
"""The timeline's row labels as a person reads them, top to bottom."""

BACKGROUND = r"""(el) => {
  // the colour a person sees behind el: translucent backgrounds blended over the first opaque one
  const layers = [];
  for (let e = el; e; e = e.parentElement) {
    const m = getComputedStyle(e).backgroundColor.match(/[\d.]+/g);
    if (!m) continue;
    const a = m.length > 3 ? +m[3] : 1;
    if (a === 0) continue;
    layers.push([+m[0], +m[1], +m[2], a]);
    if (a === 1) break;
  }
  let c = [255, 255, 255];
  for (const [r, g, b, a] of layers.reverse()) {
    c = [r * a + c[0] * (1 - a), g * a + c[1] * (1 - a), b * a + c[2] * (1 - a)];
  }
  return `rgb(${c.map(Math.round).join(', ')})`;
}"""


def test_debugger_in_jupyterlab(tmp_path: Path, browser_lab: Lab, browser_chromium: Any) -> None:
    if not os.path.exists(CHROMIUM):
        _unavailable(
            f"Debian's chromium is not installed ({CHROMIUM} is missing; "
            "apt-get install -y chromium)"
        )
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        _unavailable("the playwright Python package is not installed (pip install playwright)")

    root = browser_lab.folder("debugger")
    db_path = tmp_path / "demo.db"
    db_url = f"sqlite:///{db_path}"
    cells = [NOTEBOOK_SETUP.format(db_url=db_url, hostile=HOSTILE, script=SCRIPT), NOTEBOOK_SHOW]
    _write_notebook(root / "debugger.ipynb", cells)
    ARTIFACTS.mkdir(exist_ok=True)
    tracked = _tracked_state()
    started = time.monotonic()

    page = browser_chromium.new_page(viewport={"width": 1500, "height": 2300})
    try:
        page.set_default_timeout(TIMEOUT_MS)
        dialogs: list[str] = []

        def on_dialog(dialog) -> None:  # type: ignore[no-untyped-def]
            dialogs.append(dialog.message)
            dialog.dismiss()

        page.on("dialog", on_dialog)
        console: list[str] = []
        page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
        page.on("pageerror", lambda e: console.append(f"pageerror: {e}"))
        try:
            selected, child_id, hostile_id = _drive(page, browser_lab, root, db_url, dialogs)
            _narrow(page)
            _fork_rows(page, child_id)
            _dark(page)
        except Exception:
            with contextlib.suppress(Exception):
                page.screenshot(path=str(ARTIFACTS / "debugger-failure.png"), full_page=True)
            print("browser console:\n" + "\n".join(console[-80:]))
            raise
    finally:
        page.close()
        browser_lab.end_sessions()
        # the theme is the shared server's setting: back to its default for the next test
        theme = browser_lab.reset_settings(THEMES).get("theme", "JupyterLab Light")
        assert theme == "JupyterLab Light", theme

    with st.connect(db_url) as db:  # the fork is in the database, seen from this process
        child = db.get_run(child_id)
        assert child.record.parent_run_id == hostile_id
        assert child.record.parent_frame_no == selected
        assert len(db.runs(limit=1000)) == 9  # seven demo runs, the hostile fork, this fork
    assert _tracked_state() == tracked  # the test left every tracked file as it was
    print(f"browser round trip took {time.monotonic() - started:.1f} s")


def _tracked_state() -> str:
    import subprocess

    done = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    return done.stdout if done.returncode == 0 else ""


def _shoot(page: Any, name: str) -> None:
    out = page.locator(".jp-OutputArea-output .stt-debugger")
    out.scroll_into_view_if_needed()
    wait_settled(page)  # scrolled to and still: what the screenshot shows
    out.screenshot(path=str(ARTIFACTS / name))


def _drive(
    page: Any, lab: Lab, root: Path, db_url: str, dialogs: list[str]
) -> tuple[int, str, str]:
    """Run the notebook, click a point, look, search, fork; return (selected frame, child
    id, hostile id)."""
    out = run_notebook_at(page, lab.url(root / "debugger.ipynb"))
    # the timeline drew (a redraw for the page's theme may lay out a new figure meanwhile)
    out.locator(".js-plotly-plot svg.main-svg").first.wait_for(state="attached")
    hostile_id = (root / "hostile_id.txt").read_text().strip()
    with st.connect(db_url) as db:
        last = db.get_run(hostile_id).record.clock
    label = out.locator(".widget-label", has_text=re.compile(r"^frame \d+ of \d+"))
    assert label.first.inner_text().startswith(f"frame {last} of {last}")

    # a redraw for the page's theme moves the points a moment later: click once it is still
    # (a click measured before it lands on whatever marker then lies there)
    wait_settled(page)
    click_point(page, out)  # the first checkpoint marker
    page.wait_for_function(
        """(last) => [...document.querySelectorAll('.stt-debugger .widget-label')]
             .some(e => /^frame \\d+ of/.test(e.textContent)
                        && !e.textContent.startsWith(`frame ${last} of`))""",
        arg=last,
        timeout=TIMEOUT_MS,
    )
    text = label.first.inner_text()
    selected = int(text.split()[1])
    assert selected < last and "checkpoint of" in text, text
    page.wait_for_function(  # the timeline's selected-frame line moved there too
        """(n) => { const gd = document.querySelector('.stt-debugger .js-plotly-plot');
                    return gd && gd.layout.shapes && gd.layout.shapes[0].x0 === n; }""",
        arg=selected,
        timeout=TIMEOUT_MS,
    )
    # the inspector shows that frame's own checkpoint
    seq = re.search(r"seq (\d+)", text)
    assert seq is not None
    payload = out.locator(".stt-payload")
    payload.filter(has_text=f"seq {seq.group(1)}").first.wait_for(state="visible")

    # the hostile payload shows as text (the selected checkpoint is the edited notes)
    inspector = out.locator(".widget-html", has_text="onerror")
    inspector.first.wait_for(state="visible", timeout=TIMEOUT_MS)
    assert 'onerror="window.__pwned=1"' in out.inner_text()
    assert out.locator("img[src='x']").count() == 0

    # the notes as a conversation: one message per note, the markup as text
    out.locator(".stt-payload-view .widget-toggle-button", has_text="conversation").click()
    messages = out.locator(".stt-payload .stt-msg")
    messages.first.wait_for(state="visible", timeout=TIMEOUT_MS)
    assert messages.count() >= 2
    assert "onerror" in messages.first.inner_text()

    # the frame table: search inside payloads, then pick a row
    rows = out.locator(".stt-frame-rows select option")
    everything = rows.count()
    search = out.locator(".stt-frame-search input")
    search.fill("finding 3")
    search.press("Enter")
    page.wait_for_function(
        """(n) => document.querySelectorAll('.stt-frame-rows select option').length < n""",
        arg=everything,
        timeout=TIMEOUT_MS,
    )
    found = [rows.nth(i).inner_text() for i in range(rows.count())]
    assert found and all("checkpoint" in r for r in found), found
    pick = int(found[-1].split()[0])
    out.locator(".stt-frame-rows select").select_option(index=len(found) - 1)
    label.filter(has_text=f"frame {pick} of").first.wait_for(state="visible")
    _shoot(page, "debugger-light.png")

    # Fork, then Confirm; the report names the new run
    out.locator("button.stt-fork").click()
    out.locator("button.stt-confirm").click()
    report = out.locator(".stt-report", has_text="new run")
    report.wait_for(state="visible", timeout=TIMEOUT_MS)
    match = re.search(r"new run (\S+) \(", report.inner_text())
    assert match, report.inner_text()
    child_id = match.group(1)

    # compare with the parent run at the fork point: the edited notes show as changes
    out.locator(".widget-toggle-button", has_text="run / fork").click()
    diff = out.locator(".stt-diff", has_text="$.payload.notes[0]")
    diff.wait_for(state="visible", timeout=TIMEOUT_MS)
    assert "<script>window.__pwned=2</script>" in diff.inner_text()  # shown as text

    # frame 0 of the hostile fork, with the previous frame: its parent's frame at the fork
    # point (the edited notes show), never frame 0 against itself
    out.locator(".widget-toggle-button", has_text=re.compile(r"^frames$")).click()
    out.locator("button[title='first frame']").click()
    label.filter(has_text="frame 0 of").first.wait_for(state="visible")
    note = "frame 0 of a fork: compared with its parent's frame"
    diff = out.locator(".stt-diff", has_text=note)
    diff.wait_for(state="visible", timeout=TIMEOUT_MS)
    shown = diff.inner_text()
    assert "$.payload.notes[0]" in shown and "same frame" not in shown, shown
    assert page.evaluate("() => typeof window.__pwned") == "undefined"
    assert dialogs == []
    return pick, child_id, hostile_id


def _fork_rows(page: Any, child_id: str) -> None:
    """The new fork, not started (it has no frames of its node yet): its rows keep the graph's
    order, not the stored graph's (by name: research, review, write). After :func:`_narrow`,
    which reads the fork's progress line (a run switch clears it)."""
    out = page.locator(".jp-OutputArea-output .stt-debugger")
    label = out.locator(".widget-label", has_text=re.compile(r"^frame \d+ of \d+"))
    out.locator(f"button[title='show run {child_id}']").click()
    label.filter(has_text="frame 0 of 0").first.wait_for(state="visible")
    page.wait_for_function(f"() => ({ROWS})().join() === 'run,research,write,review'")


def _narrow(page: Any) -> None:
    """In a 1024 px window nothing of the debugger reaches past its ~590 px cell."""
    debugger = ".jp-OutputArea-output .stt-debugger"
    before = cell_width(page, debugger)
    page.set_viewport_size({"width": 1024, "height": 3800})  # tall: the screenshot shows all
    wait_cell_width_changed(page, before, debugger)
    wait_settled(page, debugger)  # plotly redrew at the new width, and nothing moves any more
    found = page.evaluate(OVERFLOW, ".jp-OutputArea-output .stt-debugger")
    what = f"{found}"
    assert found["cell"] < 700, what  # it is a narrow cell
    assert found["count"] == 0, what
    assert found["root"] <= found["cell"] + 1, what
    assert found["scroll"] <= found["client"] + 1, what
    cut = page.evaluate(
        """() => [...document.querySelectorAll('.stt-debugger button.stt-run')]
                  .filter(b => b.scrollWidth > b.clientWidth + 1).map(b => b.textContent)"""
    )
    assert cut == [], cut  # fork-tree labels wrap instead of ending in "…"
    line = page.evaluate(  # the scrubber's line ("frame 0 of 17: forked from run ...") whole
        """() => { const l = document.querySelector('.stt-debugger .stt-scrub-line');
                   return [l.textContent, l.scrollWidth <= l.clientWidth + 1,
                           l.scrollHeight <= l.clientHeight + 1]; }"""
    )
    assert line[0].startswith("frame 0 of") and line[1:] == [True, True], line
    # the fork's "forking, 0.3 s done" is read whole (the bar used to hide its end)
    progress = page.evaluate(PROGRESS_TEXT)
    assert progress and all(p["cut"] == [] for p in progress), progress
    slider = page.locator(".stt-debugger .stt-slider").bounding_box()
    assert slider is not None and slider["width"] >= 150  # still usable
    _shoot(page, "debugger-narrow.png")


def _dark(page: Any) -> None:
    """In JupyterLab Dark the text is light on dark, the diff rows too, and the figure."""
    page.evaluate(
        "() => { window.jupyterapp.commands.execute('apputils:change-theme',"
        " {theme: 'JupyterLab Dark'}); }"
    )
    page.wait_for_function(
        "() => document.body.dataset.jpThemeLight === 'false'", timeout=TIMEOUT_MS
    )
    # the figure follows through the kernel (theme probe -> plotly layout): tick text goes light
    page.wait_for_function(
        r"""() => { const t = document.querySelector('.stt-debugger .js-plotly-plot .xtick text');
                   if (!t) return false;
                   const m = (t.style.fill || getComputedStyle(t).fill).match(/[\d.]+/g);
                   return m && (+m[0] + +m[1] + +m[2]) / 3 > 170; }""",
        timeout=TIMEOUT_MS,
    )
    out = page.locator(".jp-OutputArea-output .stt-debugger")
    text = out.locator(".stt-inspector .stt h4").first
    colour = text.evaluate("e => getComputedStyle(e).color")
    behind = text.evaluate(BACKGROUND)
    assert _luminance(colour) > 0.5 and _luminance(behind) < 0.1, (colour, behind)
    row = out.locator(".stt-diff .stt-chg .stt-path").first
    row_colour = row.evaluate("e => getComputedStyle(e).color")
    row_behind = row.evaluate(BACKGROUND)
    assert _luminance(row_colour) > 0.5 and _luminance(row_behind) < 0.2, (row_colour, row_behind)
    paper = out.locator(".js-plotly-plot .main-svg").first.evaluate(
        "e => getComputedStyle(e).backgroundColor"
    )
    assert paper in ("rgba(0, 0, 0, 0)", "transparent"), paper
    _shoot(page, "debugger-dark.png")
