"""Lineage's door into the store: what ``smithers_tt.lineage`` uses, and nothing else.

Lineage mirrors the store's tables into DuckDB: it reads them described (``describe_tables``:
columns and type families), streamed (``read_tables``) or attached read-only
(``read_only_access``), and restates a fork by reference's inherited rows with the store's own
frame mapping (``checkpoint_frame``, ``frame_row``). Lineage imports ``smithers_tt.store`` and
this door only (import-linter, ``pyproject.toml``; see ``docs/store.md``, "The doors").
"""

from smithers_tt.store._frames import checkpoint_frame, frame_row
from smithers_tt.store.backend import PostgresAccess, SqliteAccess
from smithers_tt.store.reads import (
    ColumnInfo,
    TableInfo,
    content_sizes,
    describe_tables,
    read_only_access,
    read_tables,
)

__all__ = [
    "ColumnInfo",
    "PostgresAccess",
    "SqliteAccess",
    "TableInfo",
    "checkpoint_frame",
    "content_sizes",
    "describe_tables",
    "frame_row",
    "read_only_access",
    "read_tables",
]
