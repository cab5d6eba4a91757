"""Lineage's door into the store: what ``smithers_tt.lineage`` uses, and nothing else.

Lineage mirrors the store's tables into DuckDB: it reads them described (``describe_tables``:
columns and type families), streamed (``read_tables``) or attached read-only
(``read_only_access``), holding an SQLite store's gate (``gate_of``) alone while DuckDB's own
SQLite reads it; a fork by reference's inherited rows come from time travel, which has the store
compute them as its materialisation writes them. Lineage imports ``smithers_tt.store`` and
this door only (import-linter, ``pyproject.toml``; see ``docs/store.md``, "The doors").
"""

from smithers_tt.store.backend import Gate, PostgresAccess, SqliteAccess, gate_of
from smithers_tt.store.reads import (
    ColumnInfo,
    TableInfo,
    describe_tables,
    read_only_access,
    read_tables,
)

__all__ = [
    "ColumnInfo",
    "Gate",
    "PostgresAccess",
    "SqliteAccess",
    "TableInfo",
    "describe_tables",
    "gate_of",
    "read_only_access",
    "read_tables",
]
