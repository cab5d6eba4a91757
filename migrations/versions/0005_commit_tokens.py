"""Commit tokens: one row per PostgreSQL write transaction, to settle a COMMIT whose reply
was lost (the table exists on SQLite too, unused, so both backends have one schema).

Frozen: never edit; change the layout in a new revision.
"""

import sqlalchemy as sa
from alembic import op

revision = "0005_commit_tokens"
down_revision = "0004_workers"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tt_commit_tokens",
        sa.Column("created_at_ms", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("nonce", sa.BigInteger, primary_key=True, autoincrement=False),
    )
