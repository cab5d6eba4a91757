"""Running the store's prebuilt driver statements inside a SQLAlchemy transaction."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from typing import Any

from sqlalchemy.engine import Connection

from smithers_tt.store.backend._dialect import (
    COMMIT_KEY,
    defer,
    dialect_of,
    known_rows,
    learn,
    wrap_driver_error,
)


class Driver:
    """Runs the prebuilt statements on the DBAPI cursor of a SQLAlchemy connection, inside
    the transaction that connection has begun (SQLAlchemy still begins, commits, rolls back
    and makes savepoints).

    Going around ``Connection.exec_driver_sql`` saves its result-object set-up and event
    dispatch (about 30 us a statement, half of what is left of a publish on SQLite). Driver
    errors are translated the way SQLAlchemy translates them: wrapped in the matching
    :class:`sqlalchemy.exc.DBAPIError`, with ``connection_invalidated`` set (and the
    connection invalidated) when the dialect says the connection is gone, so
    :func:`~smithers_tt.store.backend._engine.is_transient` and the retries see exactly what
    they see for any other statement.
    """

    __slots__ = ("_conn", "_cursor", "_dialect", "_error", "pipelines", "sql")

    def __init__(self, conn: Connection) -> None:
        dialect = self._dialect = dialect_of(conn)
        self.sql = dialect.statements
        self._conn = conn
        self._cursor = conn.connection.cursor()
        self._error: type[Exception] = conn.dialect.loaded_dbapi.Error
        self.pipelines = dialect.pipelines
        """Whether :meth:`together` sends its statements in one round trip."""

    def close(self) -> None:
        """Close the cursor (so no statement of it stays open until the commit)."""
        with suppress(Exception):  # never hide the error that ended the transaction
            self._cursor.close()

    def one(self, statement: str, params: tuple[Any, ...]) -> tuple[Any, ...] | None:
        """Execute and return the first row (``None`` if there is none)."""
        if self.pipelines:
            self._flush()
        try:
            self._cursor.execute(statement, params)
            return self._cursor.fetchone()
        except self._error as error:
            raise self._wrap(error, statement, params) from error

    def all(self, statement: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        """Execute and return every row."""
        if self.pipelines:
            self._flush()
        try:
            self._cursor.execute(statement, params)
            return self._cursor.fetchall()
        except self._error as error:
            raise self._wrap(error, statement, params) from error

    def count(self, statement: str, params: tuple[Any, ...]) -> int:
        """Execute and return the number of rows it changed."""
        if self.pipelines:
            self._flush()
        try:
            self._cursor.execute(statement, params)
            return self._cursor.rowcount
        except self._error as error:
            raise self._wrap(error, statement, params) from error

    def many(self, statement: str, rows: list[tuple[Any, ...]]) -> None:
        """Execute once per row of parameters (one call: the driver batches them)."""
        if self.pipelines:
            self._flush()
        try:
            if len(rows) == 1:
                self._cursor.execute(statement, rows[0])
            else:
                self._cursor.executemany(statement, rows)
        except self._error as error:
            raise self._wrap(error, statement, rows) from error

    def together(self, steps: list[tuple[str, Any, bool]]) -> list[tuple[Any, ...] | None]:
        """Execute ``(statement, params, many)`` steps in order; return each one's first row.

        On PostgreSQL they go in one round trip (psycopg's pipeline mode: the server runs them
        in order, and a failure aborts the rest and surfaces here); SQLite runs them one by
        one. Use it only for statements that do not depend on each other's results.
        """
        if not self.pipelines:
            out = []
            for statement, params, many in steps:
                if many:
                    self.many(statement, params)
                    out.append(None)
                else:
                    out.append(self.one(statement, params))
            return out
        return self._dialect.send(self._conn, steps, token=True)

    def later(self, steps: list[tuple[str, Any, bool]]) -> None:
        """Execute ``(statement, params, many)`` steps that return nothing, at the latest
        with the transaction's COMMIT: on PostgreSQL they are held back and go with whatever
        the transaction sends next (its COMMIT, when nothing else follows: a write then costs
        no round trip of its own); elsewhere, or inside a savepoint, now."""
        if not (self.pipelines and defer(self._conn, steps)):
            self.together(steps)

    def known(self) -> Mapping[Any, Any] | None:
        """What earlier commits taught the engine of rows, for a write that sends guarded
        guesses with its COMMIT instead of asking; None where it cannot."""
        return known_rows(self._conn) if self.pipelines else None

    def learn(self, key: Any, value: Any) -> None:
        """Record what ``key`` holds (None: forget it) once this transaction commits; nothing
        where no write guesses (see :meth:`known`)."""
        if self.pipelines:
            learn(self._conn, key, value)

    def _flush(self) -> None:
        """Send the steps held back by :meth:`later` before a statement that may read them."""
        commit = self._conn.info.get(COMMIT_KEY)
        if commit is not None and commit.deferred:
            self._dialect.send(self._conn, [], token=True)

    def _wrap(self, error: Exception, statement: str, params: Any) -> BaseException:
        return wrap_driver_error(self._conn, error, statement, params, self._cursor)


@contextmanager
def driver(conn: Connection) -> Iterator[Driver]:
    """The prebuilt statements on ``conn``, inside the transaction it has begun."""
    db = Driver(conn)
    try:
        yield db
    finally:
        db.close()
