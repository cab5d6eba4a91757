"""Migrations: exact shape, idempotence, concurrent start-up, fail-closed checks."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import sqlalchemy as sa

import smithers_tt as st
from smithers_tt.errors import MigrationError, SchemaMismatch
from smithers_tt.store import Engine, migrate
from smithers_tt.store.backend import _schema as S
from smithers_tt.store.backend._alembic_v1 import V1_CHECKSUMS
from smithers_tt.store.backend._migrate import VERSION_TABLE, migration_names, upgrade
from smithers_tt.store.backend._schema import metadata
from tests.fixtures.v1 import v1_support

from ._support import count, execute, rewound_run, run_together
from ._v1_layout import make_v1_layout

TABLES = sorted(metadata.tables)
KNOWN = migration_names()


def table_names(raw: sa.Engine) -> set[str]:
    return set(sa.inspect(raw).get_table_names())


def migration_rows(raw: sa.Engine) -> list[tuple[str, str]]:
    with raw.connect() as conn:
        return [tuple(r) for r in conn.execute(sa.text("SELECT name, checksum FROM tt_migrations"))]


def version_rows(raw: sa.Engine) -> list[str]:
    with raw.connect() as conn:
        return list(conn.execute(sa.text("SELECT version_num FROM tt_alembic_version")).scalars())


def test_migrate_applies_every_migration_when_the_database_is_empty(db_url: str) -> None:
    engine = Engine(db_url)
    try:
        assert migrate(engine) == KNOWN
    finally:
        engine.dispose()


def test_migrate_creates_exactly_the_schema_tables(db: st.Database) -> None:
    # and Alembic's version table, the one table the schema module does not describe
    assert set(sa.inspect(db.engine.sa).get_table_names()) == {*TABLES, VERSION_TABLE}


@pytest.mark.parametrize("table", TABLES)
def test_migrate_creates_columns_nullability_and_primary_key_of_the_schema(
    db: st.Database, table: str
) -> None:
    inspector = sa.inspect(db.engine.sa)
    want = metadata.tables[table]
    columns = {c["name"]: bool(c["nullable"]) for c in inspector.get_columns(table)}
    assert columns == {c.name: bool(c.nullable) for c in want.columns}
    primary_key = inspector.get_pk_constraint(table)["constrained_columns"]
    assert primary_key == [c.name for c in want.primary_key.columns]
    indexes = {i["name"] for i in inspector.get_indexes(table)}
    assert indexes == {i.name for i in want.indexes}


def test_migrate_records_the_head_revision_and_marks_the_store_for_v1(db: st.Database, raw) -> None:
    assert version_rows(raw) == [KNOWN[-1]]
    # the one row smithers_tt 0.1 reads, to refuse a store a newer version made
    assert [name for name, _ in migration_rows(raw)] == ["0006_alembic"]


def test_migrate_is_a_no_op_when_run_twice(db: st.Database, raw) -> None:
    before = version_rows(raw), migration_rows(raw)
    assert migrate(db.engine) == []
    assert (version_rows(raw), migration_rows(raw)) == before


CONNECT_AND_CREATE_A_RUN = """
import smithers_tt
url = args[0]
wait_for_go()
db = smithers_tt.connect(url)
run, _ = db.store.create_run("started-at-once")
emit(run.run_id)
db.close()
"""


def test_connect_succeeds_in_8_processes_when_they_migrate_an_empty_database_at_once(
    db_url: str, raw, tmp_path
) -> None:
    run_ids = run_together(CONNECT_AND_CREATE_A_RUN, [[db_url]] * 8, tmp_path)

    assert version_rows(raw) == [KNOWN[-1]]
    assert len(migration_rows(raw)) == 1  # the revisions ran once
    db = st.connect(db_url)
    try:
        assert sorted(r.run_id for r in db.store.list_runs().items) == sorted(run_ids)
    finally:
        db.close()


# --- fail closed on a shape we do not recognise ---------------------------------------------

NULLABLE_CONTENT_HASH = {
    # SQLite: a rowid table's TEXT PRIMARY KEY accepts NULL (and many of them).
    "sqlite": "CREATE TABLE tt_checkpoint_contents (content_hash TEXT PRIMARY KEY, "
    "data BLOB NOT NULL, size_bytes INTEGER NOT NULL, created_at_ms BIGINT NOT NULL)",
    # PostgreSQL: a primary key is never nullable; a unique column is.
    "postgresql": "CREATE TABLE tt_checkpoint_contents (content_hash VARCHAR(64) UNIQUE, "
    "data BYTEA NOT NULL, size_bytes INTEGER NOT NULL, created_at_ms BIGINT NOT NULL)",
}


def nullable_content_hash(raw: sa.Engine) -> None:
    with raw.begin() as conn:
        conn.exec_driver_sql(NULLABLE_CONTENT_HASH[raw.dialect.name])


def _schema_with(change: Callable[[sa.MetaData], None]) -> Callable[[sa.Engine], None]:
    def create(raw: sa.Engine) -> None:
        copy = sa.MetaData()
        for table in metadata.sorted_tables:
            table.to_metadata(copy)
        change(copy)
        copy.create_all(raw)

    return create


def _agent_id_not_null(md: sa.MetaData) -> None:
    md.tables["tt_frame_rows"].c.agent_id.nullable = False


def _unknown_column(md: sa.MetaData) -> None:
    md.tables["tt_runs"].append_column(sa.Column("surprise", sa.Text, nullable=True))


@pytest.mark.parametrize(
    ("build", "problem"),
    [
        pytest.param(
            nullable_content_hash,
            "tt_checkpoint_contents.content_hash is NULL, expected NOT NULL",
            id="nullable_content_hash",
        ),
        pytest.param(
            _schema_with(_agent_id_not_null),
            "tt_frame_rows.agent_id is NOT NULL, expected NULL",
            id="agent_id_not_null",
        ),
        pytest.param(
            _schema_with(_unknown_column),
            "tt_runs.surprise is not a known column",
            id="unknown_column",
        ),
    ],
)
def test_connect_raises_schema_mismatch_and_commits_nothing_when_a_table_has_another_shape(
    db_url: str, raw, build: Callable[[sa.Engine], None], problem: str
) -> None:
    build(raw)
    tables_before = table_names(raw)

    with pytest.raises(SchemaMismatch) as caught:
        st.connect(db_url)

    assert problem in caught.value.details["problems"]
    assert table_names(raw) == tables_before  # no version table either
    if "tt_migrations" in tables_before:
        assert migration_rows(raw) == []


def test_connect_raises_migration_error_when_an_applied_migration_changed(db_url: str, raw) -> None:
    # Only stores of smithers_tt 0.1 record checksums: their migrations became revisions.
    make_v1_layout(db_url, {**V1_CHECKSUMS, KNOWN[0]: "0" * 64})

    with pytest.raises(MigrationError, match=KNOWN[0]):
        st.connect(db_url)
    assert VERSION_TABLE not in table_names(raw)


def test_connect_raises_schema_mismatch_when_a_newer_migration_was_applied(
    db: st.Database,
) -> None:
    execute(db, "UPDATE tt_alembic_version SET version_num = :n", n="9999_future")

    with pytest.raises(SchemaMismatch, match="9999_future"):
        st.connect(db.url)
    with pytest.raises(SchemaMismatch, match="9999_future"):
        st.connect(db.url, read_only=True)
    assert count(db, VERSION_TABLE, version_num="9999_future") == 1


def test_the_checks_of_the_schema_module_are_the_database_s_own(db: st.Database, raw) -> None:
    # Every status and frame kind the code knows is accepted (0007 widened the checks on
    # both backends); a value it does not know is still refused; the edit left a sound file.
    stamp = 1
    with raw.begin() as conn:
        for n, status in enumerate(S.RUN_STATUSES):
            conn.execute(
                sa.insert(S.runs).values(
                    run_id=f"r{n}", workflow="w", status=status, owner_epoch=0,
                    cancel_requested=False, clock=len(S.FRAME_KINDS), created_at_ms=stamp,
                    updated_at_ms=stamp,
                )
            )  # fmt: skip
        conn.execute(
            sa.insert(S.frame_rows),
            [
                {"run_id": "r0", "frame_no": no, "kind": kind, "created_at_ms": stamp}
                for no, kind in enumerate(S.FRAME_KINDS)
            ],
        )
    for table, values in [
        (S.runs, {"run_id": "bad", "workflow": "w", "status": "asleep", "owner_epoch": 0,
                  "cancel_requested": False, "clock": 0, "created_at_ms": 1,
                  "updated_at_ms": 1}),
        (S.frame_rows, {"run_id": "r0", "frame_no": 999, "kind": "run_asleep", "created_at_ms": 1}),
    ]:  # fmt: skip
        with pytest.raises(sa.exc.IntegrityError), raw.begin() as conn:
            conn.execute(sa.insert(table).values(**values))
    assert count(db, "tt_runs") == len(S.RUN_STATUSES)
    with raw.connect() as conn:
        if raw.dialect.name == "sqlite":
            assert conn.exec_driver_sql("PRAGMA integrity_check").scalar_one() == "ok"


def test_0010_lets_a_store_of_0009_record_breakpoint_changes_and_keeps_its_rows(
    db_url: str, raw
) -> None:
    # A store at 0009 with a paused run: its frames are refused a 'breakpoints_set' row.
    with raw.begin() as conn:
        upgrade(conn, to="0009_rewinds")
        conn.execute(
            sa.insert(S.runs).values(
                run_id="old", workflow="w", status="paused", owner_epoch=2,
                cancel_requested=False, clock=1, created_at_ms=1, updated_at_ms=1,
            )
        )  # fmt: skip
        conn.execute(
            sa.insert(S.frames),
            [
                {"run_id": "old", "frame_no": 0, "kind": "run_created", "created_at_ms": 1,
                 "data_json": '{"breakpoints":{"after":[],"before":["a"]}}'},
                {"run_id": "old", "frame_no": 1, "kind": "run_paused", "created_at_ms": 1,
                 "data_json": '{"reason":"breakpoint","when":"before"}', "node_id": "a"},
            ],
        )  # fmt: skip
    late = {"run_id": "old", "frame_no": 2, "kind": "breakpoints_set", "created_at_ms": 1}
    with pytest.raises(sa.exc.IntegrityError), raw.begin() as conn:
        conn.execute(sa.insert(S.frames).values(**late))
    with st.connect(db_url) as db:  # migrates to 0010
        assert version_rows(raw) == [KNOWN[-1]] and "0010_breakpoints" in KNOWN
        assert [f.kind for f in db.store.frames("old")] == ["run_created", "run_paused"]
        db.set_breakpoints("old", break_before=["b"], break_after=["a"])
        frames = db.store.pause_frames("old")
        assert [(f.frame_no, f.kind) for f in frames] == [
            (0, "run_created"), (1, "run_paused"), (2, "breakpoints_set")
        ]  # fmt: skip
        assert frames[-1].data == {"breakpoints": {"before": ["b"], "after": ["a"]}}
    with raw.connect() as conn:
        if raw.dialect.name == "sqlite":
            assert conn.exec_driver_sql("PRAGMA integrity_check").scalar_one() == "ok"


def test_0012_writes_the_partial_indexes_of_0011_as_ors_on_sqlite_and_keeps_every_row(
    db_url: str, raw
) -> None:
    # A store at 0011 with a run: its frames of every kind the two partial indexes list.
    kinds = ["run_created", "attempt_started", "checkpoint", "attempt_finished", "node_state",
             "run_finished", "reset", "run_claimed"]  # fmt: skip
    with raw.begin() as conn:
        upgrade(conn, to="0011_fork_by_reference")
        conn.execute(
            sa.insert(S.runs).values(
                run_id="old", workflow="w", status="finished", owner_epoch=2,
                cancel_requested=False, clock=len(kinds) - 1, created_at_ms=1, updated_at_ms=1,
            )
        )  # fmt: skip
        conn.execute(
            sa.insert(S.frames),
            [
                {"run_id": "old", "frame_no": no, "kind": kind, "created_at_ms": 1,
                 "node_id": None if kind.startswith(("run_", "reset")) else "a",
                 "iteration": 0, "attempt": 1}
                for no, kind in enumerate(kinds)
            ],
        )  # fmt: skip
    with st.connect(db_url) as db:  # migrates to 0012
        assert version_rows(raw) == [KNOWN[-1]] and "0012_partial_index_or" in KNOWN
        assert [f.kind for f in db.store.frames("old")] == kinds
    with raw.connect() as conn:
        dialect = raw.dialect.name
        if dialect == "sqlite":
            rows = conn.exec_driver_sql(
                "SELECT name, sql FROM sqlite_master WHERE name LIKE 'tt_frames_%_level'"
            ).all()
            assert {name for name, _ in rows} == {"tt_frames_run_level", "tt_frames_node_level"}
            for name, sql in rows:  # the chain the queries write, not an IN list
                where = S.RUN_LEVEL_WHERE if "run_level" in name else S.NODE_LEVEL_WHERE
                assert " IN " not in sql and where.text in sql, sql
            for where, index in (
                (f"run_id = 'old' AND frame_no <= 5 AND {S.RUN_LEVEL_WHERE.text}", "run_level"),
                (f"run_id = 'old' AND node_id = 'a' AND iteration = 0 AND "
                 f"{S.NODE_LEVEL_WHERE.text}", "node_level"),
            ):  # fmt: skip
                plan = conn.exec_driver_sql(
                    f"EXPLAIN QUERY PLAN SELECT frame_no FROM tt_frames WHERE {where}"  # noqa: S608
                ).all()
                assert any(f"tt_frames_{index}" in str(row) for row in plan), plan
            assert conn.exec_driver_sql("PRAGMA integrity_check").scalar_one() == "ok"
        else:  # PostgreSQL keeps 0011's indexes
            defs = (
                conn.exec_driver_sql(
                    "SELECT indexdef FROM pg_indexes "
                    "WHERE indexname IN ('tt_frames_run_level', 'tt_frames_node_level') "
                    "AND schemaname = current_schema()"
                )
                .scalars()
                .all()
            )
            assert len(defs) == 2 and all("ANY" in d for d in defs), defs
        run_level = [
            row[0]
            for row in conn.execute(
                sa.select(S.frames.c.frame_no)
                .where(S.frames.c.run_id == "old", S.RUN_LEVEL_WHERE)
                .order_by(S.frames.c.frame_no)
            )
        ]
        assert run_level == [0, 5, 6, 7]


def test_0013_drops_the_foreign_key_of_kept_frames_and_keeps_every_rewind_undoable(
    db_url: str, raw
) -> None:
    # A store at 0012 with a finished run rewound to frame 1: frame 2 is kept for undo.
    with raw.begin() as conn:
        upgrade(conn, to="0012_partial_index_or")
        frames = rewound_run(conn, "old")
    assert [fk["referred_table"] for fk in sa.inspect(raw).get_foreign_keys("tt_rewinds")] == [
        "tt_runs"
    ]
    assert sa.inspect(raw).get_foreign_keys("tt_rewound_frames") != []
    with raw.begin() as conn:
        upgrade(conn, to="0013_rewound_frames_unbound")
    assert sa.inspect(raw).get_foreign_keys("tt_rewound_frames") == []
    assert count_rows(raw, "tt_rewound_frames") == 1
    with st.connect(db_url) as db:  # migrates to the head
        assert version_rows(raw) == [KNOWN[-1]] and "0013_rewound_frames_unbound" in KNOWN
        db.undo_rewind("old")
        assert [f.kind for f in db.store.frames("old")] == [f["kind"] for f in frames]
        assert db.get_run("old").record.status == "finished"
        assert count(db, "tt_rewinds") == 0
    with raw.connect() as conn:
        if raw.dialect.name == "sqlite":
            assert conn.exec_driver_sql("PRAGMA integrity_check").scalar_one() == "ok"


def count_rows(raw: sa.Engine, table: str) -> int:
    with raw.connect() as conn:
        return conn.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar_one()  # noqa: S608


def _old_run(conn, status: str) -> None:
    """A run ``old-run-1`` (workflow ``w``) as an older release wrote it: its row and frame 0."""
    conn.execute(
        sa.insert(S.runs).values(
            run_id="old-run-1", workflow="w", status=status, owner_epoch=0,
            cancel_requested=False, clock=0, created_at_ms=1, updated_at_ms=1,
        )
    )  # fmt: skip
    conn.execute(
        sa.insert(S.frames).values(
            run_id="old-run-1", frame_no=0, kind="run_created", created_at_ms=1
        )
    )


def test_0014_adds_run_labels_and_runs_made_before_have_none(db_url: str, raw) -> None:
    # A store at 0013 with a run: no labels table yet.
    with raw.begin() as conn:
        upgrade(conn, to="0013_rewound_frames_unbound")
        _old_run(conn, "queued")
    assert "tt_run_labels" not in table_names(raw)
    with st.connect(db_url) as db:  # migrates to 0014
        assert version_rows(raw) == [KNOWN[-1]] and "0014_run_labels" in KNOWN
        assert db.get_run("old-run").record.labels == {}
        assert [r.id for r in db.runs(labels={"case": "x"})] == []
        new = db.store.create_run("w", labels={"case": "x"})[0]
        assert [r.id for r in db.runs(labels={"case": "x"})] == [new.run_id]
    indexes = {i["name"]: i["column_names"] for i in sa.inspect(raw).get_indexes("tt_run_labels")}
    assert indexes == {"tt_run_labels_value": ["key", "value", "run_id"]}
    with raw.connect() as conn:
        if raw.dialect.name == "sqlite":
            assert conn.exec_driver_sql("PRAGMA integrity_check").scalar_one() == "ok"


def test_0015_adds_model_calls_and_runs_made_before_have_none(db_url: str, raw) -> None:
    # A store at 0014 with a finished run: no model calls table yet.
    with raw.begin() as conn:
        upgrade(conn, to="0014_run_labels")
        _old_run(conn, "finished")
    assert "tt_model_calls" not in table_names(raw)
    with st.connect(db_url) as db:  # migrates to 0015
        assert version_rows(raw) == [KNOWN[-1]] and "0015_model_calls" in KNOWN
        assert db.store.model_calls("old-run-1") == []
        _, fence = db.store.create_run("w")
        key = db.store.start_attempt(fence, "n").key
        call = st.ModelCall("m", [{"role": "user", "content": "hi"}], prompt_tokens=2)
        db.store.finish_attempt(fence, key, "finished", model_calls=[call])
        assert [c.prompt_tokens for c in db.store.model_calls(fence.run_id)] == [2]
    indexes = {i["name"]: i["column_names"] for i in sa.inspect(raw).get_indexes("tt_model_calls")}
    assert indexes == {
        "tt_model_calls_frame": ["run_id", "frame_no"],
        "tt_model_calls_request": ["request_hash"],
        "tt_model_calls_reply": ["reply_hash"],
    }


def _rows(url: str) -> dict:
    rows = v1_support.dump_tables(url)
    return {k: v for k, v in rows.items() if k not in (VERSION_TABLE, "tt_commit_tokens")}


def test_0018_writes_the_checks_as_ors_and_keeps_every_run_and_rewind(
    db_url: str, fresh_url: str, raw
) -> None:
    # A store at 0017 holding a finished run rewound to frame 1 (frame 2 kept for undo).
    with raw.begin() as conn:
        upgrade(conn, to="0017_sweep_promotions")
        frames = rewound_run(conn, "old")
    rows = _rows(db_url)
    with raw.begin() as conn:
        upgrade(conn, to="0018_check_or_chains")
    assert _rows(db_url) == rows  # every row as it was (the version row aside)
    with st.connect(db_url) as db:  # on to the head
        assert version_rows(raw) == [KNOWN[-1]] and "0018_check_or_chains" in KNOWN
        db.undo_rewind("old")  # what the store kept still works
        assert [f.kind for f in db.store.frames("old")] == [f["kind"] for f in frames]
    st.connect(fresh_url).close()
    assert v1_support.reflect(db_url) == v1_support.reflect(fresh_url)

    with raw.connect() as conn:
        if raw.dialect.name == "sqlite":
            for table in ("tt_runs", "tt_nodes", "tt_attempts", "tt_frame_rows"):
                sql = conn.exec_driver_sql(
                    "SELECT sql FROM sqlite_master WHERE name = ?", (table,)
                ).scalar_one()
                assert " IN (" not in sql, sql
            # No temporary table of the kinds per row written (what the IN list cost).
            plan = conn.exec_driver_sql(
                "EXPLAIN INSERT INTO tt_frame_rows (run_id, frame_no, kind, created_at_ms) "
                "VALUES ('x', 0, 'checkpoint', 1)"
            ).all()
            assert "OpenEphemeral" not in {row[1] for row in plan}
            assert conn.exec_driver_sql("PRAGMA integrity_check").scalar_one() == "ok"
        else:
            defs = conn.exec_driver_sql(
                "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
                "WHERE conname IN ('tt_runs_status', 'tt_nodes_state', 'tt_attempts_state', "
                "'tt_frames_kind') AND connamespace = current_schema()::regnamespace"
            ).all()
            assert len(defs) == 4 and all(" OR " in d and "ANY" not in d for _, d in defs), defs
    # The chains refuse what the lists refused.
    for table, values in [
        (S.runs, {"run_id": "bad", "workflow": "w", "status": "asleep", "owner_epoch": 0,
                  "cancel_requested": False, "clock": 0, "created_at_ms": 1,
                  "updated_at_ms": 1}),
        (S.frame_rows, {"run_id": "old", "frame_no": 999, "kind": "run_asleep",
                        "created_at_ms": 1}),
        (S.nodes, {"run_id": "old", "node_id": "n", "iteration": 0, "state": "asleep",
                   "updated_at_ms": 1}),
        (S.attempts, {"run_id": "old", "node_id": "n", "iteration": 0, "attempt": 1,
                      "state": "asleep", "owner_epoch": 0, "next_sequence": 0,
                      "discard_resume": False, "started_at_ms": 1}),
    ]:  # fmt: skip
        with pytest.raises(sa.exc.IntegrityError), raw.begin() as conn:
            conn.execute(sa.insert(table).values(**values))


def test_opening_a_store_at_the_head_imports_no_alembic(db: st.Database) -> None:
    """A store already migrated is opened (and its shape checked) without Alembic, which is
    imported only to migrate: a tenth of a second of CPU at every command's start."""
    import subprocess
    import sys

    url = db.engine.sa.url.render_as_string(hide_password=False)
    code = (
        "import sys, smithers_tt as st\n"
        "st.connect(sys.argv[1]).close()\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('alembic', 'mako')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, url], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip() == "[]", done.stdout


def _execute(url: str, statement: str) -> None:
    """Change a store behind its back: one statement in a transaction of a plain engine."""
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(sa.text(statement))
    finally:
        engine.dispose()


def test_a_store_of_another_shape_is_refused_after_one_of_the_right_shape_passed(
    db: st.Database, fresh_url: str
) -> None:
    """The check remembers the catalog of a store that passed (``db``, opened in this process)
    and passes one that reads the same in one query: a store that differs in one column is
    still compared table by table and refused, naming the column."""
    st.connect(fresh_url).close()
    _execute(fresh_url, "ALTER TABLE tt_runs ADD COLUMN extra TEXT")
    st.connect(db.engine.sa.url.render_as_string(hide_password=False)).close()  # passes again
    with pytest.raises(SchemaMismatch, match=r"tt_runs\.extra is not a known column"):
        st.connect(fresh_url)


def test_a_version_table_recording_two_revisions_is_refused(db: st.Database) -> None:
    """Alembic's record holds one revision; a store whose record holds two is not opened as
    though it were at either (the version row is read without Alembic)."""
    url = db.engine.sa.url.render_as_string(hide_password=False)
    db.close()
    _execute(url, "INSERT INTO tt_alembic_version VALUES ('0001_initial')")
    with pytest.raises(MigrationError, match="more than one revision"):
        st.connect(url)
