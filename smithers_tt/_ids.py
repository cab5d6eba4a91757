"""The one rule for ids (run, node, workflow, codec, agent), checked where they come in, and
the one id of this process (:func:`owner_id`).

An id is stored in a ``VARCHAR(200)`` column on both backends and shown to people. SQLite
would keep a NUL, a lone surrogate or 10,000 characters where PostgreSQL refuses them in the
middle of a run (or Python's encoder raises ``UnicodeEncodeError``), so every id is checked
once, up front, the same everywhere: callers pass it through :func:`check_id` at their
boundary (the constructors and ``Database`` methods that take ids).
"""

from __future__ import annotations

import os
import socket
from typing import Any

from smithers_tt.errors import InvalidArgument

MAX_ID_CHARS = 200
"""Longest id in characters: the width of every id column of the schema."""


def check_id(value: Any, what: str) -> str:
    """``value`` if it is a valid id, else :class:`InvalidArgument` naming ``what``.

    Valid: a non-empty ``str`` of at most :data:`MAX_ID_CHARS` characters, encodable as
    UTF-8 (no lone surrogates), without NUL.
    """
    if type(value) is not str or not value:
        raise InvalidArgument(f"{what} must be a non-empty string, got {value!r}")
    problem = text_problem(value, MAX_ID_CHARS)
    if problem is not None:
        shown = repr(value[:60]) + ("..." if len(value) > 60 else "")
        raise InvalidArgument(f"{what} {shown} {problem}; choose another", id=what)
    return value


def owner_id() -> str:
    """Who is at work here: ``host:pid``, recorded for people to read (a run's owner, the
    actor of an audit row, a worker's default id)."""
    return f"{socket.gethostname()}:{os.getpid()}"


def text_problem(value: str, most: int) -> str | None:
    """Why ``value`` cannot be stored as text of at most ``most`` characters the same on both
    backends (too long, a NUL, a lone surrogate), or None."""
    if len(value) > most:
        return f"is {len(value)} characters long; the most is {most}"
    if "\x00" in value:
        return f"contains NUL at index {value.index(chr(0))}"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        return f"contains a lone surrogate at index {error.start}, which is not text"
    return None
