"""Model calls: ``tt_model_calls``, one row per call an agent made to a model, with the frame
it was written with, its attempt, tokens, timings, HTTP status and error; request and reply are
content hashes (pinned against garbage collection by the indexes below). A new table, no
stored row changed: runs made before have no calls.

Frozen: never edit; change the layout in a new revision.
"""

import sqlalchemy as sa
from alembic import op

revision = "0015_model_calls"
down_revision = "0014_run_labels"
branch_labels = None
depends_on = None

TOKENS = ("prompt_tokens", "completion_tokens", "cached_tokens", "reasoning_tokens")


def upgrade() -> None:
    op.create_table(
        "tt_model_calls",
        sa.Column("call_id", sa.String(40), primary_key=True),
        sa.Column("run_id", sa.String(200), nullable=False),
        sa.Column("frame_no", sa.BigInteger, nullable=False),
        sa.Column("position", sa.Integer, nullable=False),
        sa.Column("node_id", sa.String(200), nullable=False),
        sa.Column("iteration", sa.Integer, nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("model", sa.String(200), nullable=True),
        sa.Column("request_hash", sa.String(64), nullable=True),
        sa.Column("reply_hash", sa.String(64), nullable=True),
        sa.Column("finish_reason", sa.String(40), nullable=True),
        *(sa.Column(name, sa.BigInteger, nullable=True) for name in TOKENS),
        sa.Column("started_at_ms", sa.BigInteger, nullable=False),
        sa.Column("ttft_ms", sa.Float, nullable=True),
        sa.Column("latency_ms", sa.Float, nullable=True),
        sa.Column("status", sa.Integer, nullable=True),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("rewind_id", sa.String(200), nullable=True),
        sa.ForeignKeyConstraint(["run_id"], ["tt_runs.run_id"], ondelete="CASCADE"),
    )
    op.create_index("tt_model_calls_frame", "tt_model_calls", ["run_id", "frame_no"])
    op.create_index("tt_model_calls_request", "tt_model_calls", ["request_hash"])
    op.create_index("tt_model_calls_reply", "tt_model_calls", ["reply_hash"])
