"""The lineage never changes the store: every write through its connection fails, and what the
store holds (read through the store API, the SQLite file's bytes, and the WAL index of a store
open in the same process) stays the same."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path
from typing import Any

import pytest

import smithers_tt as st
from smithers_tt.demo import demo_workflow
from smithers_tt.lineage import Lineage, LineageError

from .conftest import MODES, TOPIC, Scenario, sqlite_file, store_table


def facts(scenario: Scenario) -> dict[str, Any]:
    """Everything the tests compare before and after, through the store API."""
    store = scenario.db.store
    out: dict[str, Any] = {}
    for run_id in scenario.run_ids:
        out[run_id] = (
            store.get_run(run_id),
            store.list_nodes(run_id),
            store.list_attempts(run_id),
            scenario.refs(run_id),
            store.frames(run_id),
        )
    if scenario.db.engine.is_sqlite:
        out["file"] = hashlib.sha256(sqlite_file(scenario.db).read_bytes()).hexdigest()
    return out


def writes(lin: Lineage) -> list[str]:
    """Statements that would change the store (or the lineage's copy of it) if allowed."""
    targets = []  # (runs, refs) tables; names come from DuckDB's own catalog
    if (
        lin.reader == "scanner"
        and not lin.sql("FROM duckdb_databases() WHERE database_name = 'store'").empty
    ):
        targets.append((store_table(lin, "tt_runs"), store_table(lin, "tt_checkpoint_refs")))
    if lin.snapshot:
        targets.append(("snap.main.tt_runs", "snap.main.tt_checkpoint_refs"))
    statements = [
        "DELETE FROM runs",
        "DELETE FROM raw.tt_runs",
        "UPDATE checkpoints SET codec = 'x'",
        "INSERT INTO raw.tt_checkpoint_refs SELECT * FROM raw.tt_checkpoint_refs",
        "SET autoinstall_known_extensions = true",
    ]
    if lin.snapshot:
        statements.append("CREATE TABLE snap.main.intruder (x INTEGER)")
    for runs, refs in targets:
        schema = ".".join(runs.split(".")[:2])
        statements += [
            f"DELETE FROM {runs}",  # noqa: S608
            f"DELETE FROM {refs} WHERE sequence = 0",  # noqa: S608
            f"UPDATE {runs} SET status = 'failed'",  # noqa: S608
            f"INSERT INTO {runs} SELECT * FROM {runs} LIMIT 1",  # noqa: S608
            f"DROP TABLE {refs}",
            f"ALTER TABLE {runs} ADD COLUMN x INTEGER",
            f"CREATE TABLE {schema}.intruder (x INTEGER)",
        ]
    return statements


@pytest.mark.parametrize("mode", list(MODES))
def test_every_write_through_the_lineage_fails_and_the_store_is_unchanged(
    scenario: Scenario, mode: str
) -> None:
    before = facts(scenario)
    with scenario.db.lineage(**MODES[mode]) as lin:
        runs_before = len(lin.runs())
        for statement in writes(lin):
            with pytest.raises(LineageError):
                lin.sql(statement)
        assert len(lin.runs()) == runs_before
    assert facts(scenario) == before


def test_backend_escape_hatches_cannot_write_either(scenario: Scenario) -> None:
    before = facts(scenario)
    with scenario.db.lineage(reader="scanner") as lin:
        if scenario.db.engine.is_sqlite:
            sneaky = "SELECT * FROM sqlite_query('store', 'DELETE FROM tt_runs RETURNING run_id')"
        else:
            # The server refuses too: the sessions are read-only (default_transaction_read_only).
            sneaky = "CALL postgres_execute('store', 'DELETE FROM tt_runs')"
        with pytest.raises(LineageError):
            lin.sql(sneaky)
    assert facts(scenario) == before


def test_live_lineage_sees_new_runs_and_a_snapshot_does_not(db: st.Database) -> None:
    wf, _ = demo_workflow()
    db.run(wf, TOPIC)
    with db.lineage() as live, db.lineage(snapshot=True) as frozen:
        assert len(live.runs()) == len(frozen.runs()) == 1
        wf, _ = demo_workflow()
        db.run(wf, TOPIC)
        assert len(live.runs()) == 2
        assert len(frozen.runs()) == 1


def test_a_closed_lineage_refuses_queries_and_closing_twice_is_fine(db: st.Database) -> None:
    lin = db.lineage(snapshot=True)
    lin.close()
    lin.close()
    with pytest.raises(LineageError, match="closed"):
        lin.runs()
    assert "closed" in repr(lin)


def wal_index_header(db: st.Database) -> bytes:
    """The two copies of the header of the store's WAL index (the first 96 bytes of its -shm
    file): written by a commit, or when SQLite rebuilds the index; never by a reader."""
    shm = Path(f"{sqlite_file(db)}-shm")
    with shm.open("rb") as file:
        return file.read(96)


needs_ofd_locks = pytest.mark.skipif(
    sys.platform != "linux",
    reason="open file description locks (Linux) are what keeps DuckDB's SQLite from rebuilding",
)


@needs_ofd_locks
@pytest.mark.parametrize("mode", ["live", "snapshot"])
def test_a_lineage_leaves_the_wal_index_of_a_store_open_in_this_process_as_it_was(
    tmp_path: Path, mode: str
) -> None:
    # DuckDB's scanner carries its own SQLite, blind to the POSIX locks of the store's: it took
    # the store as unused, truncated its -shm file and rebuilt the index under the store's open
    # connections at every query, and a second DuckDB thread waited a whole second for that
    # rebuild (benchmarks/README.md, "Lineage stalls over a store open in the same process").
    with st.connect(f"sqlite:///{tmp_path / 'smithers.db'}") as db:
        wf, _ = demo_workflow()
        db.run(wf, TOPIC)
        header = wal_index_header(db)
        with db.lineage(**MODES[mode]) as lin:
            for _ in range(3):
                assert len(lin.runs()) == 1
                assert lin.forks().empty
                assert wal_index_header(db) == header


@needs_ofd_locks
def test_a_live_lineage_leaves_the_wal_index_as_it_was_after_the_store_is_opened_again(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'smithers.db'}"
    with st.connect(url) as db:
        wf, _ = demo_workflow()
        db.run(wf, TOPIC)
        lin = db.lineage()
    # the last connection closed: the store's -wal and -shm files are gone
    with lin, st.connect(url) as again:
        wf, _ = demo_workflow()
        again.run(wf, TOPIC)  # a new -shm file
        header = wal_index_header(again)
        assert len(lin.runs()) == 2
        assert wal_index_header(again) == header
