"""A breakpoint driven from start to end in a real browser (JupyterLab 4, Debian's chromium,
Playwright), as a person does: the run is paused by its agent's question; the Paused banner
shows the question as text; the person toggles a breakpoint before the next node, types an
answer and clicks Continue; the run goes on live to the breakpoint; Continue again, and it
finishes. The outcome is checked in the database from this process.

Skips (or, with ``SMITHERS_TT_REQUIRE_BROWSER=1``, fails) as ``test_browser.py`` does.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest

import smithers_tt as st

from ._jupyter import CHROMIUM, TIMEOUT_MS, chromium, jupyterlab, run_notebook, write_notebook
from ._support import HOSTILE

REQUIRE = os.environ.get("SMITHERS_TT_REQUIRE_BROWSER") == "1"
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


def _unavailable(reason: str) -> None:
    if REQUIRE:
        pytest.fail(f"{reason} (SMITHERS_TT_REQUIRE_BROWSER=1: the browser test must run)")
    pytest.skip(reason)


def test_a_breakpoint_from_start_to_end_in_jupyterlab(tmp_path: Path) -> None:
    if not os.path.exists(CHROMIUM):
        _unavailable(f"Debian's chromium is not installed ({CHROMIUM} is missing)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        _unavailable("the playwright Python package is not installed (pip install playwright)")
    root, home = tmp_path / "root", tmp_path / "home"
    root.mkdir()
    home.mkdir()
    db_url = f"sqlite:///{tmp_path / 'paused.db'}"
    write_notebook(root / "paused.ipynb", [SETUP.format(db_url=db_url, hostile=HOSTILE), SHOW])

    with jupyterlab(root, home) as (base, token), chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 2000})
        page.set_default_timeout(TIMEOUT_MS)
        try:
            out = run_notebook(page, base, token, "paused.ipynb")
            banner = out.locator(".stt-paused", has_text="Paused")
            banner.wait_for(state="visible")
            assert "while running" in banner.inner_text()
            assert "<img src=x onerror=" in banner.inner_text()  # the question, as text
            assert out.locator(".stt-paused img").count() == 0
            out.locator("button.stt-breakpoint", has_text="break before check").click()
            out.locator(".stt-answer textarea").fill('"teal"')
            out.locator("button.stt-continue").click()
            # live: the run goes on in the kernel's background, to the breakpoint
            out.locator(".stt-paused", has_text="(breakpoint) before").wait_for(state="visible")
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

    run_id = (root / "run_id.txt").read_text().strip()
    with st.connect(db_url) as db:
        run = db.get_run(run_id)
        assert run.status == "finished" and run.output["write"] == {"text": "teal"}
        paused_at = [(f.data["reason"], f.node_id) for f in run.frames() if f.kind == "run_paused"]
        assert paused_at == [("ask", "pick"), ("breakpoint", "check")]
