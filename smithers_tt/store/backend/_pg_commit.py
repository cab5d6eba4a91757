"""How a PostgreSQL transaction of the store reaches its COMMIT: the BEGIN the store sends
itself, or leaves out where the server's implicit transaction is the same; and the commit
token, which settles a COMMIT whose reply was lost, riding inside another statement where one
can carry it (see :mod:`smithers_tt.store.backend._postgres`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy.engine import Connection

COMMIT_TOKEN_TTL_MS = 15 * 60_000
"""How long a commit token is kept. It is looked up within seconds of its COMMIT; the margin
covers clocks of writer machines that disagree by minutes."""
PRUNE_EVERY = 64
"""Every this many commit tokens a process makes, the transaction also deletes expired ones."""
INSERT_TOKEN = "INSERT INTO tt_commit_tokens (created_at_ms, nonce) VALUES (%s, %s)"


OWN_BEGIN = "smithers_tt_own_begin"
"""Key in ``Connection.info``: this connection is in psycopg's autocommit mode because the
store sent its transaction's BEGIN itself (see :meth:`PostgresDialect._begin`)."""


IMPLICIT_BEGIN = "BEGIN ISOLATION LEVEL READ COMMITTED"
"""The BEGIN a write transaction sends (the engine's isolation level, nothing else set)."""
READ_COMMITTED = "smithers_tt_read_committed"
"""Key in a pooled connection's ``info``: its session's transactions default to READ
COMMITTED, so a pipeline without a BEGIN runs as one with :data:`IMPLICIT_BEGIN`."""


def session_defaults(raw: Any, record: Any) -> None:
    """On each new connection: whether its session's transactions default to READ COMMITTED,
    the isolation level of every transaction the store begins (a server, database or role
    may default to another). Only then may a transaction go without its BEGIN
    (:meth:`PostgresDialect._pipeline`). One round trip per connection, not per transaction."""
    try:
        row = raw.execute(
            "SELECT current_setting('default_transaction_isolation'), "
            "current_setting('default_transaction_deferrable')"
        ).fetchone()
    finally:
        raw.rollback()
    record.info[READ_COMMITTED] = row == ("read committed", "off")


def own_begin(conn: Connection) -> None:
    """Give psycopg its BEGIN back once the transaction the store began has ended (at the
    COMMIT the store sent, or when SQLAlchemy begins the next transaction)."""
    if conn.info.pop(OWN_BEGIN, False):
        raw = conn.connection.dbapi_connection
        if raw is not None and raw.autocommit:
            raw.autocommit = False


_TOKEN_CTE = f"tt_commit_token AS ({INSERT_TOKEN})"
_RIDES: dict[str, str | None] = {}
"""Statements with the token's insert ahead of them (see :func:`with_token`), by statement."""


def ride(
    steps: Sequence[tuple[str, Any, bool]], tokens: Sequence[tuple[str, Any]]
) -> tuple[Sequence[tuple[str, Any, bool]], Sequence[tuple[str, Any]]]:
    """``steps`` and ``tokens`` with the commit token's insert moved into the first step that
    can carry it (a data-modifying CTE of that statement: see :func:`with_token`), so it costs
    no statement of its own; as they are when no step can. The token row is the same row in
    the same transaction, so :meth:`PostgresDialect.settle` finds it exactly as before; if the
    step fails the transaction aborts, token and all, as it did with the token alone."""
    if not tokens or tokens[0][0] is not INSERT_TOKEN:
        return steps, tokens
    for i, (statement, params, many) in enumerate(steps):
        if many or type(params) is not tuple:
            continue
        carrier = with_token(statement)
        if carrier is None:
            continue
        rode = (carrier, (*tokens[0][1], *params), False)
        return [*steps[:i], rode, *steps[i + 1 :]], tokens[1:]
    return steps, tokens


def with_token(statement: str) -> str | None:
    """``statement`` with the commit token's insert as a data-modifying CTE ahead of it (its
    two parameters first): PostgreSQL runs such a CTE once and to completion whatever the
    statement reads of it, in the statement's transaction. None for a statement that does not
    take a ``WITH`` (anything but one ``SELECT``, ``INSERT``, ``UPDATE``, ``DELETE`` or
    non-recursive ``WITH``)."""
    try:
        return _RIDES[statement]
    except KeyError:
        pass
    head = statement[:15].upper()
    if head.startswith("WITH RECURSIVE"):
        carrier = None
    elif head.startswith("WITH "):
        carrier = f"WITH {_TOKEN_CTE}, {statement[5:]}"
    elif head.startswith(("SELECT ", "INSERT ", "UPDATE ", "DELETE ")):
        carrier = f"WITH {_TOKEN_CTE} {statement}"
    else:
        carrier = None
    if len(_RIDES) < 1024:  # prebuilt statements: a few dozen
        _RIDES[statement] = carrier
    return carrier
