"""``connect()``'s open modes: create (the default), an existing store only, read-only."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

import smithers_tt as st
from smithers_tt.errors import InvalidArgument, SchemaMismatch, StoreNotFound, StoreReadOnly
from tests.conftest import table_names


@pytest.mark.parametrize("mode", [{"create": False}, {"read_only": True}], ids=["existing", "ro"])
def test_connect_without_create_refuses_an_empty_database_and_creates_nothing(
    db_url: str, mode: dict, tmp_path: Path
) -> None:
    with pytest.raises(StoreNotFound, match="no store at"):
        st.connect(db_url, **mode)
    if db_url.startswith("sqlite"):
        assert list(tmp_path.iterdir()) == []
    else:
        assert table_names(db_url) == []


def test_connect_read_only_reads_and_refuses_writes(db_url: str) -> None:
    with st.connect(db_url) as db:
        db.store.create_run("wf", {"a": 1}, workflow_hash="h", owner_id="o", graph={})
    with st.connect(db_url, read_only=True) as ro:
        assert [r.record.workflow for r in ro.runs()] == ["wf"]
        with pytest.raises(StoreReadOnly, match="read-only"):
            ro.store.create_run("wf", None, workflow_hash="h", owner_id="o", graph={})
        assert len(ro.runs()) == 1


def test_connect_existing_store_opens_for_writing(db_url: str) -> None:
    st.connect(db_url).close()
    with st.connect(db_url, create=False) as db:
        db.store.create_run("wf", None, workflow_hash="h", owner_id="o", graph={})
        assert len(db.runs()) == 1


def test_connect_never_creates_a_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument, match="does not exist"):
        st.connect(str(tmp_path / "a" / "b" / "x.db"))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("url", ["sqlite:/smithers.db", "postgresql:/db", "sqlite:smithers.db"])
def test_connect_refuses_a_url_missing_its_slashes(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidArgument, match="without '//'"):
        st.connect(url)
    assert list(tmp_path.iterdir()) == []


def test_connect_beside_other_tables_only_when_allowed(db_url: str) -> None:
    engine = sa.create_engine(db_url)
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE accounts (id int PRIMARY KEY)"))
    engine.dispose()
    with pytest.raises(SchemaMismatch, match="accounts"):
        st.connect(db_url, beside_other_tables=False)
    assert table_names(db_url) == ["accounts"]
    st.connect(db_url, beside_other_tables=True).close()
    assert "tt_runs" in table_names(db_url)


def test_connect_read_only_cannot_create() -> None:
    with pytest.raises(InvalidArgument, match="read-only"):
        st.connect("sqlite:///x.db", read_only=True, create=True)


@pytest.mark.parametrize("name", ["with space.db", "odd#name.db"])
def test_connect_sqlite_file_names_with_uri_characters(name: str, tmp_path: Path) -> None:
    path = tmp_path / name
    with st.connect(str(path)) as db:
        db.store.create_run("wf", None, workflow_hash="h", owner_id="o", graph={})
    assert sorted(p.name for p in tmp_path.iterdir())[0] == name
    with st.connect(str(path), read_only=True) as ro:
        assert len(ro.runs()) == 1
