"""Everything the command line prints goes through here: tables and lines for people, JSON
for scripts.

Agent-produced strings (outputs, payloads, error messages, ids, codecs) are untrusted text:
a terminal obeys the control characters inside them (OSC sequences set the window title,
write the clipboard or forge hyperlinks, even through a pipe into ``less -R``). So every
human-readable line is rendered by :class:`Output`, which shows each C0 and C1 control,
DEL, bidirectional override, line separator and lone surrogate as a visible escape
(``\\x1b``) in one last pass over the rendered text; only the styles rich adds itself reach
the terminal as escape sequences. JSON output (``--json``) keeps every value exact: JSON
already escapes C0 controls, and :func:`json_text` escapes DEL and C1 as ``\\u`` escapes,
which decode to the same strings.

On a terminal, tables fit its width (long cells end with ``…``); ``--wide``, or output to a
pipe or file, prints every value whole.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from rich.console import Console, RenderableType
from rich.segment import Segment, Segments
from rich.table import Table
from rich.text import Text

_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_JSON_UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_UNLIMITED = 1_000_000
"""The width used when values print whole (``--wide``, pipes): lines are never cut."""


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def clean(text: str) -> str:
    """``text`` with every character a terminal could obey (C0 and C1 controls, DEL, bidi
    overrides, line separators) or fail to encode (lone surrogates) shown as an escape."""
    return _UNSAFE.sub(_escape, text)


def json_text(data: Any, *, indent: int | None = 2) -> str:
    """``data`` as JSON whose values decode exactly, with nothing a terminal would obey."""
    text = json.dumps(data, ensure_ascii=False, sort_keys=True, default=str, indent=indent)
    # Outside strings JSON is plain ASCII, so these characters can only be inside strings,
    # where a \u escape decodes to the same character (lone surrogates included).
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def text(value: Any, style: str | None = None) -> Text:
    """One value as a cell or part of a line: cleaned, on one line, optionally styled."""
    return Text(clean(one_line(value)), style=style or "", no_wrap=True, overflow="ellipsis")


def one_line(value: Any) -> str:
    """A value as one line of text: JSON containers as compact JSON, the rest as text."""
    if value is None:
        return ""
    if isinstance(value, dict | list | tuple):
        return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return str(value)


def checkpoint_label(ref: Sequence[Any]) -> str:
    """A checkpoint's key ``(run, node, iteration, attempt, sequence)`` as a person reads it:
    ``write#1.0``, ``write[2]#1.0`` in a loop's third iteration (the run is the one shown)."""
    _run, node, iteration, attempt, sequence = ref
    return f"{node}{f'[{iteration}]' if iteration else ''}#{attempt}.{sequence}"


def started_from(node_id: str | None, ref: Sequence[Any]) -> str:
    """Where an attempt of ``node_id`` began, from its ``resumed_from`` key: "resumed from
    research#1.1" (its own node's checkpoint) or "started from write#1.0" (a task fork: it
    was handed another node's)."""
    verb = "resumed" if ref[1] == node_id else "started"
    return f"{verb} from {checkpoint_label(ref)}"


def frame_detail(data: Any, node_id: str | None = None) -> Any:
    """A frame's data for a table cell, which a narrow terminal cuts at its end: the error
    first, then where an attempt of ``node_id`` began (:func:`started_from`), then the fields
    that say something (``null`` and ``false`` left out), as one line."""
    if not isinstance(data, dict):
        return data
    shown = {key: value for key, value in data.items() if value is not None and value is not False}
    parts = []
    error = shown.pop("error", None)
    if error is not None:
        if str(error).startswith(f"{shown.get('error_code')}:"):
            shown.pop("error_code")  # "ConnectionError: ..." already names it
        parts.append(f"error: {one_line(error)}")
    ref = shown.get("resumed_from")
    if isinstance(ref, list) and len(ref) == 5:
        parts.append(started_from(node_id, shown.pop("resumed_from")))
    if shown:
        parts.append(one_line(shown))
    return "  ".join(parts) or None


def when(ms: int | None) -> str:
    """A wall-clock millisecond stamp as UTC text."""
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


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
    "paused": "bright_yellow",
    "pending": "white",
}


def state(value: str | None) -> Text:
    """A state word, coloured on a terminal."""
    return text(value or "-", _COLOURS.get(value or ""))


Part = str | int | float | Text | None
"""A piece of a printed line: plain values are cleaned; :class:`Text` comes from :func:`text`."""


class Output:
    """Where the command line prints: stdout for results, stderr for errors and notes."""

    def __init__(self, *, wide: bool = False) -> None:
        self.wide = wide

    def console(self, *, stderr: bool = False) -> Console:
        """A rich console on the current stdout or stderr (click's test runner swaps them)."""
        stream = sys.stderr if stderr else sys.stdout
        is_tty = _isatty(stream)
        return Console(
            file=stream,
            width=None if is_tty and not self.wide else _UNLIMITED,
            force_terminal=is_tty,
            force_jupyter=False,
            markup=False,
            emoji=False,
            highlight=False,
            soft_wrap=False,
        )

    def line(self, *parts: Part, stderr: bool = False) -> None:
        """Print one line made of ``parts`` (never cut: the terminal wraps it)."""
        joined = Text(no_wrap=True)
        for part in parts:
            joined.append(part if isinstance(part, Text) else text(part))
        self.render(joined, stderr=stderr, whole=True)

    def lines(self, value: str) -> None:
        """Print text of several lines (each cleaned, never cut)."""
        for line in value.splitlines():
            self.line(line)

    def title(self, value: str) -> None:
        """A bold heading line."""
        self.render(text(value, "bold"))

    def table(
        self,
        headers: Sequence[str],
        rows: Iterable[Sequence[Part]],
        *,
        flex: Sequence[str] = (),
    ) -> None:
        """Print an aligned table; on a terminal the ``flex`` columns shrink to fit its width
        (their cells end with ``…``) while the others stay whole."""
        table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
        for header in headers:
            table.add_column(header, no_wrap=header not in flex, overflow="ellipsis")
        count = 0
        for row in rows:
            table.add_row(*(cell if isinstance(cell, Text) else text(cell) for cell in row))
            count += 1
        self.render(table)
        if not count:
            self.line("(none)")

    def error(self, message: str) -> None:
        """An ``error: ...`` line on stderr."""
        self.line(text("error: ", "bold red"), message, stderr=True)

    def render(
        self, renderable: RenderableType, *, stderr: bool = False, whole: bool = False
    ) -> None:
        """Print any rich renderable (``whole``: never cut to the terminal's width); the one
        place every human-readable character goes through."""
        console = self.console(stderr=stderr)
        options = console.options.update_width(_UNLIMITED) if whole else console.options
        segments = [
            seg if seg.control else Segment(_clean_rendered(seg.text), seg.style)
            for seg in console.render(renderable, options)
        ]
        lines = [_rstrip(line) for line in Segment.split_lines(segments)]
        # The layout is done: print the segments as they are, without wrapping them again.
        console.print(Segments(seg for line in lines for seg in line), soft_wrap=True, end="")


def _clean_rendered(value: str) -> str:
    """Rendered text cleaned, but for the line breaks the layout itself made."""
    return "\n".join(clean(part) for part in value.split("\n"))


def _rstrip(line: list[Segment]) -> Iterable[Segment]:
    """A rendered line without the padding rich adds after its last cell, then a newline."""
    while line and not line[-1].control and not line[-1].text.rstrip():
        line = line[:-1]
    if line and not line[-1].control:
        last = line[-1]
        line = [*line[:-1], Segment(last.text.rstrip(), last.style)]
    return [*line, Segment.line()]


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def emit_json(data: Any) -> None:
    """Print ``data`` as JSON for scripts (exact values; see :func:`json_text`)."""
    sys.stdout.write(json_text(data) + "\n")


class CleanFormatter(logging.Formatter):
    """A logging formatter for terminals: log lines carry run ids and agent errors, so they
    are cleaned like every other line."""

    def format(self, record: logging.LogRecord) -> str:
        """The record formatted as usual, then cleaned, on one line."""
        return clean(super().format(record))
