"""Shared fixtures: one database fixture parametrised over the backends.

SQLite (a real temporary file) always runs. PostgreSQL runs against
``$SMITHERS_TT_TEST_PG_URL`` (default ``postgresql+psycopg://postgres@127.0.0.1:5432/test``)
when it is reachable, each test in a schema of its own that is dropped afterwards; when it is
not reachable the PostgreSQL cases skip with the reason, or fail when
``SMITHERS_TT_REQUIRE_PG=1`` (CI sets it: there the PostgreSQL tests must run).
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from urllib.parse import quote

import pytest
import sqlalchemy as sa

import smithers_tt as st
from tests.faults import PgProxy

PG_URL = os.environ.get(
    "SMITHERS_TT_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
REQUIRE_PG = os.environ.get("SMITHERS_TT_REQUIRE_PG") == "1"

_pg_state: dict[str, str | None] = {}


def pg_unavailable() -> str | None:
    """None when PostgreSQL answers, else the reason it does not (checked once)."""
    if "reason" not in _pg_state:
        try:
            engine = sa.create_engine(PG_URL, connect_args={"connect_timeout": 5})
            with engine.connect() as conn:
                conn.execute(sa.text("SELECT 1"))
            engine.dispose()
            _pg_state["reason"] = None
        except Exception as error:  # any failure to reach the server
            first = (str(error).strip().splitlines() or ["unknown error"])[0]
            _pg_state["reason"] = f"PostgreSQL at {PG_URL} is not reachable: {first}"
    return _pg_state["reason"]


def require_pg() -> None:
    """Skip (or, in CI, fail) the calling test when PostgreSQL is not reachable."""
    reason = pg_unavailable()
    if reason:
        if REQUIRE_PG:
            pytest.fail(f"{reason} (SMITHERS_TT_REQUIRE_PG=1: PostgreSQL tests must run)")
        pytest.skip(reason)


@pytest.fixture
def pg_schema_url() -> Iterator[str]:
    """A URL whose search_path is a fresh, empty PostgreSQL schema (dropped afterwards)."""
    require_pg()
    schema = f"tt_test_{secrets.token_hex(6)}"
    admin = sa.create_engine(PG_URL)
    with admin.begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    sep = "&" if "?" in PG_URL else "?"
    try:
        yield f"{PG_URL}{sep}options={quote(f'-csearch_path={schema}')}"
    finally:
        with admin.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


def table_names(url: str) -> list[str]:
    """The tables in a database (an SQLite file, or the schema a PostgreSQL URL points at)."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return sorted(sa.inspect(conn).get_table_names())
    finally:
        engine.dispose()


BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
]


@pytest.fixture(params=BACKENDS)
def db_url(request: pytest.FixtureRequest, tmp_path) -> str:
    """An empty database URL on each backend."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'smithers.db'}"
    return request.getfixturevalue("pg_schema_url")


@pytest.fixture
def db(db_url: str) -> Iterator[st.Database]:
    """A migrated, empty database on each backend."""
    database = st.connect(db_url)
    try:
        yield database
    finally:
        database.close()


@pytest.fixture
def pg_proxy() -> Iterator[PgProxy]:
    """A loopback proxy in front of the test PostgreSQL server (see :mod:`tests.faults`)."""
    require_pg()
    proxy = PgProxy(PG_URL)
    try:
        yield proxy
    finally:
        proxy.close()


@pytest.fixture
def proxied_pg_url(pg_proxy: PgProxy, pg_schema_url: str) -> str:
    """A fresh PostgreSQL schema reached through :func:`pg_proxy` (faults on demand)."""
    return pg_proxy.url(pg_schema_url)
