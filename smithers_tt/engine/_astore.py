"""The engine's one async adapter of the synchronous :class:`~smithers_tt.store.Store`."""

from __future__ import annotations

import asyncio
import functools
from typing import Any

from smithers_tt.store import Store


def _in_thread(name: str) -> Any:
    """An async method that runs ``Store.<name>`` in a worker thread (with its signature and
    docstring)."""

    async def call(self: AsyncStore, *args: Any, **kwargs: Any) -> Any:
        return await asyncio.to_thread(getattr(self.store, name), *args, **kwargs)

    return functools.wraps(getattr(Store, name))(call)


class AsyncStore:
    """The :class:`Store` methods the engine calls from its event loop, each run in a worker
    thread (``await astore.publish(...)``), so concurrent tasks publish from several threads
    and the store's group commit coalesces them. A method not listed here is not adapted: add
    it when the engine needs it."""

    def __init__(self, store: Store) -> None:
        self.store = store

    cancel_run = _in_thread("cancel_run")
    finish_attempt = _in_thread("finish_attempt")
    finish_run = _in_thread("finish_run")
    get_run = _in_thread("get_run")
    heartbeat = _in_thread("heartbeat")
    list_attempts = _in_thread("list_attempts")
    list_nodes = _in_thread("list_nodes")
    pause_frames = _in_thread("pause_frames")
    pause_run = _in_thread("pause_run")
    publish = _in_thread("publish")
    set_node = _in_thread("set_node")
    start_attempt = _in_thread("start_attempt")
    watch_run = _in_thread("watch_run")
