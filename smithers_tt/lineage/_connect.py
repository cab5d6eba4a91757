"""Opening DuckDB over the store: offline extensions, read-only attachment, and the fallback.

Two readers fill the ``raw`` schema the views read (see :mod:`smithers_tt.lineage._views`):

* **scanner** (the primary path): DuckDB's own ``sqlite`` / ``postgres`` extension reads the
  store: ``sqlite_scan`` of the file (opened read-only), or the PostgreSQL store attached
  read-only as the catalog ``store``. The extension binaries come from the
  ``duckdb-ext-sqlite`` / ``duckdb-ext-postgres`` packages (the ``lineage`` extra pins them to
  the pinned ``duckdb``) and are loaded from their installed file with ``LOAD '<path>'``.
  DuckDB's autoinstall and autoload are off and the configuration is locked afterwards, so a
  missing extension fails loudly and nothing is ever downloaded at run time.
* **arrow** (the documented fallback, when no matching extension binary is installed): the
  tables are streamed through the store (:func:`smithers_tt.store.for_lineage.read_tables`) in one
  read-only transaction, in bounded batches,
  as Arrow record batches into a temporary DuckDB file that is then attached read-only. It is a
  snapshot taken at open time, slower to open, and reads every content's bytes once.

With ``snapshot=True`` the scanner reader copies the tables (not the content bytes) into such a
read-only DuckDB file too, so that many questions run at in-memory speed on one consistent copy.
Every snapshot also stores the views marked ``materialize`` (``checkpoints``: refs joined with
their content sizes; ``dedup`` and ``run_dedup``: group-bys of those over a million rows) as
tables, so the costliest join and aggregates are done once, at open.

Opening binds no store table (:func:`create_raw_views`): every view reads its rows through a
table macro that reads nothing until :func:`bind_relations` fills it, after the views exist,
so that a query binds only the store tables it reads. A snapshot opened from the cache
(:mod:`smithers_tt.lineage._cache`) does not even load the scanner: the content bytes, the
one relation it reads from the store, are bound when a question first reads them.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import os
import shutil
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from smithers_tt._extras import require_extra
from smithers_tt.errors import LineageError, LineageUnavailable, StoreNotFound
from smithers_tt.lineage._views import (
    CONTENTS_TABLE,
    DATA_TABLE,
    INHERITED,
    MIRRORED,
    VIEWS,
    arrow_type,
    raw_columns,
)
from smithers_tt.store import Engine, Progress
from smithers_tt.store.for_lineage import (
    PostgresAccess,
    SqliteAccess,
    read_only_access,
    read_tables,
)

EXTENSIONS_ENV = "SMITHERS_TT_DUCKDB_EXTENSIONS"
"""A directory holding ``<name>.duckdb_extension`` files (flat, or in DuckDB's
``v<version>/<platform>/`` layout) to load before the pip-installed ones."""

_PACKAGES = {"sqlite_scanner": "duckdb-ext-sqlite", "postgres_scanner": "duckdb-ext-postgres"}
_ARROW_BATCH_BYTES = 64 * 1024 * 1024
_DATA_FETCH_ROWS = 64


class LineageFallbackWarning(RuntimeWarning):
    """The scanner extension could not be loaded; the lineage uses the Arrow fallback."""


def import_duckdb() -> Any:
    """The ``duckdb`` module, or :class:`LineageUnavailable` saying what to install."""
    # results are pandas DataFrames
    require_extra("duckdb", "pandas", needed_for="lineage analytics", error=LineageUnavailable)
    import duckdb

    return duckdb


def new_connection(threads: int | None = None) -> Any:
    """An in-memory DuckDB connection that never installs or autoloads an extension."""
    duckdb = import_duckdb()
    config: dict[str, Any] = {
        "autoinstall_known_extensions": False,
        "autoload_known_extensions": False,
        "allow_community_extensions": False,
    }
    if threads is not None:
        config["threads"] = threads
    return duckdb.connect(":memory:", config=config)


def literal(text: str) -> str:
    """``text`` as a SQL string literal (for statements that take no parameters)."""
    return "'" + text.replace("'", "''") + "'"


def ident(name: str) -> str:
    """``name`` as a quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


# --- extensions ------------------------------------------------------------------------------


def extension_candidates(name: str, version: str, platform: str) -> list[Path]:
    """Files that may hold extension ``name`` built for this DuckDB, most specific first."""
    found: list[Path] = []
    nested = Path(f"v{version}") / platform / f"{name}.duckdb_extension"
    override = os.environ.get(EXTENSIONS_ENV)
    if override:
        found += [Path(override) / nested, Path(override) / f"{name}.duckdb_extension"]
    try:
        dist = importlib.metadata.distribution(_PACKAGES[name])
        files = dist.files or []
        found += [
            Path(str(dist.locate_file(f)))
            for f in files
            if f.name == nested.name and f"v{version}" in f.parts and platform in f.parts
        ]
    except importlib.metadata.PackageNotFoundError:
        pass
    spec = importlib.util.find_spec("duckdb_ext")
    for root in (spec.submodule_search_locations or []) if spec else []:
        found.append(Path(root) / "extensions" / nested)
    unique: list[Path] = []
    for path in found:
        if path not in unique:
            unique.append(path)
    return unique


def has_extension(con: Any, name: str) -> bool:
    """Whether a file of extension ``name`` built for this DuckDB is installed (not loaded:
    :func:`load_extension` may still refuse it)."""
    import duckdb

    platform = con.execute("PRAGMA platform").fetchone()[0]
    return any(p.is_file() for p in extension_candidates(name, duckdb.__version__, platform))


def load_extension(con: Any, name: str) -> str:
    """Load scanner extension ``name`` from a local file; return where it came from.

    Raises:
        LineageUnavailable: no installed file loads into this DuckDB.
    """
    import duckdb

    version = duckdb.__version__
    platform = con.execute("PRAGMA platform").fetchone()[0]
    tried: list[str] = []
    for path in extension_candidates(name, version, platform):
        if not path.is_file():
            continue
        try:
            con.execute(f"LOAD {literal(str(path))}")
            return str(path)
        except duckdb.Error as error:
            tried.append(f"{path}: {str(error).splitlines()[0]}")
    try:
        # DuckDB's own extension directory: only what an earlier `INSTALL` put there. LOAD
        # never downloads, and autoinstall is off.
        con.execute(f"LOAD {name}")
        return f"duckdb extension directory ({name})"
    except duckdb.Error as error:
        tried.append(f"LOAD {name}: {str(error).splitlines()[0]}")
    raise LineageUnavailable(
        f"the DuckDB {name} extension for duckdb {version} ({platform}) is not installed; "
        f"install it with pip install 'smithers-tt[lineage]' (package {_PACKAGES[name]} pinned "
        f"to this duckdb) or point ${EXTENSIONS_ENV} at a directory holding "
        f"{name}.duckdb_extension. Tried: " + ("; ".join(tried) or "no candidate file exists"),
        extension=name,
    )


# --- attaching the store ---------------------------------------------------------------------


_SECRET_KEYS = {
    "host": "HOST",
    "port": "PORT",
    "dbname": "DATABASE",
    "user": "USER",
    "password": "PASSWORD",
}
"""The DuckDB postgres secret's name of each libpq connection parameter."""


def store_access(engine: Engine) -> SqliteAccess | PostgresAccess:
    """How DuckDB reaches the store read-only (see
    :func:`smithers_tt.store.for_lineage.read_only_access`).

    Raises:
        LineageError: the PostgreSQL database has no smithers_tt tables on its search_path.
    """
    try:
        return read_only_access(engine)
    except StoreNotFound as error:
        raise LineageError(str(error)) from error


def attach_store(con: Any, engine: Engine) -> tuple[Callable[[str], str], str]:
    """Make the store readable: ``sqlite_scan`` of the SQLite file, or PostgreSQL attached
    read-only as ``store``.

    Returns:
        ``(source, extension)``: ``source(table)`` is the SQL a view reads that store table
        from, and ``extension`` where the scanner was loaded from.

    On SQLite the views read through ``sqlite_scan(file, table)`` and the file is never
    attached: ``sqlite_scan`` opens it read-only and splits a table into rowid ranges scanned
    by every DuckDB thread (a table of an attached catalog is scanned by one thread), and a file
    DuckDB has attached stays writable by ``COPY ... TO`` once external access is off (DuckDB
    keeps attached files in ``allowed_paths``).
    """
    access = store_access(engine)
    if isinstance(access, SqliteAccess):
        loaded = load_extension(con, "sqlite_scanner")
        if not access.path.is_file():
            raise LineageError(f"no SQLite store at {access.path}")
        return sqlite_source(access.path), loaded
    loaded = load_extension(con, "postgres_scanner")
    schema = access.schema
    # Credentials go into a temporary DuckDB secret (never shown by ``duckdb_databases()``);
    # the conninfo keeps the URL's other parameters, with read-only server sessions.
    fields = ", ".join(
        f"{_SECRET_KEYS[key]} {literal(value)}" for key, value in access.credentials.items()
    )
    con.execute(f"CREATE TEMPORARY SECRET smithers_tt_store (TYPE postgres, {fields})")
    con.execute(
        f"ATTACH {literal(access.conninfo)} AS store "
        f"(TYPE postgres, READ_ONLY, SECRET smithers_tt_store, SCHEMA {literal(schema)})"
    )
    # The attached catalog keeps what it needs to connect; without the secret nothing else
    # (a second ATTACH without READ_ONLY, a postgres_scan) can log in with these credentials.
    con.execute("DROP SECRET smithers_tt_store")
    return lambda table: f"store.{ident(schema)}.{ident(table)}", loaded


def sqlite_source(path: Path) -> Callable[[str], str]:
    """``source(table)`` of :func:`attach_store` for the SQLite file ``path`` (the scanner
    must be loaded before a query reads it)."""
    return lambda table: f"sqlite_scan({literal(str(path))}, {literal(table)})"


def store_relations(source: Callable[[str], str]) -> dict[str, str]:
    """How each mirrored table, and the content bytes (:data:`DATA_TABLE`), is read from the
    store: a typed ``SELECT`` over the scanner (``source(table)``), written into the ``raw``
    views themselves. No view stands between: DuckDB binds every view a statement reaches
    again, and each bind of a SQLite table makes the scanner count its rowids, a full scan
    of the table (of 900 MB of content pages for ``tt_checkpoint_contents`` at 1M refs)."""
    found = {}
    for table in MIRRORED:
        # Identifiers and types come from the schema module, never from input.
        columns = ", ".join(
            f"CAST(t.{ident(n)} AS {kind}) AS {ident(n)}" for n, kind in raw_columns(table)
        )
        found[table.name] = f"SELECT {columns} FROM {_rows_of(source, table.name)}"  # noqa: S608
    found[DATA_TABLE] = (
        "SELECT CAST(content_hash AS VARCHAR) AS content_hash, CAST(data AS BLOB) AS data "  # noqa: S608
        f"FROM {source(CONTENTS_TABLE)}"
    )
    return found


def _rows_of(source: Callable[[str], str], name: str) -> str:
    """The ``FROM`` of store table ``name``'s rows, as ``t``. The history, ``tt_frames``, is a
    view of the store's (the frames at or below their run's clock: migration 0020), read
    from its table, which the scanner splits by rowid as it cannot a view, with its bound."""
    if name == "tt_frames":
        return (
            f"{source('tt_frame_rows')} AS t JOIN {source('tt_runs')} AS r "
            "ON r.run_id = t.run_id WHERE t.frame_no <= r.clock"
        )
    return f"{source(name)} AS t"


def snapshot_relations(data: str | None) -> dict[str, str]:
    """The mirrored tables read from the snapshot ``snap``, the content bytes from ``data``
    (left out when None)."""
    found = {t.name: f"SELECT * FROM snap.main.{ident(t.name)}" for t in MIRRORED}  # noqa: S608
    if data is not None:
        found[DATA_TABLE] = data
    return found


_RESTATED = "SELECT DISTINCT run_id FROM inherited.tt_frames ORDER BY run_id"
"""The forks by reference whose base frames the ``inherited`` catalog holds."""

UNBOUND = "smithers_tt: lineage relation not bound yet"
"""The error a ``raw`` relation raises if a query reads it before :func:`bind_relations`
gave it its rows (the lineage binds the content bytes of a cached snapshot when a question
first reads them, and asks again)."""

DATA_COLUMNS = [("content_hash", "VARCHAR"), ("data", "BLOB")]
"""The columns of the content bytes relation, :data:`DATA_TABLE`."""


def _columns(name: str) -> list[tuple[str, str]]:
    if name == DATA_TABLE:
        return DATA_COLUMNS
    return next(raw_columns(t) for t in MIRRORED if t.name == name)


def _rows_macro(name: str) -> str:
    """The table macro whose body is where ``raw.<name>`` reads its rows from."""
    return f"raw.{ident(name + '_rows')}"


def _unbound(name: str) -> str:
    """Rows of ``raw.<name>``'s columns and types that raise :data:`UNBOUND` when read."""
    columns = ", ".join(f"CAST(NULL AS {t}) AS {ident(n)}" for n, t in _columns(name))
    # The filter is evaluated on the one row whenever anything reads the relation; a
    # projection could be pruned by the optimizer, a filter is not.
    return f"SELECT {columns} FROM range(1) WHERE CAST(error({literal(UNBOUND)}) AS BOOLEAN)"  # noqa: S608


def create_raw_views(con: Any) -> None:
    """The ``raw`` schema the views read: one view per mirrored table plus the content bytes,
    each reading the rows of a table macro that :func:`bind_relations` fills. The tables
    forks by reference would have rows in also read ``inherited``
    (:mod:`smithers_tt.lineage._inherited`: what those forks inherit, as rows).

    Every view DuckDB creates is bound at once, and every bind of a SQLite table makes the
    scanner count its rowids (``MIN(ROWID), MAX(ROWID)``: a full scan of the table, 900 MB
    of content pages for ``tt_checkpoint_contents`` at 1M refs). Created over macros that do
    not read the store yet, the ``raw`` views and the documented views over them bind
    nothing; once :func:`bind_relations` gave the macros their rows, a query binds only the
    store tables it reads (a macro is expanded at each query, as a view is bound again)."""
    con.execute("CREATE SCHEMA raw")
    # A fork by reference's base frames (its edited checkpoints) are restated there.
    restated = [row[0] for row in con.execute(_RESTATED).fetchall()]
    for name in [t.name for t in MIRRORED] + [DATA_TABLE]:
        con.execute(f"CREATE MACRO {_rows_macro(name)}() AS TABLE {_unbound(name)}")
        rows = f"SELECT * FROM {_rows_macro(name)}()"  # noqa: S608 (constants)
        if name == "tt_frames" and restated:
            ids = ", ".join(literal(run_id) for run_id in restated)
            rows += f" WHERE frame_no >= 0 OR run_id NOT IN ({ids})"
        if name in INHERITED:
            rows += f" UNION ALL SELECT * FROM inherited.{ident(name)}"  # noqa: S608
        con.execute(f"CREATE VIEW raw.{ident(name)} AS {rows}")


def bind_relations(con: Any, relations: dict[str, str]) -> None:
    """Give the ``raw`` views of ``relations`` (name: ``SELECT``, from
    :func:`store_relations` or :func:`snapshot_relations`) their rows. Nothing is bound
    here: each query expands the macros it reaches."""
    for name, rows in relations.items():
        con.execute(f"CREATE OR REPLACE MACRO {_rows_macro(name)}() AS TABLE {rows}")


# --- snapshots -------------------------------------------------------------------------------


class Scratch:
    """A lineage's temporary directory, removed on :meth:`remove`: the snapshot's DuckDB file,
    and the two directories DuckDB may still write in once external access is off
    (``export``, where Parquet files are written before they are moved to their destination,
    and ``spill``, DuckDB's temp directory). The snapshot file is outside both."""

    def __init__(self) -> None:
        self.path = Path(tempfile.mkdtemp(prefix="smithers-tt-lineage-"))
        self.export.mkdir()
        self.spill.mkdir()

    @property
    def file(self) -> Path:
        """The snapshot's DuckDB file."""
        return self.path / "snapshot.duckdb"

    @property
    def inherited(self) -> Path:
        """The DuckDB file of what forks by reference inherit
        (:mod:`smithers_tt.lineage._inherited`)."""
        return self.path / "inherited.duckdb"

    @property
    def kept(self) -> Path:
        """A second name of the snapshot's file, kept for the snapshot cache (outside the
        directories DuckDB may write in)."""
        return self.path / "kept.duckdb"

    @property
    def again(self) -> Path:
        """Where second names of the attached snapshot and ``inherited`` files are kept, for
        a cached lineage to open them again when it binds the content bytes (outside the
        directories DuckDB may write in)."""
        return self.path / "again"

    @property
    def export(self) -> Path:
        """Where :meth:`Lineage.export_parquet` stages its files."""
        return self.path / "export"

    @property
    def spill(self) -> Path:
        """DuckDB's temp directory (large sorts and joins spill there)."""
        return self.path / "spill"

    def remove(self) -> None:
        """Delete the directory and everything in it."""
        shutil.rmtree(self.path, ignore_errors=True)


def _create_snapshot_tables(con: Any, with_data: bool) -> None:
    for table in MIRRORED:
        columns = ", ".join(f"{ident(n)} {t}" for n, t in raw_columns(table))
        con.execute(f"CREATE TABLE snap.{ident(table.name)} ({columns})")
    if with_data:
        columns = ", ".join(f"{n} {t}" for n, t in DATA_COLUMNS)
        con.execute(f"CREATE TABLE snap.{DATA_TABLE} ({columns})")


def materialize_views(con: Any) -> None:
    """Store the views marked ``materialize`` as tables of the (still writable) snapshot, in
    view order: a view reading an earlier one (``run_dedup`` reads ``checkpoints``) reads its
    stored table."""
    stored: list[str] = []
    for view in VIEWS:
        if not view.materialize:
            continue
        # names from VIEWS, never from input
        earlier = ", ".join(f"{ident(n)} AS (SELECT * FROM snap.main.{ident(n)})" for n in stored)  # noqa: S608
        rows = f"WITH {earlier} SELECT * FROM ({view.sql})" if stored else view.sql  # noqa: S608
        con.execute(f"CREATE TABLE snap.{ident(view.name)} AS {rows}")
        stored.append(view.name)


def attach_read_only(con: Any, alias: str, path: Path, keep: Path | None = None) -> None:
    """Attach the DuckDB file ``path`` read-only as ``alias``, then unlink it (after
    hard-linking it at ``keep``, when given, for the snapshot cache).

    When external access is turned off DuckDB adds every attached file to ``allowed_paths``,
    so once any directory is allowed ``COPY ... TO '<path>'`` could overwrite the file the
    lineage answers from. Unlinked, the file DuckDB reads through its open handle has no name:
    a ``COPY`` to that path makes a new, unrelated file (where open files cannot be unlinked,
    on Windows, the file stays and stays writable so).
    """
    if keep is not None:
        keep_file(path, keep)
    con.execute(f"ATTACH {literal(str(path))} AS {ident(alias)} (READ_ONLY)")
    with contextlib.suppress(OSError):
        path.unlink()


def keep_file(path: Path, keep: Path) -> None:
    """A second name ``keep`` for the complete, closed DuckDB file ``path`` (a copy where
    hard links are refused)."""
    try:
        os.link(path, keep)
    except OSError:
        shutil.copyfile(path, keep)


def _finish_snapshot(con: Any, scratch: Scratch, keep: Path | None = None) -> None:
    create_raw_views(con)
    relations = snapshot_relations(None)
    bind_relations(con, relations)  # the tables, for the views stored next
    materialize_views(con)
    con.execute("DETACH snap")
    attach_read_only(con, "snap", scratch.file, keep)


def open_cached_snapshot(con: Any, scratch: Scratch, keep: Path | None = None) -> None:
    """Attach the snapshot the cache put at ``scratch.file`` (a second name for it at
    ``keep``, when given): the ``raw`` views read it (and what forks inherit, computed at
    this open); the content bytes stay unbound until :func:`bind_relations` binds them."""
    attach_read_only(con, "snap", scratch.file, keep)
    create_raw_views(con)


def snapshot_from_source(
    con: Any,
    scratch: Scratch,
    relations: dict[str, str],
    progress: Progress | None = None,
    keep: Path | None = None,
) -> None:
    """Copy the store's tables (``relations``: :func:`store_relations`, no content bytes) into
    a DuckDB file attached read-only (hard-linked at ``keep`` too, when given);
    ``progress(1)`` after each table."""
    con.execute(f"ATTACH {literal(str(scratch.file))} AS snap")
    _create_snapshot_tables(con, with_data=False)
    con.execute("BEGIN TRANSACTION")
    try:
        for table in MIRRORED:
            con.execute(f"INSERT INTO snap.{ident(table.name)} {relations[table.name]}")
            if progress:
                progress(1)
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    _finish_snapshot(con, scratch, keep)


def insert_rows(con: Any, target: str, names: list[str], types: list[Any], rows: list[Any]) -> None:
    """Append ``rows`` (sequences in ``names`` order) to the table ``target`` (a qualified
    name) as one Arrow record batch of ``types``; pyarrow needed."""
    import pyarrow as pa

    arrays = [pa.array([row[i] for row in rows], type=kind) for i, kind in enumerate(types)]
    con.register("smithers_tt_batch", pa.Table.from_arrays(arrays, names=names))
    try:
        con.execute(f"INSERT INTO {target} SELECT * FROM smithers_tt_batch")  # noqa: S608
    finally:
        con.unregister("smithers_tt_batch")


def snapshot_with_arrow(
    con: Any, engine: Engine, scratch: Scratch, batch_rows: int, progress: Progress | None = None
) -> None:
    """Stream every mirrored table and the content bytes through the store into a DuckDB file
    (``progress(1)`` after each table).

    One read-only transaction (REPEATABLE READ on PostgreSQL, one WAL snapshot on SQLite), so
    the copy is consistent; batches are bounded by ``batch_rows`` rows and 64 MiB of bytes.
    """
    require_extra("pyarrow", needed_for="the lineage's Arrow fallback", error=LineageUnavailable)
    con.execute(f"ATTACH {literal(str(scratch.file))} AS snap")
    _create_snapshot_tables(con, with_data=True)
    # (relation in the snapshot, store table it is read from, its columns, rows per fetch)
    jobs: list[tuple[str, str, list[tuple[str, str]], int]] = [
        (table.name, table.name, raw_columns(table), batch_rows) for table in MIRRORED
    ]
    jobs.append((DATA_TABLE, CONTENTS_TABLE, DATA_COLUMNS, _DATA_FETCH_ROWS))
    with read_tables(engine) as reader:
        for name, table, spec, fetch in jobs:
            types = [arrow_type(t) for _, t in spec]
            names = [n for n, _ in spec]
            pending: list[Any] = []
            pending_bytes = 0

            for part in reader.batches(table, names, fetch):
                pending.extend(part)
                if name == DATA_TABLE:
                    pending_bytes += sum(len(row[1]) for row in part)
                if len(pending) >= batch_rows or pending_bytes >= _ARROW_BATCH_BYTES:
                    insert_rows(con, f"snap.{ident(name)}", names, types, pending)
                    pending, pending_bytes = [], 0
            if pending:
                insert_rows(con, f"snap.{ident(name)}", names, types, pending)
            if progress:
                progress(1)
    _finish_snapshot(con, scratch)


def warn_fallback(reason: LineageUnavailable) -> None:
    """Tell the user the lineage runs on the slower Arrow fallback, and why."""
    warnings.warn(
        f"DuckDB scanner unavailable, using the Arrow snapshot fallback: {reason}",
        LineageFallbackWarning,
        stacklevel=4,
    )
