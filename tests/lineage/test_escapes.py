# ruff: noqa: S608 (the statements under test are SQL built from paths on purpose)
"""The ways around a read-only attachment are closed: a second ATTACH of the store, the
scanner extensions' own functions, SQL hidden in strings, files and settings. Each is tried on
both backends and in every mode; the store (through its API, and the SQLite file's bytes)
stays exactly as it was."""

from __future__ import annotations

from pathlib import Path

import pytest

import smithers_tt as st
from smithers_tt.lineage import LineageError

from .conftest import MODES, Scenario, records, sqlite_file
from .test_read_only import facts

WRITE = "UPDATE tt_runs SET error = ''intruder''"


def _escapes(db: st.Database) -> list[str]:
    """Statements that wrote the store, read files or unlocked DuckDB before the lock-down."""
    escapes = [
        f"CALL postgres_execute('store', 'BEGIN READ WRITE; {WRITE}; COMMIT')",
        f"SELECT * FROM postgres_execute('store', 'BEGIN READ WRITE; {WRITE}; COMMIT')",
        f"CALL \"POSTGRES_EXECUTE\" /* hidden */ ('store', 'BEGIN READ WRITE; {WRITE}; COMMIT')",
        "SELECT * FROM postgres_query('store', 'SELECT set_config("
        "''default_transaction_read_only'', ''off'', false)')",
        f"SELECT * FROM sqlite_query('store', '{WRITE} RETURNING run_id')",
        "SELECT * FROM query('SELECT * FROM postgres_query(''store'', ''SELECT 1'')')",
        "SELECT * FROM json_execute_serialized_sql(json_serialize_sql('SELECT 1'))",
        "SELECT * FROM read_csv('/etc/passwd', sep = ':')",
        "SELECT * FROM glob('/etc/*')",
        "SET enable_external_access = true",
        "SET lock_configuration = false",
        "ATTACH ':memory:' AS scratch",
        "CREATE OR REPLACE VIEW runs AS SELECT 1 AS run_id",
        "EXPLAIN ANALYZE CREATE OR REPLACE VIEW runs AS SELECT 1 AS run_id",
        "EXPLAIN ANALYZE SELECT * FROM postgres_execute('store', 'SELECT 1')",
        "LOAD httpfs",
        "UPDATE EXTENSIONS",
        "SELECT * FROM enable_logging(storage = 'file', storage_path = '/tmp/smithers-tt-log')",
        "CALL disable_optimizer()",
        "COPY FROM DATABASE memory TO memory",
        "",
        "-- nothing but a comment",
        "INSTALL httpfs",
    ]
    if db.engine.is_sqlite:
        path = str(sqlite_file(db).resolve())
        escapes += [
            f"ATTACH '{path}' AS writable (TYPE sqlite)",
            f"ATTACH 'sqlite:{path}' AS writable",
            f"SELECT * FROM sqlite_attach('{path}')",
            f"SELECT * FROM sqlite_scan('{path}', 'tt_runs')",
            f"SELECT * FROM read_blob('{path}')",
        ]
    else:
        url = db.engine.sa.url
        escapes += [
            "ATTACH '' AS writable (TYPE postgres, SECRET smithers_tt_store)",
            f"ATTACH 'host={url.host} port={url.port} dbname={url.database} "
            f"user={url.username}' AS writable (TYPE postgres)",
            f"SELECT * FROM postgres_scan('host={url.host} dbname={url.database} "
            f"user={url.username}', 'public', 'pg_class')",
        ]
    return escapes


@pytest.mark.parametrize("mode", list(MODES))
def test_no_escape_from_the_lineage_writes_the_store_or_reads_files(
    scenario: Scenario, mode: str
) -> None:
    before = facts(scenario)
    with scenario.db.lineage(**MODES[mode]) as lin:
        for statement in _escapes(scenario.db):
            with pytest.raises(LineageError):
                lin.sql(statement)
            # A refused statement leaves the lineage working.
            assert len(lin.runs()) == len(scenario.run_ids), statement
    assert facts(scenario) == before


def test_a_second_attach_of_the_store_cannot_write_it_after_a_refused_one(
    scenario: Scenario,
) -> None:
    """The classic escape end to end: attach the store again without READ_ONLY, then write."""
    before = facts(scenario)
    with scenario.db.lineage(reader="scanner") as lin:
        if scenario.db.engine.is_sqlite:
            attach = f"ATTACH '{sqlite_file(scenario.db).resolve()}' AS w (TYPE sqlite)"
        else:
            attach = "ATTACH '' AS w (TYPE postgres, SECRET smithers_tt_store)"
        with pytest.raises(LineageError, match="ATTACH statements are refused"):
            lin.sql(attach)
        with pytest.raises(LineageError):
            lin.sql("DELETE FROM w.tt_runs")
    assert facts(scenario) == before


def test_the_lineage_holds_no_secret_and_external_access_is_off_and_locked(
    scenario: Scenario,
) -> None:
    with scenario.db.lineage(reader="scanner") as lin:
        assert lin.sql("SELECT name FROM duckdb_secrets()").empty
        settings = lin.sql(
            "SELECT name, value FROM duckdb_settings() WHERE name IN "
            "('enable_external_access', 'lock_configuration')"
        )
        assert dict(zip(settings.name, settings.value, strict=True)) == {
            "enable_external_access": "false",
            "lock_configuration": "true",
        }


def test_copy_to_a_path_that_was_not_allowed_writes_nothing(
    scenario: Scenario, tmp_path: Path
) -> None:
    target = tmp_path / "runs.csv"
    with scenario.db.lineage() as lin, pytest.raises(LineageError, match="allowed_directories"):
        lin.sql(f"COPY (SELECT * FROM runs) TO '{target}'")
    assert not target.exists()


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("allowed", [False, True], ids=["default", "allowed-dirs"])
def test_copy_cannot_overwrite_the_store_file_or_the_lineage_snapshot(
    scenario: Scenario, mode: str, allowed: bool, tmp_path: Path
) -> None:
    before = facts(scenario)
    options = {**MODES[mode], "allowed_directories": [tmp_path] if allowed else []}
    with scenario.db.lineage(**options) as lin:
        # With directories allowed, COPY may write where the lineage's own files were (see
        # test_answers.py: they are unlinked once attached, so its answers stay).
        targets = [] if allowed else [lin._scratch.file, lin._scratch.inherited]
        if scenario.db.engine.is_sqlite:
            targets += [sqlite_file(scenario.db).resolve(), Path(f"{sqlite_file(scenario.db)}-wal")]
        runs = records(lin.runs())
        for target in targets:
            with pytest.raises(LineageError):
                lin.sql(f"COPY (SELECT 1) TO '{target}' (FORMAT csv, USE_TMP_FILE false)")
        assert records(lin.runs()) == runs
    assert facts(scenario) == before


def test_allowed_directories_opt_in_to_reading_and_writing_files_there_only(
    scenario: Scenario, tmp_path: Path
) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "labels.csv").write_text("run_id,label\nx,first\n")
    beside = tmp_path / "mine-too"  # shares the prefix, is not below the allowed directory
    beside.mkdir()
    before = facts(scenario)
    with scenario.db.lineage(allowed_directories=[mine]) as lin:
        assert records(lin.sql(f"SELECT * FROM read_csv('{mine / 'labels.csv'}')")) == [
            {"run_id": "x", "label": "first"}
        ]
        lin.sql(f"COPY (SELECT run_id FROM runs) TO '{mine / 'runs.csv'}'")
        assert len((mine / "runs.csv").read_text().splitlines()) == len(scenario.run_ids) + 1
        for outside in (beside / "runs.csv", tmp_path / "runs.csv"):
            with pytest.raises(LineageError, match="disabled by configuration"):
                lin.sql(f"COPY (SELECT 1) TO '{outside}'")
            assert not outside.exists()
        if scenario.db.engine.is_sqlite:
            # Allowing the store's own directory still does not make the store writable.
            store = sqlite_file(scenario.db).resolve()
            with (
                scenario.db.lineage(allowed_directories=[store.parent]) as near,
                pytest.raises(LineageError, match="ATTACH"),
            ):
                near.sql(f"ATTACH '{store}' AS w (TYPE sqlite)")
    assert facts(scenario) == before


def test_an_allowed_directory_that_does_not_exist_is_refused(
    scenario: Scenario, tmp_path: Path
) -> None:
    with pytest.raises(LineageError, match="not an existing directory"):
        scenario.db.lineage(allowed_directories=[tmp_path / "nope"])


QUESTIONS = [
    "DESCRIBE runs",
    "SUMMARIZE runs",
    "SHOW TABLES",
    "FROM runs SELECT count(*)",
    "WITH r AS (SELECT * FROM runs) SELECT count(*) FROM r",
    "EXPLAIN SELECT * FROM checkpoints",
    "EXPLAIN ANALYZE SELECT count(*) FROM checkpoints",
    "SELECT 'postgres_execute(' AS query, 1 AS sqlite_query",  # names, not calls
    "SELECT count(*) FROM raw.tt_runs -- postgres_execute('store', 'x')",
]


def test_read_only_questions_still_run(scenario: Scenario) -> None:
    with scenario.db.lineage() as lin:
        assert [q for q in QUESTIONS if lin.sql(q).empty] == []
