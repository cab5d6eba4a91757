"""One LangGraph graph on SmithersSaver against SqliteSaver and PostgresSaver, in one run.

Run with ``./dev bench langgraph`` (or ``python -m benchmarks langgraph``);
``SMITHERS_TT_BENCH_QUICK=1`` shrinks the counts. PostgreSQL is ``$SMITHERS_TT_BENCH_PG``
(default ``postgresql://postgres@127.0.0.1:5432/test``); each saver gets a brand-new database
(dropped afterwards), SQLite files live in a temporary directory.

The graph: a state of about 4 KiB (``context`` and ``notes``, 2 KiB of text each, and a
``step`` counter); one node increments ``step`` (the one field that changes) and loops back
until 2,000 steps are done (one checkpoint and one ``put_writes`` per step, LangGraph's
default ``durability="async"``).

* **Per-step overhead**: wall time of the run with the saver minus the run without any
  checkpointer, divided by the steps. Rounds alternate savers (none, ours, theirs ...) so that
  load on the machine hits all alike; medians over rounds. Goal: ours < theirs.
* **Bytes per step**: growth of everything the database stores during the first run
  (SQLite: ``dbstat`` pages of all tables and indexes, WAL included; PostgreSQL:
  ``pg_total_relation_size`` of every table), divided by the steps. Goal: ours <= 1/5 of theirs.
* **Lookups after the run** (history of 2,000+ checkpoints): ``get_tuple`` (latest) and
  ``list(limit=10)``, medians.
* **PostgreSQL round trips and statements per step**: a libpq trace of every open connection
  over a 100-step run of each saver, counted as ``bench_publish_cost`` counts them (``Sync`` +
  ``Query`` end a round trip; ``Execute`` + ``Query`` are statements). Counts, not times: they
  do not move with the machine's load.
"""

from __future__ import annotations

import contextlib
import gc
import sqlite3
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypedDict

from ._common import (
    QUICK,
    fresh_pg_database,
    note,
    pg_available,
    pg_bytes,
    print_table,
    scaled,
    scratch_dir,
    sqlalchemy_url,
    sqlite_bytes,
    verdict,
)

STEPS = scaled(2000, 150)
ROUNDS = scaled(3, 1)
TRACED_STEPS = 100


class State(TypedDict):
    context: str
    notes: str
    step: int


def _graph(steps: int) -> Any:
    from langgraph.graph import END, START, StateGraph

    def work(state: State) -> dict[str, int]:
        return {"step": state["step"] + 1}

    def route(state: State) -> str:
        return "work" if state["step"] < steps else END

    graph = StateGraph(State)
    graph.add_node("work", work)
    graph.add_edge(START, "work")
    graph.add_conditional_edges("work", route)
    return graph


def _input() -> State:
    return {"context": "c" * 2048, "notes": "n" * 2048, "step": 0}


def _run(graph: Any, saver: Any, thread: str, steps: int = STEPS) -> float:
    app = graph.compile(checkpointer=saver)
    start = time.perf_counter()
    out = app.invoke(
        _input(), {"configurable": {"thread_id": thread}, "recursion_limit": steps + 10}
    )
    elapsed = time.perf_counter() - start
    assert out["step"] == steps
    return elapsed


def _pg_trips(savers: list[tuple[str, str, Any, Callable[[], int]]]) -> list[list[Any]]:
    """Round trips and statements per step of each PostgreSQL saver (libpq trace)."""
    import psycopg

    from .bench_publish_cost import _traced

    graph = _graph(TRACED_STEPS)
    rows = []
    for backend, name, saver, _ in savers:
        if backend != "PostgreSQL":
            continue
        conns = [o for o in gc.get_objects() if isinstance(o, psycopg.Connection) and not o.closed]
        sent = _traced(conns, lambda s=saver: _run(graph, s, "traced", TRACED_STEPS), 1)
        trips = (sent["Sync"] + sent["Query"]) / TRACED_STEPS
        rows.append([backend, name, trips, (sent["Execute"] + sent["Query"]) / TRACED_STEPS])
    return rows


@contextlib.contextmanager
def _savers(base: Path) -> Iterator[list[tuple[str, str, Any, Callable[[], int]]]]:
    """(backend, name, saver, bytes-stored function) for every saver that can run here."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    import smithers_tt as st
    from smithers_tt.integrations.langgraph import SmithersSaver

    with contextlib.ExitStack() as stack:
        ours_path = base / "ours.db"
        db = st.connect(f"sqlite:///{ours_path}")
        stack.callback(db.close)
        theirs_path = base / "theirs.db"
        conn = sqlite3.connect(str(theirs_path), check_same_thread=False)
        stack.callback(conn.close)
        theirs = SqliteSaver(conn)
        theirs.setup()
        found = [
            ("SQLite", "SmithersSaver", SmithersSaver(db), lambda: sqlite_bytes(ours_path)),
            ("SQLite", "SqliteSaver", theirs, lambda: sqlite_bytes(theirs_path)),
        ]
        reason = pg_available()
        if reason is None:
            from langgraph.checkpoint.postgres import PostgresSaver

            ours_url = stack.enter_context(fresh_pg_database("lgours"))
            pg_db = st.connect(sqlalchemy_url(ours_url))
            stack.callback(pg_db.close)
            theirs_url = stack.enter_context(fresh_pg_database("lgtheirs"))
            pg_theirs = stack.enter_context(PostgresSaver.from_conn_string(theirs_url))
            pg_theirs.setup()
            found += [
                ("PostgreSQL", "SmithersSaver", SmithersSaver(pg_db), lambda: pg_bytes(ours_url)),
                ("PostgreSQL", "PostgresSaver", pg_theirs, lambda: pg_bytes(theirs_url)),
            ]
        else:
            note(f"PostgreSQL skipped: {reason}")
        yield found


def _lookups(saver: Any, thread: str) -> tuple[float, float]:
    config = {"configurable": {"thread_id": thread}}
    get, page = [], []
    for _ in range(scaled(50, 10)):
        start = time.perf_counter()
        assert saver.get_tuple(config) is not None
        get.append(time.perf_counter() - start)
        start = time.perf_counter()
        assert len(list(saver.list(config, limit=10))) == 10
        page.append(time.perf_counter() - start)
    return statistics.median(get) * 1000, statistics.median(page) * 1000


def main() -> None:
    graph = _graph(STEPS)
    print(f"steps {STEPS}, rounds {ROUNDS}{' (QUICK)' if QUICK else ''}", flush=True)
    with scratch_dir() as base, _savers(base) as savers:
        overhead: dict[tuple[str, str], list[float]] = {(b, n): [] for b, n, _, _ in savers}
        stored: dict[tuple[str, str], float] = {}
        for round_no in range(ROUNDS):
            for backend, name, saver, size in savers:
                bare = _run(graph, None, "none")
                before = size() if round_no == 0 else 0
                took = _run(graph, saver, f"thread-{round_no}")
                overhead[(backend, name)].append((took - bare) / STEPS * 1000)
                if round_no == 0:
                    stored[(backend, name)] = (size() - before) / STEPS
            print(f"  round {round_no + 1} done", flush=True)
        rows = []
        for peer in range(0, len(savers), 2):
            (backend, ours_name, ours, _), (_, peer_name, theirs, _) = savers[peer : peer + 2]
            ours_ms = statistics.median(overhead[(backend, ours_name)])
            peer_ms = statistics.median(overhead[(backend, peer_name)])
            ours_b, peer_b = stored[(backend, ours_name)], stored[(backend, peer_name)]
            ours_get, ours_list = _lookups(ours, "thread-0")
            peer_get, peer_list = _lookups(theirs, "thread-0")
            rows.append([backend, ours_name, ours_ms, ours_b, ours_get, ours_list, "", ""])
            rows.append(
                [
                    backend,
                    peer_name,
                    peer_ms,
                    peer_b,
                    peer_get,
                    peer_list,
                    f"time {ours_ms / peer_ms:.2f}x {verdict(ours_ms < peer_ms)}",
                    f"bytes {ours_b / peer_b:.2f}x {verdict(ours_b <= peer_b / 5)}",
                ]
            )
        print_table(
            f"LangGraph graph, {STEPS} steps, ~4 KiB state, one field changing "
            "(ratios: ours / theirs; goals: time < 1, bytes <= 0.2)",
            [
                "backend",
                "saver",
                "overhead ms/step",
                "bytes/step",
                "get_tuple ms",
                "list(10) ms",
                "time goal",
                "bytes goal",
            ],
            rows,
        )
        trips = _pg_trips(savers)
        if trips:
            print_table(
                f"PostgreSQL round trips and statements per step ({TRACED_STEPS} steps, "
                "libpq trace; counts)",
                ["backend", "saver", "round trips/step", "statements/step"],
                trips,
            )


if __name__ == "__main__":
    main()
