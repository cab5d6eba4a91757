"""Run notices on PostgreSQL: one ``LISTEN`` connection per engine wakes the executors of
this process when another session commits a change they must see.

The ledger's writes that a running executor must see (a cancel, breakpoints set, a claim or
takeover, a pause, a continue, a release, a reset or rewind: whatever changes the fence or
what the executor reads) send ``pg_notify`` on the store's channel with the run id as payload,
inside their transaction, so it is delivered only if they commit (see
:func:`~smithers_tt.store.ledger._write.notify`). :class:`RunNotices` listens on that channel in
a thread of its own, with a connection of its own (detached from the pool: it is held for as
long as the engine lives), and calls the waker of every subscriber of that run.

Nothing here is trusted to be complete: a notification sent while the connection was down is
lost. So every subscriber is woken whenever the connection is lost and again once it listens
(the executors read their run then), and the executors keep a slow poll of their own.
"""

from __future__ import annotations

import logging
import os
import select
import threading
from collections.abc import Callable
from contextlib import suppress
from typing import Any

import sqlalchemy as sa

log = logging.getLogger(__name__)

RECONNECT_DELAYS = (0.1, 0.5, 1.0, 2.0, 5.0)
"""Seconds before each try to connect again after the listening connection was lost (the
last is repeated)."""

Waker = Callable[[], None]


class RunNotices:
    """Wakes subscribers when a change to their run commits in any session (this process's
    or another's). Thread-safe; the listening thread starts with the first subscriber.

    Args:
        engine: the store's :class:`~smithers_tt.store.backend._engine.Engine`.
        channel_sql: a query returning the store's channel name (computed by the server,
            the same way the notifying statement computes it).
    """

    def __init__(self, engine: Any, channel_sql: str) -> None:
        self._engine = engine
        self._channel_sql = channel_sql
        self._lock = threading.Lock()
        self._subscribers: dict[str, set[Waker]] = {}
        self._thread: threading.Thread | None = None
        self._closed = False
        self._wake_r, self._wake_w = os.pipe()
        self.backend_pid: int | None = None
        """The server process of the listening connection while it listens (for tests and
        diagnostics), else None."""
        # Closed with the engine (the listener stays: removing it while the event runs fails).
        sa.event.listen(engine.sa, "engine_disposed", self._disposed)

    @property
    def closed(self) -> bool:
        return self._closed

    def subscribe(self, run_id: str, wake: Waker) -> Callable[[], None]:
        """Call ``wake()`` (from the listening thread; it must be quick and thread-safe) after
        each change to ``run_id`` that another writer commits, and whenever notices may have
        been lost. Returns the function that ends the subscription."""
        with self._lock:
            if self._closed:
                raise RuntimeError("these run notices were closed with their engine")
            self._subscribers.setdefault(run_id, set()).add(wake)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._listen, name="smithers-tt-notices", daemon=True
                )
                self._thread.start()

        def unsubscribe() -> None:
            with self._lock:
                wakers = self._subscribers.get(run_id)
                if wakers is not None:
                    wakers.discard(wake)
                    if not wakers:
                        del self._subscribers[run_id]

        return unsubscribe

    def close(self) -> None:
        """Stop listening and close the connection (subscribers keep their own polls)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            thread = self._thread
        with suppress(OSError):
            os.write(self._wake_w, b"x")
        if thread is not None and thread is not threading.current_thread():
            thread.join(5)
        if thread is None or not thread.is_alive():  # a thread stuck connecting keeps them
            for fd in (self._wake_r, self._wake_w):
                with suppress(OSError):
                    os.close(fd)

    def _disposed(self, engine: Any) -> None:
        self.close()

    # --- the listening thread ------------------------------------------------------------

    def _wake(self, run_id: str | None) -> None:
        """Wake the subscribers of ``run_id`` (None: all of them)."""
        with self._lock:
            if run_id is None:
                wakers = [w for ws in self._subscribers.values() for w in ws]
            else:
                wakers = list(self._subscribers.get(run_id, ()))
        for wake in wakers:
            try:
                wake()
            except Exception:  # a subscriber's bug must not stop the others' notices
                log.exception("a run notice's waker failed")

    def _listen(self) -> None:
        failures = 0
        while not self._closed:
            conn = None
            try:
                conn = self._connect()
                failures = 0
                self._wake(None)  # what was sent before LISTEN took effect is not lost
                self._receive(conn)
            except Exception as error:  # the connection failed or was lost: connect again
                if not self._closed:
                    log.warning("run notices: the listening connection failed (%s)", error)
            finally:
                self.backend_pid = None
                if conn is not None:
                    with suppress(Exception):
                        conn.close()
            if self._closed:
                break
            self._wake(None)  # notices may have been lost: subscribers read their runs now
            delay = RECONNECT_DELAYS[min(failures, len(RECONNECT_DELAYS) - 1)]
            failures += 1
            if select.select([self._wake_r], [], [], delay)[0]:
                break  # closed meanwhile

    def _connect(self) -> Any:
        """A connection of the engine's pool, detached from it, listening on the channel."""
        from psycopg import sql  # the PostgreSQL extra's: imported once a store uses it

        proxied = self._engine.sa.raw_connection()
        conn = proxied.driver_connection
        proxied.detach()  # ours until closed: the pool makes another in its place
        try:
            conn.rollback()
            conn.autocommit = True
            channel = conn.execute(self._channel_sql).fetchone()[0]
            conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
        except BaseException:
            with suppress(Exception):
                conn.close()
            raise
        self.backend_pid = conn.pgconn.backend_pid
        return conn

    def _receive(self, conn: Any) -> None:
        """Hand notices to subscribers until the connection fails or :meth:`close`."""
        pgconn = conn.pgconn
        while not self._closed:
            ready = select.select([pgconn.socket, self._wake_r], [], [])[0]
            if self._wake_r in ready:
                return
            pgconn.consume_input()  # raises once the server closed the connection
            while (notice := pgconn.notifies()) is not None:
                self._wake(notice.extra.decode())
