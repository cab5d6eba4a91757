"""Runs, nodes, attempts, checkpoint contents and refs, frames and the task cache.

Also ``tt_migrations``, where smithers_tt 0.1 recorded its hand-written migrations (kept so
that a store made by 0.1 and one created now have one layout; see docs/migrations.md).

Frozen: this file states the tables as they were when it was written. Never edit it; change
the layout in a new revision.
"""

import sqlalchemy as sa
from alembic import op

revision = "0001_initial"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tt_migrations",
        sa.Column("name", sa.String(200), primary_key=True),
        sa.Column("checksum", sa.String(64), nullable=False),
        sa.Column("applied_at_ms", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "tt_runs",
        sa.Column("run_id", sa.String(200), primary_key=True),
        sa.Column("workflow", sa.String(200), nullable=False),
        sa.Column("workflow_hash", sa.String(64), nullable=True),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("input_json", sa.Text, nullable=True),
        sa.Column("output_json", sa.Text, nullable=True),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("owner_epoch", sa.BigInteger, nullable=False),
        sa.Column("owner_id", sa.String(200), nullable=True),
        sa.Column("heartbeat_at_ms", sa.BigInteger, nullable=True),
        sa.Column("cancel_requested", sa.Boolean, nullable=False),
        sa.Column("parent_run_id", sa.String(200), nullable=True),
        sa.Column("parent_frame_no", sa.BigInteger, nullable=True),
        sa.Column("max_checkpoint_bytes", sa.Integer, nullable=True),
        sa.Column("clock", sa.BigInteger, nullable=False),
        sa.Column("created_at_ms", sa.BigInteger, nullable=False),
        sa.Column("updated_at_ms", sa.BigInteger, nullable=False),
        sa.CheckConstraint(
            "status IN ('queued', 'running', 'finished', 'failed', 'cancelled', 'interrupted')",
            name="tt_runs_status",
        ),
        sa.CheckConstraint("owner_epoch >= 0", name="tt_runs_epoch"),
    )
    op.create_index("tt_runs_parent", "tt_runs", ["parent_run_id"])
    op.create_index("tt_runs_status_idx", "tt_runs", ["status", "run_id"])
    op.create_table(
        "tt_nodes",
        sa.Column("run_id", sa.String(200), primary_key=True),
        sa.Column("node_id", sa.String(200), primary_key=True),
        sa.Column("iteration", sa.Integer, primary_key=True),
        sa.Column("state", sa.String(20), nullable=False),
        sa.Column("last_attempt", sa.Integer, nullable=True),
        sa.Column("output_json", sa.Text, nullable=True),
        sa.Column("updated_at_ms", sa.BigInteger, nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["tt_runs.run_id"], ondelete="CASCADE"),
        sa.CheckConstraint(
            "state IN ('pending', 'running', 'finished', 'failed', 'cancelled', 'skipped', "
            "'cached')",
            name="tt_nodes_state",
        ),
    )
    op.create_table(
        "tt_attempts",
        sa.Column("run_id", sa.String(200), primary_key=True),
        sa.Column("node_id", sa.String(200), primary_key=True),
        sa.Column("iteration", sa.Integer, primary_key=True),
        sa.Column("attempt", sa.Integer, primary_key=True),
        sa.Column("state", sa.String(20), nullable=False),
        sa.Column("owner_epoch", sa.BigInteger, nullable=False),
        sa.Column("next_sequence", sa.Integer, nullable=False),
        sa.Column("discard_resume", sa.Boolean, nullable=False),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("error_code", sa.String(100), nullable=True),
        sa.Column("resumed_run_id", sa.String(200), nullable=True),
        sa.Column("resumed_node_id", sa.String(200), nullable=True),
        sa.Column("resumed_iteration", sa.Integer, nullable=True),
        sa.Column("resumed_attempt", sa.Integer, nullable=True),
        sa.Column("resumed_sequence", sa.Integer, nullable=True),
        sa.Column("started_at_ms", sa.BigInteger, nullable=False),
        sa.Column("finished_at_ms", sa.BigInteger, nullable=True),
        sa.ForeignKeyConstraint(["run_id"], ["tt_runs.run_id"], ondelete="CASCADE"),
        sa.CheckConstraint(
            "state IN ('in_progress', 'finished', 'failed', 'cancelled', 'interrupted', 'reset')",
            name="tt_attempts_state",
        ),
        sa.CheckConstraint("attempt >= 1 AND iteration >= 0", name="tt_attempts_numbers"),
    )
    op.create_table(
        "tt_checkpoint_contents",
        sa.Column("content_hash", sa.String(64), primary_key=True),
        sa.Column("data", sa.LargeBinary, nullable=False),
        sa.Column("size_bytes", sa.Integer, nullable=False),
        sa.Column("created_at_ms", sa.BigInteger, nullable=False),
        sa.CheckConstraint("length(content_hash) = 64", name="tt_contents_hash"),
    )
    op.create_table(
        "tt_checkpoint_refs",
        sa.Column("run_id", sa.String(200), primary_key=True),
        sa.Column("node_id", sa.String(200), primary_key=True),
        sa.Column("iteration", sa.Integer, primary_key=True),
        sa.Column("attempt", sa.Integer, primary_key=True),
        sa.Column("sequence", sa.Integer, primary_key=True),
        sa.Column("content_hash", sa.String(64), nullable=False),
        sa.Column("codec", sa.String(200), nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("agent_id", sa.String(200), nullable=True),
        sa.Column("purpose", sa.String(20), nullable=False),
        sa.Column("created_at_ms", sa.BigInteger, nullable=False),
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
        sa.ForeignKeyConstraint(["content_hash"], ["tt_checkpoint_contents.content_hash"]),
        sa.CheckConstraint(
            "purpose IN ('progress', 'turn', 'schema-correction', 'session')",
            name="tt_refs_purpose",
        ),
        sa.CheckConstraint("sequence >= 0 AND version >= 1", name="tt_refs_numbers"),
    )
    op.create_index("tt_refs_content", "tt_checkpoint_refs", ["content_hash"])
    op.create_table(
        "tt_frames",
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
        sa.ForeignKeyConstraint(["run_id"], ["tt_runs.run_id"], ondelete="CASCADE"),
        sa.CheckConstraint(
            "kind IN ('run_created', 'run_claimed', 'run_finished', 'run_failed', "
            "'run_cancelled', 'cancel_requested', 'attempt_started', 'checkpoint', "
            "'attempt_finished', 'node_state', 'cache_hit', 'forked', 'reset')",
            name="tt_frames_kind",
        ),
    )
    op.create_index("tt_frames_content", "tt_frames", ["content_hash"])
    op.create_table(
        "tt_cache",
        sa.Column("cache_key", sa.String(64), primary_key=True),
        sa.Column("output_json", sa.Text, nullable=True),
        sa.Column("content_hash", sa.String(64), nullable=True),
        sa.Column("codec", sa.String(200), nullable=True),
        sa.Column("version", sa.Integer, nullable=True),
        sa.Column("run_id", sa.String(200), nullable=False),
        sa.Column("node_id", sa.String(200), nullable=False),
        sa.Column("created_at_ms", sa.BigInteger, nullable=False),
        sa.ForeignKeyConstraint(["content_hash"], ["tt_checkpoint_contents.content_hash"]),
    )
    op.create_index("tt_cache_content", "tt_cache", ["content_hash"])
