"""A breakpoint driven from start to end in a real browser (JupyterLab 4, Debian's chromium,
Playwright), as a person does: the run is paused by its agent's question; the Paused banner
shows the question as text; the person clicks the *before* toggle on the timeline row of a
node that has not run yet (it turns red), types an answer and clicks Continue; the run goes
on live to that breakpoint; Continue again, and it finishes. The outcome is checked in the
database from this process; ``artifacts/pauses-timeline.png`` is the page at the breakpoint.

Skips (or, with ``SMITHERS_TT_REQUIRE_BROWSER=1``, fails) as ``test_browser.py`` does.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import smithers_tt as st

from ._jupyter import TIMEOUT_MS, Lab, run_notebook_at, write_notebook
from ._support import HOSTILE

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"

SETUP = """\
import smithers_tt as st
from smithers_tt.widgets import Debugger

async def pick(request):
    return {{"colour": await request.ask({{"question": {hostile!r}}})}}

async def write(request):
    return {{"text": request.needs["pick"]["colour"]}}

async def check(request):
    return {{"ok": True}}

wf = st.Workflow("paused-in-browser")
wf.task("pick", agent=pick)
wf.task("write", agent=write, needs=["pick"])
wf.task("check", agent=check, needs=["write"])
db = st.connect({db_url!r})
run = db.run(wf)
open("run_id.txt", "w").write(run.id)
print(run.status)
"""

SHOW = """\
dbg = Debugger(db, run.id, workflow=wf, interval=0.2)
display(dbg)
"""


def test_a_breakpoint_from_start_to_end_in_jupyterlab(
    browser_lab: Lab, browser_chromium: Any
) -> None:
    root = browser_lab.folder("paused")
    db_url = f"sqlite:///{root / 'paused.db'}"
    write_notebook(root / "paused.ipynb", [SETUP.format(db_url=db_url, hostile=HOSTILE), SHOW])

    page = browser_chromium.new_page(viewport={"width": 1400, "height": 2000})
    page.set_default_timeout(TIMEOUT_MS)
    try:
        out = run_notebook_at(page, browser_lab.url(root / "paused.ipynb"))
        banner = out.locator(".stt-paused", has_text="Paused")
        banner.wait_for(state="visible")
        assert "while running" in banner.inner_text()
        assert "<img src=x onerror=" in banner.inner_text()  # the question, as text
        assert out.locator(".stt-paused img").count() == 0
        assert _toggle_colour(page, "before check") != BREAK_ON_RGB
        _click_toggle(page, "before check")  # on the timeline row of a node not run yet
        page.wait_for_function(
            f"() => ({TOGGLE_JS})('before check')?.fill === '{BREAK_ON_RGB}'",
            timeout=TIMEOUT_MS,
        )  # drawn set (filled red) once the kernel wrote it
        out.locator(".stt-answer textarea").fill('"teal"')
        out.locator("button.stt-continue").click()
        # live: the run goes on in the kernel's background, to the breakpoint
        banner = out.locator(".stt-paused", has_text="(breakpoint) before")
        banner.wait_for(state="visible")
        assert "check" in banner.inner_text()
        assert _toggle_colour(page, "before check") == BREAK_ON_RGB  # still set
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "pauses-timeline.png"), full_page=True)
        figure = out.locator(".js-plotly-plot").last
        figure.screenshot(path=str(ARTIFACTS / "pauses-timeline-figure.png"))
        out.locator("button.stt-continue").click()
        out.locator(".stt-pause-report", has_text="finished").wait_for(state="attached")
        page.wait_for_function(
            """() => [...document.querySelectorAll('.stt-debugger h4')]
                 .some(h => h.textContent.includes('finished'))""",
            timeout=TIMEOUT_MS,
        )
        assert page.evaluate("() => typeof window.__pwned") == "undefined"
    except Exception:
        ARTIFACTS.mkdir(exist_ok=True)
        with contextlib.suppress(Exception):
            page.screenshot(path=str(ARTIFACTS / "pauses-failure.png"), full_page=True)
        raise
    finally:
        page.close()
        browser_lab.end_sessions()

    run_id = (root / "run_id.txt").read_text().strip()
    with st.connect(db_url) as db:
        run = db.get_run(run_id)
        assert run.status == "finished" and run.output["write"] == {"text": "teal"}
        paused_at = [(f.data["reason"], f.node_id) for f in run.frames() if f.kind == "run_paused"]
        assert paused_at == [("ask", "pick"), ("breakpoint", "check")]
        (marked,) = [f.data for f in run.frames() if f.kind == "breakpoints_set"]
        assert marked == {"breakpoints": {"before": ["check"], "after": []}}


BREAK_ON_RGB = "rgb(214, 39, 40)"  # _timeline.BREAK_ON as the browser reports it

TOGGLE_JS = """(label) => {
  const gd = [...document.querySelectorAll('.stt-debugger .js-plotly-plot')].pop();
  const k = gd && gd.data ? gd.data.findIndex(t => t.name === 'breakpoints') : -1;
  if (k < 0) return null;  // between two draws of the figure
  const i = gd.data[k].hovertext.findIndex(t => t.includes('break ' + label + '<'));
  const trace = gd.querySelectorAll('.scatterlayer .trace')[k];
  const path = trace && i >= 0 ? trace.querySelectorAll('.points path')[i] : null;
  if (!path) return null;
  const box = path.getBoundingClientRect();
  return {x: box.x + box.width / 2, y: box.y + box.height / 2, fill: path.style.fill};
}"""


def _toggle(page: Any, label: str) -> dict[str, Any]:
    """Where the timeline draws a breakpoint toggle, and its colour (once it is drawn).

    One look in the page, both to wait and to read: every redraw lays out a new figure, so a
    second look after the wait could fall between two draws and find none.
    """
    found = page.wait_for_function(f"() => ({TOGGLE_JS})({label!r})", timeout=TIMEOUT_MS)
    return found.json_value()


def _toggle_colour(page: Any, label: str) -> str:
    return _toggle(page, label)["fill"]


def _click_toggle(page: Any, label: str) -> None:
    """Click a breakpoint toggle of the timeline by its coordinates (as a person does)."""
    spot = _toggle(page, label)
    page.mouse.move(spot["x"], spot["y"])
    page.mouse.click(spot["x"], spot["y"])
