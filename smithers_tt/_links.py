"""Links to a frame: the Python code that reopens a run's debugger at a frame, and the address
of the same frame in ``smithers-tt serve``, written and read here alone.

The debugger's "link" shows both (:func:`frame_link`); ``smithers-tt serve`` reads the address
back (:func:`read_query`). The code names the store by the URL the debugger's database was
opened with (a password never shown, a relative SQLite path made absolute so the code works
from any folder) and the run by its whole id (a prefix shown today can become ambiguous when
more runs are made).
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlsplit

from smithers_tt.errors import InvalidArgument
from smithers_tt.store import display_url

SERVE_HOST = "127.0.0.1"
"""Where ``smithers-tt serve`` listens unless told otherwise (this machine only)."""
SERVE_PORT = 8866
"""Its port unless told otherwise (Voila's own default)."""

_SQLITE = "sqlite:///"


@dataclass(frozen=True)
class FrameLink:
    """How to open one frame of one run again."""

    run_id: str
    frame_no: int
    code: str
    """Python that opens the debugger there: ``db.debug("<id>", frame=N)`` on the store."""
    url: str
    """The frame's address in ``smithers-tt serve``."""
    command: str
    """The ``smithers-tt serve`` command that serves that address."""


def absolute_url(url: str) -> str:
    """The database URL with a relative SQLite path made absolute, so that it names the same
    store from any folder (a kernel runs in another one)."""
    if url.startswith(_SQLITE) and not url.removeprefix(_SQLITE).startswith("/"):
        return _SQLITE + str(Path(url.removeprefix(_SQLITE)).resolve())
    return url


def shared_url(url: str) -> str:
    """``url`` as another person may see it: :func:`absolute_url`, without a password."""
    return display_url(absolute_url(url))


def serve_base(env: Mapping[str, str] | None = None) -> str:
    """The address ``smithers-tt serve`` answers at: inside a served page, the page's own (Voila
    tells its kernel the request's host and port), else this machine at :data:`SERVE_PORT`."""
    env = os.environ if env is None else env
    host = env.get("SERVER_NAME")
    if not host or not env.get("SERVER_SOFTWARE", "").startswith("voila/"):
        return f"http://{SERVE_HOST}:{SERVE_PORT}/"
    if ":" in host:
        host = f"[{host}]"  # an IPv6 address
    port = env.get("SERVER_PORT")
    return f"http://{host}{':' + port if port else ''}/"


def frame_link(db_url: str, run_id: str, frame_no: int, base: str | None = None) -> FrameLink:
    """The code and the served address of frame ``frame_no`` of ``run_id`` (whole id) in
    the store at ``db_url``; ``base`` is where serve answers (default :func:`serve_base`)."""
    url = shared_url(db_url)
    code = (  # JSON's string literals are Python's too, in the quotes the docs use
        "import smithers_tt as st\n"
        f"db = st.connect({json.dumps(url)})\n"
        f"db.debug({json.dumps(run_id)}, frame={int(frame_no)})"
    )
    base = base or serve_base()
    address = base + "?" + urlencode({"run": run_id, "frame": int(frame_no)})
    port = urlsplit(base).port
    command = f"smithers-tt --db {shlex.quote(url)} serve" + (
        f" --port {port}" if port not in (None, SERVE_PORT) else ""
    )
    return FrameLink(run_id, int(frame_no), code, address, command)


def read_query(query: str) -> tuple[str | None, int | None]:
    """``(run, frame)`` named by a served page's query string (``run=...&frame=...``); None
    for what it does not name.

    Raises:
        InvalidArgument: ``frame`` without ``run``, or a frame that is not a whole number.
    """
    params = parse_qs(query.lstrip("?"), keep_blank_values=True)
    run = (params.get("run") or [""])[-1].strip() or None
    text = (params.get("frame") or [""])[-1].strip()
    if not text:
        return run, None
    if run is None:
        raise InvalidArgument(f"frame={text} names no run: add run=<id> to the address")
    if not text.isascii() or not text.isdigit():
        raise InvalidArgument(f"frame must be a whole number from 0, not {text!r}")
    return run, int(text)
