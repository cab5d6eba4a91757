"""The one rule for run labels, checked where they come in (``db.run``, ``db.submit``,
``db.fork``, the store's ``create_run``), and how a fork's labels follow its parent's.

Labels are a small ``str -> str`` mapping a person gives a run to find it again
(``{"case": "retry", "owner": "ana"}``): shown by ``smithers-tt runs``, filtered by
``db.runs(labels=...)`` and ``runs --label KEY=VALUE``, kept in ``tt_run_labels``. They are
bounded so that a listing stays a listing: at most :data:`MAX_LABELS` per run, keys of at
most :data:`MAX_KEY_CHARS` characters written like identifiers (they are typed on a command
line as ``KEY=VALUE``), values of at most :data:`MAX_VALUE_CHARS` characters of text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from smithers_tt._ids import text_problem
from smithers_tt.errors import InvalidArgument

MAX_LABELS = 32
"""Most labels one run carries."""
MAX_KEY_CHARS = 64
"""Longest label key, in characters (the width of ``tt_run_labels.key``)."""
MAX_VALUE_CHARS = 200
"""Longest label value, in characters (the width of ``tt_run_labels.value``)."""

_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:/-]*")

REPLAY_OF = "replay_of"
"""The label a replay gets: the id of the run it replays."""


def check_labels(labels: Any, *, removals: bool = False) -> dict[str, str | None]:
    """``labels`` as a plain dict sorted by key, or :class:`InvalidArgument` saying what is
    wrong and what is allowed. ``None`` is no labels. With ``removals`` (a fork's
    overrides), a value may be ``None``: the fork drops that inherited label.
    """
    if labels is None:
        return {}
    if not isinstance(labels, Mapping):
        raise InvalidArgument(
            f"labels must be a mapping of str to str, like {{'case': 'retry'}}; got "
            f"{type(labels).__name__}"
        )
    if len(labels) > MAX_LABELS:
        raise InvalidArgument(f"a run carries at most {MAX_LABELS} labels; got {len(labels)}")
    checked: dict[str, str | None] = {}
    for key, value in labels.items():
        if type(key) is not str or not _KEY.fullmatch(key) or len(key) > MAX_KEY_CHARS:
            raise InvalidArgument(
                f"label key {key!r} is not allowed: a key is 1 to {MAX_KEY_CHARS} letters, "
                "digits or _ . : / - (starting with a letter or digit)",
                label=str(key)[:80],
            )
        if value is None and removals:
            checked[key] = None
            continue
        if type(value) is not str:
            raise InvalidArgument(
                f"label {key!r} must have a str value, got {type(value).__name__} "
                f"({value!r:.60}){'; None removes an inherited label' if removals else ''}",
                label=key,
            )
        problem = text_problem(value, MAX_VALUE_CHARS)
        if problem is not None:
            raise InvalidArgument(f"the value of label {key!r} {problem}", label=key)
        checked[key] = value
    return dict(sorted(checked.items()))


def merged_labels(
    inherited: Mapping[str, str], overrides: Mapping[str, str | None]
) -> dict[str, str]:
    """A fork's labels: its parent's, with ``overrides`` set (a ``None`` value removes the
    label), sorted by key; at most :data:`MAX_LABELS` of them."""
    labels = dict(inherited)
    for key, value in overrides.items():
        if value is None:
            labels.pop(key, None)
        else:
            labels[key] = value
    if len(labels) > MAX_LABELS:
        raise InvalidArgument(
            f"the fork would carry {len(labels)} labels (its parent's and the new ones); the "
            f"most is {MAX_LABELS}: remove some with None values"
        )
    return dict(sorted(labels.items()))


def parse_label(pair: str) -> tuple[str, str]:
    """``KEY=VALUE`` (as typed on a command line) as ``(key, value)``, checked."""
    key, sep, value = pair.partition("=")
    if not sep:
        raise InvalidArgument(f"a label is KEY=VALUE, like case=retry; got {pair!r}")
    check_labels({key: value})
    return key, value
