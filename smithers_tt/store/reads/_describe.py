"""The store described for readers that look at it from outside: analytics and the debugger.

Lineage analytics reads the store's tables with DuckDB, not through SQLAlchemy, so it needs to
know what the tables are and how to reach the database read-only, without importing the
schema module or SQLAlchemy. This module answers both in plain data:

* :func:`describe_tables`: each table's name and columns, each column with a portable
  :data:`TypeFamily` (``boolean``, ``bigint``, ``integer``, ``double``, ``text``,
  ``bytes``) that any reader maps to its own types;
* :func:`read_only_access`: the SQLite file (:class:`SqliteAccess`), or the PostgreSQL
  connection parameters, the schema holding the tables and a conninfo whose sessions are
  read-only on the server (:class:`PostgresAccess`);
* :func:`read_tables`: one consistent read-only transaction streaming whole tables in
  batches (the lineage's Arrow fallback, when DuckDB's scanners cannot load);
* :func:`content_sizes`: the stored size of contents by hash (the debugger's inspector).

Nothing here writes, and nothing creates or migrates a database.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy import BigInteger, Boolean, Float, Integer, LargeBinary, String, Text
from sqlalchemy.engine import Connection

from smithers_tt.store.backend import Engine, PostgresAccess, SqliteAccess
from smithers_tt.store.backend import schema as S
from smithers_tt.store.reads._travel import stored_sizes

TypeFamily = Literal["boolean", "bigint", "integer", "double", "text", "bytes"]
"""The portable type of a column: what a reader needs to choose its own type."""


@dataclass(frozen=True)
class ColumnInfo:
    """One column of a store table: its name and portable type family."""

    name: str
    family: TypeFamily


@dataclass(frozen=True)
class TableInfo:
    """One store table: its name and its columns, in the schema's order."""

    name: str
    columns: tuple[ColumnInfo, ...]


def _family(column: sa.Column) -> TypeFamily:
    kind = column.type
    # Boolean before the integers, BigInteger before Integer: subclasses first.
    if isinstance(kind, Boolean):
        return "boolean"
    if isinstance(kind, BigInteger):
        return "bigint"
    if isinstance(kind, Integer):
        return "integer"
    if isinstance(kind, Float):
        return "double"
    if isinstance(kind, LargeBinary):
        return "bytes"
    if isinstance(kind, String | Text):
        return "text"
    raise TypeError(f"no type family for {column.table.name}.{column.name} ({kind!r})")


_READABLE = {**S.metadata.tables, **S.views.tables}
"""What a reader outside the store may read, by name: the tables and the views."""


def describe_tables(names: Sequence[str]) -> tuple[TableInfo, ...]:
    """The tables called ``names``, in that order, with their columns' type families.

    Raises:
        KeyError: no store table has one of the names.
    """
    tables = _READABLE
    unknown = [name for name in names if name not in tables]
    if unknown:
        raise KeyError(f"no store table {unknown}; the store has {sorted(tables)}")
    return tuple(
        TableInfo(name, tuple(ColumnInfo(c.name, _family(c)) for c in tables[name].columns))
        for name in names
    )


# --- reaching the database read-only ---------------------------------------------------------


def read_only_access(engine: Engine) -> SqliteAccess | PostgresAccess:
    """How a reader outside the store (DuckDB) reaches this store's database read-only.

    Raises:
        StoreNotFound: a PostgreSQL database with no smithers_tt tables on its search_path.
    """
    return engine.backend.read_only_access(engine)


# --- reading ---------------------------------------------------------------------------------


class TableReader:
    """Streams tables inside the one read-only transaction of :func:`read_tables`."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    def batches(
        self, table: str, columns: Sequence[str], fetch_rows: int
    ) -> Iterator[Sequence[Sequence[Any]]]:
        """The rows of ``columns`` of ``table`` (tuple-like, values in ``columns`` order),
        ``fetch_rows`` at a time (server-side on PostgreSQL), in no particular order.

        Raises:
            KeyError: no such table or column.
        """
        t = _READABLE[table]
        stmt = sa.select(*(t.c[name] for name in columns)).execution_options(yield_per=fetch_rows)
        yield from self._conn.execute(stmt).partitions()


@contextmanager
def read_tables(engine: Engine) -> Iterator[TableReader]:
    """One read-only transaction in which every table read sees the same state (REPEATABLE
    READ on PostgreSQL, one WAL snapshot on SQLite)."""
    with engine.connect(write=False) as conn:
        engine.backend.snapshot_read(conn)
        yield TableReader(conn)


def content_sizes(engine: Engine, hashes: Iterable[str]) -> dict[str, int]:
    """The stored size in bytes of each content among ``hashes`` (absent ones are left out),
    read in one transaction, a bounded number of hashes per query."""
    wanted = sorted(set(hashes))
    if not wanted:
        return {}
    return engine.transaction(lambda conn: stored_sizes(conn, wanted), write=False)
