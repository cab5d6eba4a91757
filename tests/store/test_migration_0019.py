"""Migration 0019: the LangGraph saver's model-call columns are added, every stored row kept.
Both backends (``tests/store/test_migrations.py`` holds the others)."""

from __future__ import annotations

import sqlalchemy as sa

import smithers_tt as st
from smithers_tt.store.backend._migrate import VERSION_TABLE, migration_names, upgrade
from tests.fixtures.v1 import v1_support

ADDED = {"tt_model_calls": ["lg_key"], "tt_lg_checkpoints": ["child_frame_no", "sends_json"]}


def test_0019_adds_the_langgraph_call_columns_and_keeps_every_row(db_url: str, raw) -> None:
    with raw.begin() as conn:
        upgrade(conn, to="0018_check_or_chains")
    old = sa.MetaData()  # the tables as 0018 made them
    old.reflect(raw, only=["tt_runs", "tt_frames", "tt_model_calls", "tt_lg_checkpoints"])
    with raw.begin() as conn:
        for name, values in [
            ("tt_runs", dict(run_id="old-run", workflow="w", status="finished", owner_epoch=0,
                             cancel_requested=False, clock=1, created_at_ms=1, updated_at_ms=1)),
            ("tt_frames", dict(run_id="old-run", frame_no=0, kind="run_created", created_at_ms=1)),
            ("tt_model_calls", dict(call_id="c1", run_id="old-run", frame_no=0, position=0,
                                    node_id="n", iteration=0, attempt=1, model="m",
                                    prompt_tokens=7, started_at_ms=1)),
            ("tt_lg_checkpoints", dict(run_id="old-run", checkpoint_id="cp-1", frame_no=0,
                                       writes_json='{"t":{}}')),
        ]:  # fmt: skip
            conn.execute(sa.insert(old.tables[name]).values(**values))
    before = v1_support.dump_tables(db_url)
    for name, columns in ADDED.items():
        assert not set(columns) & set(before[name]["columns"])
    with raw.begin() as conn:
        upgrade(conn, to="0019_langgraph_calls")
    after = v1_support.dump_tables(db_url)
    for name, table in before.items():
        if name in (VERSION_TABLE, "tt_commit_tokens"):
            continue
        keep = [after[name]["columns"].index(c) for c in table["columns"]]
        assert [[r[i] for i in keep] for r in after[name]["rows"]] == table["rows"], name
    for name, columns in ADDED.items():  # what the rows made before did not have: none
        at = [after[name]["columns"].index(c) for c in columns]
        assert all(row[i] is None for row in after[name]["rows"] for i in at)
    with st.connect(db_url) as db:  # on to the head
        assert "0019_langgraph_calls" in migration_names()
        # the call made before reads as it did
        assert [(c.node_id, c.prompt_tokens) for c in db.store.model_calls("old-run")] == [("n", 7)]
