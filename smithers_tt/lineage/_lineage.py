"""The :class:`Lineage` object: DuckDB over the store, answering with pandas DataFrames."""

from __future__ import annotations

import shutil
import tempfile
import textwrap
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from smithers_tt._opened import OpenedDatabase
from smithers_tt._prices import PriceTable
from smithers_tt.errors import InvalidArgument
from smithers_tt.lineage import _connect as C
from smithers_tt.lineage import _guard
from smithers_tt.lineage._cache import SnapshotCache, default_directory
from smithers_tt.lineage._inherited import add_inherited
from smithers_tt.lineage._refcheck import corrupt_ref
from smithers_tt.lineage._views import BY_NAME, DATA_TABLE, PRICES_TABLE, VIEWS
from smithers_tt.lineage._walindex import pin_store, pin_wal_index
from smithers_tt.store import Progress
from smithers_tt.store.for_lineage import Gate, SqliteAccess, gate_of

if TYPE_CHECKING:  # pragma: no cover
    import pandas


F = TypeVar("F", bound=Callable[..., Any])
Reader = Literal["auto", "scanner", "arrow"]

GATE_TIMEOUT_S = 60.0
"""How long a question over a live SQLite store waits for this process's open store
transactions to end before it gives up (:meth:`Lineage._alone`)."""


def _columns_of(*names: str) -> Callable[[F], F]:
    """Append the column documentation of views ``names`` to a method's docstring."""

    def decorate(method: F) -> F:
        docs = "\n\n".join(BY_NAME[name].doc() for name in names)
        columns = textwrap.indent(f"Columns:\n\n{textwrap.indent(docs, '    ')}", " " * 8)
        method.__doc__ = f"{(method.__doc__ or '').rstrip()}\n\n{columns}\n"
        return method

    return decorate


def _names_data(query: str) -> bool:
    """Whether ``query`` may read the content bytes: it names ``checkpoint_payloads`` or
    ``raw.tt_checkpoint_data``, the only relations that read them."""
    text = query.lower()
    return "checkpoint_payloads" in text or DATA_TABLE in text


def _snapshot_cache(db: OpenedDatabase, cache: bool | str | Path) -> SnapshotCache | None:
    """The snapshot cache a lineage asked for, when its store can use one (SQLite, POSIX)."""
    if cache is False:
        return None
    directory = default_directory() if cache is True else Path(cache)
    access = C.store_access(db.engine)
    if not isinstance(access, SqliteAccess) or not SnapshotCache.usable():
        return None
    return SnapshotCache(directory, access.path)


def _sqlite_file(db: OpenedDatabase) -> Path | None:
    """The SQLite store's file (None for PostgreSQL)."""
    access = C.store_access(db.engine)
    return access.path if isinstance(access, SqliteAccess) else None


class Lineage:
    """Read-only analytics over a smithers_tt store with DuckDB; answers are pandas DataFrames.

    Open it with :meth:`smithers_tt.Database.lineage`; close it (or use ``with``) when done.
    DuckDB attaches the store **read-only** (the SQLite file opened read-only, or PostgreSQL
    through a read-only attachment on the store's schema, with read-only server sessions) and
    defines the documented views ``runs``, ``run_labels``, ``nodes``, ``attempts``,
    ``checkpoints``, ``contents``, ``checkpoint_payloads``, ``frames``, ``forks``, ``dedup``,
    ``run_dedup``, ``audit`` and ``model_calls`` (columns in each method's docstring, or
    ``lin.sql("DESCRIBE runs")``). The ``raw`` schema mirrors the store's tables; on PostgreSQL
    the attached store itself is the catalog ``store`` (scanner reader only). Any SQL over
    these goes through :meth:`sql`.

    Nothing through a lineage can change the store, read or write files, or reach the network
    (see :meth:`sql`): once it is built, DuckDB's external access is turned off and its
    configuration locked. To read or write your own files from :meth:`sql` (``read_csv``,
    ``read_parquet``, ``COPY ... TO``), name their directories in ``allowed_directories``.

    Args:
        db: the database to read.
        snapshot: copy the tables (not the content bytes) into a temporary read-only DuckDB
            file at open, so every later question runs at in-memory speed on one consistent
            copy; without it (the default) every query reads the store as it is now.
        reader: ``"scanner"`` (DuckDB's sqlite / postgres extension, loaded from the
            installed ``duckdb-ext-*`` package files, never downloaded), ``"arrow"`` (the
            fallback: tables streamed by the store as Arrow batches into a read-only
            snapshot, content bytes included), or ``"auto"`` (scanner, else arrow with a
            :class:`LineageFallbackWarning`).
        threads: DuckDB worker threads (default: one per core).
        batch_rows: rows per Arrow batch in the fallback.
        progress: called with 1 after each table a snapshot copies (``snapshot=True`` or the
            Arrow fallback), e.g. a terminal or notebook progress bar.
        allowed_directories: existing directories (and everything below them) whose files
            :meth:`sql` may read and write; none by default. The store's own file is never
            writable through a lineage, whichever directory holds it, unless a symbolic link
            to it is planted in an allowed directory: DuckDB follows links. Allow only
            directories nobody else can write to.
        cache: keep a snapshot (``snapshot=True``) of a SQLite store between processes, in
            this private directory (``True``: ``$XDG_CACHE_HOME/smithers-tt/lineage``), and
            open it instead of reading the store again while the store's files are exactly as
            they were when it was taken (:mod:`smithers_tt.lineage._cache`: compared by
            inode, size and change times; any write makes a new one). Never written in or
            beside the store; ignored for PostgreSQL stores and live lineages.
        prices: what model calls cost (the ``cost`` of ``model_calls``): a
            :class:`~smithers_tt.PriceTable`, a mapping of model to ``{"input", "output",
            "cached_input"}`` per million tokens, or a ``.json`` / ``.toml`` file of one; kept
            in the table ``model_prices``. Without it every cost is NULL (never guessed).

    Attributes:
        reader: ``"scanner"`` or ``"arrow"``: the path actually in use.
        snapshot: whether the views read a copy taken at open (always so for ``"arrow"``).
        extension: the extension file the scanner was loaded from (None for ``"arrow"``, and
            for a snapshot opened from the cache until a question reads content bytes:
            ``checkpoint_payloads`` or ``raw.tt_checkpoint_data``, the only views that read
            the store after such an open, bind it then).
        cache: what the snapshot cache did: None (not asked or not applicable), ``"hit"``
            (the snapshot was opened from it), ``"stored"`` (taken from the store and kept),
            or ``"not stored: <why>"``.

    Raises:
        LineageUnavailable: duckdb or pandas is not installed, or ``reader="scanner"`` and the
            extension cannot be loaded.
        LineageError: an allowed directory does not exist.
        StoreCorrupt: a snapshot found a checkpoint ref that disagrees with its frame.

    A connection is not shared between threads: calls are serialised by a lock.
    """

    def __init__(
        self,
        db: OpenedDatabase,
        *,
        snapshot: bool = False,
        reader: Reader = "auto",
        threads: int | None = None,
        batch_rows: int = 50_000,
        progress: Progress | None = None,
        allowed_directories: Iterable[str | Path] = (),
        prices: Any = None,
        cache: bool | str | Path = False,
    ) -> None:
        table = PriceTable.of(prices)  # checked (and a file read) before anything opens
        if reader not in ("auto", "scanner", "arrow"):
            raise InvalidArgument(f"reader must be 'auto', 'scanner' or 'arrow', got {reader!r}")
        if type(batch_rows) is not int or batch_rows < 1:
            raise InvalidArgument(f"batch_rows must be a positive int, got {batch_rows!r}")
        if not isinstance(cache, bool | str | Path):
            raise InvalidArgument(f"cache takes True, False or a directory, got {cache!r}")
        if isinstance(allowed_directories, str | Path):
            raise InvalidArgument("allowed_directories takes a list of directories, not one path")
        self._duckdb = C.import_duckdb()
        self._lock = threading.Lock()
        self._scratch: C.Scratch | None = None
        self._threads = threads
        self._con = C.new_connection(threads)
        self.extension: str | None = None
        self.cache: str | None = None
        self._files = False
        self._refused: frozenset[str] = frozenset()
        self._prices = table
        self._allowed: list[Path] = []
        self._payloads: Path | None = None
        """A cached snapshot's store, until its content bytes are bound (:meth:`_bind_data`)."""
        self._pinned: Path | None = None
        """The SQLite store the scanner reads, pinned (:mod:`._walindex`)."""
        self._gate: Gate | None = None
        """The SQLite store's gate, held alone while the scanner may read the store."""
        try:
            if reader != "arrow" and db.engine.is_sqlite:
                self._pinned = _sqlite_file(db)
                if self._pinned is not None:
                    pin_store(self._pinned)
                    self._gate = gate_of(self._pinned)
            self._allowed = [_guard.directory_prefix(d) for d in allowed_directories]
            self._files = bool(self._allowed)
            self._scratch = C.Scratch()
            cached = _snapshot_cache(db, cache) if snapshot else None
            with self._alone():
                self.reader, self.snapshot, relations = self._open(
                    db, snapshot, reader, batch_rows, progress, cached
                )
                self._finish(self._con, relations)
        except BaseException as error:
            self.close()
            corrupt = corrupt_ref(str(error))  # a snapshot stores the checked checkpoints
            if corrupt is not None:
                raise corrupt from error
            raise

    def _alone(self) -> AbstractContextManager[None]:
        """Hold the store's gate alone while DuckDB's own SQLite may open and close the store:
        each close would drop the locks of this process's open store transactions
        (:mod:`smithers_tt.store.backend._gate`), so none is open meanwhile."""
        if self._gate is None:
            return nullcontext()
        return self._gate.alone(GATE_TIMEOUT_S)

    def _finish(self, con: Any, relations: dict[str, str]) -> None:
        """The prices table and the documented views over the ``raw`` ones (bound while the
        ``raw`` relations read nothing, so that creating them reads no store table), then the
        relations, then the lock-down."""
        con.execute(
            f"CREATE TABLE {PRICES_TABLE} (model VARCHAR PRIMARY KEY, input DOUBLE, "
            "output DOUBLE, cached_input DOUBLE)"
        )
        if len(self._prices):
            con.executemany(
                f"INSERT INTO {PRICES_TABLE} VALUES (?, ?, ?, ?)",  # noqa: S608 (constant)
                self._prices.rows(),
            )
        for view in VIEWS:
            name = C.ident(view.name)
            if self.snapshot and view.materialize:
                con.execute(f"CREATE VIEW {name} AS SELECT * FROM snap.main.{name}")  # noqa: S608
            else:
                con.execute(f"CREATE VIEW {name} AS {view.sql}")
        C.bind_relations(con, relations)
        # From here on nothing reaches files or the network but the directories allowed,
        # and the configuration (autoinstall, external access ...) is frozen.
        scratch = self._scratch
        self._refused = _guard.refused_functions(con)
        _guard.lock_down(con, [scratch.export, scratch.spill, *self._allowed], scratch.spill)

    def _open(
        self,
        db: OpenedDatabase,
        snapshot: bool,
        reader: Reader,
        batch_rows: int,
        progress: Progress | None,
        cached: SnapshotCache | None,
    ) -> tuple[str, bool, dict[str, str]]:
        """Fill the ``raw`` schema; ``(reader, snapshot, relations to bind)``."""
        scratch = self._scratch
        scanner = reader != "arrow" and C.has_extension(self._con, "sqlite_scanner")
        if cached is not None and scanner and cached.lookup(scratch.file):
            # A cached snapshot: neither the scanner nor the store is touched until a question
            # reads the content bytes (_bind_data); the snapshot and what forks inherit keep
            # a second name, to be attached again then.
            scratch.again.mkdir()
            add_inherited(self._con, db, scratch.inherited, scratch.again / "inherited")
            C.open_cached_snapshot(self._con, scratch, scratch.again / "snapshot")
            self.cache, self._payloads = "hit", cached.store
            return "scanner", True, C.snapshot_relations(None)
        # what forks by reference inherit, as rows
        add_inherited(self._con, db, scratch.inherited)
        if reader != "arrow":
            try:
                source, self.extension = C.attach_store(self._con, db.engine)
            except C.LineageUnavailable as error:
                if reader == "scanner":
                    raise
                C.warn_fallback(error)
            else:
                relations = C.store_relations(source)
                if snapshot:
                    kept = scratch.kept if cached is not None else None
                    C.snapshot_from_source(self._con, scratch, relations, progress, kept)
                    if cached is not None:
                        stored = cached.keep(scratch.kept)
                        self.cache = "stored" if stored else f"not stored: {cached.reason}"
                        scratch.kept.unlink(missing_ok=True)
                    return "scanner", True, C.snapshot_relations(relations[DATA_TABLE])
                C.create_raw_views(self._con)
                return "scanner", False, relations
        C.snapshot_with_arrow(self._con, db.engine, scratch, batch_rows, progress)
        data = f"SELECT * FROM snap.main.{DATA_TABLE}"  # noqa: S608 (constant)
        return "arrow", True, C.snapshot_relations(data)

    def _bind_data(self) -> None:
        """Bind a cached snapshot's content bytes: the scanner can no longer be loaded into a
        connection that is locked down, so the lineage is built again on a new one, over the
        same snapshot and inherited rows (their second names), with the scanner, and replaces
        the first. Nothing a question can leave in a connection is lost: :meth:`sql` runs
        queries only. Call it with the lock held."""
        store, scratch = self._payloads, self._scratch
        if store is None or scratch is None or self._con is None:
            return
        con = C.new_connection(self._threads)
        try:
            extension = C.load_extension(con, "sqlite_scanner")
            if not store.is_file():
                raise C.LineageError(f"no SQLite store at {store}")
            for name, path in (("inherited", scratch.inherited), ("snapshot", scratch.file)):
                C.keep_file(scratch.again / name, path)
            C.attach_read_only(con, "inherited", scratch.inherited)
            C.open_cached_snapshot(con, scratch)
            data = C.store_relations(C.sqlite_source(store))[DATA_TABLE]
            self._finish(con, C.snapshot_relations(data))
        except BaseException:
            con.close()
            raise
        old, self._con = self._con, con
        old.close()
        self.extension, self._payloads = extension, None
        shutil.rmtree(scratch.again, ignore_errors=True)

    # --- any SQL -----------------------------------------------------------------------------

    def sql(
        self, query: str, params: Sequence[Any] | Mapping[str, Any] | None = None
    ) -> pandas.DataFrame:
        """Run one read-only SQL query over the views and return its result as a DataFrame.

        Only queries run: ``SELECT`` (with ``FROM``-first, ``WITH``, ``DESCRIBE``, ``SHOW``,
        ``SUMMARIZE``, ``VALUES``), ``EXPLAIN``, and ``COPY (SELECT ...) TO`` a file in one of
        the lineage's ``allowed_directories``. Everything that could change the store, change
        what the views answer or reach past them is refused before it runs: ``ATTACH``,
        ``DETACH``, ``USE``, ``SET``, ``RESET``, ``PRAGMA``, ``CREATE``, ``INSERT``,
        ``UPDATE``, ``DELETE``, ``COPY <table> FROM``, ``IMPORT`` / ``EXPORT DATABASE``,
        ``INSTALL`` / ``LOAD``, the scanner extensions' functions (``sqlite_query``,
        ``postgres_execute`` ...), ``query()``, ``checkpoint()``; and DuckDB itself refuses
        files outside the allowed directories (``read_csv('/etc/passwd')``,
        ``COPY ... TO '/tmp/x'``) and any network access.

        Args:
            query: DuckDB SQL over the views (``runs``, ``checkpoints`` ...), ``raw.*`` or (on
                PostgreSQL) the attached ``store``; ``?`` / ``$1`` placeholders or ``$name``
                with a mapping.
            params: values for the placeholders (never formatted into the SQL).

        Raises:
            LineageError: the statement was refused, or failed.
            StoreCorrupt: it read a checkpoint ref that disagrees with its frame (through
                ``checkpoints``, ``contents``, ``dedup`` or ``run_dedup``).
        """
        return self._query(query, params, check=True)

    def _query(self, query: str, params: Any = None, *, check: bool = False) -> pandas.DataFrame:
        with self._lock, self._alone():
            if self._con is None:
                raise C.LineageError("this lineage is closed; open another with db.lineage()")
            if self._pinned is not None:
                pin_wal_index(self._pinned)
            if self._payloads is not None and _names_data(query):
                self._bind_data()
            try:
                return self._run(query, params, check)
            except C.LineageError as error:
                # A question that reached the content bytes without naming them: bind them,
                # ask again (it only read).
                if self._payloads is None or C.UNBOUND not in str(error.__cause__):
                    raise
            self._bind_data()
            return self._run(query, params, check)

    def _run(self, query: str, params: Any, check: bool) -> pandas.DataFrame:
        try:
            # The statements checked are the ones run (params bind to the last, as when
            # DuckDB runs a text of several statements).
            *first, last = (
                _guard.check_query(self._con, query, files=self._files, refused=self._refused)
                if check
                else [query]
            )
            for statement in first:
                self._con.execute(statement)
            cursor = self._con.execute(last) if params is None else self._con.execute(last, params)
            return cursor.df()
        except self._duckdb.Error as error:
            corrupt = corrupt_ref(str(error))
            if corrupt is not None:
                raise corrupt from error
            first = (str(error).strip().splitlines() or [type(error).__name__])[0]
            raise C.LineageError(f"lineage query failed: {first}") from error

    # --- the documented views ----------------------------------------------------------------

    @_columns_of("runs")
    def runs(self) -> pandas.DataFrame:
        """Every run, oldest id first, with its counts of nodes, attempts, refs and frames."""
        return self._query("SELECT * FROM runs ORDER BY run_id")

    @_columns_of("run_labels")
    def run_labels(self) -> pandas.DataFrame:
        """Every label of every run, by run id then key."""
        return self._query("SELECT * FROM run_labels ORDER BY run_id, key")

    @_columns_of("model_calls")
    def model_calls(self, run_id: str | None = None) -> pandas.DataFrame:
        """Model calls of one run (or of every run) as recorded, by run, frame and position,
        priced by the lineage's ``prices``; a fork's inherited calls are its parent's rows
        (``run.model_calls()`` lists them with the fork's own)."""
        return self._where("model_calls", run_id, "run_id, frame_no, position")

    @_columns_of("nodes")
    def nodes(self, run_id: str | None = None) -> pandas.DataFrame:
        """Nodes of one run (or of every run), in key order."""
        return self._where("nodes", run_id, "run_id, node_id, iteration")

    @_columns_of("attempts")
    def attempts(self, run_id: str | None = None) -> pandas.DataFrame:
        """Attempts of one run (or of every run), in key order, with state, error and the
        checkpoint ref each resumed from."""
        return self._where("attempts", run_id, "run_id, node_id, iteration, attempt")

    @_columns_of("checkpoints")
    def checkpoints(self, run_id: str | None = None) -> pandas.DataFrame:
        """Checkpoint refs of one run (or of every run), in key order, with content sizes;
        :class:`~smithers_tt.errors.StoreCorrupt` when a ref disagrees with its frame (so do
        :meth:`contents` and :meth:`dedup`)."""
        return self._where("checkpoints", run_id, "run_id, node_id, iteration, attempt, sequence")

    @_columns_of("frames")
    def frames(self, run_id: str) -> pandas.DataFrame:
        """The public frames of one run in order (a fork's copied base frames excluded)."""
        return self._query("SELECT * FROM frames WHERE run_id = ? ORDER BY frame_no", [run_id])

    @_columns_of("forks")
    def forks(self) -> pandas.DataFrame:
        """The fork tree: one row per forked run, ordered by root, depth and child id."""
        return self._query("SELECT * FROM forks ORDER BY root_run_id, depth, child_run_id")

    @_columns_of("workers")
    def workers(self) -> pandas.DataFrame:
        """Registered worker processes, oldest first, with the runs each owns now."""
        return self._query("SELECT * FROM workers ORDER BY started_at_ms, worker_id")

    @_columns_of("contents")
    def contents(self) -> pandas.DataFrame:
        """Stored contents (no bytes), with the refs and runs using each."""
        return self._query("SELECT * FROM contents ORDER BY content_hash")

    @_columns_of("dedup", "run_dedup")
    def dedup(self, by: Literal["codec", "run"] = "codec") -> pandas.DataFrame:
        """How much content de-duplication saves: logical bytes (every ref counted) against
        stored bytes (each distinct content once), per codec with an overall row last
        (``by="codec"``, view ``dedup``), or per run (``by="run"``, view ``run_dedup``)."""
        if by == "codec":
            return self._query("SELECT * FROM dedup ORDER BY scope = 'all', codec")
        if by == "run":
            return self._query("SELECT * FROM run_dedup ORDER BY run_id")
        raise InvalidArgument(f"dedup(by=...) takes 'codec' or 'run', got {by!r}")

    def _where(self, view: str, run_id: str | None, order: str) -> pandas.DataFrame:
        if run_id is None:
            return self._query(f"SELECT * FROM {view} ORDER BY {order}")  # noqa: S608 (constants)
        return self._query(
            f"SELECT * FROM {view} WHERE run_id = ? ORDER BY {order}",  # noqa: S608 (constants)
            [run_id],
        )

    # --- export ------------------------------------------------------------------------------

    def export_parquet(
        self,
        directory: str | Path,
        views: Iterable[str] | None = None,
        *,
        progress: Progress | None = None,
    ) -> dict[str, Path]:
        """Write each view (or the named ones) to ``<directory>/<view>.parquet`` (zstd);
        ``progress(1)`` is called after each view.

        Returns:
            The path written for each view, in view order.

        Raises:
            InvalidArgument: a name is not one of the documented views.
        """
        chosen = [v.name for v in VIEWS] if views is None else list(views)
        unknown = [name for name in chosen if name not in BY_NAME]
        if unknown:
            raise InvalidArgument(f"no lineage view {unknown}; choose from {list(BY_NAME)}")
        scratch = self._scratch
        if self._con is None or scratch is None:
            raise C.LineageError("this lineage is closed; open another with db.lineage()")
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        # DuckDB may write only in the lineage's own export directory: each file is written
        # there, then moved (by Python, not by SQL) to where it was asked for.
        staging = Path(tempfile.mkdtemp(dir=scratch.export))
        paths: dict[str, Path] = {}
        try:
            for name in chosen:
                staged = staging / f"{name}.parquet"
                self._query(
                    f"COPY (SELECT * FROM {C.ident(name)}) TO {C.literal(str(staged))} "  # noqa: S608
                    "(FORMAT parquet, COMPRESSION zstd)"
                )
                path = (out / f"{name}.parquet").resolve()
                shutil.move(staged, path)
                paths[name] = path
                if progress:
                    progress(1)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return paths

    # --- lifetime ----------------------------------------------------------------------------

    def close(self) -> None:
        """Close the DuckDB connection and delete any snapshot file (idempotent). The gate is
        not needed: the scanner closes its connections to the store at the end of each
        question, so none is left to close here."""
        with self._lock:
            con, self._con = self._con, None
            if con is not None:
                con.close()
            if self._scratch is not None:
                self._scratch.remove()
                self._scratch = None

    def __enter__(self) -> Lineage:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._con is None else ("snapshot" if self.snapshot else "live")
        return f"<smithers_tt.Lineage reader={self.reader} {state}>"
