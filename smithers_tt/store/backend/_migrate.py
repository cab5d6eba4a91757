"""Apply the Alembic revisions in ``migrations/`` and check the result against the schema.

Rules (see DESIGN.md, "Persistence", and docs/migrations.md):

* all pending revisions run in **one transaction** under a lock: a PostgreSQL advisory
  transaction lock, or SQLite's ``BEGIN IMMEDIATE``; so several processes starting at once
  all succeed, one migrating and the others finding the work done;
* each revision states its DDL literally (frozen: it never reads
  :mod:`smithers_tt.store.backend._schema`); the version is kept in :data:`VERSION_TABLE`; a version
  this smithers_tt does not know (a newer one migrated the database) stops everything with a
  clear error;
* a store made by smithers_tt 0.1 (hand-written migrations recorded in ``tt_migrations``) is
  recognised, stamped at its revision and upgraded in place (:mod:`._alembic_v1`);
* after migrating, every table is compared with :mod:`smithers_tt.store.backend._schema` (columns,
  nullability, primary keys, type families); an unexpected shape fails closed with
  :class:`~smithers_tt.errors.SchemaMismatch` and nothing is committed.
"""

from __future__ import annotations

import functools
import io
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from smithers_tt.errors import MigrationError, SchemaMismatch
from smithers_tt.store.backend import _schema
from smithers_tt.store.backend._alembic_v1 import V1_TABLE, v1_revision, v1_rows, v1_unknown
from smithers_tt.store.backend._dialect import dialect_of
from smithers_tt.store.backend._engine import Engine

VERSION_TABLE = "tt_alembic_version"
"""Alembic's one-row table holding the revision the store is at (``tt_`` like every table)."""


def migrations_dir() -> Path:
    """Where the migrations are: inside the installed wheel, or the source checkout."""
    package = Path(__file__).resolve().parents[2]
    shipped = package / "_migrations"
    return shipped if shipped.is_dir() else package.parent / "migrations"


def _versions() -> Path:
    folder = migrations_dir() / "versions"
    if not folder.is_dir():
        raise MigrationError(f"migrations folder not found at {folder}; reinstall smithers_tt")
    return folder


@functools.cache
def _names(folder: Path) -> tuple[str, ...]:
    return tuple(sorted(p.stem for p in folder.glob("[0-9][0-9][0-9][0-9]_*.py")))


def migration_names() -> list[str]:
    """The revision ids, oldest first (``0001_initial`` ...); the last one is the head.

    Each revision's id is its file's name, and the files' order is Alembic's order of the
    revisions (a test checks both against Alembic's own walk, :func:`alembic_order`): so a
    store already at the head is opened without importing Alembic (a tenth of a second of
    every command's start), which is imported only to migrate."""
    return list(_names(_versions()))


def alembic_order() -> list[str]:
    """The revision ids in the order Alembic walks them from the base (what
    :func:`migration_names` must equal)."""
    from alembic.script import ScriptDirectory

    script = ScriptDirectory(str(_versions().parent))
    return [s.revision for s in reversed(list(script.walk_revisions("base", "heads")))]


def _current(conn: Connection) -> str | None:
    """The revision Alembic recorded (None: none yet), read as Alembic reads it."""
    rows = conn.execute(sa.text(f"SELECT version_num FROM {VERSION_TABLE}")).scalars().all()  # noqa: S608
    if len(rows) > 1:
        raise MigrationError(f"{VERSION_TABLE} records more than one revision: {sorted(rows)}")
    return rows[0] if rows else None


def _after(names: list[str], revision: str | None) -> list[str]:
    return names if revision is None else names[names.index(revision) + 1 :]


def _newer(revision: str) -> SchemaMismatch:
    return SchemaMismatch(
        f"the database was migrated by a newer smithers_tt (unknown migrations "
        f"{[revision]}); upgrade smithers_tt to open it"
    )


def _start(conn: Connection, tables: set[str], names: list[str]) -> str | None:
    """The revision the database is at (None: no store yet), or why it cannot be migrated."""
    if VERSION_TABLE in tables:
        current = _current(conn)
        if current is not None and current not in names:
            raise _newer(current)
        return current
    rows = v1_rows(conn) if V1_TABLE in tables else {}
    if rows:
        return v1_revision(rows)  # a store of smithers_tt 0.1
    if tables & set(_schema.metadata.tables):
        check_shape(conn)  # raises on the usual problems, else the tables are unrecorded:
        raise SchemaMismatch(
            "the database holds smithers_tt tables but no record of their migrations; point "
            "smithers_tt at its own database (or schema), or repair these tables",
            problems=["no migration record"],
        )
    return None


def upgrade(conn: Connection, *, to: str | None = None) -> list[str]:
    """Take the lock and apply the pending revisions up to ``to`` (the head by default) in
    ``conn``'s transaction; return their ids. :func:`migrate` is what callers use; tests call
    this one on a plain connection to build a store of an older revision.
    """
    dialect_of(conn).migration_lock(conn)
    names = migration_names()
    target = to or names[-1]
    tables = set(sa.inspect(conn).get_table_names())
    start = _start(conn, tables, names)
    pending = _after(names, start)
    if target not in pending:
        return []  # at the target already (or past it)
    from alembic import command
    from alembic.config import Config
    from alembic.util import CommandError

    config = Config(stdout=io.StringIO())  # Alembic's command output is not ours to print
    config.set_main_option("script_location", str(migrations_dir()).replace("%", "%%"))
    config.attributes.update(connection=conn, version_table=VERSION_TABLE)
    try:
        if start is not None and VERSION_TABLE not in tables:
            command.stamp(config, start)  # a 0.1 store: Alembic takes over its record
        command.upgrade(config, target)
    except (sa.exc.DBAPIError, CommandError) as error:
        why = error.orig if isinstance(error, sa.exc.DBAPIError) else error
        raise MigrationError(
            f"migrating from {start or 'an empty database'} to {target} failed: {why}"
        ) from error
    return pending[: pending.index(target) + 1]


def migrate(engine: Engine) -> list[str]:
    """Bring the database up to date; return the ids of the revisions applied now.

    Raises:
        MigrationError: a revision failed, or a store of smithers_tt 0.1 has a record that
            0.1 did not write.
        SchemaMismatch: the database holds tables of an unexpected shape, or was migrated by
            a newer version of smithers_tt.
    """

    def work(conn: Connection) -> list[str]:
        done = upgrade(conn)
        check_shape(conn)
        return done

    return engine.transaction(work, write=True)


@dataclass(frozen=True)
class StoreState:
    """What a database holds, found without writing anything.

    Attributes:
        exists: it is a smithers_tt store (it has a version table, or 0.1's ``tt_migrations``).
        pending: revisions this version would apply (all of them when there is no store).
        unknown: applied revisions this version does not know (a newer one migrated it).
        other_tables: tables that are not smithers_tt's, in the schema a store would use.
    """

    exists: bool
    pending: tuple[str, ...]
    unknown: tuple[str, ...]
    other_tables: tuple[str, ...]


def store_state(engine: Engine) -> StoreState:
    """Look at the database in a read-only transaction: is there a store, how current is it."""
    names = migration_names()
    ours = {*_schema.metadata.tables, VERSION_TABLE}

    def work(conn: Connection) -> StoreState:
        tables = set(sa.inspect(conn).get_table_names())
        others = tuple(sorted(tables - ours))
        if VERSION_TABLE in tables:
            current = _current(conn)
            if current is not None and current not in names:
                return StoreState(True, (), (current,), others)
            return StoreState(True, tuple(_after(names, current)), (), others)
        if V1_TABLE not in tables:
            return StoreState(False, tuple(names), (), others)
        rows = v1_rows(conn)  # 0.1 used the revision ids as names
        pending = tuple(n for n in names if n not in rows)
        return StoreState(True, pending, tuple(v1_unknown(rows)), others)

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
    if isinstance(type_, sa.Float):  # FLOAT on SQLite, DOUBLE PRECISION on PostgreSQL
        return "float"
    if isinstance(type_, sa.LargeBinary | sa.types._Binary):
        return "bytes"
    if isinstance(type_, sa.String):
        return "text"
    return type(type_).__name__.lower()


_PASSED: dict[tuple[str, str], tuple[tuple[object, ...], ...]] = {}
"""The catalog rows (``Dialect.shape_rows``) of the last store whose shape passed the check,
by dialect class and head revision: a store whose rows are the same has passed too."""


def check_shape(conn: Connection) -> None:
    """Compare every table of the schema with the database; raise on any difference.

    Every open of a store runs it. A store whose catalog rows equal those of one that passed
    in this process passes in one query; any other is compared table by table (SQLAlchemy's
    reflection: most of a connect's time, 4 statements on PostgreSQL)."""
    ours, backend = set(_schema.metadata.tables), dialect_of(conn)
    key = (type(backend).__name__, migration_names()[-1])
    rows = tuple(row for row in backend.shape_rows(conn) if row[0] in ours)
    if _PASSED.get(key) == rows:
        return
    _compare_tables(conn)
    _PASSED[key] = rows


def _compare_tables(conn: Connection) -> None:
    inspector = sa.inspect(conn)
    present = set(inspector.get_table_names())
    ours = [name for name in _schema.metadata.tables if name in present]
    # Every table's columns and primary key in one catalog read each (PostgreSQL answers a
    # connect's check in 2 statements, not 2 per table: 0.08 s of a 0.12 s connect before).
    columns = {
        key[1]: value for key, value in inspector.get_multi_columns(filter_names=ours).items()
    }
    keys = {
        key[1]: value for key, value in inspector.get_multi_pk_constraint(filter_names=ours).items()
    }
    problems: list[str] = []
    for name, table in _schema.metadata.tables.items():
        if name not in present:
            problems.append(f"table {name} is missing")
            continue
        actual = {c["name"]: c for c in columns[name]}
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
        pk = keys[name].get("constrained_columns") or []
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
