"""Rewinds kept for undo: ``tt_rewinds`` (the run row's ending before each rewind) and
``tt_rewound_frames`` (the frames it deleted, every column of ``tt_frames`` plus the rewind's
id). New tables only: no stored row changes.

Frozen: never edit; change the layout in a new revision.
"""

import sqlalchemy as sa
from alembic import op

revision = "0009_rewinds"
down_revision = "0008_layout"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tt_rewinds",
        sa.Column("rewind_id", sa.String(200), primary_key=True),
        sa.Column("run_id", sa.String(200), nullable=False),
        sa.Column("from_clock", sa.BigInteger, nullable=False),
        sa.Column("to_frame", sa.BigInteger, nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("output_json", sa.Text, nullable=True),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("created_at_ms", sa.BigInteger, nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["tt_runs.run_id"], ondelete="CASCADE"),
    )
    op.create_index("tt_rewinds_run", "tt_rewinds", ["run_id", "created_at_ms"])
    op.create_table(
        "tt_rewound_frames",
        sa.Column("rewind_id", sa.String(200), primary_key=True),
        sa.Column("run_id", sa.String(200), primary_key=True),
        sa.Column("frame_no", sa.BigInteger, primary_key=True),
        sa.Column("kind", sa.String(30), nullable=False),
        sa.Column("node_id", sa.String(200), nullable=True),
        sa.Column("iteration", sa.Integer, nullable=True),
        sa.Column("attempt", sa.Integer, nullable=True),
        sa.Column("sequence", sa.Integer, nullable=True),
        sa.Column("state", sa.String(20), nullable=True),
        sa.Column("content_hash", sa.String(64), nullable=True),
        sa.Column("codec", sa.String(200), nullable=True),
        sa.Column("version", sa.Integer, nullable=True),
        sa.Column("purpose", sa.String(20), nullable=True),
        sa.Column("agent_id", sa.String(200), nullable=True),
        sa.Column("data_json", sa.Text, nullable=True),
        sa.Column("created_at_ms", sa.BigInteger, nullable=False),
        sa.Column("size_bytes", sa.Integer, nullable=True),
        sa.ForeignKeyConstraint(["rewind_id"], ["tt_rewinds.rewind_id"], ondelete="CASCADE"),
    )
    op.create_index("tt_rewound_frames_content", "tt_rewound_frames", ["content_hash"])
