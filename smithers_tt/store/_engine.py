"""Connections, transactions, transient-error retries and error translation.

One SQLAlchemy Core code path serves SQLite and PostgreSQL; the differences live here and in
:mod:`smithers_tt.store._dialect`:

* SQLite: WAL, ``synchronous=FULL`` (durability is the product), foreign keys on, a busy
  timeout, and ``BEGIN IMMEDIATE`` for write transactions so two writers never deadlock on a
  lock upgrade. Read transactions use a plain ``BEGIN`` and do not block writers.
* PostgreSQL: psycopg 3, READ COMMITTED; row locks decide the races (see the store).

Every transaction runs through :meth:`Engine.transaction`, which retries transient failures
(``database is locked``, serialization failures, deadlocks, dropped connections) with jittered
exponential backoff and translates everything else into the :mod:`smithers_tt.errors` tree.
"""

from __future__ import annotations

import os
import random
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import sqlalchemy as sa
from sqlalchemy import event, exc
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.pool import NullPool

from smithers_tt._extras import extra_needed
from smithers_tt.errors import (
    InvalidArgument,
    SmithersError,
    StoreCorrupt,
    StoreError,
    StoreNotFound,
    StoreReadOnly,
    TransientStoreError,
)
from smithers_tt.store._records import VERIFY_HINT

T = TypeVar("T")

_WRITE = "smithers_tt_write"

# SQLSTATE classes and codes that are worth a retry on PostgreSQL.
_PG_TRANSIENT = {"40001", "40P01", "55P03", "57P01", "57P02", "57P03", "53300"}
_SQLITE_TRANSIENT = (
    "database is locked",
    "database table is locked",
    "database is busy",
    "disk i/o error",
)


_PG_MISTAKES = ("does not exist", "authentication failed", "no pg_hba.conf entry")
"""Connection failures that name a mistake in the URL (database, role, password)."""

_PG_NAME = {"application_name": "smithers_tt"}
"""How our PostgreSQL sessions appear in ``pg_stat_activity`` unless the URL names them."""


@dataclass(frozen=True)
class RetryPolicy:
    """How long the store keeps retrying a transient failure before giving up."""

    attempts: int = 12
    base_delay: float = 0.01
    max_delay: float = 1.0


def is_transient(error: BaseException) -> bool:
    """Whether a database error is worth retrying (locks, serialization, lost connections)."""
    if isinstance(error, exc.DBAPIError) and error.connection_invalidated:
        return True
    orig = getattr(error, "orig", error)
    sqlstate = getattr(orig, "sqlstate", None)
    if sqlstate and (sqlstate in _PG_TRANSIENT or sqlstate.startswith("08")):
        return True
    message = str(orig).lower()
    if any(text in message for text in _SQLITE_TRANSIENT):
        return True
    if any(text in message for text in _PG_MISTAKES):
        return False  # a mistyped URL fails the same way on every try
    # psycopg raises OperationalError without a SQLSTATE when the server goes away.
    return (
        isinstance(error, exc.OperationalError)
        and sqlstate is None
        and ("connection" in message or "server closed" in message or "terminat" in message)
    )


class Engine:
    """A SQLAlchemy engine set up for smithers_tt, with a retrying transaction runner."""

    def __init__(
        self,
        url: str,
        *,
        retry: RetryPolicy | None = None,
        busy_timeout_ms: int = 5000,
        synchronous: str = "FULL",
        read_only: bool = False,
        create: bool = True,
    ) -> None:
        """Set up the connection pool; only an SQLite file is checked here (see
        :func:`_sqlite_engine`), a PostgreSQL server is first reached by a transaction.

        Args:
            url: an SQLAlchemy URL of SQLite or PostgreSQL.
            read_only: every transaction is read-only, enforced by SQLite (``mode=ro``) or
                by the PostgreSQL server (``default_transaction_read_only``).
            create: an SQLite file that does not exist may be created (never its folder).

        Raises:
            InvalidArgument: not a supported URL, or an SQLite path that cannot be a file.
            StoreNotFound: no SQLite file there, and ``create`` is off.
            StoreReadOnly: the SQLite file cannot be written and ``read_only`` is off.
        """
        self.url = url
        self.retry = retry or RetryPolicy()
        self.read_only = read_only
        self.immutable = False
        """Whether SQLite reads the file as immutable (read-only media: no -shm file)."""
        parsed = _parse(url)
        self.dialect = parsed.get_backend_name()
        if self.dialect == "sqlite":
            self.sa, self.immutable = _sqlite_engine(
                parsed, busy_timeout_ms, synchronous, read_only, create
            )
        else:
            if read_only:
                parsed = _pg_read_only(parsed)
            with extra_needed("PostgreSQL"):  # SQLAlchemy imports psycopg here
                self.sa = sa.create_engine(
                    parsed,
                    pool_pre_ping=True,
                    pool_size=8,
                    max_overflow=24,
                    isolation_level="READ COMMITTED",
                    # A name given in the URL (?application_name=...) wins.
                    connect_args={} if "application_name" in parsed.query else _PG_NAME,
                )

        self._held: weakref.WeakSet[HeldConnection] = weakref.WeakSet()

    @property
    def is_sqlite(self) -> bool:
        """Whether the store is an SQLite file."""
        return self.dialect == "sqlite"

    @contextmanager
    def connect(self, *, write: bool):
        """A raw connection inside one transaction (no retries; prefer :meth:`transaction`).

        Raises:
            StoreReadOnly: a write transaction on an engine opened read-only.
        """
        if write and self.read_only:
            raise StoreReadOnly(
                f"the store at {display_url(self.url)} was opened read-only; nothing was written"
            )
        with self.sa.connect() as conn:
            conn.execution_options(**{_WRITE: write})
            with conn.begin():
                yield conn

    def hold(self) -> HeldConnection:
        """A connection kept checked out between transactions, for one serial caller."""
        held = HeldConnection(self)
        self._held.add(held)
        return held

    def transaction(
        self,
        work: Callable[[Connection], T],
        *,
        write: bool = True,
        held: HeldConnection | None = None,
    ) -> T:
        """Run ``work(conn)`` in one transaction, retrying it whole on transient failures.

        ``work`` must be safe to run again from the start: it gets a fresh transaction each
        time and everything it wrote in a failed try was rolled back. With ``held``, the
        transaction runs on that connection instead of one checked out of the pool.

        Raises:
            TransientStoreError: the database stayed busy or unreachable through every retry.
            StoreError: any other database failure, with the driver error chained.
        """
        policy = self.retry
        for attempt in range(1, policy.attempts + 1):
            try:
                with (held or self).connect(write=write) as conn:
                    return work(conn)
            except SmithersError:
                raise
            except UnicodeDecodeError as error:  # SQLite's message about a damaged page
                raise damaged(error) from error
            except exc.DBAPIError as error:
                if not is_transient(error):
                    raise damaged(error) or StoreError(
                        f"database error: {_short(error)}"
                    ) from error
                if attempt == policy.attempts:
                    raise TransientStoreError(
                        f"the database stayed unavailable through {attempt} tries "
                        f"({_short(error)}); retry later or raise the busy timeout",
                        tries=attempt,
                    ) from error
                delay = min(policy.max_delay, policy.base_delay * 2 ** (attempt - 1))
                time.sleep(delay * (0.5 + random.random()))
        raise AssertionError("unreachable")  # pragma: no cover

    def dispose(self) -> None:
        """Close every pooled connection (held ones included)."""
        for held in list(self._held):
            held.release()
        self.sa.dispose()


class HeldConnection:
    """One connection kept out of the pool between transactions, for a caller whose
    transactions run one at a time (the publication committer).

    It saves the pool checkout, the check-in's reset and, on PostgreSQL, the pre-ping round
    trip of every transaction. Pre-ping is not needed: a connection the server dropped fails
    its next statement with a disconnect, which is transient, so :meth:`Engine.transaction`
    retries; and any failure releases the connection, so the retry checks out (and pings) a
    fresh one.
    """

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._conn: Connection | None = None
        self._lock = threading.Lock()

    @contextmanager
    def connect(self, *, write: bool):
        """The held connection (checked out on first use) inside one transaction."""
        with self._lock:
            conn = self._conn
            if conn is None or conn.closed or conn.invalidated:
                conn = self._conn = self._engine.sa.connect()
            try:
                conn.execution_options(**{_WRITE: write})
                with conn.begin():
                    yield conn
            except BaseException:
                self._release()  # start the next transaction on a known-good connection
                raise

    def release(self) -> None:
        """Return the connection to the pool (it is checked out again when next needed)."""
        with self._lock:
            self._release()

    def _release(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with suppress(Exception):  # a broken connection: the pool discards it
                conn.close()


_DAMAGE = ("malformed", "not a database", "could not decode to utf-8")


def damaged(error: BaseException) -> StoreCorrupt | None:
    """:class:`StoreCorrupt` saying what to do when ``error`` means a damaged database file
    (SQLite pages, or text that is not UTF-8), else None."""
    if not isinstance(error, UnicodeDecodeError):
        from_sqlite = type(getattr(error, "orig", None)).__module__.startswith("sqlite3")
        if not from_sqlite or not any(word in str(error).lower() for word in _DAMAGE):
            return None
    return StoreCorrupt(
        f"the database is damaged ({_short(error)}); {VERIFY_HINT}. An SQLite file whose "
        "pages are damaged may not open at all: restore it from a backup, or try "
        "`sqlite3 <file> .recover`"
    )


def _short(error: BaseException) -> str:
    orig = getattr(error, "orig", error)
    return (str(orig).strip().splitlines() or [type(orig).__name__])[0][:300]


def _parse(url: str) -> sa.URL:
    try:
        parsed = make_url(url)
    except exc.ArgumentError as error:
        raise InvalidArgument(
            f"not a database URL: {url!r}; use sqlite:///path/to/file.db or "
            "postgresql+psycopg://user@host:5432/dbname"
        ) from error
    backend = parsed.get_backend_name()
    if backend == "postgresql":
        if parsed.drivername != "postgresql+psycopg":
            parsed = parsed.set(drivername="postgresql+psycopg")
        return parsed
    if backend != "sqlite":
        raise InvalidArgument(f"unsupported database {backend!r}: use sqlite or postgresql")
    if not parsed.database or parsed.database == ":memory:":
        raise InvalidArgument(
            "smithers_tt needs an SQLite *file* (durability is the point): "
            "use sqlite:///path/to/file.db"
        )
    return parsed


def display_url(url: str) -> str:
    """A URL as people may see it (no password)."""
    with suppress(exc.ArgumentError):
        return make_url(url).render_as_string(hide_password=True)
    return url


def _pg_read_only(url: sa.URL) -> sa.URL:
    """The URL with every session read-only on the server, the URL's own options kept."""
    options = url.query.get("options", "")
    options = options if isinstance(options, str) else " ".join(options)
    return url.update_query_dict(
        {"options": f"{options} -cdefault_transaction_read_only=on".strip()}
    )


def _sqlite_engine(
    url: sa.URL, busy_timeout_ms: int, synchronous: str, read_only: bool, create: bool
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
        write = conn.get_execution_options().get(_WRITE, True)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write and not read_only else "BEGIN")

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
