"""The workspace of issue 35 from a wheel with the ``notebook`` extra, as a newcomer meets it:
``smithers-tt demo``, ``runs`` and ``failures`` in a terminal; the run browser, the triage view
and a served page built in Python (a price table reaching the debuggers they open); and
``smithers-tt serve`` answering the address of a run at a frame with the page's widgets, not
an error. (The page in a browser: ``tests/widgets/test_serve_browser.py``.)"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from tests.installed.conftest import Installed

SCRIPT = """
import json, re, sys
import smithers_tt as st
from smithers_tt.widgets import TriageView, served_page

db = st.connect(sys.argv[1], read_only=True)
prices = {"demo-small": {"input": 1.0, "output": 2.0}}
retry = db.runs(labels={"case": "retry"})[0].id
browser = db.browse(prices=prices, status="cancelled")
shown = [r.run_id for r in browser.listing.runs]
opened = browser.open_run(retry)
view = TriageView(db, prices=prices)
example = view.open_example(0)
short = db.store.short_run_ids([retry])[retry]  # as the CLI prints it
page = served_page(db, f"run={short}&frame=3", prices=prices).children[1]
print(json.dumps({
    "cancelled": shown,
    "opened": [opened.model.run_id, "$" in opened.header.value],
    "example": [example.model.run_id, example.model.frame_no, "$" in example.header.value],
    "page": [page.model.run_id, page.model.frame_no, "$" in page.header.value],
    "retry": retry,
}))
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow  # the notebook extra's venv (once per session), then a Voila start
def test_the_workspace_runs_from_a_wheel_with_the_notebook_extra(
    notebook: Installed, tmp_path: Path
) -> None:
    assert notebook.run("smithers-tt", "demo", cwd=tmp_path).returncode == 0
    db_url = f"sqlite:///{tmp_path / 'smithers.db'}"
    runs = notebook.run("smithers-tt", "runs", "--json", cwd=tmp_path)
    assert runs.returncode == 0, runs.stderr
    by_case = {r["labels"]["case"]: r["run_id"] for r in json.loads(runs.stdout)}
    failures = notebook.run("smithers-tt", "failures", "--json", cwd=tmp_path)
    assert failures.returncode == 0, failures.stderr
    (group,) = json.loads(failures.stdout)  # the retry case's failed first attempt
    assert group["run_ids"] == [by_case["retry"]] and group["node_id"] == "research"

    script = tmp_path / "workspace.py"
    script.write_text(SCRIPT)
    done = notebook.run("python", script, db_url, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["cancelled"] == [by_case["cancelled"]]
    assert seen["opened"] == [by_case["retry"], True]  # priced: the table reached it
    assert seen["example"][0] == by_case["retry"] and seen["example"][2] is True
    assert seen["page"] == [by_case["retry"], 3, True]

    port = _free_port()
    server = subprocess.Popen(
        [str(notebook.bin / "smithers-tt"), "serve", "--no-browser", "--port", str(port)],
        cwd=tmp_path,
        env=notebook.env(
            **{
                name: str(tmp_path / "jupyter" / name.lower())
                for name in ("JUPYTER_CONFIG_DIR", "JUPYTER_RUNTIME_DIR", "JUPYTER_DATA_DIR")
            }
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        page = None
        deadline = time.monotonic() + 180
        while page is None and time.monotonic() < deadline and server.poll() is None:
            try:
                address = f"http://127.0.0.1:{port}/?run={by_case['retry']}&frame=3"
                with urllib.request.urlopen(address, timeout=120) as reply:
                    page = reply.read().decode()
            except OSError:
                time.sleep(0.5)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGTERM)
        try:
            out = server.communicate(timeout=30)[0]
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            out = server.communicate(timeout=10)[0]
    assert page is not None, out[-3000:]
    # the page's one cell ran and showed widgets (a VBox), not an error
    assert "application/vnd.jupyter.widget-view+json" in page, page[-3000:]
    assert "Traceback" not in page and "error when executing" not in page.lower()
