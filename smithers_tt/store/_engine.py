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

**Ambiguous commits** (DESIGN invariant 8). A failure *before* COMMIT rolled everything back,
so the transaction is simply run again. A failure *at* COMMIT is different: on PostgreSQL the
COMMIT may have reached the server and been carried out while its reply was lost, and running
the work again would apply it twice. So every PostgreSQL write transaction inserts a unique
token row (``tt_commit_tokens``) without an extra round trip: it rides in the first pipeline
of statements the transaction sends (the publication's, see :func:`token_steps`), or else is
pipelined with the COMMIT (a single publisher measured about 3% more per publish). When the
COMMIT fails with a lost connection, :meth:`Engine.transaction` reconnects, makes sure the old
session is gone (``pg_terminate_backend`` on its backend, so no COMMIT of it can still land
afterwards), and looks the token up: found, the transaction committed and the result ``work``
produced is returned; not found, it rolled back and is retried as usual; no answer within the
retry budget raises :class:`~smithers_tt.errors.OutcomeUnknown`, never a false "failed".
Writers delete tokens older than :data:`COMMIT_TOKEN_TTL_MS` a page at a time (every
:data:`_PRUNE_EVERY`-th token, in the same pipeline), so the table stays small.

SQLite has no lost replies: the COMMIT runs in this process and either returns or raises. A
COMMIT that raises ``database is locked`` left the transaction open and uncommitted (SQLite
documents this), so it is retried. Any other error raised by COMMIT itself (``disk I/O
error``, ``database or disk is full``) means the disk failed while the commit was being
written: SQLite may or may not have made it durable (frames with their commit mark may be in
the WAL and reappear at the next recovery), so it raises ``OutcomeUnknown`` instead of being
retried as transient; a ``disk I/O error`` before COMMIT rolled back and is still retried.
"""

from __future__ import annotations

import itertools
import os
import random
import secrets
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
    OutcomeUnknown,
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

# SQLSTATE classes and codes that are worth a retry on PostgreSQL. (At COMMIT time a failure
# is first settled by Engine._settle: see the module docstring.)
_PG_TRANSIENT = {"40001", "40P01", "55P03", "57P01", "57P02", "57P03", "53300"}
_SQLITE_TRANSIENT = (
    "database is locked",
    "database table is locked",
    "database is busy",
    "disk i/o error",  # before COMMIT only: everything was rolled back
)


_PG_MISTAKES = ("does not exist", "authentication failed", "no pg_hba.conf entry")
"""Connection failures that name a mistake in the URL (database, role, password)."""

_PG_NAME = {"application_name": "smithers_tt"}
"""How our PostgreSQL sessions appear in ``pg_stat_activity`` unless the URL names them."""

COMMIT_TOKEN_TTL_MS = 15 * 60_000
"""How long a commit token is kept. It is looked up within seconds of its COMMIT; the margin
covers clocks of writer machines that disagree by minutes."""
_PRUNE_EVERY = 64
"""Every this many commit tokens a process makes, the transaction also deletes expired ones."""
_PRUNE_PAGE = 256
"""At most this many expired tokens per prune (4 times the rate they are made)."""

_INSERT_TOKEN = "INSERT INTO tt_commit_tokens (created_at_ms, nonce) VALUES (%s, %s)"
_PRUNE_TOKENS = (
    "DELETE FROM tt_commit_tokens WHERE (created_at_ms, nonce) IN ("
    "SELECT created_at_ms, nonce FROM tt_commit_tokens WHERE created_at_ms < %s "
    "ORDER BY created_at_ms LIMIT %s FOR UPDATE SKIP LOCKED)"
)
# Ends the session that sent an unanswered COMMIT (same user and database only), waiting up
# to 2 s for it to exit: once it is gone its transaction can no longer commit, so the token
# lookup that follows is final. No row: the session had already ended.
_END_SESSION = sa.text(
    "SELECT pg_terminate_backend(pid, 2000) FROM pg_stat_activity "
    "WHERE pid = :pid AND usename = current_user AND datname = current_database()"
)
_FIND_TOKEN = sa.text(
    "SELECT 1 FROM tt_commit_tokens WHERE created_at_ms = :created_at_ms AND nonce = :nonce"
)


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
        time and everything it wrote in a failed try was rolled back. A try whose COMMIT was
        carried out is never run again, even when the COMMIT's reply was lost (see the module
        docstring). With ``held``, the transaction runs on that connection instead of one
        checked out of the pool.

        Raises:
            TransientStoreError: the database stayed busy or unreachable through every retry
                (this transaction wrote nothing).
            OutcomeUnknown: the COMMIT of a write failed and whether it committed could not
                be found out.
            StoreError: any other database failure, with the driver error chained.
        """
        policy = self.retry
        for attempt in range(1, policy.attempts + 1):
            commit = _Commit()
            sealed = write and not self.is_sqlite
            try:
                with (held or self).connect(write=write) as conn:
                    info = conn.info  # held on to: an invalidated conn refuses .info
                    if sealed:
                        info[_COMMIT] = commit  # for token_steps()
                    try:
                        result = work(conn)
                    finally:
                        info.pop(_COMMIT, None)
                    commit.started = True  # from here on a failure may come after the COMMIT
                    if sealed:
                        self._seal(conn, commit)
                return result
            except SmithersError:
                raise
            except UnicodeDecodeError as error:  # SQLite's message about a damaged page
                raise damaged(error) from error
            except exc.DBAPIError as error:
                if write and commit.started and self._settle(commit, error):
                    return result  # the COMMIT was carried out; only its reply was lost
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
                self._pause(attempt)
        raise AssertionError("unreachable")  # pragma: no cover

    def _pause(self, attempt: int) -> None:
        policy = self.retry
        delay = min(policy.max_delay, policy.base_delay * 2 ** (attempt - 1))
        time.sleep(delay * (0.5 + random.random()))

    def _seal(self, conn: Connection, commit: _Commit) -> None:
        """Commit a PostgreSQL write transaction with its token row, in one round trip
        (unless :func:`token_steps` already sent the token: then SQLAlchemy commits)."""
        raw = conn.connection.dbapi_connection
        if commit.token is not None:
            return
        if raw.info.transaction_status.name == "IDLE":
            return  # nothing was sent: nothing to commit (SQLAlchemy's COMMIT is a no-op)
        cursor = raw.cursor()
        try:
            with raw.pipeline():
                for statement, params in _token_statements(commit, raw):
                    cursor.execute(statement, params)
                # COMMIT as a statement, not raw.commit(): that one syncs the pipeline itself,
                # and leaving the pipeline syncs again, a second round trip. Never prepared,
                # so every COMMIT goes out as such. SQLAlchemy's own commit is then a no-op.
                cursor.execute("COMMIT", prepare=False)
        except conn.dialect.loaded_dbapi.Error as error:
            raise wrap_driver_error(conn, error, _INSERT_TOKEN, commit.token, cursor) from error
        finally:
            with suppress(Exception):
                cursor.close()

    def _settle(self, commit: _Commit, error: exc.DBAPIError) -> bool:
        """Whether a write whose COMMIT raised ``error`` committed after all.

        False when it certainly did not (the caller then retries or reports as usual); raises
        :class:`OutcomeUnknown` when that cannot be found out.
        """
        if self.is_sqlite:
            if not any(text in _short(error).lower() for text in _SQLITE_NOT_COMMITTED):
                raise OutcomeUnknown(
                    f"SQLite failed while committing a write ({_short(error)}): the disk "
                    "may have failed or filled up mid-commit, so the write may or may not "
                    f"be stored; check the disk and the file ({self.sa.url.database}) with "
                    "`smithers-tt verify`, look at the run it changed (`smithers-tt show "
                    "RUN`), and repeat the call only if it did not happen",
                    phase="commit",
                ) from error
            return False  # "database is locked" at COMMIT: the transaction stayed open
        if commit.token is None or not _reply_lost(error):
            # No token: nothing had been sent. Otherwise the server answered the COMMIT with
            # an error (a serialization failure, a deferred constraint...): it rolled back.
            return False
        created_at_ms, nonce = commit.token
        why = _short(error)
        for attempt in range(1, self.retry.attempts + 1):
            try:
                with self.connect(write=False) as conn:
                    ended = conn.execute(_END_SESSION, {"pid": commit.pid}).scalar_one_or_none()
                    if ended is not False:  # gone already (None) or ended now (True)
                        found = conn.execute(
                            _FIND_TOKEN, {"created_at_ms": created_at_ms, "nonce": nonce}
                        ).first()
                        return found is not None
                why = f"its server session {commit.pid} did not end"
            except exc.DBAPIError as lookup_error:
                why = _short(lookup_error)
                if not is_transient(lookup_error):
                    break  # e.g. not allowed to end the session: asking again will not help
            if attempt < self.retry.attempts:
                self._pause(attempt)
        raise OutcomeUnknown(
            "the connection to PostgreSQL was lost while a write was committing, and the "
            f"store could not find out whether it committed ({why}); the write may "
            "or may not have happened: once the database is reachable, look at the run it "
            "changed (`smithers-tt show RUN`, `smithers-tt timeline RUN`) and repeat the "
            "call only if it did not happen",
            phase="commit",
        ) from error

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


@dataclass
class _Commit:
    """What :meth:`Engine.transaction` knows about one try's COMMIT."""

    started: bool = False
    """``work`` returned and the COMMIT is under way: a failure now may follow the commit."""
    token: tuple[int, int] | None = None
    """The token row this transaction wrote (PostgreSQL): ``(created_at_ms, nonce)``."""
    pid: int | None = None
    """The server process of the session that sent it."""


# A random start: processes that commit less than _PRUNE_EVERY times (a CLI command) still
# prune, on average, as often as they make tokens.
_TOKENS = itertools.count(random.randrange(_PRUNE_EVERY))

_COMMIT = "smithers_tt_commit"
"""Key of the running write transaction's :class:`_Commit` in ``Connection.info``."""


def _token_statements(commit: _Commit, raw: Any) -> list[tuple[str, tuple[int, ...]]]:
    """Make ``commit``'s token; the statements that store it (and now and then prune)."""
    token = commit.token = (_now_ms(), secrets.randbits(63))
    commit.pid = raw.info.backend_pid
    statements: list[tuple[str, tuple[int, ...]]] = [(_INSERT_TOKEN, token)]
    if next(_TOKENS) % _PRUNE_EVERY == 0:
        statements.append((_PRUNE_TOKENS, (token[0] - COMMIT_TOKEN_TTL_MS, _PRUNE_PAGE)))
    return statements


def token_steps(conn: Connection) -> list[tuple[str, tuple[int, ...]]]:
    """The commit token's statements, for a caller about to pipeline statements on ``conn``.

    The token costs no round trip of its own when it rides along with statements already going
    to the server (the publication's pipelines); otherwise it goes with the COMMIT. Empty when
    it is not wanted (SQLite, reads), already sent, or ``conn`` is inside a savepoint, whose
    rollback would take the token away while the transaction still commits.
    """
    commit = conn.info.get(_COMMIT)
    if commit is None or commit.token is not None or conn.in_nested_transaction():
        return []
    return _token_statements(commit, conn.connection.dbapi_connection)


# A COMMIT that fails with these left the SQLite transaction open and uncommitted.
_SQLITE_NOT_COMMITTED = ("database is locked", "database table is locked", "database is busy")


def _reply_lost(error: exc.DBAPIError) -> bool:
    """Whether a failed PostgreSQL COMMIT may have been carried out: the connection went away
    (or the server was shutting the session down) instead of answering with an error."""
    if error.connection_invalidated:
        return True
    sqlstate = getattr(error.orig, "sqlstate", None)
    return sqlstate is None or sqlstate.startswith(("08", "57P"))


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def wrap_driver_error(
    conn: Connection, error: Exception, statement: str, params: Any, cursor: Any = None
) -> exc.DBAPIError:
    """Wrap a raw driver error the way SQLAlchemy does: in the matching
    :class:`sqlalchemy.exc.DBAPIError`, with ``connection_invalidated`` set (and the connection
    invalidated) when the dialect says the connection is gone, so :func:`is_transient` and the
    retries see exactly what they see for a statement run through SQLAlchemy."""
    gone = conn.dialect.is_disconnect(error, conn.connection.dbapi_connection, cursor)
    if gone:
        conn.invalidate(error)
    return exc.DBAPIError.instance(
        statement,
        params,
        error,
        conn.dialect.loaded_dbapi.Error,
        connection_invalidated=gone,
        dialect=conn.dialect,
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
