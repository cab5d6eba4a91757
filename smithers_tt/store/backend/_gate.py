"""One readers-writer gate per SQLite file in this process: the store's transactions share it,
a reader that would drop their locks holds it alone.

SQLite locks a store with POSIX record locks, which belong to the (process, file) pair, not to
the connection that took them: closing *any* descriptor of the file, or unlocking a byte of it,
from anywhere in the process removes them. SQLite copes within one library (it defers a close
while a lock is held), but DuckDB's ``sqlite_scanner`` carries a second SQLite library that
knows nothing of the first one's locks. Each time one of its connections closes (after every
bind and every query of a lineage) it unlocks the database file and closes its ``-shm``, and
with that removes the WAL write lock of a write transaction open in another thread and the
read mark of a read transaction: another process may then write at the same time (a commit is
lost) or checkpoint over pages the reader still needs ("database disk image is malformed").

So every transaction of an SQLite :class:`~smithers_tt.store.backend.Engine` holds this gate
shared, from its ``BEGIN`` to its end, and a lineage question over the scanner holds it alone
(:func:`alone`): while it runs no transaction of this process is open, and none begins.
Transactions are short; a question waits for those open to end, and a transaction waits for
the question. A question waiting stops new transactions from starting for at most
``_GIVE_WAY_S`` (so a busy worker cannot keep it out for ever, and a thread that waits on
another thread's transaction while holding one of its own cannot deadlock with it).
A thread that holds a transaction may begin more, and one that holds the gate alone may begin
transactions too (nothing of the scanner runs while its own thread does). Other processes
need nothing: their locks are their own.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from smithers_tt.errors import InvalidArgument, TransientStoreError

_GIVE_WAY_S = 1.0
"""How long a transaction about to begin waits for a lineage question that waits its turn."""


class Gate:
    """The gate of one SQLite file (see the module docstring)."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._readers: dict[int, int] = {}
        """Open transactions by thread."""
        self._entries: dict[int, int] = {}
        """The thread of each open transaction, by the key it was entered with."""
        self._owner: int | None = None
        """The thread holding the gate alone."""
        self._depth = 0
        self._waiting = 0

    def enter(self, key: int) -> None:
        """A transaction (known by ``key`` until :meth:`leave`) begins in this thread."""
        me = threading.get_ident()
        with self._cond:
            if me not in self._readers and self._owner != me:
                give_way = time.monotonic() + _GIVE_WAY_S
                while True:
                    if self._owner is None:
                        left = give_way - time.monotonic()
                        if not self._waiting or left <= 0:
                            break
                        self._cond.wait(left)
                    else:
                        self._cond.wait()
            self._leave(key)  # a key never left (its connection vanished) counts no more
            self._entries[key] = me
            self._readers[me] = self._readers.get(me, 0) + 1

    def leave(self, key: int) -> None:
        """The transaction entered with ``key`` ended (committed, rolled back or lost);
        nothing if it was never entered."""
        with self._cond:
            self._leave(key)

    def _leave(self, key: int) -> None:
        thread = self._entries.pop(key, None)
        if thread is None:
            return
        count = self._readers[thread] - 1
        if count:
            self._readers[thread] = count
        else:
            del self._readers[thread]
            if self._waiting:  # only alone() waits for the readers to leave
                self._cond.notify_all()

    @contextmanager
    def alone(self, timeout: float) -> Iterator[None]:
        """Hold the gate alone: wait (up to ``timeout`` seconds) for this process's open
        transactions on the file to end; none begins until the block ends. Blocks nest.

        Raises:
            InvalidArgument: this thread has a transaction of the store open (it would wait
                for itself).
            TransientStoreError: a transaction of another thread stayed open ``timeout``
                seconds.
        """
        me = threading.get_ident()
        with self._cond:
            if self._owner == me:
                self._depth += 1
            else:
                if me in self._readers:
                    raise InvalidArgument(
                        "this thread has a store transaction open (a `reading()` block, or a "
                        "connection in a transaction): end it before asking the lineage"
                    )
                self._waiting += 1
                try:
                    free = self._cond.wait_for(
                        lambda: self._owner is None and not self._readers, timeout
                    )
                finally:
                    self._waiting -= 1
                    self._cond.notify_all()
                if not free:
                    raise TransientStoreError(
                        f"a transaction of this process kept the store busy for {timeout:g} s; "
                        "the lineage question was not asked: retry when it has ended",
                        tries=1,
                    )
                self._owner, self._depth = me, 1
        try:
            yield
        finally:
            with self._cond:
                self._depth -= 1
                if not self._depth:
                    self._owner = None
                    self._cond.notify_all()


_GATES: dict[tuple[int, int], Gate] = {}
_GATES_LOCK = threading.Lock()


def gate_of(path: Path) -> Gate | None:
    """The gate of the SQLite file at ``path`` (by device and inode: every name of it, every
    engine of it in this process share one), or None while there is no such file."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    key = (stat.st_dev, stat.st_ino)
    with _GATES_LOCK:
        gate = _GATES.get(key)
        if gate is None:
            gate = _GATES[key] = Gate()
        return gate
