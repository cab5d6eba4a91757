"""Stores of smithers_tt 0.1 upgrade in place, losing nothing; fresh stores match them.

The fixture (tests/fixtures/v1, made by ``make_v1_store.py`` with the code of 0.1) holds a
real 0.1 SQLite store, a dump of its rows and what 0.1 read from it. SQLite: a copy of the
store is upgraded. PostgreSQL: the revisions up to 0.1's head build its tables, the dump is
loaded and recorded as 0.1 recorded it, then the store is upgraded. Either way today's code
must read exactly what 0.1 read.
"""

from __future__ import annotations

import ast
import gzip
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

import smithers_tt as st
from smithers_tt.errors import MigrationError, SchemaMismatch
from smithers_tt.store import Engine, check_store_shape, migrate, store_state
from smithers_tt.store.backend import _schema
from smithers_tt.store.backend._alembic_v1 import V1_CHECKSUMS
from smithers_tt.store.backend._migrate import (
    VERSION_TABLE,
    alembic_order,
    migration_names,
    migrations_dir,
    upgrade,
)
from tests.conftest import table_names as conftest_table_names
from tests.fixtures.v1 import v1_support

from ._v1_layout import V1_HEAD, make_v1_layout

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "v1"


def _load(name: str) -> Any:
    with gzip.open(FIXTURE / name) as data:
        return json.load(data)


EXPECTED = _load("v1_expected.json.gz")


def _backend(url: str) -> str:
    return "sqlite" if url.startswith("sqlite") else "postgresql"


def _without_version_table(shape: dict[str, Any]) -> dict[str, Any]:
    return {name: table for name, table in shape.items() if name != VERSION_TABLE}


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
    expected = {
        **expected,
        "runs": _with_todays_fold(expected["runs"]),
        "lineage": _with_labels(expected["lineage"]),
    }
    for part in ("runs", "contents", "lineage", "langgraph"):
        assert found[part] == expected[part], part
    assert len(found["runs"]) == 11 and found["langgraph"][v1_support.THREADS[0]]


def _with_todays_fold(runs: dict[str, Any]) -> dict[str, Any]:
    """What 0.1 showed, with the one fold fix made since: after a reset frame, until the run
    ends again, a snapshot has no run output or error (the reset cleared them from the run
    row; 0.1's fold kept showing the ending the run no longer had). Records gained two fields
    since, ``inherits``: False for every run of 0.1 (its forks restate their parent in base
    frames), and ``labels``: empty for every run of 0.1; the fork tree's entries gained
    ``started``: whether the run has a frame after its frame 0 (read from 0.1's frames).
    Nothing stored differs: frames, records and payloads are compared as 0.1 wrote them."""
    started = {run_id: len(run.get("frames", ())) > 1 for run_id, run in runs.items()}
    fixed = {}
    for run_id, run in runs.items():
        cleared, snapshots = False, dict(run["snapshots"])
        for frame in run["frames"]:
            if frame["kind"] == "reset":
                cleared = True
            elif frame["kind"] in ("run_finished", "run_failed", "run_cancelled"):
                cleared = False
            key = str(frame["frame_no"])
            if cleared and key in snapshots:
                snapshots[key] = {**snapshots[key], "output": None, "error": None}
        fixed[run_id] = {**run, "snapshots": snapshots}
        if "record" in run:
            fixed[run_id]["record"] = {**run["record"], "inherits": False, "labels": {}}
        if "tree" in run:
            fixed[run_id]["tree"] = [
                {**edge, "started": started.get(edge["run_id"], True)} for edge in run["tree"]
            ]
    return fixed


def _with_labels(lineage: dict[str, Any]) -> dict[str, Any]:
    """What 0.1's lineage showed, with the column the ``runs`` view gained since: ``labels``,
    ``{}`` for every run of 0.1 (labels came with revision 0014; records gained the field,
    empty likewise: see :func:`_with_todays_fold`)."""
    runs = lineage["runs"]
    data = [[*row, "{}"] for row in runs["data"]]
    return {**lineage, "runs": {**runs, "columns": [*runs["columns"], "labels"], "data": data}}


def test_upgraded_v1_store_keeps_its_foreign_keys_and_points_each_ref_at_its_frame(
    v1_url: str,
) -> None:
    engine = Engine(v1_url)
    try:
        migrate(engine)
        if _backend(v1_url) == "sqlite":  # 0008 rebuilt the refs table: nothing may dangle
            rows = engine.transaction(
                lambda conn: conn.exec_driver_sql("PRAGMA foreign_key_check").all(), write=False
            )
            assert rows == []
        refs = engine.transaction(
            lambda conn: conn.execute(
                sa.select(sa.func.count()).select_from(_schema.refs)
            ).scalar(),
            write=False,
        )
    finally:
        engine.dispose()
    db = st.connect(v1_url, read_only=True)
    try:
        report = db.verify()
        listed = sum(
            len(db.store.list_refs(run.id, limit=1000).items) for run in db.runs(limit=100)
        )
    finally:
        db.close()
    assert report.ok, report
    assert (report.missing, report.mismatched) == ([], [])
    assert listed == refs == 46  # every ref of 0.1 joins its checkpoint frame


def test_upgraded_v1_store_and_fresh_store_have_one_schema(v1_url: str, fresh_url: str) -> None:
    # Tables, columns with types and nullability, primary keys, indexes, foreign keys with
    # their ON DELETE, check constraints (the order of columns aside: 0.1 made tt_runs in one
    # go, revision 0002 adds its three columns at the end).
    st.connect(v1_url).close()  # upgrades, and checks the shape against _schema
    st.connect(fresh_url).close()

    assert v1_support.reflect(v1_url) == v1_support.reflect(fresh_url)


def test_revisions_up_to_v1_create_the_schema_v1_created_whatever_the_schema_module_says(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Were a revision to build tables from _schema, emptying it would change what it makes.
    monkeypatch.setattr(_schema, "metadata", sa.MetaData())
    engine = sa.create_engine(db_url)
    try:
        with engine.begin() as conn:
            assert upgrade(conn, to=V1_HEAD) == migration_names()[: len(V1_CHECKSUMS)]
    finally:
        engine.dispose()

    made = _without_version_table(v1_support.reflect(db_url))

    assert made == EXPECTED["schema"][_backend(db_url)]


def _version(url: str) -> list[str] | None:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            if VERSION_TABLE not in sa.inspect(conn).get_table_names():
                return None
            return list(conn.execute(sa.text("SELECT version_num FROM tt_alembic_version")))
    finally:
        engine.dispose()


def test_upgrade_of_a_v1_store_made_before_its_last_migrations_stamps_its_own_revision(
    db_url: str,
) -> None:
    make_v1_layout(
        db_url,
        {n: c for n, c in V1_CHECKSUMS.items() if n <= "0003_langgraph"},
        to="0003_langgraph",
    )

    engine = Engine(db_url)
    try:
        applied = migrate(engine)
    finally:
        engine.dispose()

    assert applied == migration_names()[3:]
    assert applied[:2] == ["0004_workers", "0005_commit_tokens"]
    assert _version(db_url) == [(migration_names()[-1],)]


@pytest.mark.parametrize(
    ("rows", "error", "message"),
    [
        pytest.param(
            {**V1_CHECKSUMS, "0002_time_travel": "0" * 64},
            MigrationError,
            "0002_time_travel was applied with checksum 000000000000",
            id="changed_checksum",
        ),
        pytest.param(
            {n: c for n, c in V1_CHECKSUMS.items() if n != "0002_time_travel"},
            MigrationError,
            "['0002_time_travel'] are not recorded",
            id="gap",
        ),
        pytest.param(
            {**V1_CHECKSUMS, "0006_future": "f" * 64},
            SchemaMismatch,
            "newer smithers_tt (unknown migrations ['0006_future'])",
            id="newer",
        ),
    ],
)
def test_upgrade_refuses_a_v1_record_that_v1_did_not_write_and_commits_nothing(
    db_url: str, rows: dict[str, str], error: type[Exception], message: str
) -> None:
    make_v1_layout(db_url, rows)

    with pytest.raises(error) as caught:
        st.connect(db_url)

    assert message in str(caught.value)
    assert _version(db_url) is None


def test_read_only_open_of_a_v1_store_names_the_pending_revisions_and_writes_nothing(
    v1_url: str,
) -> None:
    with pytest.raises(SchemaMismatch, match="0006_alembic") as caught:
        st.connect(v1_url, read_only=True, create=False)

    assert "older smithers_tt" in str(caught.value)
    assert _version(v1_url) is None


def test_revisions_are_frozen_they_never_read_the_schema_module() -> None:
    versions = migrations_dir() / "versions"
    files = sorted(versions.glob("[0-9][0-9][0-9][0-9]_*.py"))

    assert [p.stem for p in files] == migration_names() == alembic_order()
    for path in files:
        tree = ast.parse(path.read_text())
        imported = {
            name.split(".")[0]
            for node in ast.walk(tree)
            for name in (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
        }
        # Their DDL is literal: SQLAlchemy's types and Alembic's operations, nothing of ours.
        assert imported <= {"sqlalchemy", "alembic", "time"}, path.name
        # Nor do they name it (``PRAGMA writable_schema`` is SQLite's, not the module).
        text = path.read_text().replace("writable_schema", "")
        assert "_schema" not in text, path.name


def test_head_revision_has_the_shape_of_the_schema_module(db_url: str) -> None:
    engine = Engine(db_url)
    try:
        migrate(engine)
        check_store_shape(engine)  # raises SchemaMismatch on any difference
        assert store_state(engine).pending == ()
    finally:
        engine.dispose()


def test_a_failing_revision_rolls_back_every_revision_of_the_upgrade(db_url: str) -> None:
    make_v1_layout(
        db_url,
        {n: c for n, c in V1_CHECKSUMS.items() if n <= "0003_langgraph"},
        to="0003_langgraph",
    )
    engine = sa.create_engine(db_url)
    try:
        with engine.begin() as conn:  # in the way of 0005, which creates this table
            conn.execute(sa.text("CREATE TABLE tt_commit_tokens (x INTEGER)"))
    finally:
        engine.dispose()

    with pytest.raises(
        MigrationError, match=r'from 0003_langgraph .*tt_commit_tokens"? already exists'
    ):
        st.connect(db_url)

    assert "tt_workers" not in conftest_table_names(db_url)  # 0004 ran, and was rolled back
    assert _version(db_url) is None  # not even the stamp of the 0.1 record was kept
