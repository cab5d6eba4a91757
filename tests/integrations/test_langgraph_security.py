"""No code from a file or a stored value ever runs: LangGraph msgpack values that name a type
outside the allow-list are refused, by the import (CLI and Python, SqliteSaver and
PostgresSaver sources) and by SmithersSaver's reads, with an error naming where they are."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import uuid
from datetime import UTC, datetime
from http import HTTPStatus
from pathlib import Path

import pytest

pytest.importorskip("langgraph.checkpoint.sqlite")
pytest.importorskip("langgraph.checkpoint.postgres")

import ormsgpack
import sqlalchemy as sa
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer, _msgpack_enc
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Send

import smithers_tt as st
from smithers_tt.errors import StoreCorrupt, UnsafeValue
from smithers_tt.integrations.langgraph import SmithersSaver
from smithers_tt.integrations.langgraph_import import import_langgraph
from tests.integrations.test_langgraph_saver import _graph

THREAD = {"configurable": {"thread_id": "t"}}
PLACES = ["channel", "write"]


def _hostile(marker: Path) -> ormsgpack.Ext:
    """What JsonPlusSerializer writes for a value it rebuilds by calling ``os.system(...)``."""
    return ormsgpack.Ext(1, _msgpack_enc(("os", "system", [f"touch {marker}"])))


def _run_graph(saver) -> None:
    _graph(2).compile(checkpointer=saver).invoke({"topic": "a", "notes": [], "count": 0}, THREAD)


def _sqlite_source(tmp_path: Path, place: str, value) -> str:
    """A genuine SqliteSaver file with ``value`` planted in the newest checkpoint's channel
    ``notes`` or in a pending write; its URL."""
    path = tmp_path / "langgraph.sqlite"
    with SqliteSaver.from_conn_string(str(path)) as saver:
        _run_graph(saver)
    with sqlite3.connect(path) as conn:
        if place == "channel":
            cid, blob = conn.execute(
                "SELECT checkpoint_id, checkpoint FROM checkpoints ORDER BY checkpoint_id DESC"
            ).fetchone()
            checkpoint = JsonPlusSerializer().loads_typed(("msgpack", blob))
            checkpoint["channel_values"]["notes"] = value
            conn.execute(
                "UPDATE checkpoints SET checkpoint = ? WHERE checkpoint_id = ?",
                (_msgpack_enc(checkpoint), cid),
            )
        else:
            conn.execute(
                "UPDATE writes SET type = 'msgpack', value = ? WHERE channel = 'notes'",
                (_msgpack_enc([value]),),
            )
    return f"sqlite:///{path}"


def _postgres_source(url: str, place: str, value) -> str:
    """A genuine PostgresSaver database (the schema ``url`` names) with ``value`` planted in
    every stored value of channel ``notes`` or in its pending writes; its URL."""
    with PostgresSaver.from_conn_string(url.replace("postgresql+psycopg://", "postgresql://")) as s:
        s.setup()
        _run_graph(s)
    sql = {
        "channel": "UPDATE checkpoint_blobs SET type = 'msgpack', blob = :b WHERE channel = :c",
        "write": "UPDATE checkpoint_writes SET type = 'msgpack', blob = :b WHERE channel = :c",
    }[place]
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        changed = conn.execute(
            sa.text(sql),
            {"b": _msgpack_enc([value]), "c": "notes"},
        ).rowcount
    engine.dispose()
    assert changed
    return url


def _imported(db: st.Database) -> list:
    return list(SmithersSaver(db).list(None))


@pytest.mark.parametrize("place", PLACES)
def test_cli_import_of_a_hostile_sqlite_file_runs_nothing(
    place: str, db_url: str, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    source = _sqlite_source(tmp_path, place, _hostile(marker))
    proc = subprocess.run(
        [sys.executable, "-m", "smithers_tt.cli", "--db", db_url, "import-langgraph", source],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert not marker.exists()  # the command never ran
    assert proc.returncode != 0, proc.stdout
    assert "os.system" in proc.stderr and "thread 't'" in proc.stderr
    assert "checkpoint '" in proc.stderr and "--allow-type" in proc.stderr
    with st.connect(db_url) as db:
        assert _imported(db) == []  # nothing of the thread was written


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_import_langgraph_refuses_a_hostile_value_naming_it(
    kind: str, place: str, db: st.Database, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    marker = tmp_path / "ran"
    if kind == "sqlite":  # a checkpoint is one blob there: its channels are not told apart
        source = _sqlite_source(tmp_path, place, _hostile(marker))
        named = {"channel": "its checkpoint", "write": "write 'notes'"}[place]
    else:
        url = request.getfixturevalue("pg_schema_url")
        source = _postgres_source(url, place, _hostile(marker))
        named = {"channel": "channel 'notes'", "write": "write 'notes'"}[place]
    with pytest.raises(UnsafeValue) as caught:
        import_langgraph(source, db)
    assert not marker.exists()
    assert caught.value.details["type"] == "os.system"
    where = caught.value.details["where"]
    assert where.startswith("thread 't', checkpoint '") and named in where
    assert _imported(db) == []


def test_import_langgraph_refuses_a_pickled_value(db: st.Database, tmp_path: Path) -> None:
    source = _sqlite_source(tmp_path, "write", "plain")
    with sqlite3.connect(source.removeprefix("sqlite:///")) as conn:
        conn.execute(
            "UPDATE writes SET type = 'pickle', value = ? WHERE channel = 'notes'",
            (b"\x80\x05K\x01.",),
        )
    with pytest.raises(UnsafeValue, match="is a pickle; smithers_tt never unpickles") as caught:
        import_langgraph(source, db)
    assert caught.value.details["where"].startswith("thread 't', checkpoint '")
    assert _imported(db) == []


@pytest.mark.parametrize("checkpoint", [42, [1, 2], "text"])
def test_import_langgraph_calls_a_checkpoint_that_is_not_a_mapping_corrupt(
    checkpoint, db: st.Database, tmp_path: Path
) -> None:
    path = tmp_path / "langgraph.sqlite"
    with SqliteSaver.from_conn_string(str(path)) as saver:
        _run_graph(saver)
    with sqlite3.connect(path) as conn:
        conn.execute(
            "UPDATE checkpoints SET type = 'msgpack', checkpoint = ?", (_msgpack_enc(checkpoint),)
        )
    with pytest.raises(StoreCorrupt, match=r"thread 't', checkpoint .* not a mapping"):
        import_langgraph(f"sqlite:///{path}", db)


def _put_hostile(saver: SmithersSaver, value) -> dict:
    """A checkpoint whose channel ``notes`` and pending write hold ``value`` (the saver
    stores an ``ormsgpack.Ext`` as the msgpack it is, as a permissive writer would)."""
    config = {"configurable": {"thread_id": "s", "checkpoint_ns": ""}}
    checkpoint = {
        "v": 4,
        "id": "1ef0000-0000-6000-8000-000000000001",
        "ts": "2026-01-01T00:00:00+00:00",
        "channel_values": {"notes": value, "topic": "plain"},
        "channel_versions": {"notes": 1, "topic": 1},
        "versions_seen": {},
        "updated_channels": None,
    }
    stored = saver.put(config, checkpoint, {"source": "input", "step": -1}, {"notes": 1})
    saver.put_writes(stored, [("notes", value)], "task-1")
    return stored


@pytest.mark.parametrize("nested", [False, True])
def test_saver_reads_refuse_a_stored_hostile_value_naming_it(
    nested: bool, db: st.Database, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    saver = SmithersSaver(db)
    value = _hostile(marker)
    if nested:  # inside the arguments of a type LangGraph allows (a Send)
        value = ormsgpack.Ext(1, _msgpack_enc(("langgraph.types", "Send", ["node", value])))
    stored = _put_hostile(saver, value)
    for read in (
        lambda: saver.get_tuple(stored),
        lambda: saver.get_tuple({"configurable": {"thread_id": "s"}}),
        lambda: list(saver.list(None)),
        lambda: list(saver.list({"configurable": {"thread_id": "s"}})),
    ):
        with pytest.raises(UnsafeValue) as caught:
            read()
        assert caught.value.details["type"] == "os.system"
        assert caught.value.details["where"] == (
            "thread 's', checkpoint '1ef0000-0000-6000-8000-000000000001', channel 'notes'"
        )
    assert not marker.exists()

    # a saver given a permissive serializer still refuses: the allow-list decides
    with pytest.raises(UnsafeValue):
        SmithersSaver(db, serde=JsonPlusSerializer()).get_tuple(stored)
    assert not marker.exists()


def test_saver_refuses_a_stored_hostile_pending_write_naming_it(
    db: st.Database, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    saver = SmithersSaver(db)
    stored = _put_hostile(saver, "plain")
    saver.put_writes(stored, [("count", _hostile(marker))], "task-2")
    with pytest.raises(UnsafeValue, match=r"write 'count'.*os\.system") as caught:
        saver.get_tuple(stored)
    assert caught.value.details["where"].startswith("thread 's', checkpoint '1ef0000-")
    assert not marker.exists()


def test_saver_round_trips_langgraph_types_and_the_types_it_is_allowed(db: st.Database) -> None:
    value = [
        HumanMessage("hi"),
        Send("node", {"x": 1}),
        datetime(2026, 1, 2, tzinfo=UTC),
        uuid.UUID(int=7),
        {1, 2},
    ]
    stored = _put_hostile(SmithersSaver(db), value)
    assert SmithersSaver(db).get_tuple(stored).checkpoint["channel_values"]["notes"] == value

    _put_hostile(SmithersSaver(db), HTTPStatus.OK)  # a type of the user's, not LangGraph's
    with pytest.raises(UnsafeValue, match=r"http\.HTTPStatus.*allowed_types") as caught:
        SmithersSaver(db).get_tuple(stored)
    assert caught.value.details["type"] == "http.HTTPStatus"
    for allowed in ([HTTPStatus], [("http", "HTTPStatus")], ["http.HTTPStatus"]):
        back = SmithersSaver(db, allowed_types=allowed).get_tuple(stored)
        assert back.checkpoint["channel_values"]["notes"] is HTTPStatus.OK
    # what graph.compile does under LANGGRAPH_STRICT_MSGPACK: the state's types join the list
    extended = SmithersSaver(db).with_allowlist({("http", "HTTPStatus")})
    assert extended.get_tuple(stored).checkpoint["channel_values"]["notes"] is HTTPStatus.OK


def test_cli_import_allows_the_types_it_is_told_to(db_url: str, tmp_path: Path) -> None:
    source = _sqlite_source(tmp_path, "write", HTTPStatus.OK)
    base = [sys.executable, "-m", "smithers_tt.cli", "--db", db_url, "--json", "import-langgraph"]
    refused = subprocess.run([*base, source], capture_output=True, text=True, timeout=120)
    assert refused.returncode != 0 and "http.HTTPStatus" in refused.stderr
    allowed = subprocess.run(
        [*base, source, "--allow-type", "http.HTTPStatus"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert allowed.returncode == 0, allowed.stderr
    assert json.loads(allowed.stdout)["checkpoints"] > 0
    with st.connect(db_url) as db:
        writes = [
            w
            for t in SmithersSaver(db, allowed_types=["http.HTTPStatus"]).list(None)
            for w in t.pending_writes
        ]
    assert ("notes", [HTTPStatus.OK]) in [(w[1], w[2]) for w in writes]
