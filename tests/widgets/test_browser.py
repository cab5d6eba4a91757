"""The debugger in a real browser: JupyterLab 4 and Debian's chromium, driven by Playwright.

A JupyterLab server is started for this test only (own process group, temporary config,
data, runtime and IPython dirs, a token, a free port); a notebook builds the demo database,
adds a run whose checkpoint holds hostile markup, and shows ``Debugger(db, run_id)``. The
test runs all cells, checks the timeline drew, clicks a frame point, forks with confirmation
and checks the new run in the database from this process, checks no markup executed, and
saves a screenshot to ``artifacts/debugger.png`` and ``docs/debugger.png``.

Without ``/usr/bin/chromium`` (or the ``playwright`` package) the test skips and says why;
with ``SMITHERS_TT_REQUIRE_BROWSER=1`` (set by ``.ci/run``) it fails instead.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import smithers_tt as st

from ._support import HOSTILE, SCRIPT

CHROMIUM = "/usr/bin/chromium"
REQUIRE = os.environ.get("SMITHERS_TT_REQUIRE_BROWSER") == "1"
REPO = Path(__file__).resolve().parents[2]
TIMEOUT_MS = 180_000  # two busy cores: a FigureWidget alone takes seconds to draw


def _unavailable(reason: str) -> None:
    if REQUIRE:
        pytest.fail(f"{reason} (SMITHERS_TT_REQUIRE_BROWSER=1: the browser test must run)")
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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


def _notebook(path: Path, db_url: str) -> None:
    cells = [
        NOTEBOOK_SETUP.format(db_url=db_url, hostile=HOSTILE, script=SCRIPT),
        NOTEBOOK_SHOW,
    ]
    nb = {
        "cells": [
            {
                "cell_type": "code",
                "execution_count": None,
                "id": f"cell-{i}",
                "metadata": {},
                "outputs": [],
                "source": source,
            }
            for i, source in enumerate(cells)
        ],
        "metadata": {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path.write_text(json.dumps(nb, indent=1))


@contextlib.contextmanager
def _jupyterlab(root: Path, home: Path) -> Iterator[tuple[str, str]]:
    """A JupyterLab server in its own process group; yields (base URL, token)."""
    port, token = _free_port(), secrets.token_hex(16)
    dirs = {name: home / name.lower() for name in ("JUPYTER_CONFIG_DIR", "JUPYTER_RUNTIME_DIR")}
    dirs["JUPYTER_DATA_DIR"] = home / "data"
    dirs["IPYTHONDIR"] = home / "ipython"
    for d in dirs.values():
        d.mkdir(parents=True, exist_ok=True)
    labconfig = dirs["JUPYTER_CONFIG_DIR"] / "labconfig"
    labconfig.mkdir()
    (labconfig / "page_config.json").write_text(
        json.dumps({"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}})
    )
    env = {**os.environ, **{k: str(v) for k, v in dirs.items()}}
    env.pop("JUPYTER_PATH", None)
    log = (home / "jupyterlab.log").open("wb")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyterlab",
            "--no-browser",
            "--allow-root",
            "--ip=127.0.0.1",
            f"--port={port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={token}",
            f"--ServerApp.root_dir={root}",
            "--LabApp.expose_app_in_browser=True",
        ],
        cwd=root,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"jupyterlab exited with {proc.returncode}:\n"
                    + (home / "jupyterlab.log").read_text()[-3000:]
                )
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2):
                    break
            except (urllib.error.URLError, OSError):
                if time.monotonic() > deadline:
                    raise RuntimeError("jupyterlab did not answer within 120 s") from None
                time.sleep(0.25)
        yield base, token
    finally:
        with contextlib.suppress(Exception):  # shut kernels down cleanly first
            request = urllib.request.Request(
                f"{base}/api/shutdown?token={token}", method="POST", data=b""
            )
            urllib.request.urlopen(request, timeout=10).close()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)  # only the group this test started
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        log.close()


KERNEL_IDLE = """() => {
  const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
  return !!k && k.status === 'idle';
}"""


def test_debugger_in_jupyterlab(tmp_path: Path) -> None:
    if not os.path.exists(CHROMIUM):
        _unavailable(
            f"Debian's chromium is not installed ({CHROMIUM} is missing; "
            "apt-get install -y chromium)"
        )
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("the playwright Python package is not installed (pip install playwright)")

    root, home = tmp_path / "root", tmp_path / "home"
    root.mkdir()
    home.mkdir()
    db_path = tmp_path / "demo.db"
    db_url = f"sqlite:///{db_path}"
    _notebook(root / "debugger.ipynb", db_url)
    artifacts = REPO / "artifacts"
    artifacts.mkdir(exist_ok=True)
    started = time.monotonic()

    with _jupyterlab(root, home) as (base, token), sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
        )
        try:
            page = browser.new_page(viewport={"width": 1500, "height": 2300})
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
                selected, child_id, hostile_id = _drive(page, base, token, root, db_url, dialogs)
            except Exception:
                with contextlib.suppress(Exception):
                    page.screenshot(path=str(artifacts / "debugger-failure.png"))
                print("browser console:\n" + "\n".join(console[-80:]))
                raise
            out = page.locator(".jp-OutputArea-output .stt-debugger")
            out.scroll_into_view_if_needed()
            page.wait_for_timeout(500)
            out.screenshot(path=str(artifacts / "debugger.png"))
        finally:
            browser.close()

    with st.connect(db_url) as db:  # the fork is in the database, seen from this process
        child = db.get_run(child_id)
        assert child.record.parent_run_id == hostile_id
        assert child.record.parent_frame_no == selected
        assert len(db.runs(limit=1000)) == 9  # seven demo runs, the hostile fork, this fork
    docs = REPO / "docs"
    docs.mkdir(exist_ok=True)
    shutil.copyfile(artifacts / "debugger.png", docs / "debugger.png")
    print(f"browser round trip took {time.monotonic() - started:.1f} s")


def _drive(
    page: Any, base: str, token: str, root: Path, db_url: str, dialogs: list[str]
) -> tuple[int, str, str]:
    """Run the notebook, click a point, fork; return (selected frame, child id, hostile id)."""
    page.goto(f"{base}/lab/tree/debugger.ipynb?token={token}")
    page.wait_for_function(KERNEL_IDLE, timeout=TIMEOUT_MS)
    # fire and forget: awaiting this command's promise never returns
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
    out = page.locator(".jp-OutputArea-output .stt-debugger")
    out.wait_for(state="visible", timeout=TIMEOUT_MS)
    points = out.locator(".js-plotly-plot .scatterlayer .points path")
    points.first.wait_for(state="attached", timeout=TIMEOUT_MS)
    assert out.locator(".js-plotly-plot svg.main-svg").count() > 0  # the timeline drew
    hostile_id = (root / "hostile_id.txt").read_text().strip()
    with st.connect(db_url) as db:
        last = db.get_run(hostile_id).record.clock
    label = out.locator(".widget-label", has_text=re.compile(r"^frame \d+ of \d+"))
    assert label.first.inner_text().startswith(f"frame {last} of {last}")

    # click a frame point (the first checkpoint marker) by its coordinates
    box = points.first.bounding_box()
    assert box is not None
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.move(x, y)
    page.mouse.click(x, y)
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

    # the hostile payload shows as text (the selected checkpoint is the edited notes)
    inspector = out.locator(".widget-html", has_text="onerror")
    inspector.first.wait_for(state="visible", timeout=TIMEOUT_MS)
    assert 'onerror="window.__pwned=1"' in out.inner_text()
    assert out.locator("img[src='x']").count() == 0

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

    assert page.evaluate("() => typeof window.__pwned") == "undefined"
    assert dialogs == []
    return selected, child_id, hostile_id
