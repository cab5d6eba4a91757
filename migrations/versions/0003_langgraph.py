"""LangGraph saver: index tables mapping LangGraph threads and checkpoints onto runs and frames.

Frozen: never edit; change the layout in a new revision.
"""

import sqlalchemy as sa
from alembic import op

revision = "0003_langgraph"
down_revision = "0002_time_travel"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tt_lg_threads",
        sa.Column("run_id", sa.String(200), primary_key=True),
        sa.Column("thread_id", sa.Text, nullable=False),
        sa.Column("checkpoint_ns", sa.Text, nullable=False),
        sa.Column("created_at_ms", sa.BigInteger, nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["tt_runs.run_id"], ondelete="CASCADE"),
    )
    op.create_index("tt_lg_threads_thread", "tt_lg_threads", ["thread_id", "checkpoint_ns"])
    op.create_table(
        "tt_lg_checkpoints",
        sa.Column("run_id", sa.String(200), primary_key=True),
        sa.Column("checkpoint_id", sa.String(200), primary_key=True),
        sa.Column("frame_no", sa.BigInteger, nullable=True),
        sa.Column("writes_json", sa.Text, nullable=True),
        sa.ForeignKeyConstraint(["run_id"], ["tt_runs.run_id"], ondelete="CASCADE"),
    )
