"""The sweep view as a person uses it, in a real JupyterLab in Chromium (issue 37, item 3).

A notebook sweeps a demo run at frame 9 over three variants (``base``, ``bees``, ``wasps``)
and shows ``sweep.view(wf)``. In the page, one sequence: the table lists the three branches by
their short ids (the ones the kernel printed), each ``finished``; choosing ``base`` and
``bees`` as branches A and B and **Diff** shows how their outputs differ (the title of the
report written about ants, then bees); **Open debugger** on ``wasps`` shows that branch's
debugger below (its header names the run, its timeline draws); **Promote…** on ``bees`` with
"delete the others" ticked asks first, naming the branches to delete, and its confirmation
reports the promoted branch and the two deleted ones: the table marks ``bees`` promoted and
the others ``deleted``, and the debugger open on the deleted ``wasps`` is gone. Screenshots
go to ``artifacts/`` (untracked).
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import Any

from ._jupyter import KERNEL_IDLE, TIMEOUT_MS, Lab, write_notebook

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"

SETUP = """\
import smithers_tt as st
from smithers_tt.demo import demo_workflow

db = st.connect({db_url!r})
wf = demo_workflow()[0]
run = db.run(wf, {{"topic": "ants"}})
variants = {{
    "base": {{}},
    "bees": {{"input": {{"topic": "bees"}}, "reset": ["research"]}},
    "wasps": {{"input": {{"topic": "wasps"}}, "reset": ["research"]}},
}}
sweep = db.sweep(run.id, 9, variants, workflow=wf, progress=None)
branches = [b.id for b in sweep.branches().values()]
short = db.store.short_run_ids(branches)
print("SWEEP", sweep.id)
print("BRANCHES", " ".join(branches))
print("SHORT", " ".join(short[b] for b in branches))
"""

SHOW = "sweep.view(wf)"

ROWS = """() => [...document.querySelector('.stt-sweep table').querySelectorAll('tr')].slice(1)
  .map(r => [...r.querySelectorAll('td')].map(td => td.textContent.trim()))"""
"""The branches' table's rows as shown (the first table: the diff's come after it): each
row's cells as text."""


def _printed(page: Any, label: str) -> list[str]:
    text = page.locator(".jp-OutputArea-output", has_text=label).first.inner_text()
    found = re.search(rf"^{label} ([0-9a-z ]+)$", text, re.M)
    assert found, text
    return found.group(1).split()


def _rows(page: Any) -> list[list[str]]:
    return page.evaluate(ROWS)


def _dropdown(view: Any, label: str) -> Any:
    return view.locator(".widget-dropdown", has_text=label).first.locator("select")


def test_sweep_view_diff_open_and_promote_after_confirming(
    browser_lab: Lab, browser_chromium: Any
) -> None:
    root = browser_lab.folder("sweeps")
    db_url = f"sqlite:///{root / 'sweeps.db'}"
    write_notebook(root / "sweeps.ipynb", [SETUP.format(db_url=db_url), SHOW])
    ARTIFACTS.mkdir(exist_ok=True)

    page = browser_chromium.new_page(viewport={"width": 1280, "height": 2400})
    logs: list[str] = []
    page.on("console", lambda m: logs.append(f"{m.type}: {m.text}"))
    page.on("pageerror", lambda e: logs.append(f"pageerror: {e}"))
    page.set_default_timeout(TIMEOUT_MS)
    try:
        page.goto(browser_lab.url(root / "sweeps.ipynb"))
        page.wait_for_function(KERNEL_IDLE, timeout=TIMEOUT_MS)
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
        view = page.locator(".jp-OutputArea-output .stt-sweep")
        view.wait_for(state="visible", timeout=TIMEOUT_MS)
        (sweep_id,) = _printed(page, "SWEEP")
        base, bees, wasps = _printed(page, "BRANCHES")
        short = dict(zip((base, bees, wasps), _printed(page, "SHORT"), strict=True))

        # the table: one row per variant, its branch by short id (whole on hover), finished
        assert view.get_by_text(f"sweep {sweep_id} of run").is_visible()
        rows = _rows(page)
        assert [r[:3] for r in rows] == [
            ["base", short[base], "finished"],
            ["bees", short[bees], "finished"],
            ["wasps", short[wasps], "finished"],
        ], rows
        assert "A bees colony" in rows[1][5] and "A wasps colony" in rows[2][5]  # outputs
        titles = page.evaluate(
            "() => [...document.querySelectorAll('.stt-sweep table .stt-id')].map(e => e.title)"
        )
        assert titles[-3:] == [base, bees, wasps]
        # styled as the run browser, though nothing else on the page brought the style: a
        # status is a padded badge, a time one line ("0.09 s" did not wrap)
        looks = page.evaluate(
            """() => { const row = document.querySelector('.stt-sweep table tr:nth-child(2)');
              const badge = getComputedStyle(row.querySelector('.stt-badge'));
              const cells = [...row.querySelectorAll('td')];
              const time = document.createRange();
              time.selectNodeContents(cells[4]);  // its text's lines: one rectangle each
              return [badge.paddingLeft, badge.borderTopLeftRadius,
                      time.getClientRects().length]; }"""
        )
        assert looks == ["4px", "3px", 1], looks
        view.screenshot(path=str(ARTIFACTS / "sweep-view.png"))

        # pick two branches and diff them: their outputs differ where the topic does
        _dropdown(view, "Branch A").select_option(label="base")
        _dropdown(view, "Branch B").select_option(label="bees")
        view.get_by_role("button", name="Diff", exact=True).click()
        diff = view.locator(".widget-html", has_text="outputs (")
        diff.wait_for(timeout=TIMEOUT_MS)
        shown = " ".join(diff.inner_text().split())
        assert f"A: run {short[base]}" in shown and f"B: run {short[bees]}" in shown, shown
        assert '$.write.title "What we know about the ants" "What we know about the bees"' in (
            shown
        )
        view.screenshot(path=str(ARTIFACTS / "sweep-view-diff.png"))

        # open a branch's debugger below the table
        _dropdown(view, "Open").select_option(label="wasps")
        view.get_by_role("button", name="Open debugger").click()
        debugger = view.locator(".stt-debugger")
        debugger.wait_for(state="visible", timeout=TIMEOUT_MS)
        page.wait_for_function(  # its header names the branch (whole on hover)
            "(id) => !!document.querySelector(`.stt-sweep .stt-debugger h4 [title='${id}']`)",
            arg=wasps,
            timeout=TIMEOUT_MS,
        )
        debugger.locator(".js-plotly-plot .scatterlayer .points path").first.wait_for(
            state="attached", timeout=TIMEOUT_MS
        )
        # its fork tree draws the sweep as one group, the branches under it
        group = debugger.locator(".stt-sweep-group")
        assert group.inner_text().startswith(f"▾ sweep {sweep_id} · fork @ frame 9 · 3 branches")
        tree = group.locator("xpath=..")  # the tree's list: the group, its branches under it
        assert tree.locator(".stt-run").all_inner_texts()[1:] == [
            f"{name} · {short[run_id]} · finished · fork @ frame 9"
            for name, run_id in (("base", base), ("bees", bees), ("wasps", wasps))
        ]
        tree.screenshot(path=str(ARTIFACTS / "sweep-fork-tree.png"))

        # promote bees and delete the others: asked first, then reported
        _dropdown(view, "Keep").select_option(label="bees")
        view.get_by_text("delete the others").click()
        view.get_by_role("button", name="Promote…").click()
        question = view.get_by_text("delete the 2 other branch(es) (base, wasps)?")
        question.wait_for(timeout=TIMEOUT_MS)
        assert "Promote 'bees'" in question.inner_text()
        assert _rows(page)[1][0] == "bees"  # nothing changed before the confirmation
        view.screenshot(path=str(ARTIFACTS / "sweep-view-ask.png"))
        view.get_by_role("button", name="Promote and delete").click()
        view.get_by_text(f"promoted bees: branch {short[bees]}").wait_for(timeout=TIMEOUT_MS)
        for run_id in (base, wasps):
            assert view.get_by_text(f"deleted branch {short[run_id]}").is_visible()
        page.wait_for_function(
            f"() => ({ROWS})().map(r => r[2]).join() === 'deleted,finished,deleted'",
            timeout=TIMEOUT_MS,
        )
        rows = _rows(page)
        assert [r[0] for r in rows] == ["base", "bees promoted", "wasps"], rows
        mark = view.locator("tr.stt-promoted .stt-promoted-mark")
        assert mark.inner_text() == "promoted" and mark.is_visible()
        assert view.locator(".stt-debugger").count() == 0  # it showed a deleted branch
        assert diff.count() == 0  # so did the diff
        assert not question.is_visible()
        view.screenshot(path=str(ARTIFACTS / "sweep-view-promoted.png"))
    except Exception:
        print("\n".join(logs))
        with contextlib.suppress(Exception):
            page.screenshot(path=str(ARTIFACTS / "sweeps-failure.png"), full_page=True)
        raise
    finally:
        page.close()
        browser_lab.end_sessions()
