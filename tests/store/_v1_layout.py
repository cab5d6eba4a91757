"""Build a store as smithers_tt 0.1 left it, with today's frozen revisions."""

from __future__ import annotations

import sqlalchemy as sa

from smithers_tt.store.backend._alembic_v1 import V1_CHECKSUMS
from smithers_tt.store.backend._migrate import upgrade

V1_HEAD = "0005_commit_tokens"
"""The last migration smithers_tt 0.1 shipped: its tables are those of this revision."""


def make_v1_layout(url: str, rows: dict[str, str] | None = None, *, to: str = V1_HEAD) -> None:
    """Tables as 0.1 left them (the revisions up to ``to``, no Alembic version) and its
    record of migrations: ``rows`` (name to checksum), by default the five it shipped."""
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            upgrade(conn, to=to)
            conn.execute(sa.text("DROP TABLE tt_alembic_version"))
            for name, checksum in (V1_CHECKSUMS if rows is None else rows).items():
                conn.execute(
                    sa.text(
                        "INSERT INTO tt_migrations (name, checksum, applied_at_ms) "
                        "VALUES (:n, :c, 1)"
                    ),
                    {"n": name, "c": checksum},
                )
    finally:
        engine.dispose()
