"""Alembic takes over: mark the store in ``tt_migrations`` so that smithers_tt 0.1 refuses it.

smithers_tt 0.1 read ``tt_migrations`` and stopped with "migrated by a newer smithers_tt" on a
name it did not know; this row is that name. Without it, 0.1 would find its five migrations
(or none) recorded, apply what it thinks is missing and use a store whose layout later
revisions change. Nothing else changes: the tables are those of 0005.

Frozen: never edit; change the layout in a new revision.
"""

import time

import sqlalchemy as sa
from alembic import op

revision = "0006_alembic"
down_revision = "0005_commit_tokens"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        sa.text(
            "INSERT INTO tt_migrations (name, checksum, applied_at_ms) "
            "VALUES (:name, :checksum, :now)"
        ).bindparams(name="0006_alembic", checksum="0" * 64, now=time.time_ns() // 1_000_000)
    )
