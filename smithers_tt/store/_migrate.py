"""Apply the ordered migrations in ``migrations/`` and check the result against the schema.

Rules (see DESIGN.md, "Persistence"):

* all pending migrations run in **one transaction** under a lock: a PostgreSQL advisory
  transaction lock, or SQLite's ``BEGIN IMMEDIATE``; so several processes starting at once
  all succeed, one migrating and the others finding the work done;
* each applied migration is recorded with the SHA-256 of its file; a recorded migration whose
  file changed, or one this version does not know (a newer smithers_tt migrated the
  database), stops everything with a clear error;
* migrations name tables and columns of :mod:`smithers_tt.store._schema` (the one definition)
  and are idempotent against it;
* after migrating, every table is compared with that definition (columns, nullability,
  primary keys, type families); an unexpected shape fails closed with
  :class:`~smithers_tt.errors.SchemaMismatch` and nothing is committed.
"""

from __future__ import annotations

import hashlib
import importlib.util
import re
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from smithers_tt.errors import MigrationError, SchemaMismatch
from smithers_tt.store import _schema
from smithers_tt.store._engine import Engine

# An arbitrary constant: the key of the PostgreSQL advisory lock that serialises migrations.
_PG_LOCK_KEY = 0x5EED_7E57_0001
_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.py$")


def migrations_dir() -> Path:
    """Where the migration files are: inside the installed wheel, or the source checkout."""
    package = Path(__file__).resolve().parent.parent
    shipped = package / "_migrations"
    return shipped if shipped.is_dir() else package.parent / "migrations"


def migration_names(directory: Path | None = None) -> list[str]:
    """The names of the migration files in order, without loading them."""
    directory = directory or migrations_dir()
    if not directory.is_dir():
        raise MigrationError(f"migrations folder not found at {directory}; reinstall smithers_tt")
    return [p.stem for p in sorted(directory.iterdir()) if _NAME.match(p.name)]


@dataclass(frozen=True)
class Migration:
    """One migration file: its name (``0001_initial``), checksum and loaded module."""

    name: str
    checksum: str
    module: ModuleType


def load_migrations(directory: Path | None = None) -> list[Migration]:
    """Every migration file in order, loaded and checksummed."""
    directory = directory or migrations_dir()
    if not directory.is_dir():
        raise MigrationError(f"migrations folder not found at {directory}; reinstall smithers_tt")
    found: list[Migration] = []
    for path in sorted(directory.iterdir()):
        if not _NAME.match(path.name):
            continue
        data = path.read_bytes()
        spec = importlib.util.spec_from_file_location(f"smithers_tt_migration_{path.stem}", path)
        if spec is None or spec.loader is None:  # pragma: no cover - a .py file always has one
            raise MigrationError(f"cannot load migration {path}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        if not callable(getattr(module, "upgrade", None)):
            raise MigrationError(f"migration {path.name} has no upgrade(ctx) function")
        found.append(Migration(path.stem, hashlib.sha256(data).hexdigest(), module))
    numbers = [m.name[:4] for m in found]
    if len(set(numbers)) != len(numbers):
        raise MigrationError(f"two migrations share a number in {directory}: {numbers}")
    return found


class MigrationContext:
    """What a migration's ``upgrade(ctx)`` may do; every operation is idempotent."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def create_tables(self, *names: str) -> None:
        """Create these tables (and their indexes) from the schema unless they exist."""
        for name in names:
            _schema.metadata.tables[name].create(self.conn, checkfirst=True)

    def add_columns(self, table: str, *columns: str) -> None:
        """Add these columns of the schema's ``table`` unless they exist."""
        existing = {c["name"] for c in sa.inspect(self.conn).get_columns(table)}
        for name in columns:
            if name in existing:
                continue
            column = _schema.metadata.tables[table].c[name]
            ddl = sa.schema.CreateColumn(column).compile(dialect=self.conn.dialect)
            self.conn.exec_driver_sql(f"ALTER TABLE {table} ADD COLUMN {ddl}")

    def create_indexes(self, table: str) -> None:
        """Create the schema's indexes of ``table`` unless they exist."""
        for index in _schema.metadata.tables[table].indexes:
            index.create(self.conn, checkfirst=True)


def migrate(engine: Engine) -> list[str]:
    """Bring the database up to date; return the names of the migrations applied now.

    Raises:
        MigrationError: a migration failed or an applied one was changed afterwards.
        SchemaMismatch: the database holds tables of an unexpected shape, or was migrated by
            a newer version of smithers_tt.
    """
    known = load_migrations()

    def work(conn: Connection) -> list[str]:
        if not engine.is_sqlite:
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_LOCK_KEY})
        _schema.migrations_table.create(conn, checkfirst=True)
        table = _schema.migrations_table
        applied = dict(conn.execute(sa.select(table.c.name, table.c.checksum)).all())
        unknown = sorted(set(applied) - {m.name for m in known})
        if unknown:
            raise SchemaMismatch(
                f"the database was migrated by a newer smithers_tt (unknown migrations "
                f"{unknown}); upgrade smithers_tt to open it"
            )
        done: list[str] = []
        for migration in known:
            if migration.name in applied:
                if applied[migration.name] != migration.checksum:
                    raise MigrationError(
                        f"migration {migration.name} was applied with checksum "
                        f"{applied[migration.name][:12]} but its file now has "
                        f"{migration.checksum[:12]}; migrations must never change once released"
                    )
                continue
            try:
                migration.module.upgrade(MigrationContext(conn))
            except sa.exc.DBAPIError as error:
                raise MigrationError(f"migration {migration.name} failed: {error.orig}") from error
            conn.execute(
                table.insert().values(
                    name=migration.name,
                    checksum=migration.checksum,
                    applied_at_ms=time.time_ns() // 1_000_000,
                )
            )
            done.append(migration.name)
        check_shape(conn)
        return done

    return engine.transaction(work, write=True)


@dataclass(frozen=True)
class StoreState:
    """What a database holds, found without writing anything.

    Attributes:
        exists: it is a smithers_tt store (it has the migrations table).
        pending: migrations this version would apply (all of them when there is no store).
        unknown: applied migrations this version does not know (a newer one migrated it).
        other_tables: tables that are not smithers_tt's, in the schema a store would use.
    """

    exists: bool
    pending: tuple[str, ...]
    unknown: tuple[str, ...]
    other_tables: tuple[str, ...]


def store_state(engine: Engine) -> StoreState:
    """Look at the database in a read-only transaction: is there a store, how current is it."""
    known = migration_names()
    table = _schema.migrations_table
    ours = {*_schema.metadata.tables, table.name}

    def work(conn: Connection) -> StoreState:
        names = set(sa.inspect(conn).get_table_names())
        others = tuple(sorted(names - ours))
        if table.name not in names:
            return StoreState(False, tuple(known), (), others)
        applied = set(conn.execute(sa.select(table.c.name)).scalars())
        pending = tuple(n for n in known if n not in applied)
        return StoreState(True, pending, tuple(sorted(applied - set(known))), others)

    return engine.transaction(work, write=False)


def row_counts(engine: Engine) -> dict[str, int]:
    """How many rows each smithers_tt table holds, read in one read-only transaction."""

    def work(conn: Connection) -> dict[str, int]:
        return {
            name: conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one()
            for name, table in _schema.metadata.tables.items()
        }

    return engine.transaction(work, write=False)


def check_store_shape(engine: Engine) -> None:
    """:func:`check_shape` in a read-only transaction."""
    engine.transaction(check_shape, write=False)


def _family(type_: sa.types.TypeEngine) -> str:
    if isinstance(type_, sa.Boolean):
        return "bool"
    if isinstance(type_, sa.Integer):
        return "int"
    if isinstance(type_, sa.LargeBinary | sa.types._Binary):
        return "bytes"
    if isinstance(type_, sa.String):
        return "text"
    return type(type_).__name__.lower()


def check_shape(conn: Connection) -> None:
    """Compare every table of the schema with the database; raise on any difference."""
    inspector = sa.inspect(conn)
    present = set(inspector.get_table_names())
    problems: list[str] = []
    for name, table in _schema.metadata.tables.items():
        if name not in present:
            problems.append(f"table {name} is missing")
            continue
        actual = {c["name"]: c for c in inspector.get_columns(name)}
        expected = {c.name: c for c in table.columns}
        for missing in sorted(set(expected) - set(actual)):
            problems.append(f"{name}.{missing} is missing")
        for extra in sorted(set(actual) - set(expected)):
            problems.append(f"{name}.{extra} is not a known column")
        for col_name in sorted(set(expected) & set(actual)):
            want, have = expected[col_name], actual[col_name]
            if bool(have["nullable"]) != bool(want.nullable):
                problems.append(
                    f"{name}.{col_name} is {'NULL' if have['nullable'] else 'NOT NULL'}, "
                    f"expected {'NULL' if want.nullable else 'NOT NULL'}"
                )
            if _family(have["type"]) != _family(want.type):
                problems.append(f"{name}.{col_name} has type {have['type']}, expected {want.type}")
        pk = inspector.get_pk_constraint(name).get("constrained_columns") or []
        if list(pk) != [c.name for c in table.primary_key.columns]:
            problems.append(
                f"{name} primary key is {pk}, expected "
                f"{[c.name for c in table.primary_key.columns]}"
            )
    if problems:
        raise SchemaMismatch(
            "the database does not have the shape smithers_tt expects: "
            + "; ".join(problems)
            + ". Point smithers_tt at its own database (or schema), or repair these tables.",
            problems=problems,
        )
