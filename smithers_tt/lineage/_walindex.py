"""Keeping DuckDB's copy of SQLite from resetting the WAL index of a store open in this process.

DuckDB's ``sqlite_scanner`` extension carries its own SQLite, a second copy beside Python's
``sqlite3`` that the store's :class:`~smithers_tt.Database` uses. SQLite decides whether it is
the first to use a store's WAL index (the ``-shm`` file) by asking, with ``F_GETLK``, whether
anyone holds a read lock on its "dead man switch" byte; a process never sees its own POSIX
locks, and the two copies do not share their bookkeeping, so whenever no scanner connection is
open (between two queries, between binds) the scanner's first connection believes it is alone:
it truncates the ``-shm`` file the store's open connections are using and rebuilds it from the
WAL, holding SQLite's recovery lock. A second DuckDB thread opening the store meanwhile gets
``SQLITE_BUSY``, and the scanner's busy handler, built without ``usleep``, sleeps a whole second
(while DuckDB's Python client polls for the result on another core): the one-second stalls of
tiny queries over small stores (benchmarks/README.md, "Lineage stalls ...").

:class:`WalIndexPin` holds a shared *open file description* lock on that byte. Such locks belong
to the open file, not to the process, so the scanner's ``F_GETLK`` sees it, as it would see
another process using the store: it keeps the WAL index the store maintains, and neither
rebuilds it nor waits. The ``-shm`` file is opened read-only and never written; a read lock on
that byte is what every SQLite connection using the file holds. Linux only (where
``F_OFD_SETLK`` exists); elsewhere it holds nothing and the scanner behaves as before.
"""

from __future__ import annotations

import contextlib
import os
import struct
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows: SQLite locks files per handle there, nothing to pin
    fcntl = None  # type: ignore[assignment]

_DMS_BYTE = 128
"""SQLite's "dead man switch" byte of the ``-shm`` file: ``WALINDEX_LOCK_OFFSET`` (120) plus its
eight lock bytes, the same in every SQLite version and on every Unix."""


_SHARED_FIRST, _SHARED_SIZE = 0x40000002, 510
"""The database file's shared-lock range (SQLite's ``SHARED_FIRST``, ``SHARED_SIZE``): every
connection using the store holds a read lock on it, and a connection closing takes a write lock
on it to learn whether it is the store's last user."""


def _ofd_read_lock(fd: int, start: int = _DMS_BYTE, length: int = 1) -> bool:
    """Take a shared open-file-description lock on ``length`` bytes at ``start`` (the switch
    byte unless told); whether it was taken."""
    command = getattr(fcntl, "F_OFD_SETLK", None)
    if command is None:
        return False
    # struct flock: l_type, l_whence, l_start, l_len, l_pid (0 for an OFD lock)
    flock = struct.pack("hhqqi4x", fcntl.F_RDLCK, os.SEEK_SET, start, length, 0)
    try:
        fcntl.fcntl(fd, command, flock)
    except OSError:  # someone initialising the file holds it exclusively: try at the next query
        return False
    return True


class WalIndexPin:
    """A shared lock on the switch byte of ``<store>-shm`` while that file exists.

    Closing any descriptor of a file drops every POSIX lock this process holds on it (the
    scanner's connections do so at the end of each query), so the pin keeps its one descriptor
    until :meth:`close`, and opens another only when the ``-shm`` file is replaced (the store
    closed everywhere and opened again).
    """

    def __init__(self, store: Path) -> None:
        self._shm = Path(f"{store}-shm")
        self._fd: int | None = None
        self._file: tuple[int, int] | None = None
        self._held = False
        """Whether the lock is held on the current ``-shm`` file."""
        self.refresh()

    def refresh(self) -> None:
        """Hold the lock on the ``-shm`` file there now (call before each query)."""
        if getattr(fcntl, "F_OFD_SETLK", None) is None:
            return
        try:
            stat = self._shm.stat()
            now: tuple[int, int] | None = (stat.st_dev, stat.st_ino)
        except OSError:
            now = None
        if now is None or now != self._file:
            self.close()
            self._open(now)
        if self._fd is not None and not self._held:
            self._held = _ofd_read_lock(self._fd)

    def _open(self, file: tuple[int, int] | None) -> None:
        if file is None:
            return
        try:
            fd = os.open(self._shm, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return
        stat = os.fstat(fd)
        if (stat.st_dev, stat.st_ino) != file:  # replaced in between: at the next query
            os.close(fd)
            return
        self._fd, self._file = fd, file

    def close(self) -> None:
        """Release the lock (idempotent)."""
        fd, self._fd, self._file, self._held = self._fd, None, None, False
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


_IN_USE: dict[tuple[int, int], int] = {}
"""Descriptors of the store files :func:`pin_in_use` pinned, by (device, inode)."""


def pin_in_use(store: Path) -> None:
    """Keep ``store`` marked as in use by this process for as long as the process lives.

    The scanner's SQLite, closing its connections, drops every POSIX lock this process holds
    on the store's file, among them the shared lock each of the store's own connections keeps
    while it is open; those connections never take it again. Another process closing its last
    connection would then believe it is the store's last user and delete the WAL and its index
    under this process's feet: what either writes afterwards is lost to the other
    (``tests/lineage/test_scanner_locks.py``). An open-file-description read lock on the
    shared range, which no close in this process drops, says "in use" as the lost locks did;
    it is what every reader of the store holds, so nothing else is kept from working (only
    the deletion of the WAL at another process's close waits for this process to end).
    Linux only, as :class:`WalIndexPin`; call it before the scanner first opens the store.
    """
    if getattr(fcntl, "F_OFD_SETLK", None) is None:
        return
    for key, held in list(_IN_USE.items()):  # stores deleted since: nothing left to protect
        if os.fstat(held).st_nlink == 0:
            os.close(_IN_USE.pop(key))
    try:
        fd = os.open(store, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return
    stat = os.fstat(fd)
    key = (stat.st_dev, stat.st_ino)
    if key in _IN_USE or not _ofd_read_lock(fd, _SHARED_FIRST, _SHARED_SIZE):
        os.close(fd)  # pinned already (or being changed exclusively: the next open tries)
        return
    _IN_USE[key] = fd
