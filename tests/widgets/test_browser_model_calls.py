"""The model calls' waterfall as a person uses it, in a real JupyterLab in Chromium (issue 36,
item 3): a click on a call's bar shows that call's request and reply; scrubbing to a frame
before the call was made redraws the waterfall for that frame and leaves no call shown;
scrubbing back and pressing Enter on its row (reached by the keyboard) shows it again.

The notebook runs the demo workflow (a 429 then a 200 in its research, calls in every node)
and prints, for one call made by a later attempt, its id, its frame, the last message of its
request and its reply, and how many calls the frame before it sees; the page must show those
texts for that call and those rows for that frame. A screenshot of the debugger after the
click goes to ``artifacts/model-calls-click.png`` (untracked).
"""

from __future__ import annotations

import contextlib
import json
import re
from pathlib import Path
from typing import Any

from ._jupyter import KERNEL_IDLE, TIMEOUT_MS, Lab, write_notebook

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"

SETUP = """\
import json
import smithers_tt as st
from smithers_tt.demo import DEMO_PRICES, demo_workflow

db = st.connect({db_url!r})
wf, _ = demo_workflow(flaky=True, invalid_first_draft=True)
run = db.run(wf, {{"topic": "bee <b>hive</b>"}})
calls = db.store.calls.model_calls(run.id)
target = next(c for c in calls[2:] if c.attempt > 1)  # a retry's call, after others
request, reply = db.store.calls.model_call_exchange(target)
before = [c.call_id for c in calls if c.frame_no < target.frame_no]
print("CALLS " + json.dumps({{
    "every": [c.call_id for c in calls], "target": target.call_id,
    "number": calls.index(target) + 1, "frame": target.frame_no, "node": target.node_id,
    "request": request[-1]["content"], "reply": reply["content"], "before": before,
}}))
dbg = db.debug(run.id, live=False, prices=DEMO_PRICES)
dbg
"""

ROWS = """() => [...document.querySelectorAll('.stt-debugger .stt-waterfall-view tr[data-call]')]
  .map(r => r.dataset.call)"""
"""The calls whose rows the waterfall shows, in order."""


def _calls(page: Any) -> dict[str, Any]:
    text = page.locator(".jp-OutputArea-output", has_text="CALLS {").first.inner_text()
    found = re.search(r"^CALLS (\{.*\})$", text, re.M)
    assert found, text
    return json.loads(found.group(1))


def _wait_rows(page: Any, ids: list[str]) -> None:
    page.wait_for_function(
        f"(ids) => JSON.stringify(({ROWS})()) === JSON.stringify(ids)",
        arg=ids,
        timeout=TIMEOUT_MS,
    )


def _frame(page: Any, frame_no: int) -> None:
    """Wait until the debugger says it shows ``frame_no``."""
    page.locator(".stt-debugger .widget-label", has_text=f"frame {frame_no} of").first.wait_for(
        state="visible", timeout=TIMEOUT_MS
    )


def test_a_click_on_a_calls_bar_shows_its_request_and_reply_and_a_scrub_follows_the_frame(
    browser_lab: Lab, browser_chromium: Any
) -> None:
    root = browser_lab.folder("model-calls")
    write_notebook(root / "calls.ipynb", [SETUP.format(db_url=f"sqlite:///{root / 'calls.db'}")])
    ARTIFACTS.mkdir(exist_ok=True)
    page = browser_chromium.new_page(viewport={"width": 1280, "height": 2400})
    logs: list[str] = []
    page.on("console", lambda m: logs.append(f"{m.type}: {m.text}"))
    page.on("pageerror", lambda e: logs.append(f"pageerror: {e}"))
    page.set_default_timeout(TIMEOUT_MS)
    try:
        page.goto(browser_lab.url(root / "calls.ipynb"))
        page.wait_for_function(KERNEL_IDLE, timeout=TIMEOUT_MS)
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
        out = page.locator(".jp-OutputArea-output .stt-debugger")
        out.wait_for(state="visible", timeout=TIMEOUT_MS)
        seen = _calls(page)
        _wait_rows(page, seen["every"])  # the newest frame: every call
        calls = out.locator(".stt-waterfall-view")
        detail = out.locator(".stt-call-detail")
        assert detail.inner_text().strip() == ""  # none chosen yet

        # a click on the target call's bar: its request and reply, its number and node
        row = calls.locator(f'tr[data-call="{seen["target"]}"]')
        row.locator(".stt-call-bar").click()
        detail.get_by_text(seen["reply"]).first.wait_for(timeout=TIMEOUT_MS)
        shown = detail.inner_text()
        assert shown.startswith(f"Call #{seen['number']}"), shown
        assert f"{seen['node']} attempt" in shown and seen["request"] in shown
        assert "<b>hive</b>" in shown and detail.locator("b", has_text="hive").count() == 0
        assert row.get_attribute("aria-pressed") == "true"
        assert "stt-call-selected" in (row.get_attribute("class") or "")
        row.scroll_into_view_if_needed()
        out.screenshot(path=str(ARTIFACTS / "model-calls-click.png"))

        # scrub (the slider, by keyboard) to the frame before the call: the waterfall shows
        # that frame's calls, the header its totals, and no call is shown any more
        last = int(re.search(r"frame (\d+) of", out.inner_text()).group(1))  # type: ignore[union-attr]
        handle = out.locator(".stt-slider .noUi-handle")
        handle.focus()
        for _ in range(last - seen["frame"] + 1):
            handle.press("ArrowLeft")
        _frame(page, seen["frame"] - 1)
        _wait_rows(page, seen["before"])
        page.wait_for_function(
            "() => document.querySelector('.stt-debugger .stt-call-detail')"
            ".innerText.trim() === ''",
            timeout=TIMEOUT_MS,
        )
        head = out.locator("h4").first.locator("xpath=..").inner_text()
        assert f"model calls at frame {seen['frame'] - 1}: {len(seen['before'])} call(s)" in head
        out.screenshot(path=str(ARTIFACTS / "model-calls-scrubbed.png"))

        # one frame on: the call is back in the waterfall, not chosen; Enter on its row
        # (reached by Tab, as a keyboard user does) shows it again
        handle.press("ArrowRight")
        _frame(page, seen["frame"])
        page.wait_for_function(
            f"(id) => ({ROWS})().includes(id)", arg=seen["target"], timeout=TIMEOUT_MS
        )
        assert row.get_attribute("aria-pressed") == "false"
        row.focus()
        row.press("Enter")
        detail.get_by_text(seen["reply"]).first.wait_for(timeout=TIMEOUT_MS)
        assert detail.inner_text().startswith(f"Call #{seen['number']}")
    except Exception:
        print("\n".join(logs))
        with contextlib.suppress(Exception):
            page.screenshot(path=str(ARTIFACTS / "model-calls-failure.png"), full_page=True)
        raise
    finally:
        page.close()
        browser_lab.end_sessions()
