"""A rewind moves its frames aside (copied into ``tt_rewound_frames``, then deleted): on an
SQLite build with ``secure_delete`` on, the delete runs with it ``FAST`` (the pages it frees
are not zeroed: they hold what the same transaction just copied), and the connection's own
setting is put back after, also when the delete fails."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

import smithers_tt as st
from smithers_tt.store.backend import dialect_of
from smithers_tt.testing import large_run


def _setting(conn: sa.Connection) -> int:
    return conn.exec_driver_sql("PRAGMA secure_delete").scalar()


@pytest.mark.parametrize("before", [0, 1, 2])
def test_moving_lightens_only_a_full_secure_delete_and_puts_it_back(
    tmp_path: Path, before: int
) -> None:
    db = st.connect(f"sqlite:///{tmp_path / 'tt.db'}")
    try:
        with db.engine.sa.connect() as conn:
            conn.exec_driver_sql(f"PRAGMA secure_delete = {['OFF', 'ON', 'FAST'][before]}")
            with dialect_of(conn).moving(conn):
                assert _setting(conn) == (2 if before == 1 else before)
            assert _setting(conn) == before
            with pytest.raises(RuntimeError), dialect_of(conn).moving(conn):
                raise RuntimeError("the delete failed")
            assert _setting(conn) == before
    finally:
        db.close()


def test_a_rewind_deletes_the_frames_it_kept_with_secure_delete_fast(tmp_path: Path) -> None:
    db = st.connect(f"sqlite:///{tmp_path / 'tt.db'}")
    try:
        sa.event.listen(db.engine.sa, "connect", lambda c, _: c.execute("PRAGMA secure_delete = 1"))
        db.engine.sa.dispose()  # every connection from now on starts with it on
        run_id = large_run(db, 400, payload_bytes=40)
        seen: list[tuple[str, int]] = []

        def spy(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
            if statement.startswith(("DELETE FROM tt_frames", "INSERT INTO tt_rewound_frames")):
                setting = cursor.connection.execute("PRAGMA secure_delete").fetchone()[0]
                seen.append((statement.split(" (")[0].split(" WHERE")[0], setting))

        sa.event.listen(db.engine.sa, "before_cursor_execute", spy)
        db.rewind(run_id, 200, confirm=True)
        assert seen == [("INSERT INTO tt_rewound_frames", 1), ("DELETE FROM tt_frames", 2)]
        with db.engine.sa.connect() as conn:  # the pool's connection, as it was
            assert _setting(conn) == 1
        assert [f.frame_no for f in db.get_run(run_id).frames()][-1] == 200
        db.undo_rewind(run_id)
        assert len(db.get_run(run_id).frames()) == 400
    finally:
        db.close()
