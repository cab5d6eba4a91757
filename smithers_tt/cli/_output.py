"""Output for people (tables, colours on a terminal) and for scripts (``--json``)."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import click


def when(ms: int | None) -> str:
    """A wall-clock millisecond stamp as local-free UTC text."""
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


def short(text: Any, width: int = 60) -> str:
    """One line of at most ``width`` characters (payloads can be long and multi-line)."""
    value = (
        text
        if isinstance(text, str)
        else json.dumps(text, ensure_ascii=False, sort_keys=True, default=str)
    )
    value = " ".join(value.split())
    return value if len(value) <= width else value[: width - 1] + "…"


_COLOURS = {
    "finished": "green",
    "cached": "cyan",
    "running": "yellow",
    "in_progress": "yellow",
    "failed": "red",
    "cancelled": "magenta",
    "interrupted": "bright_red",
    "unresponsive": "bright_red",
    "reset": "blue",
    "queued": "white",
    "pending": "white",
}


def state(value: str | None) -> str:
    """A state word, coloured when the terminal supports colour."""
    text = value or "-"
    return click.style(text, fg=_COLOURS.get(text)) if value in _COLOURS else text


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Print an aligned table (cells are already strings or are converted)."""
    cells = [[str(c) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(click.unstyle(cell)))
    # Cut lines to the terminal's width; when piped, keep them whole.
    limit = shutil.get_terminal_size().columns if sys.stdout.isatty() else 10**6

    def line(values: Sequence[str]) -> str:
        parts = [
            v + " " * (w - len(click.unstyle(v))) for v, w in zip(values, widths, strict=False)
        ]
        text = "  ".join(parts).rstrip()
        return (
            text
            if len(click.unstyle(text)) <= limit
            else text[: limit + len(text) - len(click.unstyle(text))]
        )

    click.echo(click.style(line(list(headers)), bold=True))
    for row in cells:
        click.echo(line(row))
    if not rows:
        click.echo("(none)")


def emit_json(data: Any) -> None:
    """Print ``data`` as JSON for scripts."""
    click.echo(json.dumps(data, ensure_ascii=False, sort_keys=True, default=str, indent=2))
