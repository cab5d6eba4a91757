"""Connections, transactions, transient-error retries and error translation.

One SQLAlchemy Core code path serves SQLite and PostgreSQL; what differs between them is a
:class:`~smithers_tt.store.backend._dialect.Dialect` (:mod:`._dialect_sqlite`,
:mod:`._dialect_postgres`), which the :class:`Engine` holds as :attr:`Engine.backend`.

Every transaction runs through :meth:`Engine.transaction`, which retries transient failures
(``database is locked``, serialization failures, deadlocks, dropped connections) with jittered
exponential backoff and translates everything else into the :mod:`smithers_tt.errors` tree.

**Ambiguous commits** (DESIGN invariant 8). A failure *before* COMMIT rolled everything back,
so the transaction is simply run again. A failure *at* COMMIT is different: the COMMIT may
have been carried out while its reply was lost, and running the work again would apply it
twice. The dialect settles it (:meth:`Dialect.settle`): PostgreSQL looks up the commit token
the transaction wrote (see :mod:`._dialect_postgres`); SQLite, whose COMMIT runs in this
process, knows whether it was left open. Found committed, the result ``work`` produced is
returned; certainly not committed, it is retried as usual; otherwise
:class:`~smithers_tt.errors.OutcomeUnknown` is raised, never a false "failed".
"""

from __future__ import annotations

import itertools
import random
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy import exc
from sqlalchemy.engine import Connection, make_url

from smithers_tt.errors import (
    DiskError,
    InvalidArgument,
    SmithersError,
    StoreCorrupt,
    StoreError,
    StoreReadOnly,
    TransientStoreError,
)
from smithers_tt.store._records import VERIFY_HINT
from smithers_tt.store.backend import _sqlite as _dialect_sqlite  # noqa: F401 (registers them)
from smithers_tt.store.backend._dialect import (
    COMMIT_KEY,
    DIALECTS,
    Commit,
    Dialect,
    carry,
    dialect_owning,
    disk_failure,
    is_transient,
    short,
    wrap_driver_error,
)
from smithers_tt.store.backend._postgres import COMMIT_TOKEN_TTL_MS, PRUNE_EVERY

__all__ = [
    "COMMIT_TOKEN_TTL_MS",
    "Engine",
    "HeldConnection",
    "RetryPolicy",
    "damaged",
    "display_url",
    "is_transient",
    "wrap_driver_error",
]

T = TypeVar("T")

_WRITE = "smithers_tt_write"
_KNOWN_MAX = 100_000
_KEYS = itertools.count()
"""Keys of transactions in a gate (:meth:`Engine.gated`)."""
"""Rows an engine keeps what it learned of (:attr:`Engine._known`) before it starts again."""
_PRUNE_EVERY = PRUNE_EVERY  # the name tests know
_short = short


@dataclass(frozen=True)
class RetryPolicy:
    """How long the store keeps retrying a transient failure before giving up."""

    attempts: int = 12
    base_delay: float = 0.01
    max_delay: float = 1.0


class _Shared(threading.local):
    """One thread's shared read transaction (see :meth:`Engine.reading`)."""

    depth = 0
    """How many ``reading`` blocks this thread is in."""
    conn: Connection | None = None
    """The connection whose transaction the reads share, once one was asked for."""
    ends: ExitStack | None = None
    """What ends it: the connection's close, then the gate's (:meth:`Engine.gated`)."""
    broken = False
    """A shared read failed: the rest of the block reads as if there were no block."""


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
        :meth:`Dialect.create_engine`), a PostgreSQL server is first reached by a transaction.

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
        self.backend: Dialect = DIALECTS[parsed.get_backend_name()]
        """What this database does differently (statements, locks, commits, errors)."""
        self.dialect = self.backend.name
        """The backend's name (``sqlite``, ``postgresql``)."""
        self.sa, self.immutable = self.backend.create_engine(
            parsed,
            busy_timeout_ms=busy_timeout_ms,
            synchronous=synchronous,
            read_only=read_only,
            create=create,
            write_option=_WRITE,
        )
        carry(self.sa, self.backend)
        self._held: weakref.WeakSet[HeldConnection] = weakref.WeakSet()
        self._shared = _Shared()
        self._gate: Any = None
        """This process's gate of the database, once found (:meth:`gated`)."""
        self._known: dict[Any, Any] | None = {} if self.backend.pipelines else None
        """What committed writes learned of rows (a run's clock and fence, an attempt's next
        sequence), for writes that send guarded guesses instead of asking (see
        :func:`~smithers_tt.store.ledger._write.write`): a guess found wrong aborts its
        transaction, so this is a hint, never trusted."""

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
        with self.gated(), self.sa.connect() as conn:
            conn.execution_options(**{_WRITE: write})
            with conn.begin():
                yield conn

    @contextmanager
    def gated(self) -> Iterator[None]:
        """Hold this process's gate of the database shared for a transaction (see
        :mod:`~smithers_tt.store.backend._gate`; nothing where the dialect has none)."""
        gate = self._gate or self._find_gate()
        if gate is None:
            yield
            return
        key = next(_KEYS)
        gate.enter(key)
        try:
            yield
        finally:
            gate.leave(key)

    def _find_gate(self) -> Any:
        self._gate = self.backend.gate(self)
        return self._gate

    @contextmanager
    def reading(self) -> Iterator[None]:
        """Inside the block, the read-only transactions this thread runs through
        :meth:`transaction` share one transaction on one connection.

        For a caller that reads many small things at once (the debugger opening a run: about
        30 read transactions): each transaction of its own costs a pool checkout, a ``BEGIN``
        and an end, and on PostgreSQL each of those is a round trip to a server that a loaded
        machine answers late. The reads see what they saw before: on PostgreSQL (read
        committed) each statement sees what was committed when it started, as before; on
        SQLite the block reads one snapshot, taken at its first read. A write transaction
        inside the block ends the shared one first (what is read after it sees the write),
        and a read that fails in the shared transaction ends it and runs again on its own,
        with the retries and error translation of :meth:`transaction`; the rest of the block
        then reads as if there were no block. Other threads are not affected; blocks nest.
        """
        shared = self._shared
        shared.depth += 1
        try:
            yield
        finally:
            shared.depth -= 1
            if not shared.depth:
                shared.broken = False
                self._end_shared()

    def _end_shared(self) -> None:
        """End this thread's shared read transaction, if one is open (a rollback: it
        wrote nothing)."""
        shared = self._shared
        ends, shared.ends, shared.conn = shared.ends, None, None
        if ends is not None:
            with suppress(exc.DBAPIError):
                ends.close()  # the connection, then the gate

    def _shared_read(self, work: Callable[[Connection], T]) -> tuple[bool, T | None]:
        """``(True, work(conn))`` in this thread's shared read transaction, or ``(False,
        None)`` when there is none to use (no block, or it failed): then ``work`` runs in a
        transaction of its own."""
        shared = self._shared
        if not shared.depth or shared.broken:
            return False, None
        try:
            if shared.conn is None:
                with ExitStack() as ends:
                    ends.enter_context(self.gated())
                    conn = ends.enter_context(self.sa.connect())
                    conn.execution_options(**{_WRITE: False})
                    conn.begin()
                    shared.ends = ends.pop_all()
                shared.conn = conn
            return True, work(shared.conn)
        except SmithersError:
            raise
        except (exc.DBAPIError, UnicodeDecodeError):
            shared.broken = True  # run again alone: retried and translated as ever
            self._end_shared()
            return False, None

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
        alone: bool = False,
    ) -> T:
        """Run ``work(conn)`` in one transaction, retrying it whole on transient failures.

        ``work`` must be safe to run again from the start: it gets a fresh transaction each
        time and everything it wrote in a failed try was rolled back. A try whose COMMIT was
        carried out is never run again, even when the COMMIT's reply was lost (see the module
        docstring). With ``held``, the transaction runs on that connection instead of one
        checked out of the pool. A read inside a :meth:`reading` block of this thread runs in
        the block's shared transaction.

        With ``alone``, ``work`` sends exactly one statement, which is then its own
        transaction where that saves round trips (:meth:`Dialect.alone`: on PostgreSQL one
        round trip instead of three, no BEGIN, no COMMIT). For a read, or a write that may
        be applied twice (a heartbeat): a failure while it runs is retried like any other,
        although the statement may have taken effect, and no commit token is sent.

        Raises:
            TransientStoreError: the database stayed busy or unreachable through every retry
                (this transaction wrote nothing).
            OutcomeUnknown: the COMMIT of a write failed and whether it committed could not
                be found out.
            StoreError: any other database failure, with the driver error chained.
        """
        if held is None and self._shared.depth:
            if write:
                self._end_shared()  # the reads after this write must see it
            else:
                shared, result = self._shared_read(work)
                if shared:
                    return result  # type: ignore[return-value]
        policy = self.retry
        for attempt in range(1, policy.attempts + 1):
            commit = Commit(known=self._known)
            sealed = write and self.backend.seals_commits
            try:
                with (held or self).connect(write=write) as conn:
                    info = conn.info  # held on to: an invalidated conn refuses .info
                    if sealed:
                        info[_COMMIT] = commit  # for the dialect's token and deferred steps
                    if alone:
                        self.backend.alone(conn)
                    try:
                        result = work(conn)
                    finally:
                        info.pop(_COMMIT, None)
                    commit.started = True  # from here on a failure may come after the COMMIT
                    if sealed:
                        self.backend.seal(conn, commit)
                self._keep(commit)
                return result
            except SmithersError:
                raise
            except UnicodeDecodeError as error:  # SQLite's message about a damaged page
                raise damaged(error) from error
            except exc.DBAPIError as error:
                if write and commit.started and self.backend.settle(self, commit, error):
                    self._keep(commit)
                    return result  # the COMMIT was carried out; only its reply was lost
                if not is_transient(error):
                    raise (
                        damaged(error)
                        or disk_error(self.url, error)
                        or StoreError(f"database error: {_short(error)}")
                    ) from error
                if attempt == policy.attempts:
                    raise TransientStoreError(
                        f"the database stayed unavailable through {attempt} tries "
                        f"({_short(error)}); retry later or raise the busy timeout",
                        tries=attempt,
                    ) from error
                self.pause(attempt)
        raise AssertionError("unreachable")  # pragma: no cover

    def _keep(self, commit: Commit) -> None:
        """Keep what a committed transaction learned (see :attr:`_known`)."""
        known = self._known
        if known is None or not commit.learned:
            return
        if len(known) > _KNOWN_MAX:
            known.clear()  # runs come and go: start again rather than track which are gone
        for key, value in commit.learned.items():
            if value is None:
                known.pop(key, None)
            else:
                known[key] = value

    def pause(self, attempt: int) -> None:
        """Sleep before try ``attempt + 1``: jittered exponential backoff."""
        policy = self.retry
        delay = min(policy.max_delay, policy.base_delay * 2 ** (attempt - 1))
        time.sleep(delay * (0.5 + random.random()))

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
                if conn.get_execution_options().get(_WRITE) is not write:
                    # Set only when it changes: the committer's every transaction writes, and
                    # setting an option dispatches SQLAlchemy's events and dialect hooks.
                    conn.execution_options(**{_WRITE: write})
                with self._engine.gated(), conn.begin():
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


def damaged(error: BaseException) -> StoreCorrupt | None:
    """:class:`StoreCorrupt` saying what to do when ``error`` means a damaged database file
    (as its dialect says, or text that is not UTF-8), else None."""
    if not isinstance(error, UnicodeDecodeError):
        dialect = dialect_owning(getattr(error, "orig", None))
        if dialect is None or not dialect.damaged(error):
            return None
    return StoreCorrupt(
        f"the database is damaged ({short(error)}); {VERIFY_HINT}. An SQLite file whose "
        "pages are damaged may not open at all: restore it from a backup, or try "
        "`sqlite3 <file> .recover`"
    )


def disk_error(url: str, error: BaseException) -> DiskError | None:
    """:class:`DiskError` saying what failed and what to do when ``error`` (raised before any
    COMMIT, so the transaction was rolled back) is the disk's, else None."""
    what = disk_failure(error)
    if what is None:
        return None
    where = f"the disk that holds the database ({display_url(url)})"
    if what == "disk full":
        return DiskError(
            f"disk full: {where} has no space left ({short(error)}); nothing was written: "
            "free space on it (or move the database to a larger disk), then repeat the call"
        )
    return DiskError(
        f"{what}: {where} failed to read or write ({short(error)}); nothing was written: "
        "check the disk (free space, the kernel log, a file size limit such as `ulimit -f`) "
        "and the database with `smithers-tt verify`, then repeat the call"
    )


_COMMIT = COMMIT_KEY


def _parse(url: str) -> sa.URL:
    try:
        parsed = make_url(url)
    except exc.ArgumentError as error:
        raise InvalidArgument(
            f"not a database URL: {url!r}; use sqlite:///path/to/file.db or "
            "postgresql+psycopg://user@host:5432/dbname"
        ) from error
    backend = parsed.get_backend_name()
    if backend not in DIALECTS:
        raise InvalidArgument(f"unsupported database {backend!r}: use sqlite or postgresql")
    return DIALECTS[backend].normalize_url(parsed)


def display_url(url: str) -> str:
    """A URL as people may see it (no password)."""
    with suppress(exc.ArgumentError):
        return make_url(url).render_as_string(hide_password=True)
    return url
