"""A layout that writes less: the content hash once per publish, the size on the frame.

- ``tt_frames`` gains ``size_bytes``: a checkpoint frame's content size, filled for the
  checkpoint frames that have data (0.1's LangGraph frames have none, and a NULL
  ``data_json`` with a size reads as ``{"size": n}``). A checkpoint frame whose ``data_json``
  is exactly ``{"size":n}`` (what a publish writes) keeps ``n`` there instead and
  ``data_json`` becomes NULL; the store reads such a frame's data back as ``{"size": n}``,
  so what users read is unchanged.
- ``tt_checkpoint_refs`` stops repeating its checkpoint frame: a live ref is its key and
  ``frame_no``, the checkpoint frame of the same run that holds hash, codec, version,
  purpose, agent and time. Each ref points at the newest checkpoint frame of its key with the
  same content, codec, version and purpose (the one with the ref's own ``created_at_ms``
  first). A ref without any such frame (0.1's ``put_ref`` restored refs without one) gets a
  ``checkpoint`` frame appended after the run's clock, which advances past it. The table is
  rebuilt (nothing refers to it: the rebuild cascades nothing), on SQLite ``WITHOUT ROWID``;
  its content index goes (frames and the cache pin content now).

Set-based throughout (``INSERT ... SELECT``, ``UPDATE`` with subqueries), in the one migration
transaction.

Frozen: never edit; change the layout in a new revision.
"""

import sqlalchemy as sa
from alembic import op

revision = "0008_layout"
down_revision = "0007_pauses"
branch_labels = None
depends_on = None

SAME_KEY = (
    "f.run_id = r.run_id AND f.kind = 'checkpoint' AND f.node_id = r.node_id "
    "AND f.iteration = r.iteration AND f.attempt = r.attempt AND f.sequence = r.sequence "
    "AND f.content_hash = r.content_hash AND f.codec = r.codec AND f.version = r.version "
    "AND f.purpose = r.purpose"
)


def upgrade() -> None:
    op.add_column("tt_frames", sa.Column("size_bytes", sa.Integer, nullable=True))
    op.execute(
        sa.text(
            "UPDATE tt_frames SET size_bytes = (SELECT c.size_bytes FROM tt_checkpoint_contents c "
            "WHERE c.content_hash = tt_frames.content_hash) "
            "WHERE kind = 'checkpoint' AND content_hash IS NOT NULL AND data_json IS NOT NULL"
        )
    )
    op.execute(
        sa.text(
            "UPDATE tt_frames SET data_json = NULL WHERE kind = 'checkpoint' "
            "AND size_bytes IS NOT NULL "
            "AND data_json = '{\"size\":' || CAST(size_bytes AS VARCHAR(20)) || '}'"
        )
    )
    # Refs without a checkpoint frame of their own: one appended after the run's clock.
    op.execute(
        sa.text(
            "INSERT INTO tt_frames (run_id, frame_no, kind, node_id, iteration, attempt, "  # noqa: S608
            "sequence, state, content_hash, codec, version, purpose, agent_id, data_json, "
            "created_at_ms, size_bytes) "
            "SELECT r.run_id, run.clock + ROW_NUMBER() OVER (PARTITION BY r.run_id "
            "ORDER BY r.node_id, r.iteration, r.attempt, r.sequence), 'checkpoint', "
            "r.node_id, r.iteration, r.attempt, r.sequence, NULL, r.content_hash, r.codec, "
            "r.version, r.purpose, r.agent_id, NULL, r.created_at_ms, c.size_bytes "
            "FROM tt_checkpoint_refs r JOIN tt_runs run ON run.run_id = r.run_id "
            "LEFT JOIN tt_checkpoint_contents c ON c.content_hash = r.content_hash "
            f"WHERE NOT EXISTS (SELECT 1 FROM tt_frames f WHERE {SAME_KEY})"
        )
    )
    op.execute(
        sa.text(
            "UPDATE tt_runs SET clock = (SELECT max(f.frame_no) FROM tt_frames f "
            "WHERE f.run_id = tt_runs.run_id) "
            "WHERE clock < (SELECT max(f.frame_no) FROM tt_frames f "
            "WHERE f.run_id = tt_runs.run_id)"
        )
    )
    op.create_table(
        "tt_refs_0008",
        sa.Column("run_id", sa.String(200), primary_key=True),
        sa.Column("node_id", sa.String(200), primary_key=True),
        sa.Column("iteration", sa.Integer, primary_key=True),
        sa.Column("attempt", sa.Integer, primary_key=True),
        sa.Column("sequence", sa.Integer, primary_key=True),
        sa.Column("frame_no", sa.BigInteger, nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id", "node_id", "iteration", "attempt"],
            [
                "tt_attempts.run_id",
                "tt_attempts.node_id",
                "tt_attempts.iteration",
                "tt_attempts.attempt",
            ],
            ondelete="CASCADE",
        ),
        sa.CheckConstraint("sequence >= 0", name="tt_refs_numbers"),
        sqlite_with_rowid=False,
    )
    op.execute(
        sa.text(
            "INSERT INTO tt_refs_0008 (run_id, node_id, iteration, attempt, sequence, "  # noqa: S608
            "frame_no) "
            "SELECT r.run_id, r.node_id, r.iteration, r.attempt, r.sequence, COALESCE("
            f"(SELECT max(f.frame_no) FROM tt_frames f WHERE {SAME_KEY} "
            "AND f.created_at_ms = r.created_at_ms), "
            f"(SELECT max(f.frame_no) FROM tt_frames f WHERE {SAME_KEY})) "
            "FROM tt_checkpoint_refs r"
        )
    )
    op.drop_index("tt_refs_content", table_name="tt_checkpoint_refs")
    op.drop_table("tt_checkpoint_refs")
    op.rename_table("tt_refs_0008", "tt_checkpoint_refs")
    if op.get_bind().dialect.name == "postgresql":
        # Names as a table created under its final name has them.
        for old, new in (
            ("tt_refs_0008_pkey", "tt_checkpoint_refs_pkey"),
            (
                "tt_refs_0008_run_id_node_id_iteration_attempt_fkey",
                "tt_checkpoint_refs_run_id_node_id_iteration_attempt_fkey",
            ),
        ):
            op.execute(sa.text(f"ALTER TABLE tt_checkpoint_refs RENAME CONSTRAINT {old} TO {new}"))
