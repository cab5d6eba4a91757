"""Stores of smithers_tt 0.1 upgrade in place, losing nothing; fresh stores match them.

The fixture (tests/fixtures/v1, made by ``make_v1_store.py`` with the code of 0.1) holds a
real 0.1 SQLite store, a dump of its rows and what 0.1 read from it. SQLite: a copy of the
store is upgraded. PostgreSQL: the revisions up to 0.1's head build its tables, the dump is
loaded and recorded as 0.1 recorded it, then the store is upgraded. Either way today's code
must read exactly what 0.1 read.
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

import smithers_tt as st
from smithers_tt.errors import MigrationError
from smithers_tt.store import Engine, migrate
from smithers_tt.store._alembic_v1 import V1_CHECKSUMS
from smithers_tt.store._migrate import VERSION_TABLE, migration_names, upgrade
from tests.fixtures.v1 import v1_support

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "v1"
V1_HEAD = "0005_commit_tokens"


def _load(name: str) -> Any:
    with gzip.open(FIXTURE / name) as data:
        return json.load(data)


EXPECTED = _load("v1_expected.json.gz")


def _backend(url: str) -> str:
    return "sqlite" if url.startswith("sqlite") else "postgresql"


def _without_version_table(shape: dict[str, Any]) -> dict[str, Any]:
    return {name: table for name, table in shape.items() if name != VERSION_TABLE}


def make_v1_layout(url: str, rows: dict[str, str] | None = None) -> None:
    """Tables as 0.1 left them (the frozen revisions up to its head, no Alembic version) and
    its record of migrations: ``rows`` (name to checksum), by default the five it shipped."""
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            upgrade(conn, to=V1_HEAD)
            conn.execute(sa.text(f"DROP TABLE {VERSION_TABLE}"))
            for name, checksum in (V1_CHECKSUMS if rows is None else rows).items():
                conn.execute(
                    sa.text(
                        "INSERT INTO tt_migrations (name, checksum, applied_at_ms) "
                        "VALUES (:n, :c, 1)"
                    ),
                    {"n": name, "c": checksum},
                )
    finally:
        engine.dispose()


@pytest.fixture
def v1_url(db_url: str, tmp_path: Path) -> str:
    """A store of smithers_tt 0.1 with the fixture's history, not yet upgraded."""
    if _backend(db_url) == "sqlite":
        copy = tmp_path / "v1_store.db"  # tests never write the tracked file
        shutil.copyfile(FIXTURE / "v1_store.db", copy)
        return f"sqlite:///{copy}"
    make_v1_layout(db_url)
    v1_support.load_tables(db_url, _load("v1_dump.json.gz"))  # with 0.1's tt_migrations rows
    return db_url


def test_upgrade_of_a_v1_store_applies_the_revisions_after_v1_and_loses_nothing(
    v1_url: str,
) -> None:
    engine = Engine(v1_url)
    try:
        assert migrate(engine) == migration_names()[migration_names().index(V1_HEAD) + 1 :]
    finally:
        engine.dispose()

    db = st.connect(v1_url, read_only=True)
    try:
        found = v1_support.describe(db, v1_support.THREADS)
    finally:
        db.close()
    expected = EXPECTED["describe"][_backend(v1_url)]
    for part in ("runs", "contents", "lineage", "langgraph"):
        assert found[part] == expected[part], part
    assert len(found["runs"]) == 11 and found["langgraph"][v1_support.THREADS[0]]


def test_upgraded_v1_store_has_the_schema_v1_created(v1_url: str) -> None:
    st.connect(v1_url).close()  # upgrades, and checks the shape against _schema

    upgraded = v1_support.reflect(v1_url)

    assert _without_version_table(upgraded) == EXPECTED["schema"][_backend(v1_url)]


def test_fresh_store_has_the_schema_v1_created(db: st.Database) -> None:
    # Tables, columns with types and nullability, primary keys, indexes, foreign keys with
    # their ON DELETE, check constraints: as 0.1 created them (the order of columns aside:
    # 0.1 made tt_runs in one go, the revisions add three columns of 0002 at the end).
    fresh = v1_support.reflect(db.url)

    assert _without_version_table(fresh) == EXPECTED["schema"][_backend(db.url)]
    assert set(fresh) - set(EXPECTED["schema"][_backend(db.url)]) == {VERSION_TABLE}
