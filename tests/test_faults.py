"""The fault proxy itself: the faults it makes are real, seen by the real driver and server."""

from __future__ import annotations

import secrets
import select
import time

import psycopg
import pytest
import sqlalchemy as sa
from psycopg import pq

from tests.faults import PgProxy

pytestmark = pytest.mark.postgres


def _libpq(url: str) -> str:
    return sa.make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def _rows(url: str) -> list[int]:
    with psycopg.connect(_libpq(url)) as conn:
        return [n for (n,) in conn.execute("SELECT n FROM t ORDER BY n")]


@pytest.mark.parametrize("pipeline", [False, True], ids=["simple", "pipeline"])
def test_lost_commit_reply_leaves_the_transaction_committed(
    pg_proxy: PgProxy, pg_schema_url: str, pipeline: bool
) -> None:
    with psycopg.connect(_libpq(pg_schema_url), autocommit=True) as conn:
        conn.execute("CREATE TABLE t (n int)")
    conn = psycopg.connect(_libpq(pg_proxy.url(pg_schema_url)), connect_timeout=5)
    conn.execute("INSERT INTO t VALUES (1)")
    conn.commit()
    dropped = pg_proxy.drop_commit_reply()
    conn.execute("INSERT INTO t VALUES (2)")
    with pytest.raises(psycopg.OperationalError):
        if pipeline:
            with conn.pipeline():
                conn.execute("INSERT INTO t VALUES (3)")
                conn.commit()
        else:
            conn.commit()
    assert dropped.wait(5)
    # The client was told nothing, yet the server committed everything.
    assert _rows(pg_schema_url) == ([1, 2, 3] if pipeline else [1, 2])


def test_outage_cuts_connections_until_restored(pg_proxy: PgProxy, pg_schema_url: str) -> None:
    url = _libpq(pg_proxy.url(pg_schema_url))
    conn = psycopg.connect(url, autocommit=True, connect_timeout=5)
    assert conn.execute("SELECT 1").fetchone() == (1,)
    pg_proxy.outage()
    with pytest.raises(psycopg.OperationalError):
        conn.execute("SELECT 1")
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(url, connect_timeout=2)
    pg_proxy.restore()
    with psycopg.connect(url, autocommit=True, connect_timeout=5) as again:
        assert again.execute("SELECT 2").fetchone() == (2,)


def _pipelined_results(pg: pq.PGconn, syncs: int) -> list[tuple[str, bytes | None]]:
    """``(status, command tag)`` of each result a pipeline-mode connection gets back, until
    ``syncs`` syncs are answered; a ``("lost", message)`` last when the connection dies."""
    got: list[tuple[str, bytes | None]] = []
    while sum(status == "PIPELINE_SYNC" for status, _ in got) < syncs:
        assert select.select([pg.socket], [], [], 10)[0], f"no answer; so far {got}"
        try:
            pg.consume_input()
        except psycopg.OperationalError as error:
            return [*got, ("lost", str(error).encode())]
        while not pg.is_busy():
            result = pg.get_result()
            if result is None:
                if pg.transaction_status == pq.TransactionStatus.IDLE or not got:
                    break
                continue
            status = pq.ExecStatus(result.status).name
            if status == "FATAL_ERROR":
                return [*got, ("lost", result.error_message)]
            got.append((status, result.command_status))
    return got


def test_outage_after_commit_waits_for_that_commits_own_reply(
    pg_proxy: PgProxy, pg_schema_url: str
) -> None:
    # A pipelining client sends its COMMIT before the statement ahead of it has been answered
    # (that one waits for a lock, given up once the COMMIT has gone by): the outage still
    # begins only once the COMMIT's reply is through, so the client learns it committed, and
    # what it sends after that reaches no server, on the same connection or another.
    direct = _libpq(pg_schema_url)
    with psycopg.connect(direct, autocommit=True) as conn:
        conn.execute("CREATE TABLE t (n int)")
    lock = secrets.randbits(62)
    blocker = psycopg.connect(direct, autocommit=True)
    blocker.execute("SELECT pg_advisory_lock(%s)", [lock])
    proxied = _libpq(pg_proxy.url(pg_schema_url))
    other = psycopg.connect(proxied, autocommit=True, connect_timeout=5)
    client = psycopg.connect(proxied, autocommit=True, connect_timeout=5)
    pg = client.pgconn  # libpq itself: psycopg would wait for each answer before the COMMIT
    began = pg_proxy.outage_after_commit()
    pg.enter_pipeline_mode()
    for sql in (
        b"BEGIN",
        f"SELECT pg_advisory_xact_lock({lock})".encode(),
        b"INSERT INTO t VALUES (1)",
    ):
        pg.send_query_params(sql, None)
    pg.pipeline_sync()
    pg.send_query_params(b"COMMIT", None)
    pg.pipeline_sync()
    while pg.flush():
        select.select([], [pg.socket], [], 1)
    deadline = time.monotonic() + 10
    while pg_proxy.commits_seen < 1:  # the COMMIT is through the proxy before any reply is
        assert time.monotonic() < deadline, "the COMMIT never reached the proxy"
        time.sleep(0.001)
    blocker.execute("SELECT pg_advisory_unlock(%s)", [lock])
    blocker.close()
    results = _pipelined_results(pg, syncs=2)
    assert began.wait(5)
    assert results == [
        ("COMMAND_OK", b"BEGIN"),
        ("TUPLES_OK", b"SELECT 1"),
        ("COMMAND_OK", b"INSERT 0 1"),
        ("PIPELINE_SYNC", b""),
        ("COMMAND_OK", b"COMMIT"),  # the outage once began at the sync above, cutting this
        ("PIPELINE_SYNC", b""),
    ]
    with pytest.raises(psycopg.OperationalError):
        other.execute("INSERT INTO t VALUES (2)")
    client.close()
    other.close()
    assert _rows(pg_schema_url) == [1]
