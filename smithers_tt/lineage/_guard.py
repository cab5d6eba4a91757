"""What :meth:`Lineage.sql` lets through: read-only questions, and files only where allowed.

Three walls; each closes the escapes it names, and every escape meets at least one:

* **DuckDB's own sandbox** (:func:`lock_down`), set after the lineage is built: external
  access off (no ``read_csv`` / ``COPY ... TO`` / ``glob`` of arbitrary paths, no new
  ``ATTACH`` of PostgreSQL, no extension loading, no pandas replacement scans), only the
  lineage's own scratch directories and the ones a caller opts into readable and writable
  (``allowed_directories``), and the configuration locked so no statement turns it back on.
* **Statement kinds** (:func:`check_query`): only queries (``SELECT`` and what DuckDB reads
  as one: ``FROM``, ``WITH``, ``DESCRIBE``, ``SHOW``, ``SUMMARIZE``, ``VALUES``), ``EXPLAIN``
  and, when the caller allowed directories, ``COPY`` (which DuckDB confines to them and to
  the files attached at lock-down: the lineage's own snapshot, never the store). No
  ``ATTACH`` (the SQLite scanner opens any file for writing even with external access off),
  ``SET``, ``CREATE``, ``INSERT`` / ``UPDATE`` / ``DELETE``, ``PREPARE`` or transactions.
* **Scanner functions**: the sqlite / postgres extensions' own functions (``sqlite_query``,
  ``sqlite_attach``, ``sqlite_scan`` of another file, ``postgres_execute``,
  ``postgres_query`` ...) send SQL or open files past DuckDB's checks, ``query()`` /
  ``query_table()`` would run SQL hidden in a string, and ``enable_logging()`` and its kin
  change settings past the lock: none of them may be called from :meth:`Lineage.sql`. The
  lineage's own views use the scanners; they were defined before.

The PostgreSQL sessions are read-only on the server too, and the credentials' secret is
dropped once the store is attached, so nothing in DuckDB can open a second connection with it.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from smithers_tt.errors import LineageError
from smithers_tt.lineage._connect import literal

_ALLOWED_KINDS = frozenset({"SELECT", "EXPLAIN", "COPY"})
"""Statement kinds sql() runs; an EXPLAIN counts only when what it explains is a SELECT."""
_DENIED_PREFIXES = (
    "sqlite_",
    "postgres_",
    # settings in disguise: enable_logging(storage='file', ...) leaves every later query and
    # the process's exit failing; profiling, verification, checkpoints on shutdown ...
    "enable_",
    "disable_",
    "verify_",
)
_DENIED_NAMES = frozenset(
    {
        # run SQL held in a string, past the name check below
        "query",
        "query_table",
        "json_execute_serialized_sql",
        # copy between attached catalogs, read a database export
        "copy_database",
        "import_database",
        # scan Python objects by raw pointer
        "arrow_scan",
        "arrow_scan_dumb",
        "pandas_scan",
        "python_map_function",
        "pg_clear_cache",
        "truncate_duckdb_logs",
        "checkpoint",
        "force_checkpoint",
    }
)


def directory_prefix(path: str | Path) -> Path:
    """An allowed directory as DuckDB matches it: absolute, resolved, existing.

    Raises:
        LineageError: ``path`` is not an existing directory.
    """
    resolved = Path(path).expanduser().resolve()
    if not resolved.is_dir():
        raise LineageError(
            f"allowed_directories: {str(path)!r} is not an existing directory; create it first"
        )
    return resolved


def lock_down(con: Any, directories: Iterable[Path], temp_directory: Path) -> None:
    """Turn DuckDB's external access off, allowing only ``directories``; lock the settings.

    Call it last, once the lineage has attached, loaded and built everything it needs.
    ``temp_directory`` (where DuckDB spills large sorts and joins) must be one of them.
    """
    # DuckDB matches allowed directories as path prefixes: the trailing separator keeps
    # ``/data/out`` from also allowing ``/data/outside``.
    prefixes = ", ".join(literal(f"{Path(d)}/") for d in directories)
    con.execute(f"SET temp_directory = {literal(str(temp_directory))}")
    # DuckDB also keeps every file attached now (the snapshot; never the SQLite store, which
    # is read through sqlite_scan) in allowed_paths: COPY is refused unless directories were
    # allowed on purpose, so that only those are written.
    con.execute(f"SET allowed_directories = [{prefixes}]")
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")


def called_names(query: str) -> list[str]:
    """Identifiers of ``query`` that are called (followed by ``(``), lower-cased, unquoted."""
    import duckdb

    tokens = duckdb.tokenize(query)
    bounds = [start for start, _ in tokens] + [len(query)]
    names: list[str] = []
    for index, (start, kind) in enumerate(tokens):
        if kind != duckdb.token_type.identifier:
            continue
        after = index + 1
        while after < len(tokens) and tokens[after][1] == duckdb.token_type.comment:
            after += 1
        if after == len(tokens) or not query[tokens[after][0] :].startswith("("):
            continue
        text = query[start : bounds[index + 1]].strip()
        if len(text) >= 2 and text[0] == text[-1] == '"':
            text = text[1:-1].replace('""', '"')
        names.append(text.lower())
    return names


def explained(statement: str) -> str:
    """The statement an ``EXPLAIN [ANALYZE] [(options)]`` statement explains (or runs)."""
    import duckdb

    tokens = [
        start for start, kind in duckdb.tokenize(statement) if kind != duckdb.token_type.comment
    ]
    index = 1  # past EXPLAIN
    depth = 0
    while index < len(tokens):
        word = statement[tokens[index] :].split(None, 1)[0].upper() if depth == 0 else ""
        if statement[tokens[index]] == "(":
            depth += 1
        elif statement[tokens[index]] == ")" and depth:
            depth -= 1
        elif depth == 0 and word not in ("ANALYZE", "ANALYSE"):
            return statement[tokens[index] :]
        index += 1
    return ""


def check_query(con: Any, query: str, *, files: bool) -> None:
    """Refuse ``query`` unless it only reads (see the module docstring for what that means);
    ``COPY`` only when ``files`` (the caller allowed directories).

    Raises:
        LineageError: a statement is of a refused kind or calls a refused function; nothing
            was run.
    """
    statements = con.extract_statements(query)
    if not statements:
        raise LineageError("lineage.sql() got no statement: pass a query such as 'FROM runs'")
    for statement in statements:
        kind = statement.type.name.replace("???", "this kind of")
        if kind == "EXPLAIN":
            # EXPLAIN ANALYZE runs what it explains: that must be a query too.
            inner = con.extract_statements(explained(statement.query))
            kinds = {s.type.name for s in inner} or {"EXPLAIN"}
            kind = "EXPLAIN" if kinds == {"SELECT"} else f"EXPLAIN {'/'.join(sorted(kinds))}"
        if kind == "COPY" and not files:
            raise LineageError(
                "lineage.sql() writes files only in directories allowed when the lineage was "
                "opened: db.lineage(allowed_directories=[...]); nothing was run (or use "
                "lineage.export_parquet(directory))"
            )
        if kind not in _ALLOWED_KINDS:
            raise LineageError(
                "lineage.sql() runs read-only queries (SELECT, DESCRIBE, SUMMARIZE, EXPLAIN, "
                f"COPY ... TO an allowed directory); {kind} statements are refused and nothing "
                "was run. The store cannot be changed through a lineage: use the Database API"
            )
    for name in called_names(query):
        if name.startswith(_DENIED_PREFIXES) or name in _DENIED_NAMES:
            raise LineageError(
                f"lineage.sql() does not call {name}(): it reaches the store, files or memory "
                "past the lineage's read-only views; query the views (runs, checkpoints ...) "
                "or raw.* instead. Nothing was run"
            )
