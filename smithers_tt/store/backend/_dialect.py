"""What differs between the databases the store runs on, behind one base class.

The store's logic is written once; every place where SQLite and PostgreSQL differ is a method
or a named statement of :class:`Dialect`, implemented by :mod:`._dialect_sqlite` and
:mod:`._dialect_postgres` (a third backend is one new file registered in :data:`DIALECTS` of
:mod:`._engine`). Nothing in the store asks ``if dialect == ...``.

The differences: the driver's placeholder, how a URL is normalised and an engine set up
(SQLite pragmas and ``BEGIN IMMEDIATE``; a PostgreSQL pool), whether statements can be
pipelined in one round trip, how content read by a publisher is kept from garbage collection
(``FOR KEY SHARE``), how a run row is locked before reading what hangs under it, how a write's
COMMIT is sealed and an ambiguous COMMIT settled (PostgreSQL's commit tokens and session
termination; SQLite's "the disk failed mid-commit"), and which driver errors are transient
or mean a damaged file.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import ChainMap
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy import exc
from sqlalchemy.engine import Connection

from smithers_tt.store.backend._statements import Statements

T = TypeVar("T")


@dataclass
class Commit:
    """What :meth:`Engine.transaction` knows about one try's COMMIT."""

    started: bool = False
    """``work`` returned and the COMMIT is under way: a failure now may follow the commit."""
    token: tuple[int, int] | None = None
    """The token row this transaction wrote (PostgreSQL): ``(created_at_ms, nonce)``."""
    pid: int | None = None
    """The server process of the session that sent it."""
    known: dict[Any, Any] | None = None
    """What the engine learned of rows from the writes it committed (see :meth:`learn`), for
    a write that sends guarded guesses instead of asking (None: not kept here)."""
    learned: dict[Any, Any] = field(default_factory=dict)
    """What this transaction's writes learned; kept in :attr:`known` once it committed."""
    deferred: list[tuple[str, Any, bool]] = field(default_factory=list)
    """Steps ``(statement, params, many)`` that return nothing, held back to go to the
    server with the next statements of the transaction or with its COMMIT (see
    :func:`defer`)."""


COMMIT_KEY = "smithers_tt_commit"
"""Key of the running write transaction's :class:`Commit` in ``Connection.info``."""


def defer(conn: Connection, steps: list[tuple[str, Any, bool]]) -> bool:
    """Hold ``steps`` (that return nothing) back, to be sent with whatever the transaction
    sends next, its COMMIT at the latest; False (nothing held) when the transaction is not a
    sealed write or ``conn`` is inside a savepoint (whose statements must fail there)."""
    commit = conn.info.get(COMMIT_KEY)
    if commit is None or conn.in_nested_transaction():
        return False
    commit.deferred.extend(steps)
    return True


def known_rows(conn: Connection) -> Mapping[Any, Any] | None:
    """What the engine knows of rows (for guarded guesses): what this transaction's earlier
    writes learned, else what committed ones did; None where guesses cannot be sent (not a
    sealed write, or inside a savepoint)."""
    commit = conn.info.get(COMMIT_KEY)
    if commit is None or commit.known is None or conn.in_nested_transaction():
        return None
    return ChainMap(commit.learned, commit.known) if commit.learned else commit.known


def learn(conn: Connection, key: Any, value: Any) -> None:
    """Record ``value`` (None: forget it) as what ``key`` holds once the transaction commits."""
    commit = conn.info.get(COMMIT_KEY)
    if commit is not None and commit.known is not None:
        commit.learned[key] = value


def take_deferred(conn: Connection) -> list[tuple[str, Any, bool]]:
    """The steps :func:`defer` held back on ``conn`` (now the caller's to send)."""
    commit = conn.info.get(COMMIT_KEY)
    if commit is None or not commit.deferred:
        return []
    steps, commit.deferred = commit.deferred, []
    return steps


def is_transient(error: BaseException) -> bool:
    """Whether a database error is worth retrying (locks, serialization, lost connections),
    as the dialect whose driver raised it says."""
    if isinstance(error, exc.DBAPIError) and error.connection_invalidated:
        return True
    orig = getattr(error, "orig", error)
    dialect = dialect_owning(orig)
    return dialect is not None and dialect.transient(error, orig)


def disk_failure(error: BaseException) -> str | None:
    """What failed when a database error is the disk's (``"disk full"``, ``"I/O error"``), as
    the dialect whose driver raised it says; else None. Never transient: a retry at once meets
    the same disk."""
    orig = getattr(error, "orig", error)
    dialect = dialect_owning(orig)
    return None if dialect is None else dialect.disk_failure(orig)


def dialect_owning(orig: BaseException | None) -> Dialect | None:
    """The registered dialect whose driver raised ``orig``, if any."""
    for dialect in DIALECTS.values():
        if orig is not None and dialect.owns(orig):
            return dialect
    return None


def short(error: BaseException) -> str:
    """The first line of a (driver) error's message, at most 300 characters."""
    orig = getattr(error, "orig", error)
    return (str(orig).strip().splitlines() or [type(orig).__name__])[0][:300]


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


DIALECTS: dict[str, Dialect] = {}
"""Every dialect the store runs on, by backend name (filled by :func:`register`)."""


CARRIED = "smithers_tt_dialect"
"""The execution option under which an engine's connections carry their :class:`Dialect`."""


def carry(engine: sa.Engine, dialect: Dialect) -> None:
    """Make every connection of ``engine`` carry ``dialect``: set once, when the
    :class:`~._engine.Engine` is made (which holds it too, as ``engine.backend``), and read by
    :func:`dialect_of`, so no code asks a connection which database it is on."""
    engine.update_execution_options(**{CARRIED: dialect})


def dialect_of(conn: Connection) -> Dialect:
    """The store's dialect object of ``conn``'s database: the one its engine carries.

    The one accessor of a connection's dialect. A connection of a plain SQLAlchemy engine
    (what :func:`~._migrate.upgrade` is documented to accept: tests and migration tools build
    old stores with one) carries none; its dialect is then found by its backend name, here
    and nowhere else.
    """
    carried = conn.get_execution_options().get(CARRIED)
    return DIALECTS[conn.dialect.name] if carried is None else carried


def register(dialect: Dialect) -> Dialect:
    """Make ``dialect`` the one used for its backend name."""
    DIALECTS[dialect.name] = dialect
    return dialect


class Dialect(ABC):
    """One database's side of every difference the store has to know about."""

    name: str
    """SQLAlchemy's backend name (``sqlite``, ``postgresql``)."""
    placeholder: str
    """The driver's bound-parameter marker in :class:`Statements`."""
    pipelines: bool
    """Whether independent statements can go to the server in one round trip."""
    seals_commits: bool
    """Whether a write transaction carries a commit token, so an unanswered COMMIT can be
    settled afterwards (see :meth:`settle`)."""
    content_lock: str
    """Suffix of the read that checks stored content: holds it against garbage collection
    until the publishing transaction ends (empty where writers are serialised anyway)."""
    row_lock: str
    """Suffix of a read that locks the run row before reading what hangs under it."""
    put_content: str = (
        "INSERT INTO tt_checkpoint_contents (content_hash, data, size_bytes, created_at_ms) "
        "VALUES (?, ?, ?, ?) ON CONFLICT (content_hash) DO NOTHING RETURNING size_bytes, 1"
    )
    """Store content unless present, in one statement that needs no answer before the next
    (parameters: hash, bytes, size, stamp). Returns ``(size, same)`` when it inserted the row,
    or (where the database can do it in the same statement) found it and compared its bytes
    with the new ones, holding it (:attr:`content_lock`); no row when the caller must check
    stored content itself (with ``store_content``)."""
    frame_ctes: bool = False
    """Whether a statement may insert a frame and the rows it projects to (a checkpoint's
    ref) in one, with a data-modifying CTE (``Statements.insert_frame_ref``)."""
    put_content_if: str | None = None
    """:attr:`put_content` as a guarded guess (see ``Statements.advance_run_if``): aborts the
    transaction unless the content was stored or found with the same bytes; None where
    guesses are not sent."""

    def __init__(self) -> None:
        self._statements: Statements | None = None

    # --- time travel, bulk writes, describe, migrations ---
    max_params: int = 30_000
    """Bound parameters per multi-row statement (below SQLite's 32,766, PostgreSQL's 65,535)."""
    frame_data_ok: str
    """SQL: 1 when ``f.data_json`` is what ``fold`` accepts on a checkpoint frame and the set
    path can read (NULL, or a JSON object whose ``created_at_ms``, if any, is an integer).

    Data with a ``\\u`` escape goes to the fold: an escape could spell the key, and SQLite
    matches JSON paths against keys as written. Only data that mentions ``created_at_ms`` is
    parsed a second time for it. The key written twice goes to the fold as well: SQLite's path
    finds the first, the fold keeps the last (so both backends send it there).
    """
    code_point_order: str = ""
    """SQL after a text column in ``ORDER BY`` or a comparison so that it orders as Python
    sorts text (by code point): SQLite's default already does."""
    ref_created: str
    """SQL: a ref's ``created_at_ms`` from its checkpoint frame ``f``, as ``fold`` takes it
    (``data.created_at_ms`` when present, else the frame's own); ``data`` was checked by
    :attr:`frame_data_ok`."""
    choice_block: int | None
    """Frame numbers per block when the values a frame table filters by are read
    (:func:`~smithers_tt.store.for_widgets.frame_choices`): grouping a run's frames by (kind, node,
    purpose) sorts every frame where the database groups by sorting (SQLite), so only the
    blocks where groups start are grouped; None: the database hashes groups in one pass
    (PostgreSQL), group all the frames at once."""

    def named(self, sql: str) -> str:
        """``sql`` written with ``:name`` placeholders, in this driver's named style."""
        return sql

    @contextmanager
    def roomy(self, conn: Connection) -> Iterator[None]:
        """Give one rewind or fork more memory for its transaction (put back afterwards,
        also when the operation fails); nothing by default."""
        yield

    def indexed_by(self, index: str) -> str:
        """What follows a table's name in ``FROM`` to read it through ``index`` where the
        planner would not pick it itself: nothing by default (PostgreSQL's planner does)."""
        return ""

    def unless_cast_fails(self, conn: Connection, read: Callable[[], T]) -> T | None:
        """``read()``, or ``None`` where the database could not read some stored text as JSON
        (only a database that casts in SQL can fail so; the transaction stays usable)."""
        return read()

    @staticmethod
    def chunks(rows: Sequence[Any], columns: int, limit: int = 1000) -> Iterable[Sequence[Any]]:
        """Slices of ``rows`` small enough for one multi-row statement."""
        size = max(1, min(limit, Dialect.max_params // max(1, columns)))
        for start in range(0, len(rows), size):
            yield rows[start : start + size]

    def any_of(self, numbers: Sequence[int]) -> Iterable[tuple[str, list[Any]]]:
        """A condition that a number is one of ``numbers``, in pieces small enough for one
        statement each: (SQL to write after the column, its parameters). By default
        ``IN (?, ?, ...)`` of up to 1,000 numbers."""
        for part in self.chunks(numbers, 1):
            yield f"IN ({', '.join([self.placeholder] * len(part))})", list(part)

    def insert_tuples(
        self, conn: Connection, table: sa.Table, names: Sequence[str], rows: Sequence[Any]
    ) -> int:
        """Insert ``rows`` (tuples of the columns ``names``) in a few multi-row statements
        written here, not compiled by SQLAlchemy (which compiles every bound value in Python,
        seconds per 10,000 rows); return how many statements it took. Values are plain values
        the driver adapts. By default a multi-row ``VALUES`` per chunk of up to 1,000 rows.
        """
        head = self.insert_head(conn, table, names)
        one = f"({', '.join([self.placeholder] * len(names))})"
        sent = 0
        for part in self.chunks(rows, len(names)):
            conn.exec_driver_sql(
                f"{head}VALUES {', '.join([one] * len(part))}",
                tuple([value for row in part for value in row]),
            )
            sent += 1
        return sent

    def delete_keys(
        self,
        conn: Connection,
        table: sa.Table,
        run_id: str,
        names: Sequence[str],
        keys: Sequence[Sequence[Any]],
    ) -> None:
        """Delete the rows of ``run_id`` in ``table`` whose columns ``names`` (the rest of
        its primary key) are one of ``keys``, each found by primary key whatever the
        planner knows of the table. By default one statement run for every key
        (``executemany``)."""
        table_name = conn.dialect.identifier_preparer.format_table(table)
        head = f"DELETE FROM {table_name} AS t"  # noqa: S608 (schema names)
        self.keyed(conn, head, (), table, run_id, names, keys, delete=True)

    def copy_keys(
        self,
        conn: Connection,
        table: sa.Table,
        into: sa.Table,
        tag: str,
        run_id: str,
        names: Sequence[str],
        keys: Sequence[Sequence[Any]],
    ) -> None:
        """Copy into ``into`` (whose columns are ``tag``'s, then ``table``'s) the rows of
        ``run_id`` in ``table`` that :meth:`delete_keys` would delete, found the same way."""
        prep = conn.dialect.identifier_preparer
        columns = ", ".join(f"t.{prep.quote(c.name)}" for c in table.c)
        head = (
            f"{self.insert_head(conn, into, [c.name for c in into.c])}SELECT "  # noqa: S608
            f"{self.placeholder}, {columns} FROM {prep.format_table(table)} AS t"
        )
        self.keyed(conn, head, (tag,), table, run_id, names, keys, delete=False)

    def keyed(
        self,
        conn: Connection,
        head: str,
        lead: Sequence[Any],
        table: sa.Table,
        run_id: str,
        names: Sequence[str],
        keys: Sequence[Sequence[Any]],
        *,
        delete: bool,
    ) -> None:
        """``head`` (a ``DELETE`` when ``delete``, else a ``SELECT``, over ``table`` as
        ``t``, whose parameters are ``lead``) for the rows of ``run_id`` whose ``names`` are
        one of ``keys``: by default run once for every key (``executemany``), each row found
        by primary key."""
        if not keys:
            return
        prep = conn.dialect.identifier_preparer
        where = " AND ".join(f"t.{prep.quote(name)} = {self.placeholder}" for name in names)
        conn.exec_driver_sql(
            f"{head} WHERE t.run_id = {self.placeholder} AND {where}",  # schema names only
            [(*lead, run_id, *key) for key in keys],
        )

    @staticmethod
    def insert_head(conn: Connection, table: sa.Table, names: Sequence[str]) -> str:
        """``INSERT INTO table (columns) `` with quoted identifiers (from the schema module,
        never from user input)."""
        prep = conn.dialect.identifier_preparer
        columns = ", ".join(prep.quote(table.c[name].name) for name in names)
        return f"INSERT INTO {prep.format_table(table)} ({columns}) "

    def snapshot_read(self, conn: Connection) -> None:  # noqa: B027 (optional hook)
        """Make ``conn``'s read-only transaction see one state in every table it reads
        (nothing by default: an SQLite read transaction reads one WAL snapshot)."""

    shape_sql: str
    """The catalog query of :meth:`shape_rows`, in the dialect's own catalog."""

    def shape_rows(self, conn: Connection) -> tuple[tuple[Any, ...], ...]:
        """Every column of the tables in the store's schema as the catalog describes it, in
        one query: (table, column, type, not null, place in the primary key), ordered. Two
        stores with the same rows have the same shape in all that the shape check compares
        (:func:`~._migrate.check_shape` remembers the rows of a shape it passed)."""
        return tuple(tuple(row) for row in conn.execute(sa.text(self.shape_sql)))

    def migration_lock(self, conn: Connection) -> None:  # noqa: B027 (optional hook)
        """Serialise migrators inside ``conn``'s transaction (nothing by default: the write
        transaction already holds the database's write lock)."""

    @abstractmethod
    def read_only_access(self, engine: Any) -> Any:
        """How a reader outside the store (DuckDB) reaches ``engine``'s database read-only
        (a :class:`~smithers_tt.store.backend._access.SqliteAccess` or ``PostgresAccess``)."""

    @property
    def statements(self) -> Statements:
        """The prebuilt driver statements, built once per dialect object."""
        if self._statements is None:
            self._statements = Statements(self)
        return self._statements

    def sql(self, text: str) -> str:
        """``text`` written with ``?`` placeholders, in this driver's style."""
        return text if self.placeholder == "?" else text.replace("?", self.placeholder)

    @abstractmethod
    def normalize_url(self, url: sa.URL) -> sa.URL:
        """The URL this dialect connects with (raises InvalidArgument for an unusable one)."""

    @abstractmethod
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
        """The SQLAlchemy engine, and whether it reads the database as immutable.

        ``write_option`` names the execution option that says a transaction writes.
        """

    @abstractmethod
    def owns(self, orig: BaseException) -> bool:
        """Whether ``orig`` was raised by this dialect's driver."""

    @abstractmethod
    def transient(self, error: BaseException, orig: BaseException) -> bool:
        """Whether the driver error ``orig`` (wrapped in ``error``) is worth a retry."""

    def damaged(self, error: BaseException) -> bool:
        """Whether ``error`` (of this driver) means the database file is damaged."""
        return False

    def disk_failure(self, orig: BaseException) -> str | None:
        """``"disk full"`` or ``"I/O error"`` when the driver error ``orig`` says the disk
        failed; None otherwise (the default: the server reports its own disk)."""
        return None

    def commit_steps(self, commit: Commit, raw: Any) -> list[tuple[str, tuple[int, ...]]]:
        """Make ``commit``'s token; the statements that store it (none if not sealed)."""
        return []

    # --- claims, heartbeats, garbage collection ---
    @abstractmethod
    def skip_locked(self, stmt: sa.Select) -> sa.Select:
        """``stmt`` (a read picking rows to change: a run to claim, content to collect)
        locking what it returns and passing over rows another transaction has locked, so
        concurrent claimers or collectors never pick the same row and never wait."""

    def send(
        self, conn: Connection, steps: Sequence[tuple[str, Any, bool]], *, token: bool
    ) -> list[tuple[Any, ...] | None]:
        """Run ``(statement, params, many)`` steps in one round trip (only where
        :attr:`pipelines`); return each one's first row."""
        raise NotImplementedError

    def seal(self, conn: Connection, commit: Commit) -> None:  # noqa: B027 (optional hook)
        """Send what makes the COMMIT of a write settle-able (nothing by default)."""

    def alone(self, conn: Connection) -> None:  # noqa: B027 (optional hook)
        """``conn``'s transaction, begun and nothing sent yet, will send one statement: let
        that statement be its own transaction where the BEGIN and COMMIT cost round trips of
        their own (nothing by default: SQLite's run in this process)."""

    def gate(self, engine: Any) -> Any:
        """The :class:`~smithers_tt.store.backend._gate.Gate` this process's transactions on
        ``engine``'s database hold shared, or None: nothing in the process can drop their locks
        (only an SQLite file has one)."""
        return None

    # --- run notices (what wakes a run's executor) ---
    notify_sql: str | None = None
    """The statement (one ``?``: the run id) that tells the listeners of other sessions, once
    the transaction commits, that a run changed in a way its executor must see; None: the
    database cannot (executors poll)."""

    def run_notices(self, engine: Any) -> Any:
        """What wakes this process's executors when :attr:`notify_sql` was sent for their run
        (a :class:`~smithers_tt.store.backend._notify.RunNotices`), or None: they poll."""
        return None

    @abstractmethod
    def settle(self, engine: Any, commit: Commit, error: exc.DBAPIError) -> bool:
        """Whether a write whose COMMIT raised ``error`` committed after all.

        False when it certainly did not; raises :class:`OutcomeUnknown` when that cannot be
        found out.
        """
