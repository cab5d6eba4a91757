"""``smithers-tt serve``: the run browser and the debugger as a web page, served by Voila.

No web server of our own: Voila (the ``notebook`` extra) runs a notebook we write into a
temporary folder, whose one cell opens the store and shows
:func:`smithers_tt.widgets.served_page` for the request's query string (``?run=...&frame=...``;
Voila hands it to the kernel as ``$QUERY_STRING``). The store is opened read-only unless
``--allow-actions`` is given, so a page cannot change it; the server listens on 127.0.0.1
unless ``--host`` says otherwise (with a warning: the page shows every run's checkpoints to
whoever reaches it). Voila's page template is ours (``_voila/``): Voila's ``lab`` template
without the stylesheets it links from a CDN, so the page fetches nothing from the internet.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import click

from smithers_tt._extras import require_extra
from smithers_tt._links import SERVE_HOST, SERVE_PORT, absolute_url, shared_url
from smithers_tt._prices import PriceTable
from smithers_tt.cli._app import Context, cli, handle_errors, pass_ctx
from smithers_tt.cli._maintenance import demo_prices_file

TEMPLATES = Path(__file__).resolve().parent / "_voila"
"""A Jupyter data folder holding our Voila template, ``voila/templates/smithers-tt``."""
TEMPLATE = "smithers-tt"
ACTIONS_ENV = "SMITHERS_TT_SERVE_ACTIONS"
"""Set to ``1`` for the page's kernel when ``--allow-actions`` was given."""
PRICES_ENV = "SMITHERS_TT_SERVE_PRICES"
"""The price table's file (absolute) for the page's kernel when ``--prices`` was given."""

PAGE_CELL = f"""\
import os

import smithers_tt as st
from smithers_tt.widgets import served_page

db = st.connect(
    os.environ["SMITHERS_TT_DB"],
    read_only=os.environ.get("{ACTIONS_ENV}") != "1",
    create=False,
)
served_page(
    db,
    os.environ.get("QUERY_STRING", ""),
    prices=os.environ.get("{PRICES_ENV}") or None,
)
"""
"""The page's notebook: one cell, the store from the environment, the page for the query."""


def page_notebook(folder: Path) -> Path:
    """Write the page's notebook (:data:`PAGE_CELL`) into ``folder``; its path."""
    notebook = {
        "cells": [
            {
                "cell_type": "code",
                "execution_count": None,
                "id": "smithers-tt-serve",
                "metadata": {},
                "outputs": [],
                "source": PAGE_CELL,
            }
        ],
        "metadata": {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path = folder / "smithers-tt.ipynb"
    path.write_text(json.dumps(notebook, indent=1))
    return path


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reached from this machine alone (127.0.0.0/8, ::1, localhost)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name: it may resolve to anything


def voila_command(notebook: Path, host: str, port: int, *, browser: bool) -> list[str]:
    """The command that serves ``notebook`` (Voila in this Python, our template)."""
    return [
        sys.executable,
        "-m",
        "voila",
        str(notebook),
        f"--Voila.ip={host}",
        f"--port={port}",
        "--Voila.port_retries=0",  # the port asked for, or a clear failure: links name it
        f"--template={TEMPLATE}",
        "--strip_sources=True",
        *([] if browser else ["--no-browser"]),
    ]


def voila_environment(
    db_url: str, allow_actions: bool, prices: Path | None = None
) -> dict[str, str]:
    """Voila's (and so the page kernel's) environment: the store, whether it may be
    changed, the price table's file (if any), and our template's folder first on
    ``JUPYTER_PATH``."""
    paths = [str(TEMPLATES), *filter(None, os.environ.get("JUPYTER_PATH", "").split(os.pathsep))]
    return {
        **os.environ,
        "SMITHERS_TT_DB": db_url,
        ACTIONS_ENV: "1" if allow_actions else "0",
        PRICES_ENV: "" if prices is None else str(prices),
        "JUPYTER_PATH": os.pathsep.join(paths),
    }


@cli.command()
@click.option(
    "--host",
    default=SERVE_HOST,
    show_default=True,
    help="The address to listen on; any but a loopback one lets other machines open the page "
    "(a warning says so).",
)
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    default=SERVE_PORT,
    show_default=True,
    help="The port to listen on (it must be free).",
)
@click.option("--no-browser", is_flag=True, help="Do not open a web browser on the page.")
@click.option(
    "--prices",
    metavar="FILE",
    help="A .json or .toml price table (model -> input, output, cached_input per million "
    "tokens), as for calls --prices: what the page's debuggers show model calls cost; a model "
    "it does not name shows tokens and no cost. Default: the demo-prices.json `demo` wrote "
    "beside a SQLite database, if there is one; else no table.",
)
@click.option(
    "--allow-actions",
    is_flag=True,
    help="Let the page change the store (rewind, fork, cancel, resume, export, breakpoints); "
    "without it the store is opened read-only and those buttons are off.",
)
@pass_ctx
@handle_errors
def serve(
    ctx: Context,
    host: str,
    port: int,
    no_browser: bool,
    prices: str | None,
    allow_actions: bool,
) -> None:
    """Serve the run browser and the debugger as a web page, through Voila (needs the
    notebook extra). Ctrl-C stops it.

    Open http://HOST:PORT/ for the run browser, or ?run=ID&frame=N for that run's debugger at
    that frame (the debugger's "Link to frame" gives these addresses). Read-only unless
    --allow-actions is given.

    \b
    Examples:
      smithers-tt serve
      smithers-tt --db demo.db serve --port 9000 --no-browser
      smithers-tt serve --prices prices.toml
      smithers-tt --db postgresql+psycopg://user@host/db serve --allow-actions
    """
    require_extra("voila", "ipywidgets", "plotly", "anywidget", needed_for="smithers-tt serve")
    # read here first, as the page will: a bad table is one clear line now, not an error page
    table = demo_prices_beside(ctx.url) if prices is None else Path(prices).resolve()
    if table is not None:
        PriceTable.load(table)
        if prices is None:
            click.echo(f"model calls priced by {table} (the demo's; --prices FILE for another)")
    # the store is opened here first, as the page will: a missing or unreadable one is one
    # clear line now, not an error page later
    _db = ctx.db if allow_actions else ctx.read_db
    ctx.close()
    url = absolute_url(ctx.url)  # the kernel runs in another folder
    if not is_loopback(host):
        ctx.out.error(
            f"warning: listening on {host}: anyone who can reach it sees every run's inputs, "
            "outputs and checkpoints"
            + (" and can change them (--allow-actions)" if allow_actions else "")
            + "; the page asks for no password"
        )
    shown = f"[{host}]" if ":" in host else host
    mode = "actions allowed" if allow_actions else "read-only"
    click.echo(
        f"serving {shared_url(url)} ({mode}) at http://{shown}:{port}/ (a run: ?run=ID&frame=N); "
        "Ctrl-C stops it"
    )
    sys.stdout.flush()
    with tempfile.TemporaryDirectory(prefix="smithers-tt-serve-") as folder:
        notebook = page_notebook(Path(folder))
        command = voila_command(notebook, host, port, browser=not no_browser)
        code = _run_until_stopped(command, voila_environment(url, allow_actions, table))
    if code not in (0, -signal.SIGINT, -signal.SIGTERM, 130):
        raise SystemExit(code)


def demo_prices_beside(url: str) -> Path | None:
    """The price table ``smithers-tt demo`` wrote beside the SQLite file at ``url``, if it
    is there: the demo's models are priced without ``--prices``. None for any other store
    (a demo-prices.json in the current folder may belong to another database)."""
    if not url.startswith("sqlite:///"):
        return None
    path = demo_prices_file(url)
    return path.resolve() if path.is_file() else None


def _run_until_stopped(command: list[str], env: dict[str, str]) -> int:
    """Run Voila until it ends; Ctrl-C (which Voila gets too) or a SIGTERM to us stops it,
    and it is waited for, so its kernels are shut down and our folder removed."""
    process = subprocess.Popen(command, env=env)
    before = signal.signal(signal.SIGTERM, lambda *_: process.terminate())
    try:
        while True:
            with contextlib.suppress(KeyboardInterrupt):
                return process.wait()
    finally:
        signal.signal(signal.SIGTERM, before)
