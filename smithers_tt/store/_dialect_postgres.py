"""PostgreSQL: psycopg 3, READ COMMITTED, row locks decide the races; commit tokens settle
ambiguous commits.

**Ambiguous commits** (DESIGN invariant 8). A failure *at* COMMIT may follow a COMMIT that
reached the server and was carried out while its reply was lost; running the work again would
apply it twice. So every write transaction inserts a unique token row (``tt_commit_tokens``)
without an extra round trip: it rides in the first pipeline of statements the transaction
sends (the publication's, see :func:`~smithers_tt.store._engine.token_steps`), or else is
pipelined with the COMMIT (:meth:`PostgresDialect.seal`). When the COMMIT fails with a lost
connection, :meth:`PostgresDialect.settle` makes sure the old session is gone
(``pg_terminate_backend`` on its backend, so no COMMIT of it can still land afterwards) and
looks the token up: found, the transaction committed; not found, it rolled back and is
retried as usual; no answer within the retry budget raises
:class:`~smithers_tt.errors.OutcomeUnknown`, never a false "failed". Writers delete tokens
older than :data:`COMMIT_TOKEN_TTL_MS` a page at a time (every :data:`PRUNE_EVERY`-th token,
in the same pipeline), so the table stays small.
"""

from __future__ import annotations

import itertools
import random
import secrets
import time
from contextlib import suppress
from typing import Any

import sqlalchemy as sa
from sqlalchemy import exc
from sqlalchemy.engine import Connection

from smithers_tt._extras import extra_needed
from smithers_tt.errors import OutcomeUnknown
from smithers_tt.store._dialect import (
    Commit,
    Dialect,
    is_transient,
    register,
    short,
    wrap_driver_error,
)

# SQLSTATE classes and codes that are worth a retry.
_TRANSIENT = {"40001", "40P01", "55P03", "57P01", "57P02", "57P03", "53300"}
_MISTAKES = ("does not exist", "authentication failed", "no pg_hba.conf entry")
"""Connection failures that name a mistake in the URL (database, role, password)."""

_NAME = {"application_name": "smithers_tt"}
"""How our sessions appear in ``pg_stat_activity`` unless the URL names them."""

COMMIT_TOKEN_TTL_MS = 15 * 60_000
"""How long a commit token is kept. It is looked up within seconds of its COMMIT; the margin
covers clocks of writer machines that disagree by minutes."""
PRUNE_EVERY = 64
"""Every this many commit tokens a process makes, the transaction also deletes expired ones."""
_PRUNE_PAGE = 256
"""At most this many expired tokens per prune (4 times the rate they are made)."""

INSERT_TOKEN = "INSERT INTO tt_commit_tokens (created_at_ms, nonce) VALUES (%s, %s)"
_PRUNE_TOKENS = (
    "DELETE FROM tt_commit_tokens WHERE (created_at_ms, nonce) IN ("
    "SELECT created_at_ms, nonce FROM tt_commit_tokens WHERE created_at_ms < %s "
    "ORDER BY created_at_ms LIMIT %s FOR UPDATE SKIP LOCKED)"
)
# Ends the session that sent an unanswered COMMIT (same user and database only), waiting up
# to 2 s for it to exit: once it is gone its transaction can no longer commit, so the token
# lookup that follows is final. No row: the session had already ended.
_END_SESSION = sa.text(
    "SELECT pg_terminate_backend(pid, 2000) FROM pg_stat_activity "
    "WHERE pid = :pid AND usename = current_user AND datname = current_database()"
)
_FIND_TOKEN = sa.text(
    "SELECT 1 FROM tt_commit_tokens WHERE created_at_ms = :created_at_ms AND nonce = :nonce"
)

# A random start: processes that commit less than PRUNE_EVERY times (a CLI command) still
# prune, on average, as often as they make tokens.
_TOKENS = itertools.count(random.randrange(PRUNE_EVERY))


class PostgresDialect(Dialect):
    """PostgreSQL through psycopg 3."""

    name = "postgresql"
    placeholder = "%s"
    pipelines = True
    seals_commits = True
    # Garbage collection locks FOR UPDATE SKIP LOCKED: a publisher's KEY SHARE lock makes it
    # skip the content until the reference to it has committed.
    content_lock = " FOR KEY SHARE"
    row_lock = " FOR UPDATE"

    def normalize_url(self, url: sa.URL) -> sa.URL:
        if url.drivername != "postgresql+psycopg":
            url = url.set(drivername="postgresql+psycopg")
        return url

    def create_engine(
        self,
        url: sa.URL,
        *,
        busy_timeout_ms: int,
        synchronous: str,
        read_only: bool,
        create: bool,
        write_option: str,
    ) -> tuple[sa.Engine, bool]:
        if read_only:
            url = read_only_url(url)
        with extra_needed("PostgreSQL"):  # SQLAlchemy imports psycopg here
            engine = sa.create_engine(
                url,
                pool_pre_ping=True,
                pool_size=8,
                max_overflow=24,
                isolation_level="READ COMMITTED",
                # A name given in the URL (?application_name=...) wins.
                connect_args={} if "application_name" in url.query else _NAME,
            )
        return engine, False

    def owns(self, orig: BaseException) -> bool:
        return type(orig).__module__.startswith("psycopg")

    def transient(self, error: BaseException, orig: BaseException) -> bool:
        sqlstate = getattr(orig, "sqlstate", None)
        if sqlstate and (sqlstate in _TRANSIENT or sqlstate.startswith("08")):
            return True
        message = str(orig).lower()
        if any(text in message for text in _MISTAKES):
            return False  # a mistyped URL fails the same way on every try
        # psycopg raises OperationalError without a SQLSTATE when the server goes away.
        return (
            isinstance(error, exc.OperationalError)
            and sqlstate is None
            and ("connection" in message or "server closed" in message or "terminat" in message)
        )

    def commit_steps(self, commit: Commit, raw: Any) -> list[tuple[str, tuple[int, ...]]]:
        token = commit.token = (time.time_ns() // 1_000_000, secrets.randbits(63))
        commit.pid = raw.info.backend_pid
        statements: list[tuple[str, tuple[int, ...]]] = [(INSERT_TOKEN, token)]
        if next(_TOKENS) % PRUNE_EVERY == 0:
            statements.append((_PRUNE_TOKENS, (token[0] - COMMIT_TOKEN_TTL_MS, _PRUNE_PAGE)))
        return statements

    # --- claims, heartbeats, garbage collection ---
    def skip_locked(self, stmt: sa.Select) -> sa.Select:
        return stmt.with_for_update(skip_locked=True)

    def seal(self, conn: Connection, commit: Commit) -> None:
        """Commit a write transaction with its token row, in one round trip (unless the
        token was already sent with the transaction's statements: then SQLAlchemy commits)."""
        raw = conn.connection.dbapi_connection
        if commit.token is not None:
            return
        if raw.info.transaction_status.name == "IDLE":
            return  # nothing was sent: nothing to commit (SQLAlchemy's COMMIT is a no-op)
        cursor = raw.cursor()
        try:
            with raw.pipeline():
                for statement, params in self.commit_steps(commit, raw):
                    cursor.execute(statement, params)
                # COMMIT as a statement, not raw.commit(): that one syncs the pipeline itself,
                # and leaving the pipeline syncs again, a second round trip. Never prepared,
                # so every COMMIT goes out as such. SQLAlchemy's own commit is then a no-op.
                cursor.execute("COMMIT", prepare=False)
        except conn.dialect.loaded_dbapi.Error as error:
            raise wrap_driver_error(conn, error, INSERT_TOKEN, commit.token, cursor) from error
        finally:
            with suppress(Exception):
                cursor.close()

    def settle(self, engine: Any, commit: Commit, error: exc.DBAPIError) -> bool:
        if commit.token is None or not _reply_lost(error):
            # No token: nothing had been sent. Otherwise the server answered the COMMIT with
            # an error (a serialization failure, a deferred constraint...): it rolled back.
            return False
        created_at_ms, nonce = commit.token
        why = short(error)
        for attempt in range(1, engine.retry.attempts + 1):
            try:
                with engine.connect(write=False) as conn:
                    ended = conn.execute(_END_SESSION, {"pid": commit.pid}).scalar_one_or_none()
                    if ended is not False:  # gone already (None) or ended now (True)
                        found = conn.execute(
                            _FIND_TOKEN, {"created_at_ms": created_at_ms, "nonce": nonce}
                        ).first()
                        return found is not None
                why = f"its server session {commit.pid} did not end"
            except exc.DBAPIError as lookup_error:
                why = short(lookup_error)
                if not is_transient(lookup_error):
                    break  # e.g. not allowed to end the session: asking again will not help
            if attempt < engine.retry.attempts:
                engine.pause(attempt)
        raise OutcomeUnknown(
            "the connection to PostgreSQL was lost while a write was committing, and the "
            f"store could not find out whether it committed ({why}); the write may "
            "or may not have happened: once the database is reachable, look at the run it "
            "changed (`smithers-tt show RUN`, `smithers-tt timeline RUN`) and repeat the "
            "call only if it did not happen",
            phase="commit",
        ) from error


register(PostgresDialect())


def _reply_lost(error: exc.DBAPIError) -> bool:
    """Whether a failed COMMIT may have been carried out: the connection went away (or the
    server was shutting the session down) instead of answering with an error."""
    if error.connection_invalidated:
        return True
    sqlstate = getattr(error.orig, "sqlstate", None)
    return sqlstate is None or sqlstate.startswith(("08", "57P"))


def read_only_url(url: sa.URL) -> sa.URL:
    """The URL with every session read-only on the server, the URL's own options kept."""
    options = url.query.get("options", "")
    options = options if isinstance(options, str) else " ".join(options)
    return url.update_query_dict(
        {"options": f"{options} -cdefault_transaction_read_only=on".strip()}
    )
