"""The checkpoint store against LangGraph's savers, in one run, on the same payloads.

Run with ``./dev bench store`` (or ``python -m benchmarks store``); ``SMITHERS_TT_BENCH_QUICK=1``
shrinks every count for a smoke run; ``SMITHERS_TT_BENCH_STORE_SECTIONS=a,c`` runs a subset.
PostgreSQL is ``$SMITHERS_TT_BENCH_PG`` (default ``postgresql://postgres@127.0.0.1:5432/test``);
every measurement gets a brand-new database that is dropped afterwards, and SQLite files live
in a temporary directory that is removed afterwards.

Sections (ratios are always ours / LangGraph's, measured in the same process):

a. **Single-publisher durable publish** of a ~4 KiB agent state (a small chat transcript whose
   last message changes each time): ``store.publish`` vs ``SqliteSaver.put`` /
   ``PostgresSaver.put`` with a realistic v4 checkpoint dict (state in ``channel_values``, new
   ``uuid6`` id each time, parent config chained). Median per operation, ours and theirs timed
   in alternating blocks after a warm-up, with the **floor** in the same blocks: the bare
   driver inserting the canonical state as one row and committing (same file settings, or
   server defaults). Goal (issue 15): <= 1.0x the saver's ``put`` and <= 1.5x the floor.
b. **16 concurrent publishers**: 16 threads, each its own attempt of one run (ours, group
   commit) or its own ``thread_id`` (theirs; ``SqliteSaver`` shares one ``sqlite3`` connection
   behind its lock, as designed; ``PostgresSaver`` gets a ``psycopg_pool.ConnectionPool``).
   Throughput in publishes/s, best of 3 alternating rounds of 50 publishes per thread, and
   this process's CPU time (``time.process_time``, all threads) per publish, median of the
   rounds: the Python cost that the interpreter lock serialises. Goal on SQLite: >= 5x
   LangGraph.
c. **Bytes stored per checkpoint** over 2,000 checkpoints of a ~4 KiB state: unchanged, the
   transcript changing, and a small counter changing. Growth of everything the database stores
   (SQLite: ``dbstat`` page bytes of all tables and indexes, WAL included; PostgreSQL:
   ``pg_total_relation_size`` of every table, i.e. heap + indexes + TOAST), divided by 2,000.
   LangGraph channels map to the state's top-level keys; a channel nobody wrote keeps its
   version (so ``PostgresSaver`` stores no new blob for it). Goals (issue 15): unchanged <= 5%
   of ``SqliteSaver``'s bytes and <= 25% of ``PostgresSaver``'s; changing <= LangGraph's bytes.
d. **Lookups as history grows** (1,000, 10,000 and 100,000 refs in one run, each history in
   its own database, all timed in alternating blocks): ``newest_ref`` and a 100-row
   ``list_refs`` page from a cursor in the middle, against LangGraph ``get_tuple`` (latest)
   and ``list(limit=10)`` on threads of the same lengths. Histories are bulk-inserted (ours:
   rows of ``tt_checkpoint_refs`` / ``tt_frames`` / ``tt_checkpoint_contents`` built with the
   store's own row helpers, attempts through the API; theirs: rows built by the savers' own
   serializers and written with their own SQL), then ``ANALYZE``; our content rows are shared
   by 10 consecutive refs to keep set-up short (lookups read refs only). Goal: ours flat
   (100k / 1k <= 1.3).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import platform
import random
import sqlite3
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa

import smithers_tt
from smithers_tt import AgentCheckpoint

from ._common import (
    QUICK,
    exit_cleanly_on_sigterm,
    fresh_pg_database,
    median_ms,
    note,
    pg_admin_url,
    pg_available,
    pg_bytes,
    print_table,
    prose,
    scaled,
    scratch_dir,
    sqlalchemy_url,
    sqlite_bytes,
    time_each,
    verdict,
)

CODEC = "bench.chat-agent"
SYNC_NAMES = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
CHECKPOINT_V = 4  # what langgraph.pregel writes today (langgraph.pregel._checkpoint)

# --- payloads --------------------------------------------------------------------------------


def chat_state(*, draft: int = 0, turn: int = 0) -> dict[str, Any]:
    """A ~4 KiB agent state: a five-message chat transcript with a tool call, plus counters.

    ``draft`` changes the last message (the transcript), ``turn`` a small top-level counter.
    """
    rng = random.Random(7)
    return {
        "messages": [
            {"role": "system", "content": prose(rng, 560)},
            {"role": "user", "content": prose(rng, 380)},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "call_0001",
                        "type": "function",
                        "function": {
                            "name": "search_repository",
                            "arguments": '{"query": "deploy pipeline retries", "limit": 5}',
                        },
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_0001", "content": prose(rng, 1785)},
            {"role": "assistant", "content": f"[draft {draft}] " + prose(rng, 900)},
        ],
        "turn": turn,
        "status": "drafting",
        "model": "bench-model-1",
    }


def small_state(i: int) -> dict[str, Any]:
    """A ~300-byte state for the lookup histories (section d)."""
    return {
        "messages": [{"role": "assistant", "content": f"step {i}: " + "x" * 200}],
        "turn": i,
        "status": "working",
    }


def canonical_size(state: dict[str, Any]) -> int:
    return len(AgentCheckpoint(CODEC, 1, state).encode().data)


# --- LangGraph side --------------------------------------------------------------------------


def _lg_imports() -> dict[str, Any]:
    from langgraph.checkpoint.base import get_serializable_checkpoint_metadata, uuid6
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.checkpoint.sqlite import SqliteSaver

    return {
        "PostgresSaver": PostgresSaver,
        "SqliteSaver": SqliteSaver,
        "uuid6": uuid6,
        "meta": get_serializable_checkpoint_metadata,
    }


class LGThread:
    """One LangGraph thread: builds v4 checkpoints the way the Pregel loop does and puts them.

    Channels are the state's top-level keys. ``changed`` names the channels written this step
    (their versions move; the first checkpoint writes every channel).
    """

    def __init__(self, saver: Any, thread_id: str) -> None:
        self.saver = saver
        self.thread_id = thread_id
        self.config: dict[str, Any] = {
            "configurable": {"thread_id": thread_id, "checkpoint_ns": ""}
        }
        self.versions: dict[str, Any] = {}
        self.step = -1
        self._uuid6 = _lg_imports()["uuid6"]

    def build(
        self, state: dict[str, Any], changed: Iterable[str]
    ) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        """The (checkpoint, metadata, new_versions) of the next step."""
        self.step += 1
        seen = dict(self.versions)
        names = list(state) if not self.versions else list(changed)
        new_versions: dict[str, Any] = {}
        for name in names:
            new_versions[name] = self.saver.get_next_version(self.versions.get(name), None)
        self.versions.update(new_versions)
        checkpoint = {
            "v": CHECKPOINT_V,
            "id": str(self._uuid6(clock_seq=self.step)),
            "ts": datetime.now(UTC).isoformat(),
            "channel_values": dict(state),
            "channel_versions": dict(self.versions),
            "versions_seen": {"agent": seen},
            "updated_channels": sorted(names),
        }
        metadata = {"source": "loop", "step": self.step, "parents": {}}
        return checkpoint, metadata, new_versions

    def put(self, state: dict[str, Any], changed: Iterable[str]) -> None:
        checkpoint, metadata, new_versions = self.build(state, changed)
        self.config = self.saver.put(self.config, checkpoint, metadata, new_versions)

    def advance(self, checkpoint: dict[str, Any]) -> None:
        """Chain the parent config as ``put`` would have returned it (bulk loading)."""
        self.config = {
            "configurable": {
                "thread_id": self.thread_id,
                "checkpoint_ns": "",
                "checkpoint_id": checkpoint["id"],
            }
        }


def open_sqlite_saver(path: Path) -> Any:
    """``SqliteSaver`` the documented way: one connection shared by threads, behind its lock."""
    saver = _lg_imports()["SqliteSaver"](sqlite3.connect(str(path), check_same_thread=False))
    saver.setup()
    return saver


def open_pg_saver(url: str, pool_size: int = 0) -> tuple[Any, Callable[[], None]]:
    """``PostgresSaver`` on one connection (``from_conn_string`` settings) or on a pool."""
    import psycopg
    from psycopg.rows import dict_row

    saver_cls = _lg_imports()["PostgresSaver"]
    kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    if pool_size:
        from psycopg_pool import ConnectionPool

        pool = ConnectionPool(url, min_size=pool_size, max_size=pool_size, kwargs=kwargs, open=True)
        pool.wait()
        saver = saver_cls(pool)
        saver.setup()
        return saver, pool.close
    conn = psycopg.connect(url, **kwargs)
    saver = saver_cls(conn)
    saver.setup()
    return saver, conn.close


# --- our side --------------------------------------------------------------------------------


class OurNode:
    """One in-progress attempt of a node that publishes checkpoints."""

    def __init__(self, db: smithers_tt.Database, fence: Any, node_id: str) -> None:
        self.db = db
        self.fence = fence
        self.key = db.store.start_attempt(fence, node_id).key

    def put(self, state: dict[str, Any]) -> None:
        self.db.store.publish(
            self.fence, self.key, AgentCheckpoint(CODEC, 1, state), purpose="progress"
        )


def our_sqlite_sync(db: smithers_tt.Database) -> str:
    with db.engine.sa.connect() as conn:
        value = conn.exec_driver_sql("PRAGMA synchronous").scalar()
        mode = conn.exec_driver_sql("PRAGMA journal_mode").scalar()
    return f"journal_mode={mode}, synchronous={SYNC_NAMES.get(value, value)}"


def their_sqlite_sync(saver: Any) -> str:
    value = saver.conn.execute("PRAGMA synchronous").fetchone()[0]
    mode = saver.conn.execute("PRAGMA journal_mode").fetchone()[0]
    return f"journal_mode={mode}, synchronous={SYNC_NAMES.get(value, value)}"


class Backend:
    """Where a measurement runs: a scratch SQLite file or a fresh PostgreSQL database."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


SQLITE = Backend("sqlite")
POSTGRES = Backend("postgresql")


class Place:
    """A scratch database for one side of one measurement (use as a context manager)."""

    def __init__(self, backend: Backend, label: str) -> None:
        self.backend = backend
        self.label = label
        self._cleanup: list[Callable[[], None]] = []

    def __enter__(self) -> Place:
        if self.backend is SQLITE:
            self._dir = scratch_dir()
            path = self._dir.__enter__()
            self.path = path / f"{self.label}.db"
            self.url = f"sqlite:///{self.path}"
        else:
            self._db = fresh_pg_database(self.label)
            self.url = self._db.__enter__()
        return self

    def on_exit(self, fn: Callable[[], None]) -> None:
        self._cleanup.append(fn)

    def __exit__(self, *exc: object) -> None:
        for fn in reversed(self._cleanup):
            try:
                fn()
            except Exception:
                traceback.print_exc()
        if self.backend is SQLITE:
            self._dir.__exit__(None, None, None)
        else:
            self._db.__exit__(None, None, None)

    def ours(self) -> smithers_tt.Database:
        url = self.url if self.backend is SQLITE else sqlalchemy_url(self.url)
        db = smithers_tt.connect(url)
        self.on_exit(db.close)
        return db

    def saver(self, pool_size: int = 0) -> Any:
        if self.backend is SQLITE:
            saver = open_sqlite_saver(self.path)
            self.on_exit(saver.conn.close)
            return saver
        saver, close = open_pg_saver(self.url, pool_size)
        self.on_exit(close)
        return saver

    def stored_bytes(self) -> int:
        return sqlite_bytes(self.path) if self.backend is SQLITE else pg_bytes(self.url)


# --- section a: single publisher ---------------------------------------------------------------


class Floor:
    """The floor under any durable publish: one bare INSERT of the canonical state + commit.

    The bare driver on the same settings as the sides it is compared with: ``sqlite3`` in WAL
    with ``synchronous=FULL``; ``psycopg`` with server defaults (a transaction per insert).
    The row is comparable to a checkpoint: an integer key, a thread id and the state's bytes.
    """

    def __init__(self, place: Place) -> None:
        if place.backend is SQLITE:
            conn: Any = sqlite3.connect(str(place.path))
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            self.sql = "INSERT INTO floor_puts (thread_id, state) VALUES (?, ?)"
            conn.execute(
                "CREATE TABLE floor_puts (id INTEGER PRIMARY KEY, thread_id TEXT, state BLOB)"
            )
        else:
            import psycopg

            conn = psycopg.connect(place.url)
            self.sql = "INSERT INTO floor_puts (thread_id, state) VALUES (%s, %s)"
            conn.execute(
                "CREATE TABLE floor_puts (id BIGSERIAL PRIMARY KEY, thread_id TEXT, state BYTEA)"
            )
        conn.commit()
        place.on_exit(conn.close)
        self.conn = conn

    def put(self, state: dict[str, Any]) -> None:
        self.conn.execute(
            self.sql, ("thread-floor", AgentCheckpoint(CODEC, 1, state).encode().data)
        )
        self.conn.commit()


def _a_one(backend: Backend, n: int, warm: int, block: int) -> list[Any]:
    with (
        Place(backend, "a_ours") as mine,
        Place(backend, "a_lg") as theirs,
        Place(backend, "a_floor") as bare,
    ):
        floor = Floor(bare)
        db = mine.ours()
        _, fence = db.store.create_run("bench-a")
        node = OurNode(db, fence, "agent")
        saver = theirs.saver()
        thread = LGThread(saver, "thread-a")
        states = [chat_state(draft=i) for i in range(warm + n + 1)]
        ours_states = iter(states[1:])
        lg_states = iter(states[1:])

        def ours() -> None:
            node.put(next(ours_states))

        def lg() -> None:
            thread.put(next(lg_states), ["messages"])

        floor_states = iter(states[1:])

        def bare_put() -> None:
            floor.put(next(floor_states))

        time_each(ours, warm)
        time_each(lg, warm)
        time_each(bare_put, warm)
        ours_ns: list[int] = []
        lg_ns: list[int] = []
        floor_ns: list[int] = []
        for _ in range(n // block):  # alternate blocks so drift hits every side alike
            ours_ns += time_each(ours, block)
            lg_ns += time_each(lg, block)
            floor_ns += time_each(bare_put, block)
        o, t, f = median_ms(ours_ns), median_ms(lg_ns), median_ms(floor_ns)
        if backend is SQLITE:
            note(f"sqlite: ours {our_sqlite_sync(db)}; LangGraph {their_sqlite_sync(saver)}")
        return [
            backend.name,
            canonical_size(states[0]),
            len(ours_ns),
            o,
            t,
            o / t,
            f,
            o / f,
            "<= 1.0 and <= 1.5",
            verdict(o / t <= 1.0 and o / f <= 1.5),
        ]


def section_a(backends: list[Backend]) -> list[list[Any]]:
    n, warm, block = scaled(500, 60), scaled(50, 10), scaled(50, 10)
    rows = [_a_one(backend, n, warm, block) for backend in backends]
    print_table(
        "a. single-publisher durable publish, median ms per op (ours: publish; theirs: put)",
        [
            "backend",
            "state B",
            "ops",
            "ours ms",
            "LangGraph ms",
            "ratio",
            "floor ms",
            "ours / floor",
            "goal",
            "result",
        ],
        rows,
    )
    note("floor: bare driver, one INSERT of the canonical state + commit, same settings")
    return rows


# --- section b: 16 concurrent publishers --------------------------------------------------------


def run_threads(workers: list[Callable[[], None]]) -> float:
    """Start every worker at once; the wall time until the last one finishes."""
    barrier = threading.Barrier(len(workers) + 1)
    errors: list[BaseException] = []

    def wrap(fn: Callable[[], None]) -> None:
        barrier.wait()
        try:
            fn()
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=wrap, args=(fn,)) for fn in workers]
    for t in threads:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    if errors:
        raise errors[0]
    return elapsed


def _b_one(backend: Backend, threads: int, per: int, rounds: int) -> list[Any]:
    with Place(backend, "b_ours") as mine, Place(backend, "b_lg") as theirs:
        db = mine.ours()
        _, fence = db.store.create_run("bench-b")
        nodes = [OurNode(db, fence, f"agent-{i:02d}") for i in range(threads)]
        saver = theirs.saver(pool_size=threads if backend is POSTGRES else 0)
        lg_threads = [LGThread(saver, f"thread-{i:02d}") for i in range(threads)]
        # thread i publishes its own transcript; every publish differs (no dedup help)
        states = [
            [chat_state(draft=k, turn=i) for k in range(rounds * per + 1)] for i in range(threads)
        ]
        for i in range(threads):  # warm-up: one each, sequentially
            nodes[i].put(states[i][0])
            lg_threads[i].put(states[i][0], ["messages"])

        def ours_worker(i: int, r: int) -> Callable[[], None]:
            def work() -> None:
                for state in states[i][1 + r * per : 1 + (r + 1) * per]:
                    nodes[i].put(state)

            return work

        def lg_worker(i: int, r: int) -> Callable[[], None]:
            def work() -> None:
                for state in states[i][1 + r * per : 1 + (r + 1) * per]:
                    lg_threads[i].put(state, ["messages"])

            return work

        total = threads * per
        ours_rates, lg_rates, units = [], [], []
        ours_cpu, lg_cpu = [], []  # this process's CPU (all threads) per publish, ms
        for r in range(rounds):  # alternate rounds so a busy moment hits both sides alike
            batches0 = db.store.commit_batches
            cpu0 = time.process_time()
            ours_rates.append(total / run_threads([ours_worker(i, r) for i in range(threads)]))
            ours_cpu.append((time.process_time() - cpu0) * 1000 / total)
            units.append(total / max(db.store.commit_batches - batches0, 1))
            cpu0 = time.process_time()
            lg_rates.append(total / run_threads([lg_worker(i, r) for i in range(threads)]))
            lg_cpu.append((time.process_time() - cpu0) * 1000 / total)
    o, t = max(ours_rates), max(lg_rates)
    if backend is SQLITE:
        setup, goal, met = "one sqlite3 connection + saver lock", ">= 5.0", o / t >= 5.0
    else:
        setup, goal, met = f"ConnectionPool({threads}) + saver lock", "(none)", None
    return [
        backend.name,
        f"{threads}x{per} x{rounds}",
        o,
        t,
        o / t,
        sum(units) / len(units),
        sorted(ours_cpu)[len(ours_cpu) // 2],
        sorted(lg_cpu)[len(lg_cpu) // 2],
        setup,
        goal,
        verdict(met),
    ]


def section_b(backends: list[Backend]) -> list[list[Any]]:
    threads, per, rounds = 16, scaled(50, 10), scaled(3, 1)
    rows = [_b_one(backend, threads, per, rounds) for backend in backends]
    print_table(
        "b. 16 concurrent publishers, best round, publishes/s (ratio = ours / LangGraph)",
        [
            "backend",
            "threads x ops x rounds",
            "ours /s",
            "LangGraph /s",
            "ratio",
            "ours units/commit",
            "ours CPU ms/publish",
            "LangGraph CPU ms/put",
            "LangGraph setup",
            "goal",
            "result",
        ],
        rows,
    )
    return rows


# --- section c: bytes per checkpoint -------------------------------------------------------------

CASES = {
    # case: (how the state changes, LangGraph channels written each step)
    "unchanged": (lambda i: chat_state(), []),
    "transcript changes": (lambda i: chat_state(draft=i), ["messages"]),
    "counter changes": (lambda i: chat_state(turn=i), ["turn"]),
}


def section_c(backends: list[Backend]) -> list[list[Any]]:
    n = scaled(2000, 200)
    rows: list[list[Any]] = []
    for backend in backends:
        for case, (make, changed) in CASES.items():
            states = [make(i) for i in range(n)]
            with Place(backend, "c_ours") as mine:
                db = mine.ours()
                _, fence = db.store.create_run("bench-c")
                node = OurNode(db, fence, "agent")
                before = mine.stored_bytes()
                for s in states:
                    node.put(s)
                ours_b = (mine.stored_bytes() - before) / n
            with Place(backend, "c_lg") as theirs:
                saver = theirs.saver()
                thread = LGThread(saver, "thread-c")
                before = theirs.stored_bytes()
                for s in states:
                    thread.put(s, changed)
                lg_b = (theirs.stored_bytes() - before) / n
            ratio = ours_b / lg_b
            # issue 15: unchanged <= 5% of SqliteSaver, <= 25% of PostgresSaver; changing <= 1.0
            limit = (0.05 if backend is SQLITE else 0.25) if case == "unchanged" else 1.0
            rows.append(
                [
                    backend.name,
                    case,
                    n,
                    ours_b,
                    lg_b,
                    ratio,
                    f"<= {limit:g}",
                    verdict(ratio <= limit),
                ]
            )
    print_table(
        f"c. bytes stored per checkpoint ({canonical_size(chat_state())} B canonical state)",
        ["backend", "state", "ckpts", "ours B/ckpt", "LangGraph B/ckpt", "ratio", "goal", "result"],
        rows,
    )
    note("SQLite: dbstat page bytes of all tables+indexes (WAL included); PostgreSQL: ")
    note("pg_total_relation_size of every table (heap+indexes+TOAST); growth / checkpoints")
    return rows


# --- section d: lookups as history grows ----------------------------------------------------------

REFS_PER_ATTEMPT = 1000
CONTENT_SHARE = 10


def grow_ours(db: smithers_tt.Database, fence: Any, run_id: str, target: int, have: int) -> None:
    """Bring run ``run_id`` to ``target`` refs of node ``agent`` in bulk (1,000 per attempt)."""
    from smithers_tt.store._frames import Frame, frame_row
    from smithers_tt.store._records import now_ms
    from smithers_tt.store.backend import _schema as S

    store = db.store
    engine = db.engine
    while have < target:
        attempts = store.list_attempts(run_id, "agent")
        if attempts and attempts[-1].state == "in_progress":
            store.finish_attempt(fence, attempts[-1].key, "finished")
        key = store.start_attempt(fence, "agent").key
        count = min(REFS_PER_ATTEMPT, target - have)
        # one content row per CONTENT_SHARE consecutive refs (setup speed; lookups read refs)
        distinct = [
            AgentCheckpoint(CODEC, 1, small_state(have + s)).encode()
            for s in range(0, count, CONTENT_SHARE)
        ]
        encoded = [distinct[s // CONTENT_SHARE] for s in range(count)]

        def work(conn: sa.Connection, key: Any = key, encoded: list[Any] = encoded) -> None:
            clock = conn.execute(
                sa.select(S.runs.c.clock).where(S.runs.c.run_id == run_id)
            ).scalar_one()
            stamp = now_ms()
            contents, refs, frames = [], [], []
            for seq, enc in enumerate(encoded):
                if seq % CONTENT_SHARE == 0:
                    contents.append(
                        {
                            "content_hash": enc.content_hash,
                            "data": enc.data,
                            "size_bytes": len(enc.data),
                            "created_at_ms": stamp,
                        }
                    )
                clock += 1
                refs.append(
                    {"run_id": run_id, "node_id": "agent", "iteration": 0}
                    | {"attempt": key.attempt, "sequence": seq, "frame_no": clock}
                )
                frames.append(
                    frame_row(
                        Frame(
                            run_id,
                            clock,
                            "checkpoint",
                            "agent",
                            0,
                            key.attempt,
                            seq,
                            None,
                            enc.content_hash,
                            CODEC,
                            1,
                            "progress",
                            None,
                            {"size": len(enc.data)},
                            stamp,
                        )
                    )
                )
            conn.execute(S.contents.insert(), contents)
            conn.execute(S.refs.insert(), refs)
            conn.execute(S.frame_rows.insert(), frames)
            a = S.attempts
            conn.execute(
                a.update()
                .where(
                    a.c.run_id == run_id,
                    a.c.node_id == "agent",
                    a.c.iteration == 0,
                    a.c.attempt == key.attempt,
                )
                .values(next_sequence=len(encoded))
            )
            conn.execute(S.runs.update().where(S.runs.c.run_id == run_id).values(clock=clock))

        engine.transaction(work)
        have += count
    with engine.sa.connect() as conn:  # fresh statistics, as autovacuum/ANALYZE would give
        conn.exec_driver_sql("ANALYZE")
        conn.commit()


def grow_theirs(saver: Any, thread: LGThread, backend: Backend, target: int, have: int) -> None:
    """Bring LangGraph thread to ``target`` checkpoints, rows built by the saver itself."""
    lg = _lg_imports()
    batch = 5000
    while have < target:
        count = min(batch, target - have)
        if backend is SQLITE:
            import json

            from langgraph.checkpoint.base import get_checkpoint_metadata

            rows = []
            for s in range(count):
                state = small_state(have + s)
                ckpt, meta, _ = thread.build(state, ["messages", "turn"])
                type_, blob = saver.serde.dumps_typed(ckpt)
                md = json.dumps(get_checkpoint_metadata(thread.config, meta), ensure_ascii=False)
                parent = thread.config["configurable"].get("checkpoint_id")
                rows.append(
                    (
                        thread.thread_id,
                        "",
                        ckpt["id"],
                        parent,
                        type_,
                        blob,
                        md.encode("utf-8", "ignore"),
                    )
                )
                thread.advance(ckpt)
            with saver.cursor() as cur:
                cur.executemany(
                    "INSERT OR REPLACE INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id,"
                    " parent_checkpoint_id, type, checkpoint, metadata)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?)",
                    rows,
                )
            saver.conn.execute("ANALYZE")
        else:
            from psycopg.types.json import Jsonb

            blobs: list[Any] = []
            rows = []
            for s in range(count):
                state = small_state(have + s)
                ckpt, meta, new_versions = thread.build(state, ["messages", "turn"])
                # exactly what PostgresSaver.put does with the same inputs
                copy = ckpt.copy()
                copy["channel_values"] = dict(copy["channel_values"])
                blob_values = {
                    k: copy["channel_values"].pop(k)
                    for k, v in ckpt["channel_values"].items()
                    if not (v is None or isinstance(v, str | int | float | bool))
                }
                blob_versions = {k: v for k, v in new_versions.items() if k in blob_values}
                blobs += saver._dump_blobs(thread.thread_id, "", blob_values, blob_versions)
                rows.append(
                    (
                        thread.thread_id,
                        "",
                        ckpt["id"],
                        thread.config["configurable"].get("checkpoint_id"),
                        Jsonb(copy),
                        Jsonb(lg["meta"](thread.config, meta)),
                    )
                )
                thread.advance(ckpt)
            with saver._cursor() as cur, cur.connection.transaction():
                cur.executemany(saver.UPSERT_CHECKPOINT_BLOBS_SQL, blobs)
                cur.executemany(saver.UPSERT_CHECKPOINTS_SQL, rows)
            with saver._cursor() as cur:
                cur.execute("ANALYZE")
        have += count


def interleaved(
    fns: dict[str, Callable[[], object]], reps: int, budget_s: float
) -> dict[str, float]:
    """Median ms of each function, timed in alternating blocks of 5 calls (so load spikes hit
    every variant alike): up to ``reps`` calls each, at least 15, stopping after ``budget_s``."""
    for fn in fns.values():
        time_each(fn, 3)
    samples: dict[str, list[int]] = {name: [] for name in fns}
    deadline = time.perf_counter() + budget_s
    done = 0
    while done < reps and (done < 15 or time.perf_counter() < deadline):
        for name, fn in fns.items():
            samples[name] += time_each(fn, 5)
        done += 5
    return {name: median_ms(values) for name, values in samples.items()}


def _growth_rows(
    side: str, backend: Backend, medians: dict[str, float], ops: list[str], sizes: list[int]
) -> list[list[Any]]:
    rows: list[list[Any]] = []
    for op in ops:
        times = [medians[f"{op}@{size}"] for size in sizes]
        growth = times[-1] / times[0]
        if side == "ours":
            goal, result = "<= 1.3", verdict(growth <= 1.3)
        else:
            goal, result = "(report)", ""
        rows.append([backend.name, side, op, *times, growth, goal, result])
    return rows


def _d_ours(backend: Backend, sizes: list[int], reps: int) -> list[list[Any]]:
    from smithers_tt.store._records import encode_cursor

    fns: dict[str, Callable[[], object]] = {}
    t0 = time.perf_counter()
    with contextlib.ExitStack() as stack:
        for size in sizes:
            place = stack.enter_context(Place(backend, f"d_ours_{size}"))
            db = place.ours()
            run, fence = db.store.create_run("bench-d")
            run_id = run.run_id
            grow_ours(db, fence, run_id, size, 0)
            found = db.store.newest_ref(run_id, "agent")
            assert found is not None and found.sequence == (size - 1) % REFS_PER_ATTEMPT
            mid = size // 2
            cursor = encode_cursor(
                "refs", ["agent", 0, mid // REFS_PER_ATTEMPT + 1, mid % REFS_PER_ATTEMPT]
            )
            assert len(db.store.list_refs(run_id, limit=100, cursor=cursor).items) == 100
            store = db.store
            fns[f"newest_ref@{size}"] = lambda s=store, r=run_id: s.newest_ref(r, "agent")
            fns[f"list_refs(100) mid@{size}"] = lambda s=store, r=run_id, c=cursor: s.list_refs(
                r, limit=100, cursor=c
            )
        built = time.perf_counter() - t0
        medians = interleaved(fns, reps, 12)
    note(f"{backend.name}: built our refs for {len(sizes)} histories in {built:.1f} s")
    return _growth_rows("ours", backend, medians, ["newest_ref", "list_refs(100) mid"], sizes)


def _d_theirs(backend: Backend, sizes: list[int], reps: int) -> list[list[Any]]:
    fns: dict[str, Callable[[], object]] = {}
    t0 = time.perf_counter()
    cfg = {"configurable": {"thread_id": "thread-d", "checkpoint_ns": ""}}
    with contextlib.ExitStack() as stack:
        for size in sizes:
            place = stack.enter_context(Place(backend, f"d_lg_{size}"))
            saver = place.saver()
            thread = LGThread(saver, "thread-d")
            grow_theirs(saver, thread, backend, size, 0)
            tup = saver.get_tuple(cfg)
            assert tup is not None
            assert tup.checkpoint["id"] == thread.config["configurable"]["checkpoint_id"]
            assert len(list(saver.list(cfg, limit=10))) == 10
            fns[f"get_tuple (latest)@{size}"] = lambda s=saver: s.get_tuple(cfg)
            fns[f"list(limit=10)@{size}"] = lambda s=saver: list(s.list(cfg, limit=10))
        built = time.perf_counter() - t0
        medians = interleaved(fns, reps, 20)
    note(f"{backend.name}: built LangGraph checkpoints for {len(sizes)} histories in {built:.1f} s")
    return _growth_rows(
        "LangGraph", backend, medians, ["get_tuple (latest)", "list(limit=10)"], sizes
    )


def section_d(backends: list[Backend]) -> list[list[Any]]:
    sizes = [1000, scaled(10_000, 2_000), scaled(100_000, 5_000)]
    reps = scaled(200, 40)
    rows: list[list[Any]] = []
    for backend in backends:
        rows += _d_ours(backend, sizes, reps)
        rows += _d_theirs(backend, sizes, reps)
    print_table(
        "d. lookups by history length (refs in one run / checkpoints in one thread), median ms",
        [
            "backend",
            "side",
            "operation",
            *(f"{size:,}" for size in sizes),
            f"{sizes[-1] // 1000}k / 1k",
            "goal",
            "result",
        ],
        rows,
    )
    return rows


# --- main --------------------------------------------------------------------------------------


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def main() -> None:
    exit_cleanly_on_sigterm()
    chosen = os.environ.get("SMITHERS_TT_BENCH_STORE_SECTIONS", "a,b,c,d").split(",")
    sections = {"a": section_a, "b": section_b, "c": section_c, "d": section_d}
    backends = [SQLITE]
    reason = pg_available()
    if reason is None:
        backends.append(POSTGRES)
        import psycopg

        with psycopg.connect(pg_admin_url()) as conn:
            server = conn.execute("SHOW server_version").fetchone()[0]
            fsync = conn.execute("SHOW fsync").fetchone()[0]
            sync = conn.execute("SHOW synchronous_commit").fetchone()[0]
        pg = f"PostgreSQL {server} (fsync={fsync}, synchronous_commit={sync})"
    else:
        pg = f"PostgreSQL skipped: {reason}"
    print(
        f"store benchmark{' (QUICK: reduced counts)' if QUICK else ''}\n"
        f"  Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, {pg}\n"
        f"  smithers_tt {smithers_tt.__version__}, SQLAlchemy {sa.__version__}, langgraph "
        f"{_version('langgraph')}, langgraph-checkpoint-sqlite "
        f"{_version('langgraph-checkpoint-sqlite')}, langgraph-checkpoint-postgres "
        f"{_version('langgraph-checkpoint-postgres')}, {os.cpu_count()} CPUs\n"
        f"  state: {canonical_size(chat_state())} B canonical JSON (5-message chat transcript)\n"
        f"  load average at start: {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    failed = []
    for name in chosen:
        name = name.strip()
        t0 = time.perf_counter()
        try:
            sections[name](backends)
        except Exception:
            traceback.print_exc()
            failed.append(name)
        print(f"  (section {name}: {time.perf_counter() - t0:.1f} s)", flush=True)
    print(f"  load average at end: {os.getloadavg()[0]:.2f}")
    if failed:
        print(f"sections failed: {failed}", file=sys.stderr)
        raise SystemExit(1)


if __name__ == "__main__":
    main()
