"""Fixtures of the store tests: a store, a running run's fence and an open attempt."""

from __future__ import annotations

import pytest

import smithers_tt as st
from smithers_tt.store import AttemptKey, Fence, Store


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
