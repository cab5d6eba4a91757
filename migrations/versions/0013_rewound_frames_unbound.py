"""``tt_rewound_frames`` without its foreign key to ``tt_rewinds``: same columns, key, index
and rows.

A rewind to the middle of a 155,000-frame run keeps the 77,500 frames it removes, and the
foreign key checked every one of them against ``tt_rewinds``: on PostgreSQL that per-row
check was about a third of the move (an ``AFTER`` trigger per row). The store keeps the tie by
construction instead: a rewind's frames are written with its row in one transaction, and
whoever deletes a rewind (its undo, or deleting its run: retention, a LangGraph thread's
deletion) deletes its frames in the same transaction. Rows without a rewind (none can exist
while the key held) are left as they are.

On SQLite the table is rebuilt (nothing refers to it: dropping the old copy cascades
nowhere); on PostgreSQL the constraint is dropped by the name the database gave it.

Frozen: never edit; change the layout in a new revision.
"""

import sqlalchemy as sa
from alembic import op

revision = "0013_rewound_frames_unbound"
down_revision = "0012_partial_index_or"
branch_labels = None
depends_on = None

COLUMNS = (
    "rewind_id, run_id, frame_no, kind, node_id, iteration, attempt, sequence, state, "
    "content_hash, codec, version, purpose, agent_id, data_json, created_at_ms, size_bytes"
)


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        for fk in sa.inspect(bind).get_foreign_keys("tt_rewound_frames"):
            if fk["referred_table"] == "tt_rewinds":
                op.drop_constraint(fk["name"], "tt_rewound_frames", type_="foreignkey")
        return
    op.create_table(
        "tt_rewound_frames_0013",
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
    )
    op.execute(
        f"INSERT INTO tt_rewound_frames_0013 ({COLUMNS}) "  # noqa: S608 (constants)
        f"SELECT {COLUMNS} FROM tt_rewound_frames"
    )
    op.drop_index("tt_rewound_frames_content", table_name="tt_rewound_frames")
    op.drop_table("tt_rewound_frames")
    op.rename_table("tt_rewound_frames_0013", "tt_rewound_frames")
    op.create_index("tt_rewound_frames_content", "tt_rewound_frames", ["content_hash"])
