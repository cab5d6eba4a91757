"""SQLite: a file in WAL mode, ``synchronous=FULL``, writers serialised by ``BEGIN IMMEDIATE``.

Read transactions use a plain ``BEGIN`` and do not block writers. SQLite has no lost replies:
the COMMIT runs in this process and either returns or raises. A COMMIT that raises ``database
is locked`` left the transaction open and uncommitted (SQLite documents this), so it is
retried. Any other error raised by COMMIT itself (``disk I/O error``, ``database or disk is
full``) means the disk failed while the commit was being written: SQLite may or may not have
made it durable (frames with their commit mark may be in the WAL and reappear at the next
recovery), so it raises ``OutcomeUnknown`` instead of being retried as transient. The same
disk errors before COMMIT rolled everything back; they are not retried either (the disk is
still full or failing) but reported as ``DiskError``, saying what failed and what to do.
"""

from __future__ import annotations

import os
import random
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import sqlalchemy as sa
from sqlalchemy import event, exc
from sqlalchemy.engine import Connection
from sqlalchemy.pool import NullPool

from smithers_tt.errors import (
    InvalidArgument,
    OutcomeUnknown,
    StoreError,
    StoreNotFound,
    StoreReadOnly,
)
from smithers_tt.store.backend._access import SqliteAccess
from smithers_tt.store.backend._dialect import (
    Commit,
    Dialect,
    register,
    short,
    wrap_driver_error,
)
from smithers_tt.store.backend._gate import Gate, gate_of

_TRANSIENT = (
    "database is locked",
    "database table is locked",
    "database is busy",
)
# SQLITE_FULL and SQLITE_IOERR: the disk, which a retry at once meets again (never transient).
_DISK = {"database or disk is full": "disk full", "disk i/o error": "I/O error"}
_DAMAGE = ("malformed", "not a database", "could not decode to utf-8")
# A COMMIT that fails with these left the SQLite transaction open and uncommitted.
_NOT_COMMITTED = ("database is locked", "database table is locked", "database is busy")

SQLITE_CACHE_KIB = 131_072
"""Page cache (KiB) an SQLite connection gets while it rewinds or forks; see
:meth:`SqliteDialect.roomy`."""


class SqliteDialect(Dialect):
    """SQLite through the standard library's ``sqlite3``."""

    name = "sqlite"
    placeholder = "?"
    pipelines = False
    seals_commits = False
    # BEGIN IMMEDIATE serialises writers: no row lock is needed (or possible).
    content_lock = ""
    row_lock = ""
    # GROUP BY sorts every row (0.15 s at 100,000 frames); DISTINCT keeps a small index.
    choice_block = 1024

    def normalize_url(self, url: sa.URL) -> sa.URL:
        if not url.database or url.database == ":memory:":
            raise InvalidArgument(
                "smithers_tt needs an SQLite *file* (durability is the point): "
                "use sqlite:///path/to/file.db"
            )
        return url

    # --- time travel, bulk writes, describe, migrations ---
    frame_data_ok = (
        "CASE WHEN f.data_json IS NULL THEN 1 WHEN NOT json_valid(f.data_json) THEN 0 "
        "WHEN json_type(f.data_json) <> 'object' THEN 0 "
        "WHEN instr(f.data_json, '\\u') > 0 THEN 0 "
        "WHEN instr(f.data_json, 'created_at_ms') = 0 THEN 1 "
        "WHEN length(f.data_json) - length(replace(f.data_json, 'created_at_ms', '')) > 13 "
        "THEN 0 "
        "WHEN coalesce(json_type(f.data_json, '$.created_at_ms'), 'integer') <> 'integer' "
        "THEN 0 ELSE 1 END"
    )
    ref_created = (
        "coalesce(CASE WHEN instr(f.data_json, 'created_at_ms') > 0 THEN "
        "json_extract(f.data_json, '$.created_at_ms') END, f.created_at_ms)"
    )

    @contextmanager
    def roomy(self, conn: Connection) -> Iterator[None]:
        """A larger page cache for the connection while it rewinds or forks.

        Copying 100,000 refs inserts into four B-tree indexes at random places (two keyed by
        content hash); with SQLite's default 2 MiB cache most of those pages are written out
        and read back several times in one transaction. The setting is the connection's own
        (not the database's), so it is put back.
        """
        before = conn.exec_driver_sql("PRAGMA cache_size").scalar()
        conn.exec_driver_sql(f"PRAGMA cache_size = -{int(SQLITE_CACHE_KIB)}")
        try:
            yield
        finally:
            conn.exec_driver_sql(f"PRAGMA cache_size = {int(before)}")

    def indexed_by(self, index: str) -> str:
        return f" INDEXED BY {index}"

    shape_sql = (
        'SELECT m.name, p.name, p.type, p."notnull", p.pk '
        "FROM sqlite_master m, pragma_table_info(m.name) p "
        "WHERE m.type = 'table' ORDER BY m.name, p.cid"
    )

    def read_only_access(self, engine: Any) -> Any:
        return SqliteAccess(Path(engine.sa.url.database or "").resolve())

    def gate(self, engine: Any) -> Gate | None:
        return None if engine.immutable else gate_of(Path(engine.sa.url.database or ""))

    def create_engine(
        self,
        url: sa.URL,
        *,
        busy_timeout_ms: int,
        synchronous: str,
        read_only: bool,
        create: bool,
        write_option: str,
    ) -> tuple[sa.Engine, bool]:
        return _sqlite_engine(url, busy_timeout_ms, synchronous, read_only, create, write_option)

    def owns(self, orig: BaseException) -> bool:
        return type(orig).__module__.startswith("sqlite3")

    def transient(self, error: BaseException, orig: BaseException) -> bool:
        message = str(orig).lower()
        return any(text in message for text in _TRANSIENT)

    def damaged(self, error: BaseException) -> bool:
        return any(word in str(error).lower() for word in _DAMAGE)

    def disk_failure(self, orig: BaseException) -> str | None:
        message = str(orig).lower()
        return next((what for text, what in _DISK.items() if text in message), None)

    # --- claims, heartbeats, garbage collection ---
    def skip_locked(self, stmt: sa.Select) -> sa.Select:
        # BEGIN IMMEDIATE serialises writers: the row a write transaction picks cannot be
        # picked by another until it commits, and SQLite has no row locks to skip.
        return stmt

    def settle(self, engine: Any, commit: Commit, error: exc.DBAPIError) -> bool:
        if not any(text in short(error).lower() for text in _NOT_COMMITTED):
            raise OutcomeUnknown(
                f"SQLite failed while committing a write ({short(error)}): the disk "
                "may have failed or filled up mid-commit, so the write may or may not "
                f"be stored; check the disk and the file ({engine.sa.url.database}) with "
                "`smithers-tt verify`, look at the run it changed (`smithers-tt show "
                "RUN`), and repeat the call only if it did not happen",
                phase="commit",
            ) from error
        return False  # "database is locked" at COMMIT: the transaction stayed open


register(SqliteDialect())


def _sqlite_engine(
    url: sa.URL,
    busy_timeout_ms: int,
    synchronous: str,
    read_only: bool,
    create: bool,
    write_option: str,
) -> tuple[sa.Engine, bool]:
    """The SQLAlchemy engine of an SQLite file, and whether it reads the file immutable."""
    path = Path(url.database or "").expanduser()
    if path.is_dir():
        raise InvalidArgument(f"{path} is a folder: give the path of an SQLite file in it")
    if read_only:
        uri = _sqlite_read_uri(path)
        pooling: dict[str, Any] = {"poolclass": NullPool}
    else:
        uri = _sqlite_write_uri(path, create)
        # Several pooled connections let threads wait on SQLite's busy timeout, not on Python.
        pooling = {"pool_size": 8, "max_overflow": 24}

    def connect() -> sqlite3.Connection:
        # The URI form says what SQLite may do: ``rw`` never creates a file, ``ro`` never
        # writes one. The engine's URL stays the plain path (the lineage reads the file).
        return sqlite3.connect(
            uri,
            uri=True,
            timeout=busy_timeout_ms / 1000,
            check_same_thread=False,
            isolation_level=None,
        )

    engine = sa.create_engine(url, creator=connect, **pooling)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        cur = dbapi_conn.cursor()
        try:
            cur.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            if not read_only:
                _set_wal(cur)
                cur.execute(f"PRAGMA synchronous = {synchronous}")
            cur.execute("PRAGMA foreign_keys = ON")
        finally:
            cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        write = conn.get_execution_options().get(write_option, True)
        begin = "BEGIN IMMEDIATE" if write and not read_only else "BEGIN"
        # On the driver's connection: ``exec_driver_sql`` would set up a result object and
        # dispatch execute events for a statement that returns nothing, in every transaction
        # (every publish). Its error is wrapped as SQLAlchemy wraps it ("database is locked"
        # stays transient).
        try:
            conn.connection.driver_connection.execute(begin)  # type: ignore[union-attr]
        except sqlite3.Error as error:
            raise wrap_driver_error(conn, error, begin, ()) from error

    return engine, "immutable=1" in uri


def _file_uri(path: Path, **query: str) -> str:
    return f"file:{quote(str(path.resolve()))}?" + "&".join(f"{k}={v}" for k, v in query.items())


def _writable(path: Path) -> bool:
    """Whether this process may write ``path`` (``access`` also sees read-only mounts)."""
    return os.access(path, os.W_OK)


def _sqlite_write_uri(path: Path, create: bool) -> str:
    folder = path.resolve().parent
    if not path.exists():
        if not create:
            raise StoreNotFound(f"the file {path} does not exist")
        if not folder.is_dir():
            why = "is not a folder" if folder.exists() else "does not exist"
            raise InvalidArgument(
                f"cannot create {path}: {folder} {why} (create the folder first, or check the path)"
            )
    for target in (path, folder):
        if target.exists() and not _writable(target):
            raise StoreReadOnly(
                f"cannot write the store {path}: {target} is read-only (read-only media or no "
                "write permission); commands that only read (runs, show, timeline, diff, "
                "verify, lineage) still work"
            )
    return _file_uri(path, mode="rwc" if create else "rw")


def _sqlite_read_uri(path: Path) -> str:
    """How to open ``path`` read-only: ``mode=ro`` where SQLite can keep its shared-memory
    file next to it; ``immutable=1`` on read-only media, where nobody can change the file."""
    if not path.is_file():
        raise StoreNotFound(f"the file {path} does not exist")
    uri = _file_uri(path, mode="ro")
    try:
        probe = sqlite3.connect(uri, uri=True)
        try:
            probe.execute("PRAGMA schema_version").fetchone()
        finally:
            probe.close()
        return uri
    except sqlite3.DatabaseError as error:
        # Where SQLite cannot create its -shm file (no write permission, read-only media)
        # a WAL file opens only as immutable; anything else is a real failure.
        if _writable(path.resolve().parent):
            raise StoreError(f"cannot read the SQLite file {path}: {error}") from error
    wal = Path(f"{path}-wal")
    if wal.exists() and wal.stat().st_size > 0:
        raise StoreReadOnly(
            f"cannot read {path}: this process cannot write its folder, and its write-ahead "
            f"log ({wal.name}) holds changes not yet in the file; open it as a user who may "
            "write there, or copy the files to writable storage"
        )
    return _file_uri(path, mode="ro", immutable="1")


def _set_wal(cur: Any) -> None:
    # Switching to WAL needs a moment of exclusive access; when many processes open a fresh
    # file at once some of them see "database is locked" even with a busy timeout.
    for attempt in range(50):
        try:
            cur.execute("PRAGMA journal_mode = WAL")
            return
        except Exception as error:  # sqlite3.OperationalError
            if "locked" not in str(error).lower() or attempt == 49:
                raise
            time.sleep(0.02 * (1 + random.random()))
