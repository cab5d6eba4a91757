"""``smithers-tt serve`` as a person uses it, in headless Chromium (issue 35, items 5 and 6).

The command serves the demo store (a copy of the SQLite one, or one built in a PostgreSQL
schema) on a free port. Opened at
``?run=<short id>&frame=4``, the page shows that run at frame 4 (the scrubber's line, the link's
title, the actions' title), read-only (Rewind off, the reason on the page); a click on ▶
scrubs to frame 5 and every one of them follows; the link's address names the run and frame 5
on this server (its Copy button puts it on the clipboard), and following it shows that frame
again. Opened bare, the page is the run browser, and **Open** on a row shows that run's
debugger. The page asks nothing of any address but the server's. Screenshots go to
``artifacts/`` (untracked).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

import smithers_tt as st

from ._jupyter import CHROMIUM, TIMEOUT_MS, chromium, free_port

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"


def _need(ok: bool, reason: str) -> None:
    if ok:
        return
    if os.environ.get("SMITHERS_TT_REQUIRE_BROWSER") == "1":
        pytest.fail(f"{reason} (SMITHERS_TT_REQUIRE_BROWSER=1: the browser test must run)")
    pytest.skip(reason)


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest) -> str:
    """The demo store on each backend: a copy of the SQLite demo, or the demo built in a
    fresh PostgreSQL schema; its URL."""
    if request.param == "sqlite":
        return str(request.getfixturevalue("demo_copy"))
    from smithers_tt.demo.showcase import build_demo

    url = request.getfixturevalue("pg_schema_url")
    with st.connect(url) as db:
        build_demo(db)
    return url


@contextlib.contextmanager
def served(db_path: Path | str, home: Path) -> Iterator[str]:
    """``smithers-tt serve`` on ``db_path`` (a file or a URL) in its own process group;
    yields its base URL. Only that group is ever stopped."""
    port = free_port()
    dirs = {name: home / name.lower() for name in ("JUPYTER_CONFIG_DIR", "JUPYTER_RUNTIME_DIR")}
    dirs |= {"JUPYTER_DATA_DIR": home / "data", "IPYTHONDIR": home / "ipython"}
    for folder in dirs.values():
        folder.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **{k: str(v) for k, v in dirs.items()}}
    command = [sys.executable, "-m", "smithers_tt.cli", "--db", str(db_path), "serve"]
    log = (home / "serve.log").open("wb")
    proc = subprocess.Popen(
        [*command, "--port", str(port), "--no-browser"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"serve exited: {(home / 'serve.log').read_text()[-3000:]}")
            try:
                # a path Voila answers without starting a kernel
                with urllib.request.urlopen(f"{base}voila/static/voila.js", timeout=2):
                    break
            except (urllib.error.URLError, OSError):
                assert time.monotonic() < deadline, "serve did not answer within 120 s"
                time.sleep(0.1)
        yield base
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)  # serve stops Voila and its kernels
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        log.close()


def label(page: Any, pattern: str) -> Any:
    """The text a person reads in the debugger (labels and titles, not the page's source)."""
    return page.locator(".stt-debugger .widget-label, .stt-debugger h4, .stt-link summary").filter(
        has_text=re.compile(pattern)
    )


@pytest.mark.xdist_group("browser")  # a Voila and a chromium: one browser test at a time
def test_serve_opens_a_frame_scrubs_and_opens_a_run_from_the_browser(
    store: str, tmp_path: Path
) -> None:
    _need(os.path.exists(CHROMIUM), f"Debian's chromium is not installed ({CHROMIUM} is missing)")
    for module in ("playwright", "voila"):
        _need(importlib.util.find_spec(module) is not None, f"{module} is not installed")
    with st.connect(store, read_only=True) as db:
        run = max(db.runs(), key=lambda r: r.record.clock)  # the longest: frames to scrub
        short = db.store.short_run_ids([run.id])[run.id]
        ids = {r.id for r in db.runs(limit=100)}
    ARTIFACTS.mkdir(exist_ok=True)
    home = tmp_path / "home"

    with served(store, home) as base, chromium() as browser:
        page = browser.new_page(
            viewport={"width": 1280, "height": 2200},
            permissions=["clipboard-read", "clipboard-write"],
        )
        page.set_default_timeout(TIMEOUT_MS)
        asked: list[str] = []
        page.on("request", lambda request: asked.append(request.url))
        try:
            page.goto(f"{base}?run={short}&frame=4")
            page.locator(".stt-debugger").wait_for(state="visible", timeout=TIMEOUT_MS)
            label(page, r"^frame 4 of \d+").wait_for(timeout=TIMEOUT_MS)
            label(page, rf"^Link to frame 4 of run {short}$").wait_for(timeout=TIMEOUT_MS)
            label(page, r"Actions at frame 4 of run").wait_for(timeout=TIMEOUT_MS)
            header = page.locator(".stt-debugger h4 [title]").first
            assert header.get_attribute("title") == run.id
            # read-only: Rewind is off, and the page says why
            assert page.get_by_role("button", name="Rewind…", exact=True).is_disabled()
            assert page.get_by_text("Actions are off: the store is opened read-only").is_visible()

            page.locator("button[title='next frame']").click()  # ▶: scrub one frame on
            label(page, r"^frame 5 of \d+").wait_for(timeout=TIMEOUT_MS)
            label(page, rf"^Link to frame 5 of run {short}$").wait_for(timeout=TIMEOUT_MS)
            label(page, r"Actions at frame 5 of run").wait_for(timeout=TIMEOUT_MS)
            page.locator(".stt-link summary").click()
            address = page.locator(".stt-link a").inner_text()
            assert address.startswith(base)
            assert parse_qs(urlsplit(address).query) == {"run": [run.id], "frame": ["5"]}
            code = page.locator(".stt-link-code").inner_text()
            assert f'db.debug("{run.id}", frame=5)' in code
            page.get_by_role("button", name="Copy URL").click()  # what a person pastes
            assert page.evaluate("() => navigator.clipboard.readText()") == address
            page.screenshot(path=str(ARTIFACTS / "serve-frame.png"))

            page.goto(address)  # the link, followed: the same run at the same frame
            label(page, r"^frame 5 of \d+").wait_for(timeout=TIMEOUT_MS)
            label(page, rf"^Link to frame 5 of run {short}$").wait_for(timeout=TIMEOUT_MS)

            page.goto(base)  # the run browser; Open shows a run's debugger in place
            row = page.locator(".stt-browser .stt-browser-run").first
            row.wait_for(state="visible", timeout=TIMEOUT_MS)
            opened = row.locator("code.stt-id").first.get_attribute("title")
            assert opened in ids
            row.get_by_role("button", name="Open").click()
            page.locator(".stt-browser .stt-debugger").wait_for(state="visible")
            page.wait_for_function(
                "(id) => !!document.querySelector(`.stt-debugger h4 [title='${id}']`)",
                arg=opened,
                timeout=TIMEOUT_MS,
            )
            label(page, r"^Link to frame \d+ of run ").wait_for(timeout=TIMEOUT_MS)
            page.screenshot(path=str(ARTIFACTS / "serve-browser-open.png"))
        except Exception:
            with contextlib.suppress(Exception):
                page.screenshot(path=str(ARTIFACTS / "serve-failure.png"), full_page=True)
            raise
    outside = [url for url in asked if not url.startswith((base, f"blob:{base}", "data:"))]
    assert outside == []  # nothing fetched from anywhere but the server
