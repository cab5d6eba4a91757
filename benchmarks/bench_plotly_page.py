"""The timeline's redraws in a real page: plotly's widget bundle compiled once per page (the
loader of ``smithers_tt/widgets/_plotly_once.py``) against once per figure (plotly's own
module, as the timeline's figures had before).

JupyterLab and Debian's chromium, as the browser tests run them. Each round opens a fresh page
of a notebook that shows the debugger of the demo's clean run, then switches the debugger
between that run and its fork ``SWITCHES`` times by clicking the fork tree (every switch lays
out a new figure), waiting after each until the page shows what the kernel shows (the browser
sequences' check). The two arms alternate, a page each: ``plotly`` (the figure class as it was:
plotly's 5 MB bundle as each figure's module) and ``once`` (the loader). Per arm, medians over
the rounds: seconds from Run All until the page shows the debugger, seconds per switch, the
page's main-thread CPU over the switches (Chromium's ``TaskDuration`` and ``ScriptDuration``,
CDP ``Performance.getMetrics``), how many figures the page made (compiles of their module:
the bundle, or the loader) and how many times it compiled the bundle (CDP
``Debugger.scriptParsed`` of a script the bundle's length). Goal: the bundle compiled once per
page, and a switch's page CPU at most half of what it was.

``python -m benchmarks plotly_page`` (``SMITHERS_TT_BENCH_QUICK=1``: one round of 3 switches;
``SMITHERS_TT_BENCH_THROTTLE=4`` throttles the page's CPU 4x, as the loaded browser sequence).
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks._common import note, print_table, scaled, scratch_dir, verdict

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # the browser tests' helpers (as docs/hero_image.py uses them)
    sys.path.insert(0, str(REPO))

ROUNDS = scaled(3, 1)
SWITCHES = scaled(6, 3)
THROTTLE = float(os.environ.get("SMITHERS_TT_BENCH_THROTTLE", "1"))

SETUP = """\
import smithers_tt as st
from smithers_tt.widgets import Debugger, _timeline

if {arm!r} == "plotly":  # the figure class as it was: plotly's bundle is each figure's module
    import plotly.graph_objects as go
    import traitlets
    from plotly.serializers import custom_serializers

    class FigureWidget(go.FigureWidget):
        _js2py_widget_layoutDelta = traitlets.Dict(allow_none=True).tag(
            sync=True, **custom_serializers
        )

    _timeline._figure_class = lambda: FigureWidget
db = st.connect({db_url!r})
dbg = Debugger(db, {run!r})
display(dbg)
"""


def _round(lab: Any, browser: Any, arm: str, folder: Path, runs: list[str]) -> dict[str, float]:
    from smithers_tt.widgets._plotly_once import LOADER, plotly_bundle
    from tests.widgets._jupyter import KERNEL_IDLE, TIMEOUT_MS, write_notebook
    from tests.widgets.test_browser_sequences import _agree, _count_compiled, _js_length

    bundle_length, loader_length = _js_length(plotly_bundle()[0]), _js_length(LOADER.read_text())
    notebook = folder / f"{arm}.ipynb"
    write_notebook(
        notebook, [SETUP.format(arm=arm, db_url=f"sqlite:///{folder}/demo.db", run=runs[0])]
    )
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        page.set_default_timeout(TIMEOUT_MS)
        parsed = _count_compiled(page)
        cdp = page.context.new_cdp_session(page)
        cdp.send("Performance.enable")
        page.goto(lab.url(notebook))
        page.wait_for_function(KERNEL_IDLE, timeout=TIMEOUT_MS)
        if THROTTLE != 1:
            cdp.send("Emulation.setCPUThrottlingRate", {"rate": THROTTLE})
        start = time.perf_counter()
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
        out = page.locator(".jp-OutputArea-output .stt-debugger")
        out.wait_for(state="attached", timeout=TIMEOUT_MS)
        _agree(page, "Run All")
        shown = time.perf_counter() - start
        before, start = _cpu(cdp), time.perf_counter()
        for n in range(SWITCHES):
            other = runs[(n + 1) % 2]
            out.locator(f'button.stt-run[title="show run {other}"]').first.click()
            while _agree(page, f"switch {n + 1}")["run"] != other:  # the kernel not there yet
                page.wait_for_timeout(50)
        after = _cpu(cdp)
        took = time.perf_counter() - start
    finally:
        page.close()
        lab.end_sessions()
    return {
        "shown_s": shown,
        "switch_s": took / SWITCHES,
        "task_s": (after[0] - before[0]) / SWITCHES,
        "script_s": (after[1] - before[1]) / SWITCHES,
        "compiled": parsed.count(bundle_length),
        # each figure's page model compiles its module: plotly's bundle, or the loader
        "figures": parsed.count(bundle_length if arm == "plotly" else loader_length),
    }


def _cpu(cdp: Any) -> tuple[float, float]:
    metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
    return metrics["TaskDuration"], metrics["ScriptDuration"]


def main() -> None:
    import smithers_tt as st
    from smithers_tt.demo.showcase import build_demo
    from tests.widgets._jupyter import Lab, browser_unavailable, chromium, jupyterlab

    reason = browser_unavailable()
    if reason:
        note(f"skipped: {reason}")
        return
    with scratch_dir() as scratch:
        root = scratch / "root"
        root.mkdir()
        db = st.connect(f"sqlite:///{root}/demo.db")
        made = {r.label: r.run_id for r in build_demo(db)}
        db.close()
        runs = [made["clean"], made["fork"]]
        results: dict[str, list[dict[str, float]]] = {"plotly": [], "once": []}
        load = [os.getloadavg()[0]]
        with jupyterlab(root, scratch / "home") as (base, token), chromium() as browser:
            lab = Lab(root, base, token)
            for n in range(ROUNDS):
                for arm in ("plotly", "once") if n % 2 == 0 else ("once", "plotly"):
                    results[arm].append(_round(lab, browser, arm, root, runs))
                    load.append(os.getloadavg()[0])
    medians = {
        arm: {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}
        for arm, rounds in results.items()
    }
    rows = [
        [arm, m["shown_s"], m["switch_s"], m["task_s"], m["script_s"], m["figures"], m["compiled"]]
        for arm, m in medians.items()
    ]
    print_table(
        f"{ROUNDS} round(s) of {SWITCHES} switches, CPU throttled {THROTTLE:g}x, "
        f"load {min(load):.1f}-{max(load):.1f}",
        [
            "arm",
            "Run All to shown (s)",
            "s per switch",
            "page CPU per switch (s)",
            "page script per switch (s)",
            "figures",
            "bundle compiled",
        ],
        rows,
    )
    once, plotly = medians["once"], medians["plotly"]
    ratio = once["task_s"] / plotly["task_s"]
    print_table(
        "goals",
        ["goal", "measured", "result"],
        [
            [
                "bundle compiled once per page",
                f"{once['compiled']:g} for {once['figures']:g} figures (plotly's module: "
                f"{plotly['compiled']:g} for {plotly['figures']:g})",
                verdict(once["compiled"] == 1),
            ],
            ["page CPU per switch <= 0.5x", f"{ratio:.2f}x", verdict(ratio <= 0.5)],
            ["s per switch", f"{once['switch_s'] / plotly['switch_s']:.2f}x", verdict(None)],
        ],
    )


if __name__ == "__main__":
    main()
