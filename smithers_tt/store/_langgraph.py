"""The store's side of the LangGraph saver (``smithers_tt.integrations.langgraph``).

:class:`LangGraphStore` runs the saver's transactions: writes through the store's group
committer (:class:`~smithers_tt.store.ledger._publish.GroupCommitter`, shared with publishes), each
handed a :class:`LangGraphWrite`; reads handed a :class:`LangGraphRead`. The saver keeps what
is LangGraph's (serialisation, configs, ``CheckpointTuple``); this keeps the SQL.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from sqlalchemy.engine import Connection

from smithers_tt.store.backend import Engine, LangGraphSql
from smithers_tt.store.ledger import LangGraphWrite, PinCache, WorkUnit
from smithers_tt.store.reads import LangGraphRead

T = TypeVar("T")


class LangGraphStore:
    """Transactions of the LangGraph saver on one database.

    Args:
        engine: the database's :class:`Engine`.
        store: its :class:`Store`, whose listeners hear every frame a write commits.
    """

    def __init__(self, engine: Engine, store: Any) -> None:
        self.engine = engine
        self.store = store
        self._sql = LangGraphSql(engine.backend)
        self._pins = PinCache()
        # The store's group committer: the saver's writes share commits with publishes.
        self.committer = store._committer

    def write(self, run_id: str, work: Callable[[LangGraphWrite], T]) -> tuple[T, dict[str, Any]]:
        """Run ``work(tx)`` in a write transaction shared with other queued writes; once it
        commits, remember what it pinned in ``run_id`` and emit its frames. Returns its
        result and its ``tx.outcome``. A retried transaction starts with a fresh ``tx``."""
        done: list[LangGraphWrite] = []

        def tx(conn: Connection) -> T:
            done[:] = [LangGraphWrite(self._sql, self._pins, conn)]
            return work(done[0])

        result = self.committer.publish(WorkUnit(tx))
        (write,) = done
        if write.pinned is not None:
            self._pins.remember(run_id, *write.pinned)
        self.store._emit(write.frames)
        return result, write.outcome

    def read(self, work: Callable[[LangGraphRead], T]) -> T:
        """Run ``work(rx)`` in one read transaction."""
        return self.engine.transaction(
            lambda conn: work(LangGraphRead(self._sql, conn)), write=False
        )

    def delete_thread(self, thread_id: str) -> list[str]:
        """Delete a thread's runs (every namespace) in a transaction of its own; returns
        their ids (forget them with :meth:`forget`)."""
        return self.engine.transaction(
            lambda conn: LangGraphWrite(self._sql, self._pins, conn).delete_runs(thread_id)
        )

    def delete_checkpoints(self, keys: Sequence[tuple[str, str]]) -> None:
        """Delete index rows ``(run_id, checkpoint_id)`` in a transaction of its own."""
        self.engine.transaction(
            lambda conn: LangGraphWrite(self._sql, self._pins, conn).delete_checkpoints(keys)
        )

    def forget(self, run_ids: Sequence[str]) -> None:
        """Drop what this process knows of these runs' pins (deleted or rewritten)."""
        self._pins.forget(run_ids)
