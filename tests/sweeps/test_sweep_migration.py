"""Migration 0016 adds the sweeps' tables to a store made before them: runs made before stay,
no sweep is listed, and a sweep of an old run works."""

from __future__ import annotations

import sqlalchemy as sa

import smithers_tt as st
from smithers_tt.store.backend._migrate import upgrade
from tests.sweeps._flows import sweep_workflow


def test_0016_adds_sweeps_to_a_store_made_before_them(db_url: str) -> None:
    raw = sa.create_engine(db_url)
    try:
        with raw.begin() as conn:
            upgrade(conn, to="0015_model_calls")
        assert "tt_sweeps" not in sa.inspect(raw).get_table_names()
        with st.connect(db_url) as db:  # migrates to the head, 0016 included
            assert db.sweeps() == []
            wf, _ = sweep_workflow()
            parent = db.run(wf, {"topic": "ants"})
            sweep = db.sweep(parent.id, 4, {"a": {}}, workflow=wf, score=lambda r: 1.5)
            assert db.get_sweep(sweep.id).scores == {"a": 1.5}
        tables = set(sa.inspect(raw).get_table_names())
        assert {"tt_sweeps", "tt_sweep_scores"} <= tables
        indexes = {i["name"]: i["column_names"] for i in sa.inspect(raw).get_indexes("tt_sweeps")}
        assert indexes == {"tt_sweeps_run": ["run_id", "created_at_ms"]}
    finally:
        raw.dispose()
