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

:func:`pin_store` holds a shared *open file description* lock on that byte. Such locks belong
to the open file, not to the process, so the scanner's ``F_GETLK`` sees it, as it would see
another process using the store: it keeps the WAL index the store maintains, and neither
rebuilds it nor waits. The ``-shm`` file is opened read-only and never written; a read lock on
that byte is what every SQLite connection using the file holds. Linux only (where
``F_OFD_SETLK`` exists); elsewhere it holds nothing and the scanner behaves as before. It
also marks the store itself in use, which the same closes undo (:func:`pin_store`).
"""

from __future__ import annotations

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


def _ofd_read_lock(fd: int, start: int, length: int) -> bool:
    """Take a shared open-file-description lock on ``length`` bytes at ``start``; whether it
    was taken."""
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


_HELD: dict[tuple[int, int, int], int] = {}
"""Descriptors :func:`hold` keeps, by (device, inode, first byte locked)."""


def hold(path: Path, start: int = _DMS_BYTE, length: int = 1) -> None:
    """Keep a shared open-file-description lock on ``length`` bytes at ``start`` of ``path``
    for as long as this process lives (or the file does); nothing if it does not exist.

    Closing any descriptor of a file drops every POSIX lock this process holds on it, so each
    lock keeps a descriptor of its own; a file deleted since (a ``-shm`` replaced, a scratch
    store) lets go of its lock and descriptor at the next call. Calling it again for a file
    already held costs a ``stat``. Linux only (elsewhere nothing is held)."""
    if getattr(fcntl, "F_OFD_SETLK", None) is None:
        return
    for key, fd in list(_HELD.items()):
        if os.fstat(fd).st_nlink == 0:
            os.close(_HELD.pop(key))
    try:
        stat = path.stat()
    except OSError:
        return
    if (stat.st_dev, stat.st_ino, start) in _HELD:
        return
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return
    stat = os.fstat(fd)  # the file opened, if it was replaced since the stat above
    key = (stat.st_dev, stat.st_ino, start)
    if key in _HELD or not _ofd_read_lock(fd, start, length):
        os.close(fd)  # held already (or being set up exclusively: the next call tries)
        return
    _HELD[key] = fd


def pin_store(store: Path) -> None:
    """Mark ``store`` in use by this process (its shared range) and keep its WAL index as it
    is (the ``-shm`` switch byte). Call it before the scanner first opens the store, and the
    ``-shm`` part again before each question (the index is made anew when the store was
    closed everywhere): :func:`pin_wal_index`.

    The scanner's SQLite, closing its connections, drops every POSIX lock this process holds
    on the store's file, among them the shared lock each of the store's own connections keeps
    while it is open; those connections never take it again. Another process closing its last
    connection would then believe it is the store's last user and delete the WAL and its index
    under this process's feet: what either writes afterwards is lost to the other
    (``tests/lineage/test_scanner_locks.py``). A read lock on the shared range that no close
    in this process drops says "in use" as the lost locks did; it is what every reader of the
    store holds, so nothing else is kept from working (only the deletion of the WAL at another
    process's close waits for this process to end).
    """
    hold(store, _SHARED_FIRST, _SHARED_SIZE)
    pin_wal_index(store)


def pin_wal_index(store: Path) -> None:
    """Hold the switch byte of ``<store>-shm`` (see the module docstring)."""
    hold(Path(f"{store}-shm"))
