"""Threads written by LangGraph's SqliteSaver / PostgresSaver move to SmithersSaver: the
importer copies them, their history reads the same, and they take their next steps here
(with the string channel versions the built-in savers write)."""

from __future__ import annotations

import contextlib
import operator
import re
import sqlite3
from collections.abc import Iterator
from typing import Annotated, TypedDict

import pytest

pytest.importorskip("langgraph.checkpoint.sqlite")
pytest.importorskip("langgraph.checkpoint.postgres")

from click.testing import CliRunner
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, StateGraph
from langgraph.types import Command, interrupt

import smithers_tt as st
from smithers_tt.cli import cli
from smithers_tt.errors import InvalidArgument
from smithers_tt.integrations.langgraph import SmithersSaver
from smithers_tt.integrations.langgraph_import import copy_threads, import_langgraph

VERSION = re.compile(r"^\d{32}\.")


class State(TypedDict, total=False):
    query: str
    docs: Annotated[list[str], operator.add]
    answer: str


def _graph() -> StateGraph:
    """Fan-out to a node and a subgraph, then a node that asks a person (an interrupt)."""
    sub = StateGraph(State)
    sub.add_node("lookup", lambda s: {"docs": [f"sub:{s['query']}"]})
    sub.add_edge(START, "lookup")

    def ask(state: State) -> dict:
        approved = interrupt(f"approve {len(state['docs'])} docs?")
        return {"answer": f"{approved}: {', '.join(sorted(state['docs']))}"}

    graph = StateGraph(State)
    graph.add_node("rewrite", lambda s: {"query": f"q({s['query']})"})
    graph.add_node("search", lambda s: {"docs": [f"web:{s['query']}"]})
    graph.add_node("archive", sub.compile())
    graph.add_node("ask", ask)
    graph.add_edge(START, "rewrite")
    graph.add_edge("rewrite", "search")
    graph.add_edge("rewrite", "archive")
    graph.add_edge(["search", "archive"], "ask")
    return graph


def _cfg(thread: str) -> dict:
    return {"configurable": {"thread_id": thread}}


@contextlib.contextmanager
def _source(kind: str, tmp_path, request) -> Iterator[tuple[str, object]]:
    """A built-in saver on a real database, and that database's URL."""
    if kind == "sqlite":
        path = tmp_path / "langgraph.sqlite"
        with SqliteSaver.from_conn_string(str(path)) as saver:
            yield f"sqlite:///{path}", saver
        return
    url = request.getfixturevalue("pg_schema_url")
    with PostgresSaver.from_conn_string(url.replace("postgresql+psycopg://", "postgresql://")) as s:
        s.setup()
        yield url, s


def _write_threads(saver) -> None:
    """Two threads: one paused at the interrupt, one finished and then forked."""
    app = _graph().compile(checkpointer=saver)
    app.invoke({"query": "tides", "docs": []}, _cfg("paused"))
    app.invoke({"query": "moons", "docs": []}, _cfg("done"))
    app.invoke(Command(resume="yes"), _cfg("done"))
    history = list(app.get_state_history(_cfg("done")))
    at_rewrite = next(h for h in history if h.next == ("search", "archive"))
    app.update_state(at_rewrite.config, {"query": "q(edited)"})


def _tuples(saver, thread: str) -> list[tuple]:
    """What a saver holds of a thread, every namespace (writes in a fixed order: the task
    paths of writes are not part of a saver's public records)."""
    return [
        (
            t.config,
            t.checkpoint,
            t.metadata,
            t.parent_config,
            sorted(t.pending_writes, key=lambda w: (w[0], w[1], repr(w[2]))),
        )
        for t in saver.list(_cfg(thread))
    ]


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_imported_threads_keep_their_history_and_continue(
    kind: str, db: st.Database, tmp_path, request
) -> None:
    if kind == "postgres" and db.engine.is_sqlite:
        pytest.skip("a PostgresSaver source is imported into the PostgreSQL store only")
    with _source(kind, tmp_path, request) as (url, source):
        _write_threads(source)
        report = import_langgraph(url, db)
        assert (report.threads, report.skipped) == (2, 0)
        saver = SmithersSaver(db)
        old, new = _graph().compile(checkpointer=source), _graph().compile(checkpointer=saver)
        for thread in ("paused", "done"):
            assert _tuples(saver, thread) == _tuples(source, thread)
            assert list(new.get_state_history(_cfg(thread))) == list(
                old.get_state_history(_cfg(thread))
            )
        assert any(t[0]["configurable"]["checkpoint_ns"] for t in _tuples(saver, "paused"))
        again = import_langgraph(url, db)  # importing again copies nothing twice
        assert again.checkpoints == 0 and again.skipped == report.checkpoints

        # the paused thread takes its next step on SmithersSaver, as it would have on its own
        state = new.get_state(_cfg("paused"))
        assert state.next == ("ask",) and state.interrupts[0].value == "approve 2 docs?"
        assert all(VERSION.match(v) for v in _versions(saver, "paused"))  # as written there
        done_here = new.invoke(Command(resume="ok"), _cfg("paused"))
        done_there = old.invoke(Command(resume="ok"), _cfg("paused"))
        assert done_here == done_there
        assert done_here["answer"] == "ok: sub:q(tides), web:q(tides)"
        assert all(VERSION.match(v) for v in _versions(saver, "paused"))

        # the fork of the finished thread replays on SmithersSaver
        fork = next(new.get_state_history(_cfg("done")))
        assert fork.values["query"] == "q(edited)" and fork.next == ("search", "archive")
        new.invoke(None, fork.config)
        resumed = new.invoke(Command(resume="again"), _cfg("done"))
        assert resumed["answer"] == "again: sub:q(edited), web:q(edited)"


def _versions(saver: SmithersSaver, thread: str) -> list[str]:
    return list(saver.get_tuple(_cfg(thread)).checkpoint["channel_versions"].values())


def test_a_thread_put_by_a_builtin_saver_takes_its_next_step(db: st.Database, tmp_path) -> None:
    """LangGraph's test_saved_checkpoint_state_graph: checkpoints with string versions put
    into the saver one by one, then resumed from the one before the latest."""
    with SqliteSaver.from_conn_string(str(tmp_path / "lg.sqlite")) as source:
        _write_threads(source)
        saver = SmithersSaver(db)
        copy_threads(source, saver, thread_ids=["done"])
        app = _graph().compile(checkpointer=saver)
        history = list(app.get_state_history(_cfg("done")))
        before_resume = next(h for h in history if h.next == ("ask",))
        out = list(app.stream(Command(resume="later"), before_resume.config))
        # the answer recorded there (as a pending write) is the one the step uses
        assert out == [{"ask": {"answer": "yes: sub:q(moons), web:q(moons)"}}]


def test_get_next_version_keeps_the_type_of_a_thread_s_versions(db: st.Database) -> None:
    saver = SmithersSaver(db)
    assert saver.get_next_version(None, None) == 1
    assert saver.get_next_version(7, None) == 8
    after = saver.get_next_version("00000000000000000000000000000003.0.5208", None)
    assert after.startswith("00000000000000000000000000000004.")
    assert after > "00000000000000000000000000000003.0.9999"
    assert saver.get_next_version("0" * 31 + "9.0.1", None) > "0" * 31 + "9.0.1"


def test_import_refuses_what_it_cannot_read(db: st.Database, tmp_path) -> None:
    with pytest.raises(InvalidArgument, match="no SqliteSaver database"):
        import_langgraph(f"sqlite:///{tmp_path / 'missing.sqlite'}", db)
    with pytest.raises(InvalidArgument, match="cannot import"):
        import_langgraph("mysql://somewhere/db", db)
    other = tmp_path / "other.sqlite"
    sqlite3.connect(other).execute("CREATE TABLE notes (x)").connection.commit()
    with pytest.raises(InvalidArgument, match="is it a LangGraph checkpoint database"):
        import_langgraph(f"sqlite:///{other}", db)
    assert sqlite3.connect(other).execute("SELECT name FROM sqlite_master").fetchall() == [
        ("notes",)
    ]  # the source was only read


def test_cli_import_langgraph_reports_what_it_copied(tmp_path) -> None:
    path = tmp_path / "langgraph.sqlite"
    with SqliteSaver.from_conn_string(str(path)) as source:
        _write_threads(source)
        expected = len(list(source.list(None)))
    target = tmp_path / "smithers.db"
    result = CliRunner().invoke(
        cli, ["--db", str(target), "--json", "import-langgraph", f"sqlite:///{path}"]
    )
    assert result.exit_code == 0, result.output
    assert '"threads": 2' in result.output and f'"checkpoints": {expected}' in result.output
    with st.connect(f"sqlite:///{target}") as db:
        assert len(list(SmithersSaver(db).list(None))) == expected
