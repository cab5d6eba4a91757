"""What one durable publish writes and sends, against ``SqliteSaver.put``: counts, not times.

Run with ``./dev bench publish_cost`` (or ``python -m benchmarks publish_cost``), a few seconds.
Counts do not move with the machine's load, so they name the cost behind the timed ratios of
``bench_store`` (section a) and ``bench_engine``:

- **SQLite WAL frames per commit**: 100 publishes of the ~4 KiB state of ``bench_store`` (the
  transcript changes each time) against 100 ``SqliteSaver.put``; a reader holds a snapshot so
  the WAL only grows, and its growth over (page size + 24-byte frame header) is the pages each
  commit wrote. Each WAL frame's header names its page; ``dbstat`` names the table or index
  that page belongs to, which splits the figure by b-tree.
- **PostgreSQL messages per publish**: a libpq trace of the store's connection over 50
  publishes; every ``Sync`` and every simple ``Query`` ends a round trip (the client waits for
  the server's answer), so their sum is the round trips; Parse/Bind/Execute count statements.
- **PostgreSQL bytes per unchanged publish, by table**: 1,000 publishes of the same state,
  growth of ``pg_total_relation_size`` of each table over 1,000 (what ``bench_store`` section c
  sums).
- **SQLite commits per task and per checkpoint step**: the engine benchmark's chain of tasks
  and its steps agent (``bench_engine``) on an SQLite file, commits counted with SQLAlchemy's
  ``commit`` event; per task = (commits of a 40-task chain - those of a 10-task chain) / 30,
  so a run's own start and end are not counted (likewise 40 vs 10 steps).
"""

from __future__ import annotations

import gc
import os
import sqlite3
import tempfile
from collections import Counter

import smithers_tt
from smithers_tt import AgentCheckpoint
from smithers_tt.store.backend import _schema as S

from ._common import (
    exit_cleanly_on_sigterm,
    fresh_pg_database,
    note,
    pg_available,
    print_table,
    scratch_dir,
    sqlalchemy_url,
)
from .bench_store import CODEC, LGThread, chat_state, open_pg_saver, open_sqlite_saver

N_SQLITE = 100
N_PG = 50
WAL_FRAME_HEADER = 24


def _publisher(url: str, calls: int = 0) -> tuple[smithers_tt.Database, object]:
    """A database and a publish of a changing state into one attempt, carrying ``calls``
    model calls (each with a request and a reply never stored before)."""
    db = smithers_tt.connect(url)
    _, fence = db.store.create_run("publish-cost")
    key = db.store.start_attempt(fence, "agent").key
    draft = iter(range(1_000_000))

    def publish() -> None:
        n = next(draft)
        state = chat_state(draft=n)
        made = [
            smithers_tt.ModelCall(
                "m",
                [{"role": "user", "content": f"ask {n}.{k}"}],
                {"role": "assistant", "content": f"answer {n}.{k}"},
                "stop",
                10,
                5,
                latency_ms=1.0,
                status=200,
            )
            for k in range(calls)
        ]
        db.store.publish(
            fence, key, AgentCheckpoint(CODEC, 1, state), purpose="progress", model_calls=made
        )

    return db, publish


def _wal_frames(
    path: str, probe: str, page: int, write: object, n: int
) -> tuple[float, Counter[str]]:
    """WAL frames per call of ``write`` while a reader pins the WAL (no checkpoint reset), and
    the same frames by the b-tree (table or index, ``dbstat``'s name) their page belongs to."""
    hold = sqlite3.connect(path)
    try:
        hold.execute("BEGIN")
        hold.execute(probe).fetchone()  # any read: it pins a snapshot
        before = os.path.getsize(path + "-wal")
        for _ in range(n):
            write()  # type: ignore[operator]
        grown = os.path.getsize(path + "-wal") - before
        pages = _wal_page_numbers(path + "-wal", before, page)
    finally:
        hold.rollback()
        hold.close()
    return grown / (page + WAL_FRAME_HEADER) / n, _by_btree(path, pages)


def _wal_page_numbers(wal: str, start: int, page: int) -> list[int]:
    """The database page number of every WAL frame from byte ``start`` on (a frame is a
    24-byte header, whose first 4 bytes are the page number, big-endian, then the page)."""
    with open(wal, "rb") as f:
        f.seek(start)
        data = f.read()
    step = WAL_FRAME_HEADER + page
    return [int.from_bytes(data[i : i + 4], "big") for i in range(0, len(data) - step + 1, step)]


def _by_btree(path: str, pages: list[int]) -> Counter[str]:
    """How many of ``pages`` belong to each b-tree of the file (page 1 is ``sqlite_schema``'s
    root and the file header, written whenever the file grows or its free list changes)."""
    conn = sqlite3.connect(path)
    try:
        owner = dict(conn.execute("SELECT pageno, name FROM dbstat").fetchall())
    finally:
        conn.close()
    return Counter(owner.get(n, "free list") for n in pages)


def _our_pages(
    path: str, layout: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
) -> tuple[float, Counter[str]]:
    """:func:`_wal_frames` of our publish into a new SQLite store at ``path``, first changed
    to ``layout`` (:data:`LAYOUTS`' form; by default as migrated)."""
    db, publish = _publisher(f"sqlite:///{path}")
    try:
        _relayout(path, *layout)
        for _ in range(5):
            publish()  # type: ignore[operator]
        page = sqlite3.connect(path).execute("PRAGMA page_size").fetchone()[0]
        return _wal_frames(path, "SELECT count(*) FROM tt_runs", page, publish, N_SQLITE)
    finally:
        db.close()


def sqlite_pages() -> list[list[object]]:
    with scratch_dir() as base:
        ours, ours_trees = _our_pages(str(base / "ours.db"))
        lg_path = base / "lg.db"
        saver = open_sqlite_saver(lg_path)
        try:
            thread = LGThread(saver, "t")
            drafts = iter(range(1_000_000))

            def put() -> None:
                thread.put(chat_state(draft=next(drafts)), ["messages"])

            for _ in range(5):
                put()
            lg_page = saver.conn.execute("PRAGMA page_size").fetchone()[0]
            theirs, their_trees = _wal_frames(
                str(lg_path), "SELECT count(*) FROM checkpoints", lg_page, put, N_SQLITE
            )
        finally:
            saver.conn.close()
    rows: list[list[object]] = [["SQLite", "WAL frames per commit", ours, theirs, ours / theirs]]
    for side, trees in (("ours", ours_trees), ("theirs", their_trees)):
        for name, count in trees.most_common():
            per = count / N_SQLITE
            rows.append(
                ["SQLite", f"  of which pages of {name} ({side})"]
                + ([per, ""] if side == "ours" else ["", per])
                + [""]
            )
    return rows


LAYOUTS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    # candidate: (tables rebuilt WITHOUT ROWID, indexes dropped)
    "as migrated": ((), ()),
    "tt_frames WITHOUT ROWID": (("tt_frames",), ()),
    "tt_checkpoint_contents WITHOUT ROWID": (("tt_checkpoint_contents",), ()),
    "no tt_frames_content index": ((), ("tt_frames_content",)),
    "tt_frames WITHOUT ROWID, no tt_frames_content": (("tt_frames",), ("tt_frames_content",)),
}
"""Layouts the issue 38 design proposed, applied to a scratch store before it publishes."""

PLAN_PROBES = (
    # What time travel asks the two partial indexes (ledger/_cut.py, reads/_travel.py).
    # The predicates are the schema module's constants, not data.
    "SELECT 1 FROM tt_frames WHERE run_id = 'r' AND frame_no > 5 AND "  # noqa: S608
    + S.RUN_LEVEL_WHERE.text,
    "SELECT min(frame_no) FROM tt_frames WHERE run_id = 'r' AND node_id = 'n' "  # noqa: S608
    "AND frame_no > 5 AND iteration IN (0, 1) AND " + S.NODE_LEVEL_WHERE.text,
)


def _relayout(path: str, rebuilt: tuple[str, ...], dropped: tuple[str, ...]) -> None:
    """Rebuild ``rebuilt`` as WITHOUT ROWID tables (same statement, rows and indexes) and drop
    the indexes ``dropped``, in one transaction (a measurement on a scratch file only)."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        for table in rebuilt:
            (create,) = conn.execute(
                "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
            ).fetchone()
            indexes = conn.execute(
                "SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = ? "
                "AND sql IS NOT NULL",
                (table,),
            ).fetchall()
            conn.execute(create.replace(table, f"{table}_new", 1) + " WITHOUT ROWID")
            conn.execute(f"INSERT INTO {table}_new SELECT * FROM {table}")  # noqa: S608
            conn.execute(f"DROP TABLE {table}")
            conn.execute(f"ALTER TABLE {table}_new RENAME TO {table}")
            for (sql,) in indexes:
                conn.execute(sql)
        for index in dropped:
            conn.execute(f"DROP INDEX {index}")
        conn.execute("COMMIT")
    finally:
        conn.close()


def _partial_indexes_used(path: str) -> str:
    """How many of :data:`PLAN_PROBES` SQLite's planner answers from a partial index."""
    conn = sqlite3.connect(path)
    try:
        used = sum(
            any("_level" in row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {probe}"))
            for probe in PLAN_PROBES
        )
    finally:
        conn.close()
    return f"{used} of {len(PLAN_PROBES)}"


def sqlite_layouts() -> list[list[object]]:
    """WAL pages per publish under each of :data:`LAYOUTS`, and whether time travel's frame
    queries still probe the partial indexes (a layout where they do not turns a probe into a
    scan of the run's history)."""
    rows: list[list[object]] = []
    for name, (rebuilt, dropped) in LAYOUTS.items():
        with scratch_dir() as base:
            path = str(base / "layout.db")
            pages, _ = _our_pages(path, (rebuilt, dropped))
            rows.append([name, pages, _partial_indexes_used(path)])
    return rows


def pg_messages() -> list[list[object]]:
    import psycopg

    with fresh_pg_database("pubcost") as url:
        db, publish = _publisher(sqlalchemy_url(url))
        try:
            for _ in range(5):
                publish()  # type: ignore[operator]
            # The committer holds one connection; find it (and any other open one) to trace.
            conns = [
                o for o in gc.get_objects() if isinstance(o, psycopg.Connection) and not o.closed
            ]
            ours = _traced(conns, publish)
        finally:
            db.close()
    with fresh_pg_database("pubcostcall") as url:  # each publish carrying one model call
        db, publish = _publisher(sqlalchemy_url(url), calls=1)
        try:
            for _ in range(5):
                publish()  # type: ignore[operator]
            conns = [
                o for o in gc.get_objects() if isinstance(o, psycopg.Connection) and not o.closed
            ]
            with_call = _traced(conns, publish)
        finally:
            db.close()
    with fresh_pg_database("pubcostlg") as url:
        saver, close = open_pg_saver(url)
        try:
            thread = LGThread(saver, "t")
            drafts = iter(range(1_000_000))

            def put() -> None:
                thread.put(chat_state(draft=next(drafts)), ["messages"])

            for _ in range(5):
                put()
            theirs = _traced([saver.conn], put)
        finally:
            close()

    def trips(sent: Counter[str]) -> float:
        return (sent["Sync"] + sent["Query"]) / N_PG

    def statements(sent: Counter[str]) -> float:
        return (sent["Execute"] + sent["Query"]) / N_PG

    return [
        [
            "PostgreSQL",
            "round trips (Sync + Query)",
            trips(ours),
            trips(theirs),
            trips(ours) / trips(theirs),
        ],
        [
            "PostgreSQL",
            "round trips, the publish carrying a model call",
            trips(with_call),
            trips(theirs),
            trips(with_call) / trips(theirs),
        ],
        [
            "PostgreSQL",
            "statements, the publish carrying a model call",
            statements(with_call),
            statements(theirs),
            statements(with_call) / statements(theirs),
        ],
        [
            "PostgreSQL",
            "statements (Execute + Query)",
            statements(ours),
            statements(theirs),
            statements(ours) / statements(theirs),
        ],
    ]


def _traced(conns: list[object], write: object, calls: int = N_PG) -> Counter[str]:
    """Frontend messages by type sent on ``conns`` during ``calls`` calls of ``write``."""
    with tempfile.TemporaryFile("w+") as trace:
        for conn in conns:
            conn.pgconn.trace(trace.fileno())  # type: ignore[attr-defined]
        for _ in range(calls):
            write()  # type: ignore[operator]
        for conn in conns:
            conn.pgconn.untrace()  # type: ignore[attr-defined]
        trace.seek(0)
        return Counter(
            line.split("\t")[3].split(" ")[0]
            for line in trace.read().splitlines()
            if line.count("\t") >= 3 and line.split("\t")[1] == "F"
        )


def engine_commits() -> list[list[object]]:
    import sqlalchemy as sa

    from .bench_engine import _ours_runners

    with scratch_dir() as base:
        db = smithers_tt.connect(f"sqlite:///{base / 'engine.db'}")
        try:
            commits = [0]

            def count(conn: object) -> None:
                commits[0] += 1

            sa.event.listen(db.engine.sa, "commit", count)
            steps, tasks = _ours_runners("SQLite", db, lambda: 0)

            def per(runner: object) -> float:
                seen = []
                for n in (10, 40):
                    commits[0] = 0
                    runner.run(n)  # type: ignore[attr-defined]
                    seen.append(commits[0])
                return (seen[1] - seen[0]) / 30

            return [
                # no peer figure measured here (a LangGraph step is a put_writes and a put)
                ["SQLite", "commits per task (engine, chain of tasks)", per(tasks), "", ""],
                ["SQLite", "commits per checkpoint step (on_checkpoint)", per(steps), "", ""],
            ]
        finally:
            db.close()


BY_TABLE = """
    SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c
    JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = 'public' AND c.relkind = 'r'
"""


def pg_unchanged_bytes() -> list[list[object]]:
    import psycopg

    n = 1000
    with fresh_pg_database("pubbytes") as url:
        db = smithers_tt.connect(sqlalchemy_url(url))
        try:
            _, fence = db.store.create_run("publish-bytes")
            key = db.store.start_attempt(fence, "agent").key
            checkpoint = AgentCheckpoint(CODEC, 1, chat_state())

            def sizes() -> dict[str, int]:
                with psycopg.connect(url) as conn:
                    return dict(conn.execute(BY_TABLE).fetchall())

            db.store.publish(fence, key, checkpoint, purpose="progress")
            before = sizes()
            for _ in range(n):
                db.store.publish(fence, key, checkpoint, purpose="progress")
            after = sizes()
        finally:
            db.close()
    grown = {t: (after[t] - before.get(t, 0)) / n for t in after}
    return [
        ["PostgreSQL", f"B per unchanged publish: {t}", b, "", ""]
        for t, b in sorted(grown.items(), key=lambda kv: -kv[1])
        if b
    ]


def main() -> None:
    exit_cleanly_on_sigterm()
    rows = sqlite_pages() + engine_commits()
    reason = pg_available()
    if reason is None:
        rows += pg_messages() + pg_unchanged_bytes()
    else:
        note(f"PostgreSQL skipped: {reason}")
    print_table(
        "What one durable publish costs, per operation (ours: store.publish; theirs: "
        "SqliteSaver.put / PostgresSaver.put as bench_store opens them)",
        ["backend", "count", "ours", "theirs", "ratio"],
        rows,
    )
    print_table(
        "SQLite WAL pages per publish under the layouts issue 38 proposed (a scratch store "
        "rebuilt before it publishes; plan: time travel's frame probes that still use a "
        "partial index)",
        ["layout", "WAL pages per publish", "partial index probes"],
        sqlite_layouts(),
    )
