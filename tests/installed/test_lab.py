"""``smithers-tt lab`` from a wheel: the notebooks ship, JupyterLab starts (as root too) with
the caller's arguments, and the tour notebook opens the tour's database."""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import time
import urllib.request
import zipfile
from pathlib import Path

import pytest

from tests.installed.conftest import Installed

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))


def test_wheel_ships_every_notebook_and_no_database(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()

    assert {f"smithers_tt/_notebooks/{n}" for n in NOTEBOOKS} <= set(names)
    assert "smithers_tt/_notebooks/00_tour.ipynb" in names
    assert not [n for n in names if ".db" in n or "checkpoints" in n]
    # and the Voila page template `smithers-tt serve` names (ours: Voila's links a CDN)
    template = ROOT / "smithers_tt" / "cli" / "_voila"
    shipped = {p.relative_to(ROOT).as_posix() for p in template.rglob("*") if p.is_file()}
    assert shipped and shipped <= set(names)


@pytest.mark.slow
def test_demo_hint_for_the_notebooks_is_a_command_of_this_install(
    core: Installed, tmp_path: Path
) -> None:
    built = core.run("smithers-tt", "--db", "tour.db", "demo", cwd=tmp_path)
    assert built.returncode == 0, built.stderr

    hints = built.stdout.split("Next:")[1].strip().splitlines()
    (lab_hint,) = [h for h in hints if re.search(r"\blab\b", h)]
    command = lab_hint.split("(")[0].split()
    assert command[0] == "smithers-tt" and command[-1] == "lab"  # not ./dev: no checkout here
    helped = core.run(*command, "--help", cwd=tmp_path)
    assert helped.returncode == 0 and "JupyterLab" in helped.stdout


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=5) as reply:
        return json.loads(reply.read())


@pytest.mark.slow  # a venv with JupyterLab (once per session), then about 10 s of server start
def test_lab_from_a_wheel_serves_the_tour_with_extra_arguments_and_as_root(
    notebook: Installed, tmp_path: Path
) -> None:
    built = notebook.run("smithers-tt", "demo", cwd=tmp_path)  # ./smithers.db, as in the tour
    assert built.returncode == 0, built.stderr
    port, token = _free_port(), secrets.token_hex(8)
    jupyter = {
        name: str(tmp_path / "jupyter" / name.lower())
        for name in ("JUPYTER_CONFIG_DIR", "JUPYTER_RUNTIME_DIR", "JUPYTER_DATA_DIR", "IPYTHONDIR")
    }
    server = subprocess.Popen(
        [
            str(notebook.bin / "smithers-tt"),
            "lab",
            "--no-browser",  # JupyterLab's own options, passed through
            "--ip=127.0.0.1",
            "--port",
            str(port),
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={token}",
        ],
        cwd=tmp_path,
        env=notebook.env(**jupyter),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        status = None
        for _ in range(600):  # a minute at most
            if server.poll() is not None:
                break
            try:
                status = _get(f"http://127.0.0.1:{port}/api/status?token={token}")
                break
            except OSError:
                time.sleep(0.1)
        assert status is not None, server.communicate(timeout=10)[0][-3000:]
        listed = _get(f"http://127.0.0.1:{port}/api/contents?token={token}")
        served = {item["name"] for item in listed["content"]}
        environ = Path(f"/proc/{server.pid}/environ").read_bytes().split(b"\0")
        argv = Path(f"/proc/{server.pid}/cmdline").read_bytes().split(b"\0")
    finally:
        with contextlib.suppress(ProcessLookupError):  # it may have died on its own
            os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=20)

    assert set(NOTEBOOKS) <= served  # copied out of the wheel, served from there
    assert (tmp_path / "smithers-tt-notebooks" / "00_tour.ipynb").is_file()
    tour_db = f"SMITHERS_TT_DB=sqlite:///{tmp_path / 'smithers.db'}".encode()
    assert tour_db in environ  # the notebooks open the tour's database, by absolute path
    assert (b"--allow-root" in argv) == (os.geteuid() == 0)  # JupyterLab refuses root without


@pytest.mark.slow
def test_tour_notebook_opens_the_database_smithers_tt_lab_hands_it(
    notebook: Installed, tmp_path: Path
) -> None:
    built = notebook.run("smithers-tt", "demo", cwd=tmp_path)
    assert built.returncode == 0, built.stderr
    (tmp_path / "elsewhere").mkdir()  # the kernel runs beside the notebook, not the database
    tour = tmp_path / "elsewhere" / "00_tour.ipynb"
    tour.write_bytes((ROOT / "notebooks" / "00_tour.ipynb").read_bytes())

    executed = notebook.run(
        "jupyter",
        "nbconvert",
        "--to",
        "notebook",
        "--execute",
        "--inplace",
        tour,
        cwd=tmp_path,
        timeout=300,
        SMITHERS_TT_DB=f"sqlite:///{tmp_path / 'smithers.db'}",
        JUPYTER_CONFIG_DIR=str(tmp_path / "jupyter"),
        IPYTHONDIR=str(tmp_path / "ipython"),
    )

    assert executed.returncode == 0, executed.stderr[-3000:]
    text = "".join(
        "".join(out.get("text", ""))
        for cell in json.loads(tour.read_text())["cells"]
        for out in cell.get("outputs", [])
    )
    assert "7 runs: {'cancelled': 1, 'finished': 6}" in text
    assert "building the demo runs" not in text
    assert "research change $.payload.notes[0]" in text


def _wheel_tour() -> list[str]:
    """The README's tour for a wheel install: its commands, comments dropped."""
    readme = (ROOT / "README.md").read_text()
    block = readme.split("From a wheel", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    return [line.split("  #")[0].strip() for line in block.splitlines() if line.strip()]


@pytest.mark.slow
def test_readme_wheel_tour_works_word_for_word(notebook: Installed, tmp_path: Path) -> None:
    tour = _wheel_tour()
    assert tour[0] == "pip install 'smithers-tt[notebook]'"  # what the `notebook` venv holds
    assert tour[-1] == "smithers-tt lab"  # started for real (with server options) above

    for line in tour[1:-1]:
        done = notebook.run(*line.split(), cwd=tmp_path)
        assert done.returncode == 0, (line, done.stderr)
    assert (tmp_path / "smithers.db").is_file()
    helped = notebook.run("smithers-tt", "lab", "--help", cwd=tmp_path)
    assert helped.returncode == 0
