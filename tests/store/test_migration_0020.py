"""Migration 0020: ``tt_frames`` becomes a view of ``tt_frame_rows`` (the frames at or below
their run's clock); the frames every reachable rewind kept come back in place, hidden above
the clock, and what no undo can reach is dropped. Both backends."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

import smithers_tt as st
from smithers_tt.errors import NothingToUndo
from smithers_tt.store.backend._migrate import migration_names, upgrade
from tests.timetravel._support import hidden

from ._support import OLD_KINDS, count, rewound_run


def _kinds(db: st.Database, run_id: str) -> list[str]:
    return [f.kind for f in db.store.frames(run_id)]


def test_0020_keeps_every_reachable_rewind_in_place_and_drops_what_no_undo_can_reach(
    db_url: str, raw
) -> None:
    with raw.begin() as conn:
        upgrade(conn, to="0019_langgraph_calls")
        # Rewound from 5 to 4, then to 2: both undoable, three frames kept.
        nested = rewound_run(conn, "nested", cuts=[4, 2])
        # Rewound from 4 to 3, then two frames written on top: out of undo's reach.
        gone = rewound_run(conn, "gone", cuts=[3], written=2)
        plain = rewound_run(conn, "plain", cuts=[])  # never rewound
    with st.connect(db_url) as db:  # migrates to 0020 (and on)
        assert "0020_cut_in_place" in migration_names()
        inspector = sa.inspect(raw)
        assert "tt_frames" in inspector.get_view_names()
        assert {"tt_frame_rows"} <= set(inspector.get_table_names())
        assert "tt_rewound_frames" not in inspector.get_table_names()
        assert {i["name"] for i in inspector.get_indexes("tt_frame_rows")} >= {
            "tt_frames_content",
            "tt_frames_run_level",
            "tt_frames_node_level",
        }

        # The nested rewinds: the run reads at its clock, the cut frames wait above it.
        assert _kinds(db, "nested") == [f["kind"] for f in nested[:3]]
        assert hidden(db, "nested") == 3
        assert count(db, "tt_runs", run_id="nested", hides=True) == 1
        db.undo_rewind("nested")
        assert _kinds(db, "nested") == [f["kind"] for f in nested[:5]]
        db.undo_rewind("nested")
        assert _kinds(db, "nested") == [f["kind"] for f in nested]
        assert db.get_run("nested").record.status == "finished"
        assert hidden(db, "nested") == 0 and count(db, "tt_rewinds", run_id="nested") == 0

        # Written on top: the history as written, the rewind's frame gone, nothing to undo.
        assert _kinds(db, "gone") == [f["kind"] for f in gone[:4]] + ["run_claimed"] * 2
        assert hidden(db, "gone") == 0
        with pytest.raises(NothingToUndo):
            db.undo_rewind("gone")
        assert count(db, "tt_rewinds", run_id="gone") == 1
        assert db.gc().content.rewinds_released == 1
        assert count(db, "tt_rewinds") == 0

        assert _kinds(db, "plain") == [kind for kind, _, _ in OLD_KINDS]
        # Marked only where frames may wait above the clock: nowhere once the nested run's
        # last undo showed them all again.
        assert count(db, "tt_runs", hides=True) == 0
        assert [f["kind"] for f in plain] == _kinds(db, "plain")
        assert db.verify().ok
    with raw.connect() as conn:
        if raw.dialect.name == "sqlite":
            assert conn.exec_driver_sql("PRAGMA integrity_check").scalar_one() == "ok"
