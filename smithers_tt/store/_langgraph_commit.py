"""The LangGraph saver's group committer: one writer at a time, many writes per commit.

(The store's own publishes have theirs in ``_publish.py``; folding the two into one is left
to the ledger that will be the single write path.)
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from smithers_tt.errors import SmithersError, StoreError
from smithers_tt.store._engine import Engine, is_transient


class GroupCommit:
    """One writer at a time, many writes per commit.

    LangGraph writes a step's task writes and its next checkpoint from background threads.
    Each write queues here; whoever holds the commit lock takes everything queued and commits
    it in one transaction (one fsync), each write in a savepoint of its own so that one
    failing write fails alone. Waiting on this lock (not in SQLite's busy handler, whose
    sleeps last milliseconds) also keeps SQLite writers of one process from contending.
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._queue: list[_Unit] = []
        self._queue_lock = threading.Lock()
        self._commit_lock = threading.Lock()
        self.commits = 0
        self.writes = 0

    def run(self, work: Callable[[Connection], Any]) -> Any:
        """Run ``work(conn)`` in a write transaction (shared with other queued writes) and
        return its result, or raise what it (or the whole transaction) raised."""
        unit = _Unit(work)
        with self._queue_lock:
            self._queue.append(unit)
        while not unit.done.is_set():
            with self._commit_lock:
                if unit.done.is_set():
                    break
                with self._queue_lock:
                    batch, self._queue = self._queue, []
                if batch:
                    self._commit(batch)
        if unit.error is not None:
            raise unit.error
        return unit.result

    def _commit(self, batch: list[_Unit]) -> None:
        def tx(conn: Connection) -> list[tuple[Any, BaseException | None]]:
            if len(batch) == 1:
                return [(batch[0].work(conn), None)]
            outcomes: list[tuple[Any, BaseException | None]] = []
            for unit in batch:
                savepoint = conn.begin_nested()
                try:
                    result = unit.work(conn)
                except SmithersError as error:
                    savepoint.rollback()
                    outcomes.append((None, error))
                except sa.exc.DBAPIError as error:
                    if is_transient(error):
                        raise  # the whole batch is tried again on a fresh transaction
                    savepoint.rollback()
                    failure = StoreError(f"database error: {str(error.orig)[:300]}")
                    failure.__cause__ = error
                    outcomes.append((None, failure))
                else:
                    savepoint.commit()
                    outcomes.append((result, None))
            return outcomes

        try:
            outcomes = self.engine.transaction(tx)
            self.commits += 1
            self.writes += len(batch)
        except BaseException as error:  # the transaction failed as a whole
            outcomes = [(None, error)] * len(batch)
        for unit, (result, error) in zip(batch, outcomes, strict=True):
            unit.result, unit.error = result, error
            unit.done.set()


class _Unit:
    __slots__ = ("done", "error", "result", "work")

    def __init__(self, work: Callable[[Connection], Any]) -> None:
        self.work = work
        self.result: Any = None
        self.error: BaseException | None = None
        self.done = threading.Event()
