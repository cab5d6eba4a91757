"""The debugger in a real browser after sequences of actions: every part shows one run and frame.

A notebook whose debugger cell is below the fold is run with Run All (the debugger renders
off-screen), then a seeded random sequence of actions is clicked as a person clicks them:
select a point of the timeline, step with the scrubber, rewind, undo the rewind, switch runs in
the fork tree, fork and replay, and (from a paused run) Step and Continue: every kind once, in a
seeded order (a kind that cannot be done yet is tried once more at the end). After every action
the test waits until the page agrees with the kernel, or fails with both sides: the plotly
div's traces (names and point counts), its x range and its selected-frame line, the header's
run, the scrubber's frame, the slider's value and the inspector's frame and run must all be
the kernel's (read from the kernel itself over
JupyterLab's kernel API). One seed runs with Chromium's CPU throttled and a busy neighbour beside
the kernel, as the defect that this guards against was seen on a loaded machine: from Run All to
the last action (JupyterLab's own start and page load are not what it is about).

Through all of it the page compiles plotly's 5 MB widget bundle once, however many figures the
timeline lays out (``smithers_tt/widgets/_plotly_once.py``): counted by Chromium itself (CDP
``Debugger.scriptParsed``: scripts of the bundle's length, and of the figures' loader module,
one per figure model), not by the page's code.
"""

from __future__ import annotations

import contextlib
import json
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from smithers_tt.widgets._plotly_once import LOADER, plotly_bundle

from ._jupyter import KERNEL_IDLE, TIMEOUT_MS, Lab, click_point, write_notebook

SETTLE_S = 90  # how long the page may take to catch up with the kernel after an action

SETUP = """\
import json
import smithers_tt as st
from smithers_tt.demo import demo_workflow
from smithers_tt.demo.showcase import build_demo
from smithers_tt.widgets import Debugger

db = st.connect({db_url!r})
made = {{r.label: r.run_id for r in build_demo(db)}}
wf, _ = demo_workflow()
# a run paused before write, with a breakpoint before review too: Step and Continue have work
paused = db.run(wf, {{"topic": "bee"}}, break_before=["write", "review"]).id
start = {{"clean": made["clean"], "paused": paused}}[{start!r}]
"""

FILLER = """\
from IPython.display import HTML, display
display(HTML('<div style="height: 2600px">a tall output: the debugger renders below it</div>'))
"""

SHOW = """\
dbg = Debugger(db, start, workflow=wf)
display(dbg)
"""

KERNEL_STATE = """\
import json as _json
_m, _f = dbg.model, dbg.timeline.figure
print(_json.dumps({
    "run": _m.run_id,
    "frame": _m.frame_no,
    "last": _m.last_frame,
    "traces": [[t.name, len(t.x) if t.x is not None else 0] for t in _f.data],
    "xrange": list(_f.layout.xaxis.range) if _f.layout.xaxis.range else None,
    "line": _f.layout.shapes[0].x0 if _f.layout.shapes else None,
}))
"""

EXECUTE = r"""async (code) => {
  const kernel = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
  const future = kernel.requestExecute({code, silent: false, store_history: false});
  let out = '';
  future.onIOPub = (msg) => {
    if (msg.header.msg_type === 'stream') out += msg.content.text;
    if (msg.header.msg_type === 'error') {
      out += 'ERROR ' + msg.content.evalue + '\n' + msg.content.traceback.join('\n');
    }
  };
  await future.done;
  return out;
}"""

PAGE_STATE = r"""() => {
  const root = document.querySelector('.jp-OutputArea-output .stt-debugger');
  if (!root) return null;
  const plots = root.querySelectorAll('.js-plotly-plot');
  const gd = plots[plots.length - 1];
  const label = [...root.querySelectorAll('.widget-label')]
    .map(e => e.textContent).find(t => /^frame \d+ of \d+/.test(t)) || '';
  const header = (root.querySelector('h4') || {}).textContent || '';
  // the header shows the run's shortest unique prefix; its whole id is the hover title
  const id = root.querySelector('h4 .stt-id');
  const run = id ? id.title : null;
  const numbers = label.match(/^frame (\d+) of (\d+)/);
  const frame = numbers ? +numbers[1] : null;
  const last = numbers ? +numbers[2] : null;
  const shape = gd && gd.layout && gd.layout.shapes && gd.layout.shapes[0];
  // the slider's readout, and the inspector's "Frame N · run R" (R whole on hover)
  const readout = root.querySelector('.stt-slider .widget-readout');
  const slider = readout ? +readout.textContent.trim() : null;
  const title = [...root.querySelectorAll('h4')].find(h => /^Frame \d+ · run /.test(h.textContent));
  const inspector = title ? [+title.textContent.match(/^Frame (\d+)/)[1],
                             (title.querySelector('.stt-id') || {}).title || null] : null;
  return {
    plots: plots.length,
    run, frame, last, header, slider, inspector,
    traces: gd && gd.data ? gd.data.map(t => [t.name, t.x ? t.x.length : 0]) : null,
    xrange: gd && gd.layout && gd.layout.xaxis ? gd.layout.xaxis.range : null,
    line: shape ? shape.x0 : null,
  };
}"""


def _kernel(page: Any, what: str) -> dict[str, Any]:
    page.wait_for_function(KERNEL_IDLE, timeout=TIMEOUT_MS)
    out = page.evaluate(EXECUTE, KERNEL_STATE)
    # both ends of the traceback: a RecursionError's tail repeats one frame, its head says where
    shown = out if len(out) <= 8000 else f"{out[:4000]}\n[...]\n{out[-4000:]}"
    assert not out.startswith("ERROR"), f"after {what}, the kernel failed: {shown}"
    return json.loads(out.strip().splitlines()[-1])


def _disagreements(kernel: dict[str, Any], seen: dict[str, Any] | None) -> list[str]:
    """What the page shows that the kernel does not (empty: they agree)."""
    if seen is None:
        return ["no debugger on the page"]
    wrong = []
    if seen["plots"] != 1:
        wrong.append(f"{seen['plots']} plotly figures in the debugger")
    for key in ("run", "frame", "last", "traces", "line"):
        if seen[key] != kernel[key]:
            wrong.append(f"{key}: page {seen[key]!r}, kernel {kernel[key]!r}")
    if seen["slider"] != kernel["frame"]:
        wrong.append(f"slider: page {seen['slider']!r}, kernel frame {kernel['frame']!r}")
    if seen["inspector"] != [kernel["frame"], kernel["run"]]:
        wrong.append(f"inspector: page {seen['inspector']!r}, kernel {kernel['frame']!r}")
    if kernel["xrange"] is not None and (
        seen["xrange"] is None
        or any(abs(a - b) > 1e-6 for a, b in zip(seen["xrange"], kernel["xrange"], strict=True))
    ):
        wrong.append(f"x range: page {seen['xrange']!r}, kernel {kernel['xrange']!r}")
    return wrong


def _agree(page: Any, what: str) -> dict[str, Any]:
    """Wait until every part of the page shows the kernel's run and frame; fail otherwise."""
    deadline = time.monotonic() + SETTLE_S
    while True:
        kernel = _kernel(page, what)
        wrong = _disagreements(kernel, page.evaluate(PAGE_STATE))
        if not wrong:
            return kernel
        if time.monotonic() > deadline:
            pytest.fail(f"after {what}, the page disagrees with the kernel: {'; '.join(wrong)}")
        page.wait_for_timeout(100)


def _js_length(text: str) -> int:
    """A text's length as JavaScript counts it (UTF-16 code units), as CDP reports a script's."""
    return len(text.encode("utf-16-le")) // 2


def _count_compiled(page: Any) -> list[int]:
    """The length of every script the page compiles from now on (CDP ``Debugger.scriptParsed``;
    pauses skipped, so that the debugger domain changes nothing else)."""
    lengths: list[int] = []
    cdp = page.context.new_cdp_session(page)
    cdp.on("Debugger.scriptParsed", lambda event: lengths.append(event.get("length", 0)))
    cdp.send("Debugger.enable")
    cdp.send("Debugger.setSkipAllPauses", {"skip": True})
    return lengths


SCRUB = ("first frame", "previous frame", "next frame", "newest frame")
"""The scrubber's buttons, by their tooltips."""
ACTION_CLASS = {
    "rewind": "stt-rewind",
    "undo": "stt-undo-rewind",
    "fork": "stt-fork",
    "replay": "stt-replay",
}


def _confirm(page: Any, out: Any) -> None:
    """Confirm the pending action, when the kernel asked (a refused one asks nothing: its
    message says why, and the page must agree with the kernel all the same)."""
    page.wait_for_function(KERNEL_IDLE, timeout=TIMEOUT_MS)
    confirm = out.locator("button.stt-confirm")
    with contextlib.suppress(Exception):
        confirm.wait_for(state="visible", timeout=5_000)
    if confirm.is_visible():
        confirm.click()


def _act(page: Any, out: Any, action: str, rng: random.Random, state: dict[str, Any]) -> bool:
    """Click one action; False when it cannot be done in this state (nothing clicked)."""
    if action == "select":
        points = out.locator(".js-plotly-plot .scatterlayer .points path")
        if points.count() == 0:
            return False
        click_point(page, out, rng.randrange(points.count()))
    elif action == "scrub":
        button = out.locator(f'button[title="{rng.choice(SCRUB)}"]').first
        if button.is_disabled():  # already there (the first or the newest frame)
            return False
        button.click()
    elif action in ACTION_CLASS:
        button = out.locator(f"button.{ACTION_CLASS[action]}").first
        if button.is_disabled():
            return False
        if action == "rewind" and state["frame"] >= state["last"]:
            return False  # nothing to rewind: the scrubber picks an earlier frame first
        button.click()
        _confirm(page, out)
    elif action in ("step", "continue"):
        from playwright.sync_api import TimeoutError as PlaywrightTimeout

        button = out.locator(f"button.stt-{action}").first
        if not button.is_visible() or button.is_disabled():
            return False  # the run shown is not paused
        try:
            button.click(timeout=10_000)
        except PlaywrightTimeout:
            if button.is_visible():
                raise
            # hidden since the look: a run that an earlier Continue or Step set going in the
            # background (the kernel is idle meanwhile) reached its end, and is not paused
            return False
    elif action == "switch":
        runs = out.locator(".stt-run")
        if runs.count() < 2:
            return False
        runs.nth(rng.randrange(runs.count())).click()
    return True


# A neighbour that keeps the machine at least as busy as one spinning process beside the kernel
# makes it on idle cores: more runnable tasks than cores. It spins in 50 ms slices while fewer
# tasks than that are runnable besides itself (the test alone, as it was written for), and
# rests while the machine is already that busy (the whole suite on its workers), where one more
# spinner only took a core from the other tests.
NEIGHBOUR = """\
import os, time
end = time.monotonic() + 900
cores = os.cpu_count() or 1
def others():
    try:
        with open("/proc/loadavg") as f:
            return int(f.read().split()[3].split("/")[0]) - 1  # runnable now, less this one
    except (OSError, ValueError, IndexError):
        return 0  # cannot tell: spin
while time.monotonic() < end:
    if others() > cores:
        time.sleep(0.05)
    else:
        stop = time.monotonic() + 0.05
        while time.monotonic() < stop:
            pass
"""


@contextlib.contextmanager
def _busy_neighbour(on: bool) -> Iterator[None]:
    """A process that keeps the machine busy beside the kernel (``NEIGHBOUR``; bounded: it
    ends by itself)."""
    if not on:
        yield
        return
    proc = subprocess.Popen([sys.executable, "-c", NEIGHBOUR])
    try:
        yield
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize(
    ("seed", "loaded", "start"),
    [
        (23, False, "clean"),
        (11, True, "clean"),
        (23, False, "paused"),
    ],
    ids=["quiet-from-the-clean-run", "loaded-from-the-clean-run", "quiet-from-a-paused-run"],
)
def test_every_part_follows_the_kernel_through_random_sequences(
    browser_lab: Lab, browser_chromium: Any, seed: int, loaded: bool, start: str
) -> None:
    root = browser_lab.folder(f"sequence-{seed}-{start}")
    db_url = f"sqlite:///{root / 'demo.db'}"
    setup = SETUP.format(db_url=db_url, start=start)
    write_notebook(root / "sequence.ipynb", [setup, FILLER, SHOW])
    rng = random.Random(seed)
    actions = ["select", "scrub", "rewind", "undo", "switch", "fork", "replay"]
    if start == "paused":
        actions += ["step", "continue", "step"]
    deck = rng.sample(actions, len(actions))  # every kind once (Step twice), in a seeded order
    put_back: set[str] = set()
    done: list[str] = []
    page = browser_chromium.new_page(viewport={"width": 1280, "height": 900})
    try:
        page.set_default_timeout(TIMEOUT_MS)
        compiled = _count_compiled(page)
        page.goto(browser_lab.url(root / "sequence.ipynb"))
        page.wait_for_function(KERNEL_IDLE, timeout=TIMEOUT_MS)
        with _busy_neighbour(loaded):
            if loaded:
                cdp = page.context.new_cdp_session(page)
                cdp.send("Emulation.setCPUThrottlingRate", {"rate": 4})
            page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
            out = page.locator(".jp-OutputArea-output .stt-debugger")
            out.wait_for(state="attached", timeout=TIMEOUT_MS)
            out.scroll_into_view_if_needed()
            state = _agree(page, "Run All")
            while deck:
                action = deck.pop(0)
                if not _act(page, out, action, rng, state):
                    if action not in put_back:  # e.g. undo before any rewind: once more, later
                        put_back.add(action)
                        deck.append(action)
                    continue
                done.append(action)
                state = _agree(page, " -> ".join(done))
    finally:
        page.close()
        browser_lab.end_sessions()
    assert len(set(done)) >= 4, done  # the sequence exercised several kinds of action
    figures = compiled.count(_js_length(LOADER.read_text()))
    bundles = compiled.count(_js_length(plotly_bundle()[0]))
    assert figures >= 3, f"the timeline laid out {figures} figures in the page: {done}"
    assert bundles == 1, f"the page compiled plotly's bundle {bundles} times for {figures} figures"
