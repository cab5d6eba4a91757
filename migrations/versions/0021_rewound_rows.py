"""What a rewind of half a long run takes from the live tables, kept for its undo:
``tt_rewound_nodes``, ``tt_rewound_attempts`` and ``tt_rewound_refs`` hold, by ``rewind_id``,
the rows of ``tt_nodes``, ``tt_attempts`` and ``tt_checkpoint_refs`` the rewind deleted or
wrote over, as they were; ``tt_rewinds.kept_rows`` (a new nullable column) says a rewind
kept them. The undo writes those rows back instead of folding the frames it shows again and
copying every ref from its frame with the frame's content joined (issue 38, item 2: an undo
in proportion to what it restores). ``tt_rewound_nodes`` has a primary key (``rewind_id`` and
the node's key: ``verify`` pages through its JSON by it); the other two only an index on
``rewind_id`` (a key's index made the copy of 50,000 refs three times as slow on PostgreSQL).

New tables and a nullable column, no stored row changed: the rewinds kept before this revision
have no rows kept and are undone as before (by their frames).

Frozen: never edit; change the layout in a new revision.
"""

import sqlalchemy as sa
from alembic import op

revision = "0021_rewound_rows"
down_revision = "0020_cut_in_place"
branch_labels = None
depends_on = None

ID = sa.String(200)


def _key(*names: str, keyed: bool = False) -> list[sa.Column]:
    """``rewind_id`` and the live table's key columns (``keyed``: the table's primary key)."""
    columns = [
        sa.Column(name, ID, primary_key=keyed, nullable=False) for name in ("rewind_id", "run_id")
    ]
    columns.append(sa.Column("node_id", sa.String(200), primary_key=keyed, nullable=False))
    return columns + [
        sa.Column(name, sa.Integer, primary_key=keyed, nullable=False) for name in names
    ]


def upgrade() -> None:
    op.add_column("tt_rewinds", sa.Column("kept_rows", sa.Boolean, nullable=True))
    op.create_table(
        "tt_rewound_nodes",
        *_key("iteration", keyed=True),
        sa.Column("state", sa.String(20), nullable=False),
        sa.Column("last_attempt", sa.Integer, nullable=True),
        sa.Column("output_json", sa.Text, nullable=True),
        sa.Column("updated_at_ms", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "tt_rewound_attempts",
        *_key("iteration", "attempt"),
        sa.Column("state", sa.String(20), nullable=False),
        sa.Column("owner_epoch", sa.BigInteger, nullable=False),
        sa.Column("next_sequence", sa.Integer, nullable=False),
        sa.Column("discard_resume", sa.Boolean, nullable=False),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("error_code", sa.String(100), nullable=True),
        sa.Column("resumed_run_id", ID, nullable=True),
        sa.Column("resumed_node_id", sa.String(200), nullable=True),
        sa.Column("resumed_iteration", sa.Integer, nullable=True),
        sa.Column("resumed_attempt", sa.Integer, nullable=True),
        sa.Column("resumed_sequence", sa.Integer, nullable=True),
        sa.Column("started_at_ms", sa.BigInteger, nullable=False),
        sa.Column("finished_at_ms", sa.BigInteger, nullable=True),
    )
    op.create_table(
        "tt_rewound_refs",
        *_key("iteration", "attempt", "sequence"),
        sa.Column("frame_no", sa.BigInteger, nullable=False),
    )
    for table in ("tt_rewound_attempts", "tt_rewound_refs"):
        op.create_index(f"{table}_rewind", table, ["rewind_id"])
