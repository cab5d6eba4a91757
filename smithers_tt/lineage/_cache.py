"""A SQLite store's lineage snapshot kept between processes, used only while the store is
provably unchanged.

``db.lineage(snapshot=True, cache=...)`` keeps the DuckDB file of a snapshot (the store's
tables, every ref joined to its size) in a private cache directory, never in or beside the
store. A later snapshot of the same store opens it instead of reading the store again, when the
store's files are exactly as they were. What forks by reference inherit is computed again at
every open (its rows carry the time they are computed at, as materialising would write them).

The store has no change counter a reader could trust, so the cache compares the SQLite file
and its WAL by :func:`fingerprint`: device, inode, size and modification time in nanoseconds.
Every committed write reaches one of them (the WAL grows or is rewritten, a checkpoint writes
the database file), and each write sets the file's modification time to the clock's time. Two
writes within one tick of the file system's clock can share a time, so a snapshot is kept only
when the store's last change is :data:`QUIET_SECONDS` older than the snapshot's start and the
fingerprint is unchanged once the copy is done: any later write then gets a later time. The
cache never answers for a store that changed; it is rebuilt instead. (The status-change time
would be harder to forge, but SQLite running as root changes it on every open of the WAL, by
``fchown``. Only a program that sets a modification time back on purpose, or a system clock
stepped back by more than :data:`QUIET_SECONDS`, could defeat the comparison. POSIX only.)

PostgreSQL stores are never cached (a server's change marker would need a write path of the
store's own): their snapshots are always built.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import shutil
import time
from pathlib import Path

from smithers_tt.lineage._views import MIRRORED, VIEWS, raw_columns

FORMAT = 1
"""Bumped whenever what a cached snapshot holds changes in a way the key below misses."""

QUIET_SECONDS = 2.0
"""How long before a snapshot starts the store must have last changed for it to be stored."""


def default_directory() -> Path:
    """``$XDG_CACHE_HOME/smithers-tt/lineage`` (``~/.cache/...`` without it)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "smithers-tt" / "lineage"


def _stat(path: Path) -> os.stat_result | None:
    try:
        return path.stat()
    except FileNotFoundError:
        return None


def fingerprint(path: Path) -> tuple[tuple[int, ...], float] | None:
    """``(identity, last change)`` of the SQLite file ``path`` and its WAL: the identity to
    compare, and the newest modification time (seconds since the epoch). An empty or missing
    WAL adds nothing (it holds no committed transaction). None if the file is missing."""
    main = _stat(path)
    if main is None:
        return None
    wal = _stat(path.with_name(path.name + "-wal"))
    found = [main] + ([wal] if wal is not None and wal.st_size > 0 else [])
    identity = tuple(
        value for st in found for value in (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    )
    return identity, max(st.st_mtime_ns for st in found) / 1e9


def _schema_key() -> str:
    """What the cached files were built for: this format, DuckDB's version, the mirrored
    tables' columns and the materialised views' SQL."""
    import duckdb

    parts = [str(FORMAT), duckdb.__version__]
    parts += [f"{t.name}:{raw_columns(t)}" for t in MIRRORED]
    parts += [view.sql for view in VIEWS if view.materialize]
    return "\n".join(parts)


class SnapshotCache:
    """The cache entry of one SQLite store in ``directory`` (created private, mode 0700).

    Files are named ``<store key>.<fingerprint key>.duckdb``; storing one removes the
    store's older ones.
    """

    def __init__(self, directory: Path, store: Path) -> None:
        self.directory = directory
        self.store = store
        self.reason = ""
        """Why the last :meth:`lookup` missed or :meth:`keep` did not keep."""
        key = f"{store.resolve()}\n{_schema_key()}"
        self._prefix = hashlib.sha256(key.encode()).hexdigest()[:32]
        self._taken: tuple[tuple[int, ...], float] | None = None
        self._started = 0.0

    @staticmethod
    def usable() -> bool:
        """Whether file times can vouch for the store here (POSIX file systems)."""
        return os.name == "posix"

    def _private(self) -> bool:
        """The directory exists (created if not), is ours and is writable by nobody else: a
        cached file is trusted as the store's contents."""
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = self.directory.stat()
        if st.st_uid != os.getuid() or st.st_mode & 0o022:
            self.reason = f"{self.directory} is not private to this user"
            return False
        return True

    def _name(self, identity: tuple[int, ...]) -> Path:
        digest = hashlib.sha256(repr(identity).encode()).hexdigest()[:16]
        return self.directory / f"{self._prefix}.{digest}.duckdb"

    def lookup(self, target: Path) -> bool:
        """Put this store's cached snapshot at ``target`` (the lineage's scratch path) when it
        matches the store as it is now; True if it does.

        The file is hard-linked (copied across file systems), so the lineage opens its own
        name for it, which it unlinks once attached, as for a snapshot it builds."""
        self._started = time.time()
        self._taken = fingerprint(self.store)
        if self._taken is None:
            self.reason = "the store file is missing"
            return False
        if not self._private():
            self._taken = None
            return False
        source = self._name(self._taken[0])
        if not source.is_file():
            self.reason = "no snapshot of the store as it is now"
            return False
        try:
            _link_or_copy(source, target)
        except OSError as error:
            target.unlink(missing_ok=True)
            self.reason = f"cannot read the cache: {error}"
            return False
        return True

    def keep(self, built: Path) -> bool:
        """Keep ``built`` (the snapshot just taken from the store) when the store did not
        change from before :meth:`lookup` until now and had been quiet before; True if stored.
        Call it once the file is complete and closed."""
        taken = self._taken
        if taken is None:  # lookup said why
            return False
        now = fingerprint(self.store)
        if now is None or now[0] != taken[0]:
            self.reason = "the store changed while the snapshot was taken"
            return False
        if self._started - taken[1] < QUIET_SECONDS:
            self.reason = f"the store changed less than {QUIET_SECONDS:g} s before the snapshot"
            return False
        final = self._name(taken[0])
        pending = final.with_name(f".{final.name}.{secrets.token_hex(4)}")
        _link_or_copy(built, pending)
        os.replace(pending, final)  # complete or absent, for a reader in another process
        for old in self.directory.glob(f"{self._prefix}.*.duckdb"):
            if old == final:
                continue
            with contextlib.suppress(OSError):
                old.unlink()
        return True


def _link_or_copy(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)
