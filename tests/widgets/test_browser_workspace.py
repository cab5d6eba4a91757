"""The run browser and the triage view as a person uses them, in a real JupyterLab in Chromium
(issue 35, items 1 to 4 and 6).

A notebook builds the demo store plus three runs of a workflow that fails, and shows
``db.browse(workflows=[...])`` and a ``TriageView``. In the page, one sequence: the browser
lists the runs newest first (the ids the kernel printed); the label filter ``case=cancelled``
leaves the demo's cancelled run, which is ticked, exported (**Export 1…**, a file name, then
the confirmation: the file is written and each run's line count shown) and deleted
(**Delete 1…**, then the confirmation: "deleted", and the list is empty); filtering by
status ``failed`` leaves the failed runs; **Open** shows that run's debugger in place (its
header names the run, its timeline and graph draw, a click on the graph's node selects its
frame) and **Back to runs** returns to the list with the filter still set; in the triage view,
**Open example** shows the newest failure's run at the frame where it failed and **Back to
failures** returns; **Retry 3…** asks, and its confirmation resumes the three runs, each
reported ``finished`` by its short id. Screenshots go to ``artifacts/`` (untracked).
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import Any

import pytest

from ._jupyter import KERNEL_IDLE, TIMEOUT_MS, Lab, write_notebook

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"

SETUP = """\
import smithers_tt as st
from smithers_tt.demo.showcase import build_demo
from smithers_tt.widgets import TriageView

db = st.connect({db_url!r})
build_demo(db)

def flow(mended=False):
    async def fetch(request):
        if not mended:
            raise TimeoutError(f"no answer from host {{request.input['n']}} in 30 s")
        return {{"page": request.input["n"]}}
    wf = st.Workflow("fetcher")
    wf.task("fetch", agent=fetch)
    return wf

failed = [db.run(flow(), {{"n": n}}).id for n in range(3)]
newest = [r.id for r in db.runs(limit=100)][::-1]
cancelled = [r.id for r in db.runs(labels={{"case": "cancelled"}})]
short = db.store.short_run_ids([*failed, *cancelled])
ended = [f.frame_no for f in db.get_run(failed[-1]).frames() if f.kind == "attempt_finished"]
print("NEWEST", " ".join(newest))
print("FAILED", " ".join(failed))
print("CANCELLED", " ".join(cancelled))
print("SHORT", " ".join(short[r] for r in [*failed, *cancelled]))
print("EXAMPLE", ended[-1], db.get_run(failed[-1]).record.clock)
print("LINES", 1 + len(db.store.frames(cancelled[0])))  # its export: the run, its frames
"""

SHOW = """\
display(db.browse(workflows=[flow(mended=True)]))
display(TriageView(db, workflows=[flow(mended=True)]))
"""

ROWS = """() => [...document.querySelectorAll('.stt-browser .stt-browser-run')]
  .filter(r => r.offsetParent !== null)
  .map(r => [...r.querySelectorAll('td')].map(
     (td, i) => i ? td.textContent.trim() : td.querySelector('[title]').title))"""
"""The rows shown: each row's cells as text, the run's whole id (its hover title) first."""


def _printed(page: Any, label: str) -> list[str]:
    text = page.locator(".jp-OutputArea-output", has_text=label).first.inner_text()
    found = re.search(rf"^{label} ([0-9a-f ]+)$", text, re.M)
    assert found, text
    return found.group(1).split()


def _report(page: Any) -> list[list[str]]:
    """The run browser's report as shown: per run, the id shown, its hover title, the rest."""
    return page.evaluate(
        """() => [...document.querySelectorAll('.stt-browser .widget-html .stt > div')]
          .filter(d => d.querySelector('.stt-id'))
          .map(d => { const id = d.querySelector('.stt-id');
                      return [id.textContent, id.title,
                              d.textContent.split(': ').slice(1).join(': ').trim()]; })"""
    )


def _rows(page: Any) -> list[list[str]]:
    return page.evaluate(ROWS)


def _wait_rows(page: Any, ids: list[str]) -> None:
    page.wait_for_function(
        f"(ids) => JSON.stringify(({ROWS})().map(r => r[0])) === JSON.stringify(ids)",
        arg=ids,
        timeout=TIMEOUT_MS,
    )


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_browse_filter_open_back_and_retry_a_failure_group(
    browser_lab: Lab, browser_chromium: Any, backend: str, request: pytest.FixtureRequest
) -> None:
    root = browser_lab.folder(f"workspace-{backend}")
    if backend == "sqlite":
        db_url = f"sqlite:///{root / 'demo.db'}"
    else:  # a fresh schema, built by the notebook as the SQLite file is
        db_url = request.getfixturevalue("pg_schema_url")
    write_notebook(root / "workspace.ipynb", [SETUP.format(db_url=db_url), SHOW])
    ARTIFACTS.mkdir(exist_ok=True)

    page = browser_chromium.new_page(viewport={"width": 1280, "height": 3000})
    logs: list[str] = []
    page.on("console", lambda m: logs.append(f"{m.type}: {m.text}"))
    page.on("pageerror", lambda e: logs.append(f"pageerror: {e}"))
    page.set_default_timeout(TIMEOUT_MS)
    try:
        page.goto(browser_lab.url(root / "workspace.ipynb"))
        page.wait_for_function(KERNEL_IDLE, timeout=TIMEOUT_MS)
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
        page.locator(".stt-triage").wait_for(state="visible", timeout=TIMEOUT_MS)
        newest, failed = _printed(page, "NEWEST"), _printed(page, "FAILED")
        cancelled = _printed(page, "CANCELLED")
        short = dict(zip([*failed, *cancelled], _printed(page, "SHORT"), strict=True))
        at, last = (int(n) for n in _printed(page, "EXAMPLE"))
        (lines,) = (int(n) for n in _printed(page, "LINES"))
        _wait_rows(page, newest)  # newest first: the ids the kernel printed
        rows = _rows(page)
        assert [r[2] for r in rows[:3]] == ["failed"] * 3 and rows[0][1] == "fetcher"
        page.locator(".stt-browser").screenshot(path=str(ARTIFACTS / f"browser-list-{backend}.png"))

        # filter by label: the demo's cancelled run; export it, then delete it
        label = page.locator(".stt-browser .widget-text", has_text="label").locator("input")
        label.fill("case=cancelled")
        label.press("Enter")
        _wait_rows(page, cancelled)
        browser = page.locator(".stt-browser")
        tick = browser.locator(".stt-browser-run input[type=checkbox]").first
        tick.check()
        browser.get_by_role("button", name="Export 1…").click()
        browser.get_by_text("Export the history of 1 run(s), as JSON lines").wait_for()
        exported = root / "cancelled.jsonl"
        path = browser.locator(".widget-text", has_text="to file").locator("input")
        path.fill(str(exported))
        path.press("Enter")
        browser.get_by_role("button", name="Export 1 run(s)").click()
        browser.get_by_text(f"wrote {lines} lines to {exported}").wait_for()
        said = _report(page)
        assert said[0] == [short[cancelled[0]], cancelled[0], f"{lines} line(s)"], said
        assert len(exported.read_text().splitlines()) == lines
        browser.get_by_role("button", name="Export…").wait_for()  # the ticks went with it
        browser.screenshot(path=str(ARTIFACTS / "browser-exported.png"))
        tick.check()
        browser.get_by_role("button", name="Delete 1…").click()
        browser.get_by_text("Retention's rules hold").wait_for()
        browser.get_by_role("button", name="Delete 1 run(s)").click()
        browser.get_by_text("no run matches").wait_for()
        assert _report(page) == [[short[cancelled[0]], cancelled[0], "deleted"]]
        browser.screenshot(path=str(ARTIFACTS / "browser-deleted.png"))
        label.fill("")
        label.press("Enter")

        # filter: status failed (the demo's runs all finished or were cancelled)
        page.locator(".stt-browser select").first.select_option(label="failed")
        _wait_rows(page, failed[::-1])

        # open the second row in place, then back: same filter, same rows
        page.locator(".stt-browser .stt-browser-run").nth(1).get_by_role(
            "button", name="Open"
        ).click()
        debugger = page.locator(".stt-browser .stt-debugger")
        debugger.wait_for(state="visible", timeout=TIMEOUT_MS)
        page.wait_for_function(  # its header names the run (whole on hover)
            "(id) => !!document.querySelector(`.stt-browser .stt-debugger h4 [title='${id}']`)",
            arg=failed[1],
            timeout=TIMEOUT_MS,
        )
        # its timeline draws too (the plot of this run: its x axis ends at its last frame)
        page.wait_for_function(
            """() => { const gd = document.querySelector(
                         '.stt-browser .stt-debugger .js-plotly-plot');
                       return !!gd && !!gd._fullLayout
                         && Math.abs(gd._fullLayout.xaxis.range[1] - 5.5) <= 1; }""",
            timeout=TIMEOUT_MS,
        )
        # the graph beside it: fetch failed at frame 5; a click selects its frame 4
        node = debugger.locator('.stt-graph-node[data-node="fetch"]')
        assert node.get_attribute("data-state") == "failed"
        node.click()
        debugger.get_by_text("frame 4 of 5").wait_for(timeout=TIMEOUT_MS)
        page.wait_for_function(
            """() => document.querySelector('.stt-browser .stt-graph-node[data-node="fetch"]')
                      .classList.contains('stt-graph-current')""",
            timeout=TIMEOUT_MS,
        )
        assert _rows(page) == []  # the list is hidden while the run is open
        page.locator(".stt-browser").screenshot(path=str(ARTIFACTS / "browser-open.png"))
        page.locator(".stt-browser .stt-back").click()
        _wait_rows(page, failed[::-1])
        assert page.locator(".stt-browser select").first.input_value() != ""
        assert page.locator(".stt-browser .stt-debugger").count() == 0

        # triage: the three timeouts are one group, its example the newest failure
        triage = page.locator(".stt-triage")
        group = triage.locator(".stt-triage-group", has_text="fetcher").first
        assert "TimeoutError: no answer from host <n> in <n> s" in group.inner_text()
        example = group.locator(f".stt-id[title='{failed[-1]}']")
        assert example.inner_text() == short[failed[-1]]
        triage.screenshot(path=str(ARTIFACTS / "triage-list.png"))
        group.get_by_role("button", name="Open example").click()
        shown = triage.locator(".stt-debugger")
        shown.get_by_text(f"frame {at} of {last}").wait_for(timeout=TIMEOUT_MS)
        assert shown.locator(f"h4 [title='{failed[-1]}']").first.inner_text() == short[failed[-1]]
        assert not triage.locator(".stt-triage-group").first.is_visible()  # list hidden
        page.wait_for_function(  # its timeline draws, the failing frame selected on it
            """(at) => { const gd = document.querySelector(
                           '.stt-triage .stt-debugger .js-plotly-plot');
                         return !!gd && !!gd._fullLayout && gd._fullLayout.shapes
                           .some(s => Math.abs(s.x0 - at) < 0.01); }""",
            arg=at,
            timeout=TIMEOUT_MS,
        )
        triage.screenshot(path=str(ARTIFACTS / "triage-example.png"))
        triage.locator(".stt-back").click()
        group.wait_for(timeout=TIMEOUT_MS)
        assert triage.locator(".stt-debugger").count() == 0

        # retry it after confirming: each run's result, by its short id
        group.get_by_role("button", name="Retry 3…").click()
        triage.get_by_text("Reset node fetch").wait_for(timeout=TIMEOUT_MS)
        triage.get_by_role("button", name="Retry 3 run(s)").click()
        for run_id in failed:
            triage.get_by_text(f"run {short[run_id]} resumed: finished").wait_for(
                timeout=TIMEOUT_MS
            )
        # then the groups are read again: the retried runs' failed attempts were reset away
        triage.get_by_text("Failures: 1 group(s), 1 failure(s)").wait_for(timeout=TIMEOUT_MS)
        titles = page.evaluate(
            "() => [...document.querySelectorAll('.stt-triage .stt-id')].map(e => e.title)"
        )
        assert set(failed) <= set(titles)  # each result names its run whole on hover
        triage.screenshot(path=str(ARTIFACTS / "triage-after-retry.png"))
    except Exception:
        print("\n".join(logs))
        with contextlib.suppress(Exception):
            page.screenshot(path=str(ARTIFACTS / "workspace-failure.png"), full_page=True)
        raise
    finally:
        page.close()
        browser_lab.end_sessions()
