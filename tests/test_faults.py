"""The fault proxy itself: the faults it makes are real, seen by the real driver and server."""

from __future__ import annotations

import psycopg
import pytest
import sqlalchemy as sa

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
