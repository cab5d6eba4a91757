"""Fixtures of the store tests: a store, a running run's fence and an open attempt."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

import smithers_tt as st
from smithers_tt.store import AttemptKey, Fence, Store
from tests.conftest import PG_URL, pg_admin, schema_url


@pytest.fixture
def store(db: st.Database) -> Store:
    """The store of the migrated, empty database of each backend."""
    return db.store


@pytest.fixture
def fence(store: Store) -> Fence:
    """The owner's fence of a new running run."""
    _, fence = store.create_run("wf")
    return fence


@pytest.fixture
def attempt(store: Store, fence: Fence) -> AttemptKey:
    """An in-progress attempt (node ``node``, iteration 0, attempt 1) of the fenced run."""
    return store.start_attempt(fence, "node").key


@pytest.fixture
def fresh_url(db_url: str, tmp_path: Path) -> Iterator[str]:
    """A second empty database of the backend (another file, or another schema)."""
    if db_url.startswith("sqlite"):
        yield f"sqlite:///{tmp_path / 'fresh.db'}"
        return
    schema = f"tt_fresh_{secrets.token_hex(6)}"
    try:
        with pg_admin().begin() as conn:
            conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
        yield schema_url(PG_URL, schema)
    finally:
        with pg_admin().begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))


@pytest.fixture
def raw(db_url: str) -> Iterator[sa.Engine]:
    """A plain SQLAlchemy engine on the (still empty) database, for setting up shapes."""
    engine = sa.create_engine(db_url)
    try:
        yield engine
    finally:
        engine.dispose()
