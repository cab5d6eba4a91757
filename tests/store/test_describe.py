"""The store described for readers outside it: tables and type families, read-only access,
consistent table streams and content sizes, on both backends."""

from __future__ import annotations

import secrets
from pathlib import Path

import psycopg
import pytest

import smithers_tt as st
from smithers_tt.errors import StoreNotFound
from smithers_tt.store import Engine
from smithers_tt.store.for_lineage import (
    ColumnInfo,
    PostgresAccess,
    SqliteAccess,
    describe_tables,
    read_only_access,
    read_tables,
)
from smithers_tt.store.for_widgets import content_sizes

from ._support import checkpoint


def test_describe_tables_gives_columns_in_schema_order_with_their_type_families() -> None:
    (contents, runs) = describe_tables(["tt_checkpoint_contents", "tt_runs"])
    assert contents.name == "tt_checkpoint_contents"
    assert contents.columns == (
        ColumnInfo("content_hash", "text"),
        ColumnInfo("data", "bytes"),
        ColumnInfo("size_bytes", "integer"),
        ColumnInfo("created_at_ms", "bigint"),
    )
    families = {c.name: c.family for c in runs.columns}
    assert families["cancel_requested"] == "boolean"
    assert families["clock"] == "bigint"
    assert families["input_json"] == "text"


def test_describe_tables_refuses_a_table_the_store_does_not_have() -> None:
    with pytest.raises(KeyError, match="no store table"):
        describe_tables(["tt_runs", "tt_nope"])


def test_read_only_access_to_sqlite_is_the_resolved_file(tmp_path: Path) -> None:
    db = st.connect(f"sqlite:///{tmp_path / 'a' / '..' / 'store.db'}")
    try:
        assert read_only_access(db.engine) == SqliteAccess((tmp_path / "store.db").resolve())
    finally:
        db.close()


@pytest.mark.postgres
def test_read_only_access_to_postgres_reaches_the_store_schema_in_read_only_sessions(
    pg_schema_url: str,
) -> None:
    db = st.connect(pg_schema_url)
    try:
        run, _ = db.store.create_run("wf")
        access = read_only_access(db.engine)
    finally:
        db.close()
    assert isinstance(access, PostgresAccess)
    assert access.schema in pg_schema_url
    assert access.credentials["user"] == "postgres"
    assert "password" not in access.conninfo and "postgres" not in access.conninfo
    with psycopg.connect(access.conninfo, **access.credentials) as conn:
        assert conn.execute("SHOW default_transaction_read_only").fetchone() == ("on",)
        assert conn.execute("SELECT run_id FROM tt_runs").fetchall() == [(run.run_id,)]
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            conn.execute("DELETE FROM tt_runs")


@pytest.mark.postgres
def test_read_only_access_to_postgres_without_store_tables_is_not_found(
    pg_schema_url: str,
) -> None:
    engine = Engine(pg_schema_url)
    try:
        with pytest.raises(StoreNotFound, match="no smithers_tt tables"):
            read_only_access(engine)
    finally:
        engine.dispose()


def test_read_tables_streams_every_row_in_batches(db: st.Database) -> None:
    made = {db.store.create_run("wf", run_id=f"run-{i}")[0].run_id for i in range(5)}
    with read_tables(db.engine) as reader:
        batches = list(reader.batches("tt_runs", ["run_id", "clock"], fetch_rows=2))
    assert [len(b) for b in batches] == [2, 2, 1]
    assert {tuple(row) for batch in batches for row in batch} == {(r, 0) for r in made}


def test_read_tables_sees_one_state_while_a_writer_commits(db: st.Database) -> None:
    db.store.create_run("wf", run_id="before")
    with read_tables(db.engine) as reader:
        assert len([r for b in reader.batches("tt_frames", ["run_id"], 100) for r in b]) == 1
        db.store.create_run("wf", run_id="during")  # commits on another connection
        runs = [r[0] for b in reader.batches("tt_runs", ["run_id"], 100) for r in b]
    assert runs == ["before"]
    assert {r.run_id for r in db.store.list_runs().items} == {"before", "during"}


def test_content_sizes_reads_stored_sizes_and_leaves_unknown_hashes_out(
    db: st.Database,
) -> None:
    _, fence = db.store.create_run("wf")
    key = db.store.start_attempt(fence, "node").key
    refs = [db.store.publish(fence, key, checkpoint("x" * n)) for n in (1, 10, 1000)]
    unknown = [secrets.token_hex(32) for _ in range(600)]  # more than one query's worth
    sizes = content_sizes(db.engine, [*unknown, *(r.content_hash for r in refs)])
    assert sizes == {r.content_hash: len(db.store.read_content(r.content_hash)) for r in refs}
    assert content_sizes(db.engine, []) == {}
