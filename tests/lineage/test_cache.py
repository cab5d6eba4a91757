"""A snapshot kept between processes (``cache=``) answers exactly as a snapshot taken from the
store would, and only while the store is unchanged: a write, a hand edit, a store that changed
just before the snapshot or a directory others can write to all make the lineage read the
store again. The cache is never written in or beside the store, nor through the lineage."""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import smithers_tt as st
from benchmarks import bench_lineage as bench
from smithers_tt.demo import demo_workflow
from smithers_tt.errors import StoreCorrupt
from smithers_tt.lineage import LineageError, _cache, _lineage
from smithers_tt.lineage._views import VIEWS

from .conftest import TOPIC, Scenario, records, sqlite_file

QUIET = 0.2
"""The quiet time the tests use (the product's is 2 s): no test writes while it waits."""


@pytest.fixture(autouse=True)
def _quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_cache, "QUIET_SECONDS", QUIET)


def _settle() -> None:
    """Let the store's last write age past the quiet time."""
    time.sleep(QUIET * 1.5)


def answers(lin: st.Lineage, inheriting: str | None = None) -> dict[str, list[dict]]:
    """Every view's rows, in a fixed order; the nodes a fork by reference ``inheriting``
    would have carry the time they are computed at (as materialising would write them), which
    differs at every open: left out."""
    out = {v.name: records(lin.sql(f"SELECT * FROM {v.name} ORDER BY ALL")) for v in VIEWS}  # noqa: S608
    for row in out["nodes"]:
        if row["run_id"] == inheriting:
            row["updated_at_ms"] = None
    return out


@pytest.fixture
def sqlite_db(tmp_path: Path) -> Iterator[st.Database]:
    """A SQLite store holding one finished demo run."""
    (tmp_path / "store").mkdir()
    db = st.connect(f"sqlite:///{tmp_path / 'store' / 'smithers.db'}")
    try:
        wf, _ = demo_workflow()
        assert db.run(wf, TOPIC).status == "finished"
        yield db
    finally:
        db.close()


def test_cached_snapshot_answers_every_view_as_a_snapshot_taken_now(
    scenario: Scenario, tmp_path: Path
) -> None:
    db, fork = scenario.db, scenario.grandchild
    _settle()
    with db.lineage(snapshot=True) as fresh:
        expected = answers(fresh, fork)
    with db.lineage(snapshot=True, cache=tmp_path) as first:
        assert answers(first, fork) == expected
        stored = first.cache
    opened_ms = time.time() * 1000
    with db.lineage(snapshot=True, cache=tmp_path) as second:
        got, cached = answers(second, fork), second.cache
        inherited = second.nodes(fork).updated_at_ms
        assert len(inherited) > 0 and (inherited >= opened_ms - 1).all()  # computed now
    with db.lineage() as live:
        assert answers(live, fork) == expected
    if db.engine.is_sqlite:
        assert (stored, cached) == ("stored", "hit")
        assert got == expected
        assert len(list(tmp_path.glob("*.duckdb"))) == 1
    else:  # PostgreSQL stores are not cached
        assert (stored, cached) == (None, None)
        assert list(tmp_path.iterdir()) == []


def test_a_write_after_the_snapshot_is_answered_from_the_store(
    sqlite_db: st.Database, tmp_path: Path
) -> None:
    _settle()
    with sqlite_db.lineage(snapshot=True, cache=tmp_path) as lin:
        assert (lin.cache, len(lin.runs())) == ("stored", 1)
    wf, _ = demo_workflow()
    sqlite_db.run(wf, TOPIC)
    with sqlite_db.lineage(snapshot=True, cache=tmp_path) as lin:
        assert lin.cache != "hit"
        assert len(lin.runs()) == 2
        assert lin.runs().ref_count.tolist() == [len(lin.checkpoints()) // 2] * 2
    _settle()
    for _ in range(2):  # kept by the open above if the run had ended a quiet time before
        with sqlite_db.lineage(snapshot=True, cache=tmp_path) as lin:
            assert lin.cache in ("stored", "hit")
            assert len(lin.runs()) == 2
    assert lin.cache == "hit"
    assert len(list(tmp_path.glob("*.duckdb"))) == 1  # the older snapshot replaced


def test_a_hand_edit_after_the_snapshot_is_caught_as_without_the_cache(
    sqlite_db: st.Database, tmp_path: Path
) -> None:
    _settle()
    with sqlite_db.lineage(snapshot=True, cache=tmp_path) as lin:
        assert lin.cache == "stored"
    sqlite_db.close()
    with sqlite3.connect(sqlite_file(sqlite_db)) as conn:  # outside smithers_tt
        conn.execute("UPDATE tt_checkpoint_refs SET frame_no = 0 WHERE sequence = 0")
    _settle()
    with pytest.raises(StoreCorrupt, match="is not a checkpoint but a run_created frame"):
        sqlite_db.lineage(snapshot=True, cache=tmp_path)


def test_a_store_that_changed_just_before_the_snapshot_is_not_cached(
    sqlite_db: st.Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_cache, "QUIET_SECONDS", 60.0)
    cache = tmp_path / "cache"
    with sqlite_db.lineage(snapshot=True, cache=cache) as lin:
        assert lin.cache == "not stored: the store changed less than 60 s before the snapshot"
        assert len(lin.runs()) == 1
    assert list(cache.iterdir()) == []


def test_a_directory_others_can_write_to_is_not_trusted(
    sqlite_db: st.Database, tmp_path: Path
) -> None:
    _settle()
    shared = tmp_path / "shared"
    with sqlite_db.lineage(snapshot=True, cache=shared) as lin:
        assert lin.cache == "stored"
    shared.chmod(0o777)  # anyone could now plant or swap the files
    with sqlite_db.lineage(snapshot=True, cache=shared) as lin:
        assert lin.cache == f"not stored: {shared} is not private to this user"
        assert len(lin.runs()) == 1


def test_the_cache_is_written_neither_beside_the_store_nor_through_the_lineage(
    sqlite_db: st.Database, tmp_path: Path
) -> None:
    store = sqlite_file(sqlite_db)
    before = sorted(p.name for p in store.parent.iterdir())
    content = store.read_bytes()
    _settle()
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    cache = tmp_path / "cache"
    for expected in ("stored", "hit"):
        with sqlite_db.lineage(snapshot=True, cache=cache, allowed_directories=[allowed]) as lin:
            assert lin.cache == expected
            for target in cache.glob("*.duckdb"):
                with pytest.raises(LineageError):
                    lin.sql(f"COPY (SELECT 1 AS x) TO '{target}' (FORMAT parquet)")
                with pytest.raises(LineageError):
                    lin.sql(f"SELECT * FROM read_blob('{target}')")  # noqa: S608
    assert sorted(p.name for p in store.parent.iterdir()) == before
    assert store.read_bytes() == content
    assert (cache.stat().st_mode & 0o777) == 0o700
    assert all(os.access(p, os.R_OK) for p in cache.glob("*.duckdb"))


def test_live_lineages_and_postgres_ignore_the_cache(db: st.Database, tmp_path: Path) -> None:
    wf, _ = demo_workflow()
    db.run(wf, TOPIC)
    _settle()
    cache = tmp_path / "cache"
    with db.lineage(cache=cache) as lin:
        assert (lin.cache, lin.snapshot, len(lin.runs())) == (None, False, 1)
    if not db.engine.is_sqlite:
        with db.lineage(snapshot=True, cache=cache) as lin:
            assert (lin.cache, lin.snapshot, len(lin.runs())) == (None, True, 1)
    assert not cache.exists()


def _scanner_loaded(lin: st.Lineage) -> bool:
    """Whether DuckDB has loaded the SQLite scanner into the lineage's connection (without
    it no store table can be bound: ``sqlite_scan`` does not exist)."""
    found = lin.sql(
        "SELECT count(*) AS n FROM duckdb_functions() WHERE function_name = 'sqlite_scan'"
    )
    return bool(found.n.iloc[0])


def _questions(lin: st.Lineage) -> list[list[dict]]:
    """The benchmark's Q1-Q3 (none of which reads a content's bytes)."""
    return [records(ask()) for ask in bench.ours(lin).values()]


def _payloads(lin: st.Lineage) -> list[dict]:
    return records(lin.sql("SELECT * FROM checkpoint_payloads ORDER BY content_hash"))


@pytest.mark.parametrize("payloads", ["first", "last", "never"])
def test_a_cached_open_binds_the_content_bytes_only_when_a_question_reads_them(
    scenario: Scenario, tmp_path: Path, payloads: str
) -> None:
    db = scenario.db
    if not db.engine.is_sqlite:
        pytest.skip("PostgreSQL stores are not cached")
    _settle()
    with db.lineage(snapshot=True) as fresh:
        questions, contents = _questions(fresh), _payloads(fresh)
    with db.lineage(snapshot=True, cache=tmp_path) as first:
        assert first.cache == "stored"
    with db.lineage(snapshot=True, cache=tmp_path) as lin:
        assert (lin.cache, lin.extension) == ("hit", None)
        assert not _scanner_loaded(lin)  # the open read neither the store nor its contents
        if payloads == "first":
            assert _payloads(lin) == contents
            assert _scanner_loaded(lin) and lin.extension is not None
        assert _questions(lin) == questions
        assert _scanner_loaded(lin) == (payloads == "first")  # Q1-Q3 bound no store table
        if payloads == "last":
            assert _payloads(lin) == contents
            assert _scanner_loaded(lin)
            assert _questions(lin) == questions
        assert lin.cache == "hit" and lin.snapshot


def test_content_bytes_reached_without_being_named_are_bound_and_asked_again(
    sqlite_db: st.Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The relation of a cached snapshot's content bytes raises until it is bound, never
    answers empty: a question the name check missed is asked again once they are bound."""
    _settle()
    queries = [
        "SELECT count(*) AS n, sum(size_bytes) AS b FROM checkpoint_payloads",
        "SELECT EXISTS (SELECT 1 FROM raw.tt_checkpoint_data) AS any",
    ]
    with sqlite_db.lineage(snapshot=True, cache=tmp_path) as lin:
        assert lin.cache == "stored"
        expected = [records(lin.sql(q)) for q in queries]
    monkeypatch.setattr(_lineage, "_names_data", lambda query: False)
    for query, want in zip(queries, expected, strict=True):
        with sqlite_db.lineage(snapshot=True, cache=tmp_path) as lin:
            assert lin.cache == "hit" and not _scanner_loaded(lin)
            assert records(lin.sql(query)) == want
            assert _scanner_loaded(lin)
