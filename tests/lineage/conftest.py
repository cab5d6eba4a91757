"""Fixtures of the lineage tests: one store per backend with runs, retries, schema corrections,
forks (two deep), a reset and content shared across runs; lineages over it in every mode."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pandas as pd
import pytest
import sqlalchemy as sa

import smithers_tt as st
from smithers_tt.demo import demo_workflow
from smithers_tt.lineage import Lineage
from smithers_tt.store import AttemptRecord, CheckpointRef, NodeRecord
from tests.conftest import PG_URL, pg_admin, require_pg

TOPIC = {"topic": "bee"}
OTHER_TOPIC = {"topic": "ant"}


def fresh_workflow():
    """The demo workflow with new agents: a flaky researcher and an invalid first draft."""
    wf, _ = demo_workflow(flaky=True, invalid_first_draft=True)
    return wf


@dataclass
class Scenario:
    """A populated store and the ids of what it holds."""

    db: st.Database
    original: str  # retries (flaky researcher) and a schema correction (first draft)
    twin: str  # the same input again: every checkpoint shares content with ``original``
    child: str  # forked from ``original`` after research, ``write`` reset, resumed
    grandchild: str  # forked from ``child`` at its last frame, nothing reset, by reference
    reset_run: str  # another input; ``review`` reset after it finished, resumed

    @property
    def run_ids(self) -> list[str]:
        """Every run, oldest id first (as ``list_runs`` pages them)."""
        ids: list[str] = []
        cursor = None
        while True:
            page = self.db.store.list_runs(limit=100, cursor=cursor)
            ids += [r.run_id for r in page.items]
            if page.next_cursor is None:
                return ids
            cursor = page.next_cursor

    def refs(self, run_id: str) -> list[CheckpointRef]:
        """Every checkpoint ref of a run through the run API (a fork by reference's are
        what it inherits)."""
        return self.db.get_run(run_id).checkpoints()

    def nodes(self, run_id: str) -> list[NodeRecord]:
        """Every node of a run through the run API."""
        return self.db.get_run(run_id).nodes()

    def attempts(self, run_id: str) -> list[AttemptRecord]:
        """Every attempt of a run through the run API."""
        return self.db.get_run(run_id).attempts()


def _first_frame(db: st.Database, run_id: str, kind: str, node_id: str, state: str) -> int:
    for frame in db.store.frames(run_id):
        if (frame.kind, frame.node_id, frame.state) == (kind, node_id, state):
            return frame.frame_no
    raise AssertionError(f"no {kind} frame of {node_id} in state {state}")


def build(db: st.Database) -> Scenario:
    """Populate ``db`` through the public API."""
    original = db.run(fresh_workflow(), TOPIC)
    assert original.status == "finished", original.error
    twin = db.run(fresh_workflow(), TOPIC)
    after_research = _first_frame(db, original.id, "node_state", "research", "finished")
    child = db.fork(original.id, after_research, reset=["write"])
    child = db.resume(child.id, fresh_workflow())
    assert child.status == "finished", child.error
    last = db.store.get_run(child.id).clock
    grandchild = db.fork(child.id, last)
    assert grandchild.record.inherits  # a fork by reference: the views show what it inherits
    other = db.run(fresh_workflow(), OTHER_TOPIC)
    assert db.reset(other.id, "review") == ["review"]
    other = db.resume(other.id, fresh_workflow())
    assert other.status == "finished", other.error
    return Scenario(db, original.id, twin.id, child.id, grandchild.id, other.id)


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def scenario(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Scenario]:
    """The populated store, once per backend for the whole module."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('lineage') / 'smithers.db'}"
        db = st.connect(url)
        try:
            yield build(db)
        finally:
            db.close()
        return
    require_pg()
    schema = f"tt_lineage_{secrets.token_hex(6)}"
    with pg_admin().begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    sep = "&" if "?" in PG_URL else "?"
    db = st.connect(f"{PG_URL}{sep}options={quote(f'-csearch_path={schema}')}")
    try:
        yield build(db)
    finally:
        db.close()
        with pg_admin().begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))


MODES = {
    "live": {"reader": "scanner"},
    "snapshot": {"reader": "scanner", "snapshot": True},
    "arrow": {"reader": "arrow"},
}


@pytest.fixture(scope="module", params=list(MODES))
def lin(request: pytest.FixtureRequest, scenario: Scenario) -> Iterator[Lineage]:
    """A lineage over the scenario: live scanner, scanner snapshot, or the Arrow fallback."""
    with scenario.db.lineage(**MODES[request.param]) as lineage:
        yield lineage


def records(frame: pd.DataFrame, columns: list[str] | None = None) -> list[dict[str, Any]]:
    """DataFrame rows as plain dicts, missing values as None."""
    frame = frame if columns is None else frame[columns]
    plain = frame.astype(object).where(frame.notna(), None)
    return [{k: _plain(v) for k, v in row.items()} for row in plain.to_dict("records")]


def _plain(value: Any) -> Any:
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    return value


def store_table(lin: Lineage, table: str) -> str:
    """The qualified name of a store table in the attached ``store`` catalog."""
    (schema,) = lin.sql(
        "SELECT schema_name FROM duckdb_tables() WHERE database_name = 'store' AND table_name = ?",
        [table],
    ).schema_name
    return f'store."{schema}"."{table}"'


def sqlite_file(db: st.Database) -> Path:
    """The SQLite file of a database."""
    return Path(db.engine.sa.url.database or "")
