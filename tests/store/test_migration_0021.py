"""Migration 0021: the tables that keep what a rewind of half a long run takes from the live
tables (``tt_rewound_nodes``, ``tt_rewound_attempts``, ``tt_rewound_refs``) and
``tt_rewinds.kept_rows``. Rewinds kept before it kept no rows: they are undone by their
frames, as before. Both backends."""

from __future__ import annotations

import sqlalchemy as sa

import smithers_tt as st
from smithers_tt.store.backend._migrate import upgrade
from smithers_tt.testing import large_run
from smithers_tt.timetravel import _wide

from ._support import count, rewound_run

KEPT = ("tt_rewound_nodes", "tt_rewound_attempts", "tt_rewound_refs")


def test_0021_adds_the_kept_rows_and_undoes_the_rewinds_kept_before_it_by_their_frames(
    db_url: str, raw, monkeypatch
) -> None:
    with raw.begin() as conn:
        upgrade(conn, to="0019_langgraph_calls")
        nested = rewound_run(conn, "nested", cuts=[4, 2])  # two rewinds, both undoable
        upgrade(conn, to="0020_cut_in_place")
        rewinds_before = conn.exec_driver_sql(
            "SELECT rewind_id, from_clock, to_frame FROM tt_rewinds ORDER BY rewind_id"
        ).all()
    with st.connect(db_url) as db:  # migrates to 0021 (and on)
        inspector = sa.inspect(raw)
        assert set(KEPT) <= set(inspector.get_table_names())
        assert "kept_rows" in {c["name"] for c in inspector.get_columns("tt_rewinds")}
        with raw.connect() as conn:
            rows = conn.exec_driver_sql(
                "SELECT rewind_id, from_clock, to_frame, kept_rows FROM tt_rewinds "
                "ORDER BY rewind_id"
            ).all()
        assert [tuple(r[:3]) for r in rows] == [tuple(r) for r in rewinds_before]
        assert [r[3] for r in rows] == [None, None]  # they kept no rows

        db.undo_rewind("nested")
        db.undo_rewind("nested")  # both by their frames
        assert [f.kind for f in db.store.frames("nested")] == [f["kind"] for f in nested]
        assert db.get_run("nested").record.status == "finished"

        # A rewind made now keeps its rows (the wide way, taken here for a short run) and
        # its undo puts them back; nothing stays kept.
        monkeypatch.setattr(_wide, "WIDE_SPAN", 0)
        run_id = large_run(db, 600, payload_bytes=40)
        before = db.get_run(run_id).checkpoints()
        db.rewind(run_id, 300, confirm=True)
        assert count(db, "tt_rewinds", run_id=run_id, kept_rows=True) == 1
        assert all(count(db, table) > 0 for table in KEPT)
        db.undo_rewind(run_id)
        assert db.get_run(run_id).checkpoints() == before
        assert [count(db, table) for table in KEPT] == [0, 0, 0]
        assert db.verify().ok
    with raw.connect() as conn:
        if raw.dialect.name == "sqlite":
            assert conn.exec_driver_sql("PRAGMA integrity_check").scalar_one() == "ok"
