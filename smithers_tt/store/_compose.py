"""A handle composed of parts: one object for its callers, each method done by the room that
owns it (see :class:`~._store.Store` and :class:`~._travel.Travel`)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

R = TypeVar("R")


def on(part: str, method: Callable[..., R]) -> Callable[..., R]:
    """``method`` of the part held in attribute ``part``, offered on the handle: called on that
    part, with the part's own name, docstring and signature."""

    @functools.wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> R:
        return method(getattr(self, part), *args, **kwargs)

    return call
