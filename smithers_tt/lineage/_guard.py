"""What :meth:`Lineage.sql` lets through: read-only questions, and files only where allowed.

Three walls; each closes the escapes it names, and every escape meets at least one:

* **DuckDB's own sandbox** (:func:`lock_down`), set after the lineage is built: external
  access off (no ``read_csv`` / ``COPY ... TO`` / ``glob`` of arbitrary paths, no new
  ``ATTACH`` of PostgreSQL, no extension loading, no pandas replacement scans), only the
  lineage's own scratch directories and the ones a caller opts into readable and writable
  (``allowed_directories``), and the configuration locked so no statement turns it back on.
* **Statement kinds** (:func:`check_query`): only queries (``SELECT`` and what DuckDB reads
  as one: ``FROM``, ``WITH``, ``DESCRIBE``, ``SHOW``, ``SUMMARIZE``, ``VALUES``), ``EXPLAIN``
  and, when the caller allowed directories, ``COPY (query) TO`` (which DuckDB confines to
  them and to the files attached at lock-down: the lineage's own, unlinked once attached,
  never the store); never ``COPY <table> FROM``, which would add rows the views answer with.
  No ``ATTACH`` (the SQLite scanner opens any file for writing even with external access
  off), ``DETACH``, ``SET`` / ``RESET`` / ``USE``, ``PRAGMA``, ``CREATE``, ``INSERT`` /
  ``UPDATE`` / ``DELETE``, ``PREPARE`` or transactions. The statements are those DuckDB
  expands the text to (a ``PRAGMA`` becomes its SQL), each checked, and the checked ones are
  the ones run. ``IMPORT DATABASE`` is refused before any expansion: it runs the SQL of files
  (its ``schema.sql`` could call ``postgres_execute`` past the name check).
* **Table functions**: only those in :data:`SAFE_TABLE_FUNCTIONS` (series, file readers that
  DuckDB confines to the allowed directories, DuckDB's own catalog) may be called. The
  scanners' ``sqlite_query``, ``sqlite_attach``, ``sqlite_scan``, ``postgres_execute``,
  ``postgres_query`` ... send SQL or open files past DuckDB's checks, ``query()`` runs SQL
  hidden in a string, ``enable_logging()`` and its kin change settings past the lock,
  ``pandas_scan`` reads a raw pointer, ``checkpoint()`` writes attached databases: all are
  refused by name (keywords included: the tokenizer calls ``checkpoint`` one), and so is any
  table function a later DuckDB or extension adds. The lineage's own views use the scanners;
  they were defined before.

DuckDB follows symbolic links: a link planted in an allowed directory reaches whatever it
points at. Allowed directories must be ones nobody else can write to (documented).

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
SAFE_TABLE_FUNCTIONS = frozenset(
    {
        # rows made from arguments
        "range",
        "generate_series",
        "unnest",
        "repeat",
        "repeat_row",
        "json_each",
        "json_tree",
        # files (DuckDB confines them to the allowed directories)
        "read_csv",
        "read_csv_auto",
        "sniff_csv",
        "read_parquet",
        "parquet_scan",
        "parquet_metadata",
        "parquet_schema",
        "parquet_file_metadata",
        "parquet_kv_metadata",
        "read_json",
        "read_json_auto",
        "read_json_objects",
        "read_json_objects_auto",
        "read_ndjson",
        "read_ndjson_auto",
        "read_ndjson_objects",
        "read_text",
        "read_blob",
        "glob",
        # what DuckDB knows about itself
        "duckdb_columns",
        "duckdb_constraints",
        "duckdb_databases",
        "duckdb_dependencies",
        "duckdb_extensions",
        "duckdb_functions",
        "duckdb_indexes",
        "duckdb_keywords",
        "duckdb_memory",
        "duckdb_schemas",
        "duckdb_secrets",
        "duckdb_sequences",
        "duckdb_settings",
        "duckdb_tables",
        "duckdb_temporary_files",
        "duckdb_types",
        "duckdb_variables",
        "duckdb_views",
        "pragma_table_info",
        "table_info",
        "pragma_version",
        "version",
        "pragma_platform",
        "platform",
        "pragma_database_size",
        "database_size",
        "pragma_storage_info",
        "storage_info",
        "show",
        "show_tables",
        "show_tables_expanded",
        "show_databases",
        "summary",
        "pg_timezone_names",
        "icu_calendar_names",
        "test_all_types",
    }
)
"""Table functions :meth:`Lineage.sql` may call; every other one is refused by name (the
scanners' ``sqlite_query`` / ``postgres_execute``, ``query()``, ``enable_logging()``,
``pandas_scan`` of a raw pointer, and whatever a future extension adds)."""


def refused_functions(con: Any) -> frozenset[str]:
    """Names of the table and pragma functions ``con`` knows that are not safe to call, taken
    once the scanners are loaded (so their functions are included)."""
    rows = con.execute(
        "SELECT DISTINCT lower(function_name) FROM duckdb_functions() "
        "WHERE function_type IN ('table', 'table_macro', 'pragma')"
    ).fetchall()
    return frozenset(name for (name,) in rows) - SAFE_TABLE_FUNCTIONS


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


def _tokens(query: str) -> list[tuple[str, Any]]:
    """``(text, kind)`` of each token of ``query`` but comments, in order."""
    import duckdb

    tokens = duckdb.tokenize(query)
    bounds = [start for start, _ in tokens] + [len(query)]
    return [
        (query[start : bounds[index + 1]].strip(), kind)
        for index, (start, kind) in enumerate(tokens)
        if kind != duckdb.token_type.comment
    ]


def called_names(query: str) -> list[str]:
    """Names of ``query`` that are called (followed by ``(``), lower-cased, unquoted.

    Keywords count as names too: DuckDB's tokenizer calls ``checkpoint`` or ``force`` a
    keyword, yet ``checkpoint()`` is a table function. ``IMPORT DATABASE`` counts as a call of
    ``import_database`` (the pragma it is)."""
    import duckdb

    names = {duckdb.token_type.identifier, duckdb.token_type.keyword}
    tokens = _tokens(query)
    found: list[str] = []
    for index, (text, kind) in enumerate(tokens):
        after = tokens[index + 1][0] if index + 1 < len(tokens) else ""
        if kind == duckdb.token_type.keyword and (text.upper(), after.upper()) == (
            "IMPORT",
            "DATABASE",
        ):
            found.append("import_database")
        if kind not in names or not after.startswith("("):
            continue
        if len(text) >= 2 and text[0] == text[-1] == '"':
            text = text[1:-1].replace('""', '"')
        found.append(text.lower())
    return found


def copies_a_query(statement: str) -> bool:
    """Whether a ``COPY`` statement copies a query out (``COPY (SELECT ...) TO ...``), the
    only form that cannot write a table (``COPY <table> FROM <file>`` appends to it)."""
    tokens = _tokens(statement)
    return len(tokens) > 1 and tokens[1][0] == "("


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


def check_query(con: Any, query: str, *, files: bool, refused: frozenset[str]) -> list[Any]:
    """Refuse ``query`` unless it only reads (see the module docstring for what that means);
    ``COPY (query) TO`` only when ``files`` (the caller allowed directories); no call of a
    function named in ``refused`` (see :func:`refused_functions`), in the text or in what
    DuckDB expands it to (a ``PRAGMA`` becomes the SQL it stands for).

    Returns:
        The checked statements, to be run as they are: running the text again would expand
        it again, from files that may have changed since.

    Raises:
        LineageError: a statement is of a refused kind or calls a refused function; nothing
            was run.
    """
    _check_names(query, refused)  # before DuckDB expands the text (IMPORT reads files)
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
        if kind == "COPY" and not copies_a_query(statement.query):
            raise LineageError(
                "lineage.sql() copies only a query out to a file: COPY (SELECT ...) TO "
                "'<file in an allowed directory>'. COPY <table> FROM would add rows to what "
                "the lineage answers, so COPY <table> FROM / TO is refused; nothing was run"
            )
        if kind not in _ALLOWED_KINDS:
            raise LineageError(
                "lineage.sql() runs read-only queries (SELECT, DESCRIBE, SUMMARIZE, EXPLAIN, "
                f"COPY (SELECT ...) TO an allowed directory); {kind} statements are refused "
                "and nothing was run. The store and the lineage's views cannot be changed "
                "through a lineage: use the Database API"
            )
        _check_names(statement.query, refused)
    return statements


def _check_names(query: str, refused: frozenset[str]) -> None:
    for name in called_names(query):
        if name == "import_database":
            raise LineageError(
                "lineage.sql() does not run IMPORT DATABASE: it runs the SQL of files "
                "(schema.sql, load.sql) and loads tables the lineage would then answer from; "
                "read your files with read_csv / read_parquet in a query instead. Nothing was run"
            )
        if name in refused or name.startswith(("sqlite_", "postgres_")):
            raise LineageError(
                f"lineage.sql() does not call {name}(): it reaches or changes the store, files, "
                "settings or databases past the lineage's read-only views; query the views "
                "(runs, checkpoints ...) or raw.* instead. Nothing was run"
            )
