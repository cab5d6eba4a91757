"""How a reader outside the store (DuckDB) reaches its database read-only: plain records that
each dialect fills in (:meth:`Dialect.read_only_access`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class SqliteAccess:
    """The store is this SQLite file (resolved; it may not exist)."""

    path: Path


@dataclass(frozen=True)
class PostgresAccess:
    """How to reach the store's PostgreSQL database read-only.

    Attributes:
        schema: the schema holding the store's tables, as the store's search_path finds it.
        credentials: the libpq parameters among ``host``, ``port``, ``dbname``, ``user`` and
            ``password`` that the URL sets (keep them out of anything shown to people).
        conninfo: a libpq conninfo of the URL's other parameters, with every session
            read-only on the server (``default_transaction_read_only``).
    """

    schema: str
    credentials: dict[str, str]
    conninfo: str
