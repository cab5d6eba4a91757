# ruff: noqa: S608 (the statements under test are SQL built from names and paths on purpose)
"""The lineage stays read-only for what it answers: no statement a user passes to ``sql()``
changes what its views answer or what the store holds, even with directories allowed (so that
``COPY`` and file readers run). Each route is tried on both backends and in every mode; each is
refused with an error naming what is refused, and every view answers as before."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from smithers_tt.lineage import Lineage, LineageError
from smithers_tt.lineage._views import MIRRORED, VIEWS, raw_columns

from .conftest import MODES, Scenario, records
from .test_read_only import facts

TARGETS = [
    "nodes",
    "main.attempts",
    "raw.tt_nodes",
    "source.tt_attempts",
    "inherited.tt_nodes",
    "inherited.tt_attempts",
    "snap.tt_nodes",
]
"""Every schema or catalog the lineage defines, by one of its relations (some exist only in
some modes: the statements are refused before DuckDB looks their target up)."""

WRITES = {
    "insert": ("INSERT INTO {t} SELECT * FROM {t}", "INSERT statements are refused"),
    "update": ("UPDATE {t} SET node_id = 'x'", "UPDATE statements are refused"),
    "delete": ("DELETE FROM {t}", "DELETE statements are refused"),
    "truncate": ("TRUNCATE {t}", "DELETE statements are refused"),
    "replace-view": (
        "CREATE OR REPLACE VIEW {t} AS SELECT * FROM {t} LIMIT 0",
        "CREATE statements are refused",
    ),
    "replace-table": ("CREATE OR REPLACE TABLE {t} AS FROM {t}", "CREATE statements are refused"),
    "drop": ("DROP VIEW {t}", "DROP statements are refused"),
    "rename": ("ALTER VIEW {t} RENAME TO moved", "ALTER statements are refused"),
    "copy-from": ("COPY {t} FROM '{dir}/{table}.csv' (HEADER)", "COPY <table> FROM"),
    "copy-table-to": ("COPY {t} TO '{dir}/out.csv'", "COPY <table> FROM / TO is refused"),
    "explain-copy-from": (
        "EXPLAIN ANALYZE COPY {t} FROM '{dir}/{table}.csv' (HEADER)",
        "EXPLAIN COPY statements",
    ),
    "merge": (
        "MERGE INTO {t} USING (FROM {t}) AS s USING (run_id) WHEN MATCHED THEN DELETE",
        "MERGE_INTO statements are refused",
    ),
}
"""Statements that would change a relation ``{t}`` the views read, and what the error says."""

ROUTES = {
    "attach": ("ATTACH '{dir}/other.duckdb' AS other", "ATTACH statements are refused"),
    "detach": ("DETACH inherited", "DETACH statements are refused"),
    "set": ("SET search_path = 'inherited'", "SET statements are refused"),
    "reset": ("RESET allowed_directories", "SET statements are refused"),
    "set-variable": ("SET VARIABLE x = 1", "SET statements are refused"),
    "use": ("USE inherited", "SET statements are refused"),
    "macro": ("CREATE MACRO count_star() AS 0", "CREATE statements are refused"),
    "temp-macro": ("CREATE TEMP MACRO lower(x) AS 'x'", "CREATE statements are refused"),
    "temp-view": ("CREATE TEMP VIEW runs AS SELECT 1 AS run_id", "CREATE statements are refused"),
    "pragma": ("PRAGMA disable_optimizer", "PRAGMA statements are refused"),
    "pragma-import": ("PRAGMA import_database('{dir}/import')", "does not run IMPORT DATABASE"),
    "import": ("IMPORT DATABASE '{dir}/import'", "does not run IMPORT DATABASE"),
    "import-store": ("IMPORT DATABASE '{dir}/import-store'", "does not run IMPORT DATABASE"),
    "export": ("EXPORT DATABASE '{dir}/export'", "EXPORT statements are refused"),
    "copy-from-database": (
        "COPY FROM DATABASE memory TO inherited",
        "COPY_DATABASE statements are refused",
    ),
    "copy-to-outside": (
        "COPY (SELECT * FROM runs) TO '{outside}'",
        "file system operations are disabled by configuration",
    ),
    "install": ("INSTALL httpfs", "LOAD statements are refused"),
    "load": ("LOAD httpfs", "LOAD statements are refused"),
    "checkpoint-statement": ("FORCE CHECKPOINT inherited", "CALL statements are refused"),
    "checkpoint-function": ("SELECT * FROM checkpoint('inherited')", "not call checkpoint()"),
    "checkpoint-function-quoted": ('FROM "CHECKPOINT"()', "not call checkpoint()"),
    "query-function": ("FROM query('DELETE FROM inherited.tt_nodes')", "not call query()"),
    "vacuum": ("VACUUM", "VACUUM statements are refused"),
    "transaction": ("BEGIN TRANSACTION", "TRANSACTION statements are refused"),
    "prepare": ("PREPARE p AS DELETE FROM raw.tt_nodes", "PREPARE statements are refused"),
    "pivot": ("PIVOT nodes ON state", "CREATE statements are refused"),
}
"""Statements that would change settings, catalogs or functions the views rely on."""


def _table(target: str) -> str:
    return "tt_attempts" if target.endswith("attempts") else "tt_nodes"


CASES = {
    **{f"{name}-{t}": (sql.replace("{t}", t).replace("{table}", _table(t)), said)
       for name, (sql, said) in WRITES.items()
       for t in TARGETS if t == "inherited.tt_nodes" or name in ("insert", "copy-from")},
    **ROUTES,
}  # fmt: skip
"""Every write on the one relation that is a table in every mode, the main two on the others,
and every other route."""


def answers(lin: Lineage) -> dict[str, list[dict[str, Any]]]:
    """Every documented view's rows, in a fixed order."""
    return {v.name: records(lin.sql(f'SELECT * FROM "{v.name}" ORDER BY ALL')) for v in VIEWS}


@pytest.fixture(scope="module")
def allowed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory the lineage may read and write, holding ``<table>.csv``: one row of the
    store's ``tt_nodes`` / ``tt_attempts``, and directories that ``IMPORT DATABASE`` would
    run: ``import`` appends those rows to ``inherited``, ``import-store`` writes the store."""
    directory = tmp_path_factory.mktemp("allowed")
    imported = directory / "import"
    imported.mkdir()
    plain = {"VARCHAR": "intruder", "INTEGER": "1", "BIGINT": "1", "BOOLEAN": "false"}
    load = []
    for table in MIRRORED:
        if table.name in ("tt_nodes", "tt_attempts"):
            columns = raw_columns(table)
            values = ["" if n.endswith("_json") else plain[t] for n, t in columns]
            text = ",".join(n for n, _ in columns) + "\n" + ",".join(values)
            for place in (directory, imported):
                (place / f"{table.name}.csv").write_text(text + "\n")
            load.append(f"COPY memory.inherited.{table.name} FROM '{table.name}.csv' (HEADER);\n")
    (imported / "schema.sql").write_text("SELECT 1;\n")
    (imported / "load.sql").write_text("".join(load))
    # schema.sql runs any statement: this one wrote the PostgreSQL store past its read-only
    # attachment and sessions (load.sql then fails: the table does not exist).
    writer = directory / "import-store"
    writer.mkdir()
    (writer / "schema.sql").write_text(
        "SELECT * FROM postgres_execute('store', 'BEGIN READ WRITE; "
        "UPDATE tt_runs SET error = ''intruder''; COMMIT');\n"
    )
    (writer / "load.sql").write_text("COPY memory.main.nothing FROM 'tt_nodes.csv';\n")
    (writer / "tt_nodes.csv").write_text("x\n")
    return directory


@pytest.fixture(scope="module", params=["live", "snapshot"])
def opened(
    request: pytest.FixtureRequest, scenario: Scenario, allowed: Path
) -> Iterator[tuple[Lineage, dict[str, list[dict[str, Any]]]]]:
    """A lineage with ``allowed`` allowed, and its views' answers when opened: live (with
    the ``source`` views) or a snapshot (with ``snap``; the Arrow fallback is one too)."""
    with scenario.db.lineage(**MODES[request.param], allowed_directories=[allowed]) as lin:
        yield lin, answers(lin)


@pytest.mark.parametrize(("statement", "said"), list(CASES.values()), ids=list(CASES))
def test_lineage_sql_refuses_every_route_that_changes_its_answers_or_the_store(
    scenario: Scenario,
    opened: tuple[Lineage, dict[str, list[dict[str, Any]]]],
    allowed: Path,
    tmp_path: Path,
    statement: str,
    said: str,
) -> None:
    lin, before = opened
    stored = facts(scenario)
    sql = statement.format(dir=allowed, outside=tmp_path / "out.csv")
    with pytest.raises(LineageError, match=said.replace("(", r"\(").replace(")", r"\)")):
        lin.sql(sql)
    assert answers(lin) == before
    assert facts(scenario) == stored
    assert not (tmp_path / "out.csv").exists()


@pytest.mark.parametrize("mode", list(MODES))
def test_copy_to_the_files_the_lineage_reads_leaves_its_answers_unchanged(
    scenario: Scenario, mode: str, allowed: Path
) -> None:
    """DuckDB lets ``COPY ... TO`` write every file attached when external access went off;
    the lineage's own files (its snapshot, the inherited rows) are unlinked once attached."""
    stored = facts(scenario)
    with scenario.db.lineage(**MODES[mode], allowed_directories=[allowed]) as lin:
        before = answers(lin)
        files = lin.sql(
            "SELECT path FROM duckdb_databases() WHERE type = 'duckdb' AND path IS NOT NULL"
        ).path
        assert len(files) == (2 if lin.snapshot else 1)  # inherited rows (and the snapshot)
        for path in files:
            lin.sql(f"COPY (SELECT 'x' AS junk) TO '{path}' (FORMAT csv, USE_TMP_FILE false)")
        assert answers(lin) == before
    assert facts(scenario) == stored
