"""Run ids as people type them: a unique prefix of at least 6 characters stands for the run
everywhere a run id is taken; too short, unknown or ambiguous prefixes are clear errors; the
ids shown are each run's shortest unique prefix (at least 8 characters)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy as sa

import smithers_tt as st
from smithers_tt.demo import demo_workflow
from smithers_tt.errors import AmbiguousRunId, InvalidArgument, RunNotFound
from smithers_tt.store import Store


def test_full_id_and_unique_prefix_name_the_same_run(store: Store, db: st.Database) -> None:
    record, _ = store.create_run("wf", run_id="abcdef123456")
    store.create_run("wf", run_id="abcxyz999999")

    for given in ("abcdef123456", "abcdef12", "abcdef"):
        assert db.resolve_run_id(given) == record.run_id
        assert db.get_run(given).id == record.run_id


def test_ambiguous_prefix_is_an_error_listing_each_candidate_with_workflow_and_status(
    store: Store, db: st.Database
) -> None:
    store.create_run("report", run_id="abcdef-1")
    store.create_run("digest", run_id="abcdef-2", status="queued")

    with pytest.raises(AmbiguousRunId) as caught:
        db.get_run("abcdef")

    assert caught.value.details["candidates"] == [
        "abcdef-1 report running",
        "abcdef-2 digest queued",
    ]
    assert "ambiguous: 2 runs start with it" in str(caught.value)
    assert isinstance(caught.value, InvalidArgument)


def test_ambiguous_prefix_lists_ten_runs_and_says_there_are_more(
    store: Store, db: st.Database
) -> None:
    for n in range(12):
        store.create_run("wf", run_id=f"same-prefix-{n:02}")

    with pytest.raises(AmbiguousRunId, match=r"10 \(and more\) runs start with it") as caught:
        db.get_run("same-prefix")

    assert len(caught.value.details["candidates"]) == 10


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("abcde", "a run id prefix needs at least 6 characters"),
        ("a", "a run id prefix needs at least 6 characters"),
        ("zzzzzzzz", "no run id starts with it"),
    ],
)
def test_short_or_unknown_prefix_is_run_not_found_saying_why(
    store: Store, db: st.Database, given: str, message: str
) -> None:
    store.create_run("wf", run_id="abcdef123456")

    with pytest.raises(RunNotFound, match=message):
        db.get_run(given)


def test_full_id_shorter_than_a_prefix_still_names_its_run(store: Store, db: st.Database) -> None:
    store.create_run("wf", run_id="r1")

    assert db.get_run("r1").id == "r1"


def test_full_id_wins_over_the_longer_ids_it_is_a_prefix_of(store: Store, db: st.Database) -> None:
    store.create_run("wf", run_id="abcdef")
    store.create_run("wf", run_id="abcdefg")

    assert db.get_run("abcdef").id == "abcdef"
    assert db.get_run("abcdefg").id == "abcdefg"


@pytest.mark.parametrize("wild", ["_", "%", "*", "?", "[", "\\"])
def test_like_and_glob_wildcards_in_a_prefix_are_plain_characters(
    store: Store, db: st.Database, wild: str
) -> None:
    store.create_run("wf", run_id=f"abc{wild}def-1")
    store.create_run("wf", run_id="abcXdef-2")
    store.create_run("wf", run_id="abcdef-3")

    assert db.get_run(f"abc{wild}de").id == f"abc{wild}def-1"
    with pytest.raises(RunNotFound):
        db.get_run(f"abc{wild}dX")


def test_prefix_of_non_ascii_ids_resolves(store: Store, db: st.Database) -> None:
    store.create_run("wf", run_id="run-été-1")
    store.create_run("wf", run_id="run-étz-2")

    assert db.get_run("run-été").id == "run-été-1"


def _run_with_forkable_history(db: st.Database) -> str:
    wf, _ = demo_workflow()
    return db.run(wf, {"topic": "bee"}).id


ENTRY_POINTS: list[tuple[str, Callable[[st.Database, str], Any]]] = [
    ("get_run", lambda db, p: db.get_run(p).id),
    ("snapshot", lambda db, p: db.snapshot(p, 2).run_id),
    ("timeline", lambda db, p: db.timeline(p).run_id),
    ("fork", lambda db, p: db.get_run(db.fork(p, 2).id).record.parent_run_id),
    ("rewind", lambda db, p: db.rewind(p, 5, confirm=True).run_id),
    ("reset", lambda db, p: db.reset(p, "write") and db.get_run(p).id),
    ("resume", lambda db, p: db.resume(p, demo_workflow()[0]).id),
    ("cancel", lambda db, p: db.cancel(p) or db.get_run(p).id),
    ("materialize", lambda db, p: db.materialize(p) or db.get_run(p).id),
]


@pytest.mark.parametrize("call", [c for _, c in ENTRY_POINTS], ids=[n for n, _ in ENTRY_POINTS])
def test_every_entry_point_taking_a_run_id_accepts_a_unique_prefix(
    db: st.Database, call: Callable[[st.Database, str], Any]
) -> None:
    run_id = _run_with_forkable_history(db)

    assert call(db, run_id[:12]) == run_id


def test_short_ids_are_each_runs_shortest_unique_prefix_of_at_least_8(store: Store) -> None:
    for run_id in ("aaaaaaaaaaaa1", "aaaaaaaaaaab2", "b1", "ccccccccc-1", "ccccccccc-2"):
        store.create_run("wf", run_id=run_id)

    shown = store.short_run_ids(["aaaaaaaaaaaa1", "aaaaaaaaaaab2", "b1", "ccccccccc-1", "gone"])

    assert shown == {
        "aaaaaaaaaaaa1": "aaaaaaaaaaaa",
        "aaaaaaaaaaab2": "aaaaaaaaaaab",
        "b1": "b1",
        "ccccccccc-1": "ccccccccc-1",
        "gone": "gone",
    }


def test_a_generated_id_shows_as_8_characters_when_no_other_run_shares_them(
    store: Store, db: st.Database
) -> None:
    record, _ = store.create_run("wf")

    shown = store.short_run_ids([record.run_id])[record.run_id]

    assert shown == record.run_id[:8]
    assert db.get_run(shown).id == record.run_id


def test_prefix_lookup_reads_the_primary_key_index(db: st.Database) -> None:
    # A range of the primary key, not a LIKE: both backends answer from the index.
    lo, hi = "1a2b3c", "1a2b3d"
    stmt = "SELECT run_id FROM tt_runs WHERE run_id >= :lo AND run_id < :hi ORDER BY run_id"
    with db.engine.sa.connect() as conn:
        if conn.dialect.name == "sqlite":
            plan = conn.execute(sa.text(f"EXPLAIN QUERY PLAN {stmt}"), {"lo": lo, "hi": hi})
            assert "USING COVERING INDEX sqlite_autoindex_tt_runs_1" in str(plan.all())
        else:
            conn.exec_driver_sql("SET enable_seqscan = off")  # an empty table: force the choice
            plan = conn.execute(sa.text(f"EXPLAIN {stmt}"), {"lo": lo, "hi": hi})
            assert "tt_runs_pkey" in str(plan.all())
