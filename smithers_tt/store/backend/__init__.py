"""The store's backend: the database, and nothing of what is written in it.

Lives here: the tables (``_schema``, defined once), the dialect base class and one subclass per
database (``_sqlite``, ``_postgres``: every difference between them is a method there), the
engine (connections, transactions retried on transient failures, commit tokens for a lost
COMMIT reply), the driver that runs prebuilt statements on the DBAPI cursor, the migrations,
the LangGraph saver's statements, and how a reader outside the store reaches the database
read-only (``_access``).

Contract: the backend imports nothing else of the store but its records
(:mod:`smithers_tt.store._records`); the ledger, the reads and the store's handles import it
through this front door; nothing outside ``smithers_tt.store`` imports it (the store's doors
re-export the names others need, such as ``Engine`` and ``migrate``). Held by
import-linter (``pyproject.toml``).
"""

from smithers_tt.store.backend import _schema as schema
from smithers_tt.store.backend._access import PostgresAccess, SqliteAccess
from smithers_tt.store.backend._dialect import Dialect, dialect_of, disk_failure
from smithers_tt.store.backend._driver import Driver, driver
from smithers_tt.store.backend._engine import Engine, RetryPolicy, _short, display_url, is_transient
from smithers_tt.store.backend._gate import Gate, gate_of
from smithers_tt.store.backend._langgraph_sql import (
    AGENT,
    CONTENTS_WHERE,
    FRAME_DOCS,
    LANGGRAPH_DOC_NODE,
    LANGGRAPH_VALUE_NODE,
    LANGGRAPH_WORKFLOW,
    NEWEST_ORDER,
    PAGE_ORDER,
    SELECT_WRITES,
    LangGraphIndexQuery,
    LangGraphSql,
    index_select,
    langgraph_run_id,
)
from smithers_tt.store.backend._migrate import (
    StoreState,
    check_shape,
    check_store_shape,
    migrate,
    migration_names,
    row_counts,
    store_state,
)
from smithers_tt.store.backend._schema import RUN_LEVEL_KINDS
from smithers_tt.store.backend._statements import RUN_STATE_COLUMNS

__all__ = [
    "AGENT",
    "CONTENTS_WHERE",
    "FRAME_DOCS",
    "LANGGRAPH_DOC_NODE",
    "LANGGRAPH_VALUE_NODE",
    "LANGGRAPH_WORKFLOW",
    "NEWEST_ORDER",
    "PAGE_ORDER",
    "RUN_LEVEL_KINDS",
    "RUN_STATE_COLUMNS",
    "SELECT_WRITES",
    "Dialect",
    "Driver",
    "Engine",
    "Gate",
    "LangGraphIndexQuery",
    "LangGraphSql",
    "PostgresAccess",
    "RetryPolicy",
    "SqliteAccess",
    "StoreState",
    "_short",
    "check_shape",
    "check_store_shape",
    "dialect_of",
    "disk_failure",
    "display_url",
    "driver",
    "gate_of",
    "index_select",
    "is_transient",
    "langgraph_run_id",
    "migrate",
    "migration_names",
    "row_counts",
    "schema",
    "store_state",
]
