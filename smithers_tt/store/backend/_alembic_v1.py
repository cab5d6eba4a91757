"""Stores made by smithers_tt 0.1, before Alembic: recognise them so they upgrade in place.

smithers_tt 0.1 ran hand-written migrations and recorded each in ``tt_migrations`` with the
SHA-256 of its file. Those five files became the first five Alembic revisions, with the same
names as revision ids and the same resulting tables. A store that has ``tt_migrations`` rows
but no Alembic version table is such a store: its rows must be a prefix of the five, each
with the checksum 0.1 shipped, and then the store is at the revision of its last row.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from smithers_tt.errors import MigrationError, SchemaMismatch

V1_TABLE = "tt_migrations"
_v1 = sa.table(V1_TABLE, sa.column("name"), sa.column("checksum"))

V1_CHECKSUMS = {
    # The SHA-256 of migrations/NNNN_*.py as smithers_tt 0.1 shipped them (commit 1c9efba);
    # those files are gone, so their checksums are kept here.
    "0001_initial": "c8a6d0d3f897f008cebe6ad31ff2fa439b1137dd8929fb9ceb0fed29b1376123",
    "0002_time_travel": "85882656d9a7f8986f9b386ce010cc067d7a478aac1f59e5ae5416d96596e2b1",
    "0003_langgraph": "3a210a41c0049b2396c6085fd47cedaf5cc3d33a6de2bbfebc969d3cc7273d52",
    "0004_workers": "94bb21459c6b647029532542cebe4512953149464e265b221d8ee5cb29639338",
    "0005_commit_tokens": "03fbb3bd20555a60b680c275f5ffd60365266b7f8ba75592f3e07482f02fb3e8",
}
V1_NAMES = tuple(V1_CHECKSUMS)


def v1_rows(conn: Connection) -> dict[str, str]:
    """The ``tt_migrations`` rows (name to checksum); call only when the table exists."""
    return {
        name: checksum for name, checksum in conn.execute(sa.select(_v1.c.name, _v1.c.checksum))
    }


def v1_unknown(rows: dict[str, str]) -> list[str]:
    """Recorded names smithers_tt 0.1 did not ship: a newer version migrated the store."""
    return sorted(set(rows) - set(V1_CHECKSUMS))


def v1_revision(rows: dict[str, str]) -> str:
    """The Alembic revision a 0.1 store with these (non-empty) rows is at.

    Raises:
        SchemaMismatch: a name 0.1 never shipped is recorded (a newer version wrote it).
        MigrationError: a checksum differs from the file 0.1 shipped, or a migration is
            missing below a recorded one; such a store was not made by smithers_tt 0.1.
    """
    unknown = v1_unknown(rows)
    if unknown:
        raise SchemaMismatch(
            f"the database was migrated by a newer smithers_tt (unknown migrations "
            f"{unknown}); upgrade smithers_tt to open it"
        )
    for name, checksum in sorted(rows.items()):
        if checksum != V1_CHECKSUMS[name]:
            raise MigrationError(
                f"migration {name} was applied with checksum {checksum[:12]} but smithers_tt "
                f"0.1 shipped {V1_CHECKSUMS[name][:12]}; this store was not made by "
                "smithers_tt and is not upgraded"
            )
    applied = [name for name in V1_NAMES if name in rows]
    if applied != list(V1_NAMES[: len(applied)]):
        missing = sorted(set(V1_NAMES[: V1_NAMES.index(applied[-1])]) - set(applied))
        raise MigrationError(
            f"migrations {missing} are not recorded below {applied[-1]}; this store was not "
            "made by smithers_tt and is not upgraded"
        )
    return applied[-1]
