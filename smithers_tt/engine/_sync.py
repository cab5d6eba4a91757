"""Blocking calls that work both in scripts and inside a running event loop (Jupyter)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion and return its result, blocking the caller.

    Without a running loop this is ``asyncio.run``. Inside one (a Jupyter cell) the coroutine
    gets its own loop in a helper thread, because the running loop cannot be re-entered.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with ThreadPoolExecutor(1, thread_name_prefix="smithers-tt-run") as pool:
        return pool.submit(asyncio.run, coro).result()
