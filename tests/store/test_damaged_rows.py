"""Damaged rows never give a traceback: every read path answers with a ``SmithersError`` naming
the row and what to do, and ``verify()`` lists the damage. Each test damages real rows of a real
SQLite file or PostgreSQL schema with raw SQL, as a disk, a bad copy or a hand edit would."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

import smithers_tt as st
from smithers_tt.cli import cli
from smithers_tt.demo import demo_workflow
from smithers_tt.errors import SmithersError, SnapshotInvalid, StoreCorrupt
from smithers_tt.widgets import DebuggerModel

HINT = "smithers-tt verify"


@pytest.fixture
def run(db: st.Database) -> st.Run:
    """A finished demo run: nodes, attempts, checkpoints and frames."""
    wf, _ = demo_workflow()
    finished = db.run(wf, {"topic": "bee"})
    assert finished.status == "finished", finished.error
    return finished


def damage(db: st.Database, statement: str, **params: Any) -> None:
    """Run raw SQL on the store's own database (its file, or its PostgreSQL schema)."""
    with db.engine.sa.begin() as conn:
        assert conn.execute(sa.text(statement), params).rowcount >= 1


def _failure(call: Callable[[], Any]) -> SmithersError:
    with pytest.raises(SmithersError) as caught:
        call()
    return caught.value


def test_run_input_that_is_not_json_is_reported_by_every_read_of_the_run(
    db: st.Database, run: st.Run
) -> None:
    damage(db, "UPDATE tt_runs SET input_json = 'not json' WHERE run_id = :r", r=run.id)
    for read in (lambda: db.get_run(run.id), lambda: db.runs(), lambda: db.store.list_runs()):
        error = _failure(read)
        assert isinstance(error, StoreCorrupt)
        assert f"tt_runs.input_json of run {run.id!r}" in str(error)
        assert HINT in str(error)


@pytest.mark.parametrize("value", ["{broken", "[1, 2", "\x01"], ids=["object", "list", "control"])
def test_a_graph_that_is_not_json_is_reported_by_reads_forks_and_resets(
    db: st.Database, run: st.Run, value: str
) -> None:
    damage(db, "UPDATE tt_runs SET graph_json = :v WHERE run_id = :r", v=value, r=run.id)
    for act in (
        lambda: db.get_run(run.id),
        lambda: db.fork(run.id, 3, reset=["research"]),
        lambda: db.reset(run.id, "research"),
    ):
        error = _failure(act)
        assert isinstance(error, StoreCorrupt)
        assert f"tt_runs.graph_json of run {run.id!r}" in str(error)
        assert HINT in str(error)
    with db.engine.sa.connect() as conn:  # no child was made (listing would report the damage)
        assert conn.execute(sa.text("SELECT count(*) FROM tt_runs")).scalar() == 1


def test_node_output_that_is_not_json_is_reported(db: st.Database, run: st.Run) -> None:
    damage(
        db,
        "UPDATE tt_nodes SET output_json = 'nope' WHERE run_id = :r AND node_id = 'research'",
        r=run.id,
    )
    error = _failure(lambda: db.store.list_nodes(run.id))
    assert isinstance(error, StoreCorrupt)
    assert "tt_nodes.output_json of node 'research'" in str(error)


def test_frame_data_that_is_not_json_is_reported_by_the_timeline_debugger_and_snapshots(
    db: st.Database, run: st.Run
) -> None:
    damage(
        db,
        "UPDATE tt_frame_rows SET data_json = 'garbage' WHERE run_id = :r AND frame_no = 0",
        r=run.id,
    )
    for read in (
        lambda: db.timeline(run.id),
        lambda: db.store.frames(run.id),
        lambda: DebuggerModel(db, run.id),
    ):
        error = _failure(read)
        assert isinstance(error, StoreCorrupt)
        assert f"tt_frames.data_json of frame 0 of run {run.id!r}" in str(error)
        assert HINT in str(error)
    error = _failure(lambda: db.snapshot(run.id))
    assert isinstance(error, SnapshotInvalid)
    assert f"frame 0 (run_created) of run {run.id}" in str(error)
    assert HINT in str(error)


def test_verify_finds_nothing_wrong_in_a_healthy_store_with_forks_and_rewinds(
    db: st.Database, run: st.Run
) -> None:
    wf, _ = demo_workflow()
    child = db.fork(run.id, 3, reset=["research"])
    db.resume(child.id, wf)
    db.rewind(run.id, 5, confirm=True)
    report = db.verify()
    assert (report.ok, report.damaged, report.mismatched) == (True, [], [])


def test_verify_lists_every_row_whose_json_does_not_parse(db: st.Database, run: st.Run) -> None:
    damage(db, "UPDATE tt_runs SET graph_json = '{' WHERE run_id = :r", r=run.id)
    damage(
        db, "UPDATE tt_frame_rows SET data_json = 'x' WHERE run_id = :r AND frame_no = 1", r=run.id
    )
    report = db.verify()
    assert not report.ok
    assert report.damaged == [
        f"tt_runs.graph_json of run_id={run.id!r}",
        f"tt_frame_rows.data_json of run_id={run.id!r}, frame_no=1",
    ]


def test_verify_checks_every_json_column_of_the_schema() -> None:
    from smithers_tt.store import _maintenance
    from smithers_tt.store.backend import _schema

    declared = {
        (t.name, c.name)
        for t in _schema.metadata.sorted_tables
        for c in t.columns
        if isinstance(c.type, sa.Text) and c.name.endswith("_json")
    }
    checked = {(t.name, n) for t, names in _maintenance._JSON_COLUMNS for n in names}
    assert checked == declared and ("tt_sweeps", "variants_json") in checked


def test_verify_lists_damaged_json_of_sweeps_scores_and_the_audit(
    db: st.Database, run: st.Run
) -> None:
    wf, _ = demo_workflow()
    sweep = db.sweep(run.id, 3, {"a": None, "b": None}, workflow=wf, progress=False,
                     score=lambda branch: 1.0)  # fmt: skip
    db.rewind(run.id, 5, confirm=True, reason="for the audit row")
    assert db.verify().damaged == []
    damage(db, "UPDATE tt_sweeps SET variants_json = '[' WHERE sweep_id = :s", s=sweep.id)
    damage(db, "UPDATE tt_sweep_scores SET score_json = 'one' WHERE variant = 'b'")
    damage(db, "UPDATE tt_audit SET detail_json = '{x' WHERE run_id = :r", r=run.id)
    report = db.verify()
    assert not report.ok
    assert f"tt_sweeps.variants_json of sweep_id={sweep.id!r}" in report.damaged
    assert f"tt_sweep_scores.score_json of sweep_id={sweep.id!r}, variant='b'" in report.damaged
    assert any(d.startswith("tt_audit.detail_json of audit_id=") for d in report.damaged)


def _point_first_ref_at_frame_0(db: st.Database, run: st.Run) -> Any:
    """Damage the run's first ref: point it at frame 0 (the run's run_created frame)."""
    (first, *_) = db.store.list_refs(run.id).items
    damage(
        db,
        "UPDATE tt_checkpoint_refs SET frame_no = 0 WHERE run_id = :r AND node_id = :n "
        "AND iteration = :i AND attempt = :a AND sequence = :s",
        r=first.run_id,
        n=first.node_id,
        i=first.iteration,
        a=first.attempt,
        s=first.sequence,
    )
    return first


def test_verify_lists_refs_that_point_at_a_frame_other_than_their_checkpoint(
    db: st.Database, run: st.Run
) -> None:
    first = _point_first_ref_at_frame_0(db, run)
    report = db.verify()
    assert not report.ok
    assert report.mismatched == [
        (first.run_id, first.node_id, first.iteration, first.attempt, first.sequence)
    ]


# --- SQLite only: bytes that are not UTF-8 (PostgreSQL refuses to store them at all) --------


@pytest.fixture
def sqlite_run(tmp_path: Path) -> tuple[Path, str]:
    """An SQLite file holding one finished run, closed, with its WAL folded in."""
    path = tmp_path / "smithers.db"
    with st.connect(f"sqlite:///{path}") as db:
        wf, _ = demo_workflow()
        run_id = db.run(wf, {"topic": "bee"}).id
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path, run_id


def test_a_damaged_sqlite_page_gives_store_corrupt_on_connect_not_a_traceback(
    sqlite_run: tuple[Path, str],
) -> None:
    path, _ = sqlite_run
    data = bytearray(path.read_bytes())
    at = data.find(b"CREATE TABLE tt_runs")
    assert at > 0
    data[at + 7] = 0xFF  # the schema page now holds bytes that are not UTF-8
    path.write_bytes(bytes(data))
    with pytest.raises(StoreCorrupt, match="database is damaged") as caught:
        st.connect(f"sqlite:///{path}")
    assert HINT in str(caught.value)


def test_text_that_is_not_utf8_in_a_row_gives_store_corrupt(
    sqlite_run: tuple[Path, str],
) -> None:
    path, run_id = sqlite_run
    with sqlite3.connect(path) as conn:
        bad = "UPDATE tt_runs SET workflow = CAST(X'FF41' AS TEXT) WHERE run_id = ?"
        conn.execute(bad, [run_id])
    with (
        st.connect(f"sqlite:///{path}") as db,
        pytest.raises(StoreCorrupt, match="database is damaged"),
    ):
        db.get_run(run_id)


def test_cli_verify_lists_damaged_rows_and_exits_1(db: st.Database, run: st.Run) -> None:
    damage(db, "UPDATE tt_runs SET input_json = 'not json' WHERE run_id = :r", r=run.id)
    human = CliRunner().invoke(cli, ["--db", db.url, "verify"])
    assert human.exit_code == 1
    assert "1 damaged" in human.output
    assert f"damaged tt_runs.input_json of run_id={run.id!r}" in human.output
    as_json = CliRunner().invoke(cli, ["--db", db.url, "--json", "verify"])
    assert as_json.exit_code == 1
    report = json.loads(as_json.output)
    assert report["ok"] is False
    assert report["damaged"] == [f"tt_runs.input_json of run_id={run.id!r}"]


def test_cli_verify_names_the_run_of_a_damaged_ref_by_its_short_id(
    db: st.Database, run: st.Run
) -> None:
    first = _point_first_ref_at_frame_0(db, run)
    short = db.store.short_run_ids([run.id])[run.id]
    assert len(short) < len(run.id)
    human = CliRunner().invoke(cli, ["--db", db.url, "verify"])
    assert human.exit_code == 1
    line = f"mismatched ref run {short} node {first.node_id}[{first.iteration}]"
    assert line in human.output
    assert run.id not in human.output  # the whole id only with --wide
    wide = CliRunner().invoke(cli, ["--db", db.url, "--wide", "verify"])
    assert f"mismatched ref run {run.id} node" in wide.output
