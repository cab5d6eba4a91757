"""The migration lock on PostgreSQL is per schema: migrators of one store wait for each other,
stores in other schemas of the same server do not wait for them."""

from __future__ import annotations

import secrets
import threading
from collections.abc import Iterator
from urllib.parse import quote

import pytest
import sqlalchemy as sa

import smithers_tt as st
from smithers_tt.store import Engine
from tests.conftest import PG_URL, require_pg

pytestmark = pytest.mark.postgres


@pytest.fixture
def two_schemas() -> Iterator[tuple[str, str]]:
    """URLs of two fresh, empty schemas of the test server (dropped afterwards)."""
    require_pg()
    names = [f"tt_test_{secrets.token_hex(6)}" for _ in range(2)]
    admin = sa.create_engine(PG_URL)
    with admin.begin() as conn:
        for name in names:
            conn.execute(sa.text(f'CREATE SCHEMA "{name}"'))
    sep = "&" if "?" in PG_URL else "?"
    try:
        a, b = (f"{PG_URL}{sep}options={quote(f'-csearch_path={n}')}" for n in names)
        yield a, b
    finally:
        with admin.begin() as conn:
            for name in names:
                conn.execute(sa.text(f'DROP SCHEMA "{name}" CASCADE'))
        admin.dispose()


def _connect_in_thread(url: str) -> tuple[threading.Thread, list[BaseException | None]]:
    outcome: list[BaseException | None] = []

    def go() -> None:
        try:
            st.connect(url).close()
            outcome.append(None)
        except BaseException as error:  # reported to the test
            outcome.append(error)

    thread = threading.Thread(target=go, daemon=True)
    thread.start()
    return thread, outcome


def test_a_store_migrates_while_another_schema_s_migrator_holds_its_lock(
    two_schemas: tuple[str, str],
) -> None:
    busy, free = two_schemas
    holder = Engine(busy)
    try:
        with holder.sa.begin() as conn:
            holder.backend.migration_lock(conn)  # what a migrator of `busy` holds
            thread, outcome = _connect_in_thread(free)
            thread.join(timeout=60)
            assert outcome == [None], "the other schema's store waited for this lock"
            # The same schema's migrator does wait: the lock still serialises one store.
            waiting, waited = _connect_in_thread(busy)
            waiting.join(timeout=1.5)
            assert waiting.is_alive() and waited == []
        waiting.join(timeout=60)
        assert waited == [None]
    finally:
        holder.dispose()
