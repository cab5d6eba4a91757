"""A JupyterLab server and Debian's chromium for tests and screenshots (no test in here).

Used by ``tests/widgets/test_browser.py`` and by ``docs/hero_image.py``: the server runs in
its own process group with temporary config, data, runtime and IPython folders, a token and
a free port, and only that group is ever stopped. Nothing here downloads anything: the
browser is ``/usr/bin/chromium`` driven by the ``playwright`` Python package.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
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

CHROMIUM = "/usr/bin/chromium"
TIMEOUT_MS = 180_000  # two busy cores: a FigureWidget alone takes seconds to draw


def browser_unavailable() -> str | None:
    """Why a browser test cannot run here (no chromium, no playwright), or None."""
    if not Path(CHROMIUM).exists():
        return (
            f"Debian's chromium is not installed ({CHROMIUM} is missing; apt-get install chromium)"
        )
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (the dev extra has it)"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_notebook(path: Path, cells: list[str]) -> None:
    """A notebook of code cells (no outputs) at ``path``."""
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
def jupyterlab(root: Path, home: Path) -> Iterator[tuple[str, str]]:
    """A JupyterLab server in its own process group; yields (base URL, token)."""
    port, token = free_port(), secrets.token_hex(16)
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
                time.sleep(0.05)
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


class Lab:
    """One JupyterLab server that several tests share (see ``browser_lab`` in
    tests/conftest.py): each test works in a folder of its own under the server's root and
    opens its notebook in a workspace of its own, so that nothing a test opened is restored in
    the next one; :meth:`end_sessions` shuts its kernels down when it is done. Settings a test
    changes (a theme) are the server's: such a test puts them back (:meth:`reset_settings`)."""

    def __init__(self, root: Path, base: str, token: str) -> None:
        self.root, self.base, self.token = root, base, token
        self._made = 0

    def folder(self, name: str) -> Path:
        """A new, empty folder under the server's root for one test's notebooks."""
        self._made += 1
        folder = self.root / f"{self._made:03d}-{name}"
        folder.mkdir()
        return folder

    def url(self, notebook: Path) -> str:
        """The page that opens ``notebook`` (under :attr:`root`) in a fresh workspace."""
        path = notebook.relative_to(self.root).as_posix()
        workspace = f"ws-{secrets.token_hex(4)}"
        return f"{self.base}/lab/workspaces/{workspace}/tree/{path}?token={self.token}&reset"

    def _api(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"{self.base}{path}?token={self.token}", method=method, data=data
        )
        with urllib.request.urlopen(request, timeout=30) as reply:
            body = reply.read()
        return json.loads(body) if body else None

    def reset_settings(self, plugin: str) -> dict[str, Any]:
        """Put a plugin's user settings back to its defaults (a test that changed them, such as
        the theme, on the shared server); return the settings now in force."""
        self._api("PUT", f"/lab/api/settings/{plugin}", {"raw": "{}"})
        return dict(self._api("GET", f"/lab/api/settings/{plugin}")["settings"])

    def end_sessions(self) -> None:
        """Shut down every kernel session of the server (a test's notebooks, at its end)."""
        for session in self._api("GET", "/api/sessions"):
            with contextlib.suppress(urllib.error.HTTPError):  # ended meanwhile
                self._api("DELETE", f"/api/sessions/{session['id']}")


KERNEL_IDLE = """() => {
  const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
  return !!k && k.status === 'idle';
}"""


@contextlib.contextmanager
def chromium() -> Iterator[Any]:
    """A headless Debian chromium (Playwright ``Browser``); closed at the end."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
        )
        try:
            yield browser
        finally:
            browser.close()


def run_notebook(page: Any, base: str, token: str, name: str) -> Any:
    """Open ``name`` in JupyterLab, run all cells, and return the debugger's locator once its
    timeline drew."""
    return run_notebook_at(page, f"{base}/lab/tree/{name}?token={token}")


def run_notebook_at(page: Any, url: str) -> Any:
    """:func:`run_notebook` of the notebook a page address opens (``Lab.url(path)``)."""
    page.goto(url)
    page.wait_for_function(KERNEL_IDLE, timeout=TIMEOUT_MS)
    # fire and forget: awaiting this command's promise never returns
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
    out = page.locator(".jp-OutputArea-output .stt-debugger")
    out.wait_for(state="visible", timeout=TIMEOUT_MS)
    points = out.locator(".js-plotly-plot .scatterlayer .points path")
    points.first.wait_for(state="attached", timeout=TIMEOUT_MS)
    return out


SETTLED = """([selector, quietMs]) => {
  // every plotly figure under the selector drawn at its box's width (a resize redraws it a
  // moment later), and no element of them moved or resized for two animation frames and
  // quietMs: the layout a person now sees
  const roots = [...document.querySelectorAll(selector)];
  if (!roots.length) return false;
  const parts = [];
  for (const root of roots) {
    for (const gd of root.querySelectorAll('.js-plotly-plot')) {
      const svg = gd.querySelector('.main-svg');
      if (!gd._fullLayout || !svg) return false;
      const drawn = svg.getBoundingClientRect().width, box = gd.getBoundingClientRect().width;
      if (Math.abs(drawn - box) > 1) return false;
    }
    for (const el of root.querySelectorAll('*')) {
      const b = el.getBoundingClientRect();
      parts.push(b.left, b.top, b.width, b.height);
    }
  }
  const sig = parts.join(','), now = performance.now();
  const s = window.__sttSettle || (window.__sttSettle = {sig: '', frames: 0, since: now});
  if (s.sig !== sig) { s.sig = sig; s.frames = 0; s.since = now; return false; }
  s.frames += 1;
  return s.frames >= 2 && now - s.since >= quietMs;
}"""


def wait_settled(
    page: Any, selector: str = ".jp-OutputArea-output .stt-debugger", quiet_ms: int = 300
) -> None:
    """Wait until the debuggers under ``selector`` are laid out for good: each plotly figure
    drawn at its box's width, and no element moved or resized across two animation frames
    and ``quiet_ms`` (instead of a fixed wait after a resize or a scroll)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    page.evaluate("() => { delete window.__sttSettle; }")
    try:
        page.wait_for_function(SETTLED, arg=[selector, quiet_ms], polling="raf", timeout=TIMEOUT_MS)
    except PlaywrightTimeout:  # say what never settled
        seen = page.evaluate(UNSETTLED, selector)
        raise AssertionError(f"the debugger's layout never settled: {seen}") from None


UNSETTLED = """(selector) => [...document.querySelectorAll(selector)].map(root =>
  [...root.querySelectorAll('.js-plotly-plot')].map(gd => {
    const svg = gd.querySelector('.main-svg');
    return {gd: gd.getBoundingClientRect().width, svg: svg && svg.getBoundingClientRect().width,
            full: gd._fullLayout && gd._fullLayout.width, layout: gd.layout && gd.layout.width,
            frames: window.__sttSettle && window.__sttSettle.frames};
  }))"""


def wait_cell_width_changed(page: Any, before: float, selector: str) -> float:
    """Wait until the output area holding ``selector`` is no longer ``before`` px wide (a new
    window size or a side panel reached the notebook); return its new width."""
    handle = page.wait_for_function(
        """([selector, before]) => { const el = document.querySelector(selector);
             const cell = el && el.closest('.jp-OutputArea-output');
             const w = cell ? cell.getBoundingClientRect().width : before;
             return Math.abs(w - before) > 0.5 ? w : false; }""",
        arg=[selector, before],
        timeout=TIMEOUT_MS,
    )
    return float(handle.json_value())


def cell_width(page: Any, selector: str = ".jp-OutputArea-output .stt-debugger") -> float:
    """The width of the output area holding the first ``selector``."""
    return float(
        page.evaluate(
            """(s) => document.querySelector(s).closest('.jp-OutputArea-output')
                 .getBoundingClientRect().width""",
            selector,
        )
    )


def click_point(page: Any, out: Any, index: int = 0) -> None:
    """Click a point of the timeline by its coordinates (as a person does)."""
    points = out.locator(".js-plotly-plot .scatterlayer .points path")
    deadline = time.monotonic() + TIMEOUT_MS / 1000
    while True:
        # a redraw lays out a new figure, drawn a moment later: wait for a point to be drawn
        # ("attached", not "visible": a node-state marker is a vertical line, zero pixels wide)
        points.first.wait_for(state="attached", timeout=TIMEOUT_MS)
        count = points.count()
        box = None
        with contextlib.suppress(Exception):  # gone between the count and the look
            box = points.nth(min(index, count - 1)).bounding_box(timeout=2_000) if count else None
        if box is not None:
            break
        # the figure was replaced between the look and the measure (live refresh redraws it
        # while a continued run goes on): look at the one drawn now
        assert time.monotonic() < deadline, "no point of the timeline stayed drawn to click"
        page.wait_for_timeout(200)
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.move(x, y)
    page.mouse.click(x, y)
