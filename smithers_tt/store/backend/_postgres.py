"""PostgreSQL: psycopg 3, READ COMMITTED, row locks decide the races; commit tokens settle
ambiguous commits.

**Ambiguous commits** (DESIGN invariant 8). A failure *at* COMMIT may follow a COMMIT that
reached the server and was carried out while its reply was lost; running the work again would
apply it twice. So every write transaction inserts a unique token row (``tt_commit_tokens``)
without an extra round trip: it rides in the first pipeline of statements the transaction
sends (:meth:`PostgresDialect.send`), or else is pipelined with the COMMIT
(:meth:`PostgresDialect.seal`), and so does the transaction's BEGIN and every statement held
back to go with the COMMIT (:func:`~._dialect.defer`): a write of the group committer is one
round trip, BEGIN to COMMIT. When the COMMIT fails with a lost
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
import re
import secrets
import select
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy import exc
from sqlalchemy.engine import Connection

from smithers_tt._extras import extra_needed
from smithers_tt.errors import OutcomeUnknown, StoreNotFound
from smithers_tt.store.backend._access import PostgresAccess
from smithers_tt.store.backend._dialect import (
    COMMIT_KEY,
    Commit,
    Dialect,
    is_transient,
    register,
    short,
    take_deferred,
    wrap_driver_error,
)
from smithers_tt.store.backend._notify import RunNotices
from smithers_tt.store.backend._pg_commit import (
    COMMIT_TOKEN_TTL_MS,
    IMPLICIT_BEGIN,
    INSERT_TOKEN,
    OWN_BEGIN,
    PRUNE_EVERY,
    READ_COMMITTED,
    own_begin,
    ride,
    session_defaults,
)
from smithers_tt.store.backend._statements import guard

# SQLSTATE classes and codes that are worth a retry.
_TRANSIENT = {"40001", "40P01", "55P03", "57P01", "57P02", "57P03", "53300"}
_MISTAKES = ("does not exist", "authentication failed", "no pg_hba.conf entry")
"""Connection failures that name a mistake in the URL (database, role, password)."""

_NAME = {"application_name": "smithers_tt"}
"""How our sessions appear in ``pg_stat_activity`` unless the URL names them."""

_PRUNE_PAGE = 256
"""At most this many expired tokens per prune (4 times the rate they are made)."""

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

_CHANNEL = (
    "'smithers_tt:' || md5((SELECT relnamespace::regnamespace::text FROM pg_class "
    "WHERE oid = to_regclass('tt_runs')))"
)
"""SQL: the store's notice channel, named after the schema of its tables (a store per schema
may share a database); hashed, as a channel name is at most 63 bytes."""

T = TypeVar("T")

_JSONB = "CAST(f.data_json AS jsonb)"
_NAMED = re.compile(r"(?<!:):([a-z_][a-z0-9_]*)")
"""A ``:name`` placeholder (not a ``::type`` cast)."""
_PG_ROWS = 10_000
"""Rows per ``unnest(...)`` insert: one array parameter per column."""
PG_WORK_MEM_KIB = 65_536
"""``work_mem`` (KiB) of a transaction that rewinds or forks; see :meth:`PostgresDialect.roomy`."""
MIGRATION_LOCK_CLASS = 0x5EED_7E57
"""The first key of the advisory lock migrators take (a 32-bit constant no other application
uses); the second is the hash of the schema being migrated."""

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
    # Inserted, or found, compared and held FOR KEY SHARE, in one statement: content a publish
    # stores again costs no round trip of its own. Both parts read the statement's snapshot:
    # a row a collection deletes meanwhile is inserted again (the insert waits for the
    # delete) or, if the lock skipped it and the insert met it, nothing comes back and the
    # caller checks again (store_content, which loops).
    put_content = (
        "WITH v (content_hash, data, size_bytes, created_at_ms) AS (VALUES ("
        "CAST(? AS text), CAST(? AS bytea), CAST(? AS integer), CAST(? AS bigint))), "
        "i AS (INSERT INTO tt_checkpoint_contents (content_hash, data, size_bytes, "
        "created_at_ms) SELECT content_hash, data, size_bytes, created_at_ms FROM v "
        "ON CONFLICT (content_hash) DO NOTHING RETURNING size_bytes), "
        "k AS (SELECT c.size_bytes, c.data = v.data AS same FROM tt_checkpoint_contents c "
        "JOIN v ON c.content_hash = v.content_hash FOR KEY SHARE OF c) "
        "SELECT size_bytes, true FROM i UNION ALL SELECT size_bytes, same FROM k"
    )
    put_content_if = put_content.replace(
        "SELECT size_bytes, true FROM i UNION ALL SELECT size_bytes, same FROM k",
        f"{guard('count(*) = 1')} FROM (SELECT 1 FROM i UNION ALL SELECT 1 FROM k, v "  # noqa: S608
        "WHERE k.same AND k.size_bytes = v.size_bytes) g",
    )
    frame_ctes = True
    code_point_order = ' COLLATE "C"'  # the database's own collation may be a language's
    # A HashAggregate groups 100,000 frames in one pass: no blocks.
    choice_block = None

    def normalize_url(self, url: sa.URL) -> sa.URL:
        if url.drivername != "postgresql+psycopg":
            url = url.set(drivername="postgresql+psycopg")
        return url

    # --- time travel, bulk writes, describe, migrations ---
    frame_data_ok = (
        "CASE WHEN f.data_json IS NULL THEN 1 "
        "WHEN json_typeof(CAST(f.data_json AS json)) <> 'object' THEN 0 "
        "WHEN strpos(f.data_json, '\\u') > 0 THEN 0 "
        "WHEN strpos(f.data_json, 'created_at_ms') = 0 THEN 1 "
        "WHEN length(f.data_json) - length(replace(f.data_json, 'created_at_ms', '')) > 13 "
        "THEN 0 "
        f"WHEN NOT jsonb_exists({_JSONB}, 'created_at_ms') THEN 1 "
        f"WHEN jsonb_typeof({_JSONB} -> 'created_at_ms') = 'number' "
        f"AND ({_JSONB} ->> 'created_at_ms') ~ '^-?[0-9]{{1,18}}$' THEN 1 ELSE 0 END"
    )
    ref_created = (
        "coalesce(CASE WHEN strpos(f.data_json, 'created_at_ms') > 0 THEN "
        f"CAST({_JSONB} ->> 'created_at_ms' AS bigint) END, f.created_at_ms)"
    )

    def named(self, sql: str) -> str:
        return _NAMED.sub(r"%(\1)s", sql)

    @contextmanager
    def roomy(self, conn: Connection) -> Iterator[None]:
        """A larger ``work_mem`` for the transaction: numbering 100,000 base frames sorts
        them, in memory rather than in temporary files. ``LOCAL``: the setting ends with the
        transaction, committed or not."""
        conn.exec_driver_sql(f"SET LOCAL work_mem = '{int(PG_WORK_MEM_KIB)}kB'")
        yield

    def unless_cast_fails(self, conn: Connection, read: Callable[[], T]) -> T | None:
        saved = conn.begin_nested()  # a cast error must not abort the whole transaction
        try:
            found = read()
        except exc.DataError:  # some text could not be read as JSON
            saved.rollback()
            return None
        saved.commit()
        return found

    def any_of(self, numbers: Sequence[int]) -> Iterable[tuple[str, list[Any]]]:
        """``= ANY(array)``: one parameter however many numbers (an ``IN`` list of thousands
        of parameters costs more to parse and plan than to run)."""
        if numbers:
            yield "= ANY(%s::bigint[])", [list(numbers)]

    def insert_tuples(
        self, conn: Connection, table: sa.Table, names: Sequence[str], rows: Sequence[Any]
    ) -> int:
        """``INSERT ... SELECT * FROM unnest(...)`` with one array parameter per column: a
        fixed handful of parameters whatever the number of rows (up to 10,000 a statement)."""
        types = (table.c[name].type.compile(dialect=conn.dialect) for name in names)
        arrays = ", ".join(f"%s::{t}[]" for t in types)
        sql = f"{self.insert_head(conn, table, names)}SELECT * FROM unnest({arrays})"  # noqa: S608
        sent = 0
        for part in self.chunks(rows, 1, limit=_PG_ROWS):
            conn.exec_driver_sql(sql, tuple([row[i] for row in part] for i in range(len(names))))
            sent += 1
        return sent

    def keyed(
        self,
        conn: Connection,
        head: str,
        lead: Sequence[Any],
        table: sa.Table,
        run_id: str,
        names: Sequence[str],
        keys: Sequence[Sequence[Any]],
        *,
        delete: bool,
    ) -> None:
        """``head`` joined with ``unnest(...)`` of the keys (one array parameter per key
        column, on the primary key; up to 10,000 keys a statement): ``DELETE ... USING``,
        ``SELECT ... FROM t, unnest``."""
        prep = conn.dialect.identifier_preparer
        types = (table.c[name].type.compile(dialect=conn.dialect) for name in names)
        arrays = ", ".join(f"%s::{t}[]" for t in types)
        columns = [prep.quote(name) for name in names]
        on = " AND ".join(f"t.{c} = k.{c}" for c in columns)
        join = "USING" if delete else ","
        sql = (
            f"{head} {join} unnest({arrays}) AS k({', '.join(columns)}) "
            f"WHERE t.run_id = %s AND {on}"
        )
        for part in self.chunks(keys, 1, limit=_PG_ROWS):
            conn.exec_driver_sql(
                sql, (*lead, *([key[i] for key in part] for i in range(len(names))), run_id)
            )

    def snapshot_read(self, conn: Connection) -> None:
        conn.exec_driver_sql("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")

    def migration_lock(self, conn: Connection) -> None:
        """A transaction-scoped advisory lock on the schema being migrated: concurrent
        migrators of that schema wait here, then find the work done (it is released with the
        transaction); stores in other schemas of the server migrate without waiting."""
        conn.execute(
            sa.text("SELECT pg_advisory_xact_lock(:key, hashtext(coalesce(current_schema(), '')))"),
            {"key": MIGRATION_LOCK_CLASS},
        )

    shape_sql = (
        "SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), "
        "a.attnotnull, array_position(i.indkey::int2[], a.attnum) "
        "FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid "
        "LEFT JOIN pg_index i ON i.indrelid = c.oid AND i.indisprimary "
        "WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r' "
        "AND a.attnum > 0 AND NOT a.attisdropped ORDER BY c.relname, a.attnum"
    )

    def read_only_access(self, engine: Any) -> Any:
        url = engine.sa.url
        credentials = {
            key: str(value)
            for key, value in (
                ("host", url.host),
                ("port", url.port),
                ("dbname", url.database),
                ("user", url.username),
                ("password", url.password),
            )
            if value is not None
        }
        params = {
            key: value if isinstance(value, str) else " ".join(value)
            for key, value in read_only_url(url).query.items()
        }
        conninfo = " ".join(f"{key}={_conninfo_value(value)}" for key, value in params.items())
        return PostgresAccess(_store_schema(engine), credentials, conninfo)

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
                # No ping before each transaction (one round trip each): a connection that
                # died in the pool fails the transaction's first statement, which
                # Engine.transaction retries on a new connection (nothing was written yet).
                pool_pre_ping=False,
                pool_size=8,
                max_overflow=24,
                isolation_level="READ COMMITTED",
                # A name given in the URL (?application_name=...) wins.
                connect_args={} if "application_name" in url.query else _NAME,
            )
        sa.event.listen(engine, "connect", session_defaults)
        sa.event.listen(engine, "begin", own_begin)
        sa.event.listen(engine, "before_cursor_execute", _send_deferred)
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

    def send(
        self, conn: Connection, steps: Sequence[tuple[str, Any, bool]], *, token: bool
    ) -> list[tuple[Any, ...] | None]:
        """Run ``(statement, params, many)`` steps in one round trip; return each one's first
        row (None for ``many``).

        The pipeline starts with what the transaction still owes the server: its BEGIN when
        nothing was sent yet (psycopg would send that alone, a round trip of its own), then
        the steps held back by :func:`~._dialect.defer`. With ``token``, the transaction's
        commit token rides along too (unless sent already, or inside a savepoint).
        """
        raw = conn.connection.dbapi_connection
        held = take_deferred(conn)
        tokens = self._token_steps(conn, raw) if token else []
        return self._pipeline(conn, raw, [*held, *steps], tokens, commit=False, unread=len(held))

    def _pipeline(
        self,
        conn: Connection,
        raw: Any,
        steps: Sequence[tuple[str, Any, bool]],
        tokens: Sequence[tuple[str, Any]],
        *,
        commit: bool,
        unread: int = 0,
    ) -> list[tuple[Any, ...] | None]:
        """One round trip: the transaction's BEGIN if it has sent nothing yet, ``steps``,
        ``tokens``, and with ``commit`` the COMMIT; the first row back of each step but the
        first ``unread``. The first error the server answered is raised (wrapped as
        SQLAlchemy does), the rest skipped.

        Statements whose rows nobody reads (the BEGIN, the first ``unread`` steps, the tokens,
        the COMMIT) share one cursor: psycopg makes a cursor with its own copy of the
        adapters, a good part of its Python per statement; a failure surfaces at the sync
        whichever cursor sent it."""
        begin = self._begin(conn, raw)
        # A transaction sent whole, BEGIN to COMMIT, in one pipeline needs neither: without a
        # BEGIN the server runs a pipeline's statements up to its Sync as one implicit
        # transaction, committed at the Sync (rolled back, the rest skipped, on an error), at
        # the session's default isolation, which must then be the BEGIN's (see
        # session_defaults).
        implicit = commit and begin == IMPLICIT_BEGIN and conn.connection.info.get(READ_COMMITTED)
        if implicit:
            begin = None
        steps, tokens = ride(steps, tokens)
        cursor = raw.cursor()
        cursors: list[Any] = []
        where: tuple[str, Any] = ("", None)
        first: Exception | None = None
        error_type = conn.dialect.loaded_dbapi.Error
        try:
            try:
                with raw.pipeline():
                    try:  # caught inside: psycopg would log the abort of the rest as a warning
                        if begin is not None:
                            where = (begin, None)
                            cursor.execute(begin, prepare=False)
                        for i, (statement, params, many) in enumerate(steps):
                            where = (statement, params)
                            if i < unread:
                                cur = cursor
                            else:
                                cur = raw.cursor()
                                cursors.append(cur)
                            if many:
                                cur.executemany(statement, params)
                            else:
                                cur.execute(statement, params)
                        for statement, params in tokens:
                            where = (statement, params)
                            cursor.execute(statement, params)
                        if commit and not implicit:
                            # COMMIT as a statement, not raw.commit(): that one syncs the
                            # pipeline itself, and leaving the pipeline syncs again, a second
                            # round trip. Never prepared, so every COMMIT goes out as such.
                            where = ("COMMIT", None)
                            cursor.execute("COMMIT", prepare=False)
                    except error_type as error:
                        first = error
            except error_type as error:
                first = first or error
            if first is not None:
                raise wrap_driver_error(conn, first, *where, cursor) from first
            return [
                None if many or cur.description is None else cur.fetchone()
                for cur, (_, _, many) in zip(cursors, steps[unread:], strict=True)
            ]
        finally:
            for cur in (cursor, *cursors):
                with suppress(Exception):
                    cur.close()

    def _token_steps(self, conn: Connection, raw: Any) -> list[tuple[str, tuple[int, ...]]]:
        """The commit token's statements for a pipeline on ``conn``: none when it is not
        wanted (a read, a token already sent, or inside a savepoint, whose rollback would take
        the token away while the transaction still commits)."""
        commit = conn.info.get(COMMIT_KEY)
        if commit is None or commit.token is not None or conn.in_nested_transaction():
            return []
        return self.commit_steps(commit, raw)

    @staticmethod
    def _begin(conn: Connection, raw: Any) -> str | None:
        """The BEGIN to put at the head of a pipeline, when the transaction has sent nothing
        yet (else None). psycopg sends its own BEGIN before a pipeline's first statement and
        waits for its answer; so the connection goes into psycopg's autocommit mode (no BEGIN
        of its own) and the BEGIN it would have sent goes first in the pipeline. COMMIT and
        ROLLBACK work the same in that mode (psycopg sends them whenever a transaction is
        open); the next transaction's start turns the mode off again (:func:`own_begin`)."""
        if raw.autocommit or raw.info.transaction_status.name != "IDLE":
            return None
        parts = ["BEGIN"]
        if raw.isolation_level is not None:
            parts.append("ISOLATION LEVEL " + raw.isolation_level.name.replace("_", " "))
        if raw.read_only is not None:
            parts.append("READ ONLY" if raw.read_only else "READ WRITE")
        if raw.deferrable is not None:
            parts.append("DEFERRABLE" if raw.deferrable else "NOT DEFERRABLE")
        raw.autocommit = True
        conn.info[OWN_BEGIN] = True
        return " ".join(parts)

    def alone(self, conn: Connection) -> None:
        """The one statement goes in psycopg's autocommit mode: no BEGIN before it, no COMMIT
        after it (SQLAlchemy's COMMIT finds no transaction open and sends nothing), so the
        whole transaction is one round trip. One statement is as atomic and sees one snapshot
        either way; the next transaction's start gives psycopg its BEGIN back
        (:func:`own_begin`)."""
        raw = conn.connection.dbapi_connection
        if raw.autocommit or raw.info.transaction_status.name != "IDLE":
            return
        raw.autocommit = True
        conn.info[OWN_BEGIN] = True

    def seal(self, conn: Connection, commit: Commit) -> None:
        """Commit a write transaction in one round trip: the steps still held back
        (:func:`~._dialect.defer`) and the token row, unless it was sent already with the
        transaction's statements, go with the COMMIT. With nothing to send along, SQLAlchemy
        commits."""
        raw = conn.connection.dbapi_connection
        held, commit.deferred = commit.deferred, []
        if not held:
            if commit.token is not None:
                return
            if raw.info.transaction_status.name == "IDLE":
                return  # nothing was sent: nothing to commit (SQLAlchemy's COMMIT is a no-op)
        if raw.info.transaction_status.name == "IDLE":
            _check_alive(conn, raw)  # before the token: a failure here is certainly no commit
        tokens = self.commit_steps(commit, raw) if commit.token is None else []
        # SQLAlchemy's COMMIT is then a no-op.
        self._pipeline(conn, raw, held, tokens, commit=True, unread=len(held))
        own_begin(conn)

    # --- run notices: a channel per store (the schema holding its tables), the run as payload
    notify_sql = f"SELECT pg_notify({_CHANNEL}, ?)"

    def run_notices(self, engine: Any) -> Any:
        if engine.read_only:
            return None  # it runs no executor
        return RunNotices(engine, f"SELECT {_CHANNEL}")

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


_POSTGRES = PostgresDialect()
register(_POSTGRES)


def _check_alive(conn: Connection, raw: Any) -> None:
    """Raise (wrapped, transient) if the server already closed ``raw``'s connection: a
    transaction sent whole with its COMMIT (its BEGIN included) would otherwise fail as an
    ambiguous COMMIT, which a store that cannot be reached turns into ``OutcomeUnknown``,
    where nothing was sent at all. One ``select`` on the socket, no round trip."""
    try:
        readable, _, _ = select.select([raw.pgconn.socket], [], [], 0)
        if readable:
            raw.pgconn.consume_input()  # what the server sent: notices, or its goodbye
    except conn.dialect.loaded_dbapi.Error as error:
        raise wrap_driver_error(conn, error, "BEGIN", None) from error
    except OSError:
        return  # no socket to look at: the pipeline finds out


def _send_deferred(conn: Connection, *args: Any) -> None:
    """Before any statement SQLAlchemy runs: send the steps held back first (it may read
    what they write, or be a SAVEPOINT that must follow them)."""
    commit = conn.info.get(COMMIT_KEY)
    if commit is not None and commit.deferred:
        _POSTGRES.send(conn, [], token=True)


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


def _conninfo_value(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _store_schema(engine: Any) -> str:
    """The schema holding the store's tables, as its search_path finds them."""
    query = sa.text(
        "SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE c.oid = to_regclass('tt_runs')"
    )
    with engine.sa.connect() as conn:
        schema = conn.execute(query).scalar()
    if schema is None:
        raise StoreNotFound("no smithers_tt tables (tt_runs) on this database's search_path")
    return str(schema)
