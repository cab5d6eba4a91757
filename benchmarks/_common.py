"""Helpers shared by the benchmarks: timing, tables, scratch SQLite files, scratch PostgreSQL.

* ``QUICK`` (``SMITHERS_TT_BENCH_QUICK=1``) shrinks counts for a smoke run; ``scaled(full,
  quick)`` picks between them.
* ``time_each`` / ``median_ms`` time single operations with ``perf_counter_ns``.
* ``print_table`` prints an aligned text table (also usable as Markdown).
* ``scratch_dir`` is a temporary directory that is removed afterwards.
* ``pg_admin_url`` / ``pg_available`` / ``fresh_pg_database`` give a brand-new PostgreSQL
  database per use, dropped afterwards (``SMITHERS_TT_BENCH_PG`` overrides the server URL,
  default ``postgresql://postgres@127.0.0.1:5432/test``).
* ``sqlite_bytes`` / ``pg_bytes`` measure what a database stores (tables + indexes + TOAST).
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import os
import random
import secrets
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

QUICK = os.environ.get("SMITHERS_TT_BENCH_QUICK", "") not in ("", "0")
"""Smoke-run mode: every benchmark shrinks its counts."""

PG_ENV = "SMITHERS_TT_BENCH_PG"
_DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/test"


WORDS = [
    "the",
    "agent",
    "calls",
    "a",
    "tool",
    "to",
    "search",
    "the",
    "repository",
    "and",
    "reads",
    "each",
    "result",
    "before",
    "it",
    "answers",
    "user",
    "question",
    "about",
    "deployment",
    "pipeline",
    "retries",
    "timeout",
    "budget",
    "database",
    "migration",
    "schema",
    "report",
    "summary",
    "function",
    "argument",
    "returns",
    "error",
    "because",
    "value",
    "missing",
    "field",
    "config",
    "plan",
    "step",
    "next",
    "check",
    "test",
    "passes",
    "fails",
    "release",
    "branch",
    "review",
    "commit",
    "rollback",
    "canary",
    "metrics",
]
"""Plain words for generated text: realistic, compressible, deterministic with a seeded rng."""


def prose(rng: random.Random, chars: int) -> str:
    """``chars`` characters of words drawn with ``rng``."""
    out: list[str] = []
    n = 0
    while n < chars:
        word = rng.choice(WORDS)
        out.append(word)
        n += len(word) + 1
    return " ".join(out)[:chars]


def scaled(full: int, quick: int) -> int:
    """``quick`` in smoke-run mode, else ``full``."""
    return quick if QUICK else full


# --- timing --------------------------------------------------------------------------------


def time_each(fn: Callable[[], object], n: int) -> list[int]:
    """Call ``fn`` ``n`` times; the duration of each call in nanoseconds."""
    out: list[int] = []
    clock = time.perf_counter_ns
    for _ in range(n):
        t0 = clock()
        fn()
        out.append(clock() - t0)
    return out


def median_ms(samples_ns: Sequence[int]) -> float:
    """Median of nanosecond samples, in milliseconds."""
    return statistics.median(samples_ns) / 1e6


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Collect, then keep the cyclic garbage collector off while timing."""
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


# --- output --------------------------------------------------------------------------------


def print_table(title: str, headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Print a Markdown-compatible table with aligned columns."""
    cells = [[str(h) for h in headers]] + [[_fmt(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    print(f"\n{title}", flush=True)
    for n, row in enumerate(cells):
        print("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |")
        if n == 0:
            print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    print(flush=True)


def _fmt(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, float):
        if value >= 100:
            return f"{value:,.0f}"
        if value >= 10:
            return f"{value:.1f}"
        if value >= 1:
            return f"{value:.2f}"
        return f"{value:.3f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def verdict(met: bool | None) -> str:
    """The text of a goal column."""
    return "n/a" if met is None else ("met" if met else "MISSED")


def note(text: str) -> None:
    """Print an explanatory line."""
    print(f"  - {text}", flush=True)


# --- SQLite ----------------------------------------------------------------------------------


@contextlib.contextmanager
def scratch_dir(prefix: str = "smithers-tt-bench-") -> Iterator[Path]:
    """A temporary directory (under ``$TMPDIR``), removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def sqlite_bytes(path: str | Path) -> int:
    """Bytes of every b-tree (tables and indexes) in an SQLite file, WAL included.

    Uses the ``dbstat`` virtual table (sum of page sizes, so unused space inside pages counts
    as stored), falling back to used pages times page size after a WAL checkpoint.
    """
    conn = sqlite3.connect(str(path))
    try:
        try:
            # dbstat reads through the WAL, so committed pages not yet checkpointed count.
            return int(conn.execute("SELECT COALESCE(SUM(pgsize), 0) FROM dbstat").fetchone()[0])
        except sqlite3.OperationalError:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            pages = conn.execute("PRAGMA page_count").fetchone()[0]
            free = conn.execute("PRAGMA freelist_count").fetchone()[0]
            size = conn.execute("PRAGMA page_size").fetchone()[0]
            return int((pages - free) * size)
    finally:
        conn.close()


# --- PostgreSQL ------------------------------------------------------------------------------


def pg_admin_url() -> str:
    """libpq URL of the PostgreSQL server used for benchmarks (an existing database)."""
    url = os.environ.get(PG_ENV, _DEFAULT_PG)
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


def pg_available() -> str | None:
    """None when PostgreSQL is reachable, else the reason it is not."""
    try:
        import psycopg
    except ImportError:
        return "psycopg is not installed (install the postgres extra)"
    try:
        with psycopg.connect(pg_admin_url(), connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except Exception as error:  # any connection failure means "skip PostgreSQL"
        return f"PostgreSQL not reachable at {pg_admin_url()}: {str(error).strip()[:120]}"
    return None


def _with_database(url: str, name: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).set(database=name).render_as_string(hide_password=False)


_CREATED: set[str] = set()


def _drop(name: str) -> None:
    import psycopg

    with psycopg.connect(pg_admin_url(), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    _CREATED.discard(name)


@atexit.register
def _drop_leftovers() -> None:
    for name in list(_CREATED):
        with contextlib.suppress(Exception):
            _drop(name)


def exit_cleanly_on_sigterm() -> None:
    """Turn SIGTERM into SystemExit so ``finally`` blocks drop scratch databases and files."""
    import signal
    import threading

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))


@contextlib.contextmanager
def fresh_pg_database(label: str) -> Iterator[str]:
    """A new, empty PostgreSQL database; yields its libpq URL and drops it afterwards."""
    import psycopg

    name = f"stt_bench_{label}_{os.getpid()}_{secrets.token_hex(3)}"
    with psycopg.connect(pg_admin_url(), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    _CREATED.add(name)
    try:
        yield _with_database(pg_admin_url(), name)
    finally:
        _drop(name)


def pg_analyze(libpq_url: str) -> None:
    """``ANALYZE`` every table: the statistics autovacuum gives a database within a minute
    of a bulk write, which a benchmark that measures right after writing would not have."""
    import psycopg

    with psycopg.connect(libpq_url, autocommit=True) as conn:
        conn.execute("ANALYZE")


def sqlalchemy_url(libpq_url: str) -> str:
    """The same PostgreSQL URL for SQLAlchemy with psycopg 3."""
    return libpq_url.replace("postgresql://", "postgresql+psycopg://", 1)


def pg_bytes(libpq_url: str, schema: str = "public") -> int:
    """``pg_total_relation_size`` (heap + indexes + TOAST) of every table in ``schema``."""
    import psycopg

    with psycopg.connect(libpq_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relkind IN ('r', 'p')",
            (schema,),
        ).fetchone()
    return int(row[0]) if row else 0
