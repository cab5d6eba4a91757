"""Lineage analytics: DuckDB scans of the store against ``pandas.read_sql`` plus group-by.

Run with ``./dev bench lineage`` (or ``python -m benchmarks lineage``);
``SMITHERS_TT_BENCH_QUICK=1`` shrinks the store for a smoke run.

A store of 1,000,000 checkpoint refs over 10,000 runs is generated directly with bulk SQL into
a temporary SQLite file that ``smithers_tt.connect`` migrated first (so the tables are the real
ones): five workflows, a handful of nodes each (some looping), retries with failed attempts,
forks whose first attempts point at their parent's content, five codecs at versions 1 to 3,
the four purposes weighted as agents use them (mostly ``progress``), log-normal content sizes
(median about 600 bytes, up to 64 KiB) and about half of the refs pointing at content that
another ref already stored (unchanged states, shared prompts, forks). Every content row holds
real canonical JSON bytes of the envelope under their real SHA-256.

Three typical questions are then answered both ways, in the same run, on the same file:

1. refs and bytes per codec and purpose;
2. attempts per node with their failure rate;
3. the dedup ratio (logical bytes over distinct stored bytes) per run.

Each question is asked **cold**, in a new Python process, three ways, interleaved, in each of
``ROUNDS`` rounds: **pandas** (``pandas.read_sql`` of the needed columns over the stdlib
``sqlite3`` driver, then merges and group-bys), a **live** lineage (``db.lineage()``: DuckDB's
sqlite scanner reads the store at every query) and a **cached** one
(``db.lineage(snapshot=True, cache=...)`` opening the snapshot kept by an earlier process; it
is taken once beforehand and its cost reported). Every answer is checked against pandas'.
Reported: the seconds of the question alone (the goal: under 1 s and >= 10x pandas, as the
ratio within each round) and of the whole process (import, open, ask), CPU seconds, the load
average. Then the floor of the live path (what decoding only the needed columns costs SQLite
and the scanner), and warm figures (pandas on loaded DataFrames against a snapshot).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import random
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import smithers_tt

from ._common import QUICK, note, print_table, scaled, scratch_dir, verdict

RUNS = scaled(10_000, 300)
REFS_PER_RUN = 100
REPEATS = 3
ROUNDS = 3
GOAL_SECONDS = 1.0
GOAL_SPEEDUP = 10.0

WORKFLOWS = {
    "support-triage": ["classify", "retrieve", "draft", "review"],
    "code-review": ["checkout", "analyze", "comment", "summarize", "approve"],
    "research-report": ["plan", "search", "read", "write", "critique"],
    "data-cleanup": ["profile", "fix", "validate"],
    "demo-report": ["research", "write", "review"],
}
LOOPING = {"critique", "fix", "read"}  # nodes that run more than one iteration
CODECS = [
    ("smithers.chat/messages", 0.40),
    ("langgraph.state", 0.25),
    ("openai.responses", 0.15),
    ("anthropic.messages", 0.15),
    ("custom.scratchpad", 0.05),
]
PURPOSES = [("progress", 0.70), ("turn", 0.20), ("schema-correction", 0.05), ("session", 0.05)]
ERRORS = [
    ("TimeoutError", "TimeoutError: the model did not answer within 60 s"),
    ("RateLimited", "RateLimited: 429 from the provider, retry after 2 s"),
    ("OutputInvalid", "OutputInvalid: output failed validation after 3 correction turns"),
]
BATCH = 50_000


# --- generating the store ------------------------------------------------------------------


class _Contents:
    """New content rows: real canonical envelope bytes under their real SHA-256."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.count = 0
        self.rows: list[tuple[str, bytes, int, int]] = []
        self.shared: list[tuple[str, str, int]] = []  # popular (hash, codec, version)
        self.size: dict[str, int] = {}

    def new(self, codec: str, version: int, now: int) -> str:
        self.count += 1
        size = int(min(65_536, max(160, self.rng.lognormvariate(math.log(600), 0.9))))
        head = f'{{"codec":"{codec}","payload":{{"n":{self.count},"text":"'
        tail = f'"}},"version":{version}}}'
        data = (head + "x" * max(1, size - len(head) - len(tail)) + tail).encode()
        digest = hashlib.sha256(data).hexdigest()
        self.rows.append((digest, data, len(data), now))
        self.size[digest] = len(data)
        return digest


def _marks(n: int) -> str:
    return ",".join("?" * n)


def _weighted(rng: random.Random, table: list[tuple[str, float]]) -> str:
    return rng.choices([v for v, _ in table], [w for _, w in table])[0]


def _attempt_plan(rng: random.Random, nodes: list[str]) -> list[tuple[str, int, int, str]]:
    """(node, iteration, attempt, state) of one run's attempts."""
    plan = []
    for node in nodes:
        for iteration in range(rng.randint(2, 3) if node in LOOPING else 1):
            attempt = 1
            while attempt < 3 and rng.random() < 0.15:
                plan.append((node, iteration, attempt, "failed"))
                attempt += 1
            plan.append((node, iteration, attempt, "finished"))
    return plan


# Columns named: a migrated file's column order is the migrations' (columns added later come
# last), not the order of the schema's definition.
RUN_COLUMNS = (
    "run_id, workflow, workflow_hash, status, input_json, output_json, error, owner_epoch, "
    "owner_id, heartbeat_at_ms, cancel_requested, parent_run_id, parent_frame_no, "
    "max_checkpoint_bytes, clock, graph_json, lease_owner, lease_until_ms, created_at_ms, "
    "updated_at_ms"
)
RUN_INSERT = f"INSERT INTO tt_runs ({RUN_COLUMNS}) VALUES ({_marks(20)})"  # noqa: S608
FRAME_INSERT = (
    "INSERT INTO tt_frame_rows (run_id, frame_no, kind, node_id, iteration, attempt, sequence, "  # noqa: S608
    "content_hash, codec, version, purpose, agent_id, created_at_ms, size_bytes) "
    f"VALUES ({_marks(14)})"
)
"""A ref's checkpoint frame holds its hash, codec, version, purpose, agent, time and size."""


def generate(path: Path, runs: int, refs_per_run: int, seed: int = 7) -> dict[str, int]:
    """Fill a migrated SQLite file with ``runs`` runs of ``refs_per_run`` refs each."""
    smithers_tt.connect(f"sqlite:///{path}").close()  # the real schema, migrated
    rng = random.Random(seed)
    contents = _Contents(rng)
    conn = sqlite3.connect(path, isolation_level=None)
    # A bulk load of a scratch file: no journal, no fsync; WAL (the product's mode) comes back
    # at the end.
    conn.execute("PRAGMA journal_mode = OFF")
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute("PRAGMA cache_size = -262144")
    base_ms = 1_790_000_000_000
    run_rows: list[tuple] = []
    attempt_rows: list[tuple] = []
    ref_rows: list[tuple] = []
    frame_rows: list[tuple] = []
    history: list[tuple[str, list[tuple[str, str, int]]]] = []  # run -> its (hash, codec, v)
    totals = {"runs": 0, "attempts": 0, "refs": 0, "contents": 0}

    def flush(final: bool = False) -> None:
        if not final and len(ref_rows) < BATCH:
            return
        conn.execute("BEGIN")
        conn.executemany(RUN_INSERT, run_rows)
        conn.executemany(f"INSERT INTO tt_attempts VALUES ({_marks(17)})", attempt_rows)  # noqa: S608
        conn.executemany("INSERT INTO tt_checkpoint_contents VALUES (?,?,?,?)", contents.rows)
        conn.executemany(
            "INSERT INTO tt_checkpoint_refs (run_id, node_id, iteration, attempt, sequence, "
            "frame_no) VALUES (?,?,?,?,?,?)",
            ref_rows,
        )
        conn.executemany(FRAME_INSERT, frame_rows)
        conn.execute("COMMIT")
        totals["runs"] += len(run_rows)
        totals["attempts"] += len(attempt_rows)
        totals["refs"] += len(ref_rows)
        totals["contents"] += len(contents.rows)
        for rows in (run_rows, attempt_rows, ref_rows, frame_rows, contents.rows):
            rows.clear()

    for i in range(runs):
        now = base_ms + i * 60_000
        run_id = f"{now:011x}{i:010x}"
        workflow = rng.choice(list(WORKFLOWS))
        parent = rng.choice(history[-500:]) if history and rng.random() < 0.1 else None
        status = "failed" if rng.random() < 0.04 else "finished"
        plan = _attempt_plan(rng, WORKFLOWS[workflow])
        # Spread the run's refs over its attempts (every attempt publishes at least one).
        cuts = sorted(rng.sample(range(1, refs_per_run), len(plan) - 1))
        counts = [b - a for a, b in zip([0, *cuts], [*cuts, refs_per_run], strict=True)]
        mine: list[tuple[str, str, int]] = []
        frame_no = 0
        frame_rows.append((run_id, 0, "run_created", *(None,) * 9, now, None))
        inherited = list(parent[1]) if parent else []
        for (node, iteration, attempt, state), count in zip(plan, counts, strict=True):
            code, error = rng.choice(ERRORS) if state == "failed" else (None, None)
            resumed = (run_id, node, iteration, attempt - 1, 0) if attempt > 1 else (None,) * 5
            row = (run_id, node, iteration, attempt, state, 1, count, False, error, code)
            attempt_rows.append((*row, *resumed, now, now + 5_000))
            codec = _weighted(rng, CODECS)
            version = rng.choice((1, 1, 2, 3))
            previous: str | None = None
            for sequence in range(count):
                roll = rng.random()
                if inherited and roll < 0.5:  # a fork's early refs point at parent content
                    digest, codec, version = inherited.pop(0)
                elif previous is not None and roll < 0.30:  # unchanged state, same bytes
                    digest = previous
                elif contents.shared and roll < 0.48:  # a popular state (shared prompt)
                    digest, codec, version = rng.choice(contents.shared)
                else:
                    digest = contents.new(codec, version, now)
                    if rng.random() < 0.002:
                        contents.shared.append((digest, codec, version))
                purpose = _weighted(rng, PURPOSES)
                key = (run_id, node, iteration, attempt, sequence)
                frame_no += 1
                ref_rows.append((*key, frame_no))
                pin = (digest, codec, version, purpose, f"{node}-agent", now + sequence)
                frame_rows.append(
                    (run_id, frame_no, "checkpoint", *key[1:], *pin, contents.size[digest])
                )
                mine.append((digest, codec, version))
                previous = digest
        run_rows.append(
            (run_id, workflow, "0" * 64, status, "{}", None, None, 1, "bench:1", None, False)
            + ((parent[0], rng.randint(5, 60)) if parent else (None, None))
            + (None, frame_no + 1, None, None, None, now, now + 10_000)
        )
        end = "run_finished" if status == "finished" else "run_failed"
        frame_rows.append((run_id, frame_no + 1, end, *(None,) * 9, now, None))
        history.append((run_id, mine))
        flush()
    flush(final=True)
    conn.execute("ANALYZE")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.close()
    return totals


# --- the three questions -------------------------------------------------------------------

Q1_SQL = """
    SELECT codec, purpose, count(*) AS refs, sum(size_bytes) AS bytes
    FROM checkpoints GROUP BY codec, purpose ORDER BY codec, purpose
"""
Q2_SQL = """
    SELECT node_id, count(DISTINCT (run_id, iteration)) AS nodes, count(*) AS attempts,
           count(*) FILTER (WHERE state = 'failed') AS failed,
           count(*) / count(DISTINCT (run_id, iteration)) AS attempts_per_node,
           count(*) FILTER (WHERE state = 'failed') / count(*) AS failure_rate
    FROM attempts GROUP BY node_id ORDER BY node_id
"""


QUESTIONS = (
    "1. refs and bytes per codec and purpose",
    "2. attempts per node, failure rate",
    "3. dedup ratio per run",
)


def ours(lin: Any) -> dict[str, Callable[[], Any]]:
    """The three questions through a Lineage: one query each, answered as a DataFrame."""
    asks = (lambda: lin.sql(Q1_SQL), lambda: lin.sql(Q2_SQL), lambda: lin.dedup(by="run"))
    return dict(zip(QUESTIONS, asks, strict=True))


def _read(path: Path, sql: str) -> Any:
    import pandas as pd

    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return pd.read_sql(sql, conn)
    finally:
        conn.close()


_REFS = "SELECT {} FROM tt_checkpoint_refs JOIN tt_frames USING (run_id, frame_no)"
_ATTEMPTS = "SELECT run_id, node_id, iteration, state FROM tt_attempts"


def _q1(refs: Any) -> Any:
    return (
        refs.groupby(["codec", "purpose"], as_index=False)
        .agg(refs=("content_hash", "size"), bytes=("size_bytes", "sum"))
        .sort_values(["codec", "purpose"], ignore_index=True)
    )


def _q2(attempts: Any) -> Any:
    failed = attempts.assign(failed=attempts.state == "failed")
    out = failed.groupby("node_id", as_index=False).agg(
        attempts=("state", "size"), failed=("failed", "sum")
    )
    nodes = attempts.drop_duplicates(["run_id", "node_id", "iteration"]).groupby("node_id").size()
    out["nodes"] = out.node_id.map(nodes)
    out["attempts_per_node"] = out.attempts / out.nodes
    out["failure_rate"] = out.failed / out.attempts
    return out.sort_values("node_id", ignore_index=True)


def _q3(refs: Any) -> Any:
    both = refs[["run_id", "content_hash", "size_bytes"]].dropna(subset=["size_bytes"])
    logical = both.groupby("run_id").size_bytes.agg(["size", "sum"])
    distinct = both.drop_duplicates(["run_id", "content_hash"]).groupby("run_id").size_bytes
    out = logical.rename(columns={"size": "ref_count", "sum": "logical_bytes"})
    out["content_count"] = distinct.size()
    out["stored_bytes"] = distinct.sum()
    out["ratio"] = out.logical_bytes / out.stored_bytes
    return out.reset_index().sort_values("run_id", ignore_index=True)


def theirs_cold(path: Path) -> dict[str, Callable[[], Any]]:
    """The questions with ``pandas.read_sql`` of just the needed columns, then pandas."""
    return dict(
        zip(
            QUESTIONS,
            (
                lambda: _q1(_read(path, _REFS.format("codec, purpose, content_hash, size_bytes"))),
                lambda: _q2(_read(path, _ATTEMPTS)),
                lambda: _q3(_read(path, _REFS.format("run_id, content_hash, size_bytes"))),
            ),
            strict=True,
        )
    )


def theirs_warm(path: Path) -> tuple[float, dict[str, Callable[[], Any]]]:
    """Seconds to load every needed column once, and the questions on those DataFrames."""
    t0 = time.perf_counter()
    refs = _read(path, _REFS.format("run_id, codec, purpose, content_hash, size_bytes"))
    attempts = _read(path, _ATTEMPTS)
    seconds = time.perf_counter() - t0
    asks = (lambda: _q1(refs), lambda: _q2(attempts), lambda: _q3(refs))
    return seconds, dict(zip(QUESTIONS, asks, strict=True))


def _same(question: str, a: Any, b: Any) -> None:
    """Both paths must give the same answer (compared on their shared columns)."""
    shared = [c for c in a.columns if c in b.columns]
    left = a[shared].reset_index(drop=True)
    right = b[shared].reset_index(drop=True)
    for column in shared:
        x, y = left[column].tolist(), right[column].tolist()
        if x and isinstance(x[0], float):
            ok = all(math.isclose(p, q, rel_tol=1e-9) for p, q in zip(x, y, strict=True))
        else:
            ok = [_num(v) for v in x] == [_num(v) for v in y]
        if not ok:
            raise AssertionError(f"{question}: column {column} differs between the two paths")


def _num(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


def timed(fn: Callable[[], Any], repeats: int = REPEATS) -> tuple[float, Any]:
    """Median wall seconds of ``repeats`` calls, and the last result."""
    samples, result = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        samples.append(time.perf_counter() - t0)
    samples.sort()
    return samples[len(samples) // 2], result


@contextlib.contextmanager
def _store(runs: int = RUNS) -> Iterator[tuple[Path, dict[str, int], float]]:
    with scratch_dir("smithers-tt-bench-lineage-") as tmp:
        path = tmp / "store.db"
        t0 = time.perf_counter()
        totals = generate(path, runs, REFS_PER_RUN)
        yield path, totals, time.perf_counter() - t0


# --- cold: each question in a new process ------------------------------------------------

SIDES = ("pandas", "live", "cached")
"""pandas (``read_sql`` + pandas), a live lineage (DuckDB's sqlite scanner reading the
store), a snapshot lineage opened from the cache (``snapshot=True, cache=...``)."""


def cold_child() -> None:
    """One cold question in this (new) process: ``argv = [side, question 1-3, store, cache]``.
    Prints one JSON line: seconds to import, open and ask, CPU seconds, load, the answer."""
    t0, c0 = time.perf_counter(), time.process_time()
    side, number, path, cache = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3]), sys.argv[4]
    import pandas  # noqa: F401 (both sides answer with DataFrames: imported alike)

    question = QUESTIONS[number - 1] if number else ""
    status, answer, opened = None, None, 0.0
    imported = time.perf_counter() - t0
    if side == "pandas":
        ask = theirs_cold(path)[question]
    else:
        db = smithers_tt.connect(f"sqlite:///{path}", migrate_schema=False)
        t1, c1 = time.perf_counter(), time.process_time()
        options = {"snapshot": True, "cache": cache} if side != "live" else {}
        lin = db.lineage(**options)
        opened, status = time.perf_counter() - t1, lin.cache
        open_cpu = time.process_time() - c1
        ask = ours(lin)[question] if number else lambda: None
    t2, c2 = time.perf_counter(), time.process_time()
    answer = ask()
    asked, ask_cpu = time.perf_counter() - t2, time.process_time() - c2
    out = {
        "import": imported,
        "open": opened,
        "open_cpu": open_cpu if side != "pandas" else 0.0,
        "ask": asked,
        "ask_cpu": ask_cpu,
        "total": time.perf_counter() - t0,
        "cpu": time.process_time() - c0,
        "load": os.getloadavg()[0],
        "cache": status,
        "answer": None if answer is None else {c: answer[c].tolist() for c in answer.columns},
    }
    print(json.dumps(out), flush=True)


def _child(
    side: str, number: int, path: Path, cache: Path, root: Path | None = None
) -> dict[str, Any]:
    """:func:`cold_child` in a new process, importing smithers_tt from ``root`` (this
    checkout by default)."""
    code = "from benchmarks.bench_lineage import cold_child; cold_child()"
    argv = [sys.executable, "-c", code, side, str(number), str(path), str(cache)]
    root = root or Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def compare_opens(
    before: str,
    rounds: int = ROUNDS,
    runs: int = RUNS,
    jobs: list[tuple[str, int]] | None = None,
) -> None:
    """Opening and Q1-Q3 cold (a new process each), this checkout against the checkout
    ``before`` (e.g. ``git archive <commit> | tar -x -C DIR``), interleaved in ``rounds``
    rounds on one generated store of ``runs`` runs: ``jobs``, by default the cached snapshot
    (opened from one cache both share: its format is unchanged) and the live lineage's open
    (``(side, question)``, question 0: open only). Run:
    ``python -c "from benchmarks.bench_lineage import compare_opens; compare_opens('DIR')"``.
    """
    trees = {"before": Path(before).resolve(), "after": Path(__file__).resolve().parent.parent}
    if jobs is None:
        jobs = [("cached", n) for n in (0, 1, 2, 3)] + [("live", 0), ("live", 2)]
    with _store(runs) as (path, totals, build_s):
        note(
            f"store: {totals['refs']:,} refs, {path.stat().st_size / 1e6:,.0f} MB ({build_s:.0f} s)"
        )
        from smithers_tt.lineage import _cache

        time.sleep(_cache.QUIET_SECONDS + 0.5)
        cache = path.parent / "cache"
        built = _child("cached", 0, path, cache, trees["after"])
        if built["cache"] != "stored":
            raise AssertionError(f"the snapshot was not cached: {built['cache']}")
        found: dict[tuple[str, str, int], list[dict]] = {}
        for _ in range(rounds):
            for side, number in jobs:
                answers = {}
                for tree in ("before", "after"):
                    got = _child(side, number, path, cache, trees[tree])
                    if side == "cached" and got["cache"] != "hit":
                        raise AssertionError(f"{tree} read the store: {got['cache']}")
                    answers[tree] = got.pop("answer")
                    found.setdefault((side, tree, number), []).append(got)
                if answers["before"] != answers["after"]:
                    raise AssertionError(f"{side} Q{number}: the answers differ")
    rows = []
    for side, number in jobs:
        b, a = found[(side, "before", number)], found[(side, "after", number)]
        for what in ("open", "open_cpu", "ask", "ask_cpu", "total", "cpu"):
            if number == 0 and what.startswith("ask"):
                continue
            ratios = sorted(x[what] / y[what] for x, y in zip(b, a, strict=True) if y[what])
            loads = sorted(x["load"] for x in b + a)
            rows.append(
                [
                    f"{side} {'open only' if number == 0 else f'Q{number}'}",
                    what,
                    _median([x[what] for x in b]),
                    _median([x[what] for x in a]),
                    f"{_median(ratios):.2f}x ({ratios[0]:.2f}-{ratios[-1]:.2f})" if ratios else "",
                    f"{loads[0]:.1f}-{loads[-1]:.1f}",
                ]
            )
    print_table(
        f"Before / after, each in a new process, {rounds} interleaved rounds (median seconds; "
        "the ratio is before over after within each round)",
        ["process", "what", "before", "after", "before/after (range)", "load"],
        rows,
    )


def cold_rounds(path: Path, cache: Path, rounds: int) -> dict[tuple[str, int], list[dict]]:
    """``rounds`` rounds; in each, every question asked by every side in a new process, the
    sides interleaved. The cached side's snapshot is taken once before (its cost reported)."""
    import pandas as pd

    found: dict[tuple[str, int], list[dict]] = {}
    for _ in range(rounds):
        for number in (1, 2, 3):
            answers = {}
            for side in SIDES:
                got = _child(side, number, path, cache)
                if side == "cached" and got["cache"] != "hit":
                    raise AssertionError(f"the cached side read the store: {got['cache']}")
                answers[side] = pd.DataFrame(got.pop("answer"))
                found.setdefault((side, number), []).append(got)
            for side in ("live", "cached"):
                _same(QUESTIONS[number - 1], answers[side], answers["pandas"])
    return found


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def _cold_table(found: dict[tuple[str, int], list[dict]], what: str) -> list[list[Any]]:
    """Per question and lineage side: pandas and ours (median ``what`` seconds), the speedup
    of each round (same round, pandas over ours), and the goals."""
    rows = []
    for number, question in enumerate(QUESTIONS, 1):
        theirs = found[("pandas", number)]
        for side in ("live", "cached"):
            mine = found[(side, number)]
            ratios = sorted(t[what] / m[what] for t, m in zip(theirs, mine, strict=True))
            ours_s = _median([m[what] for m in mine])
            loads = sorted(x["load"] for x in theirs + mine)
            rows.append(
                [
                    question,
                    side,
                    _median([t[what] for t in theirs]),
                    ours_s,
                    _median([t["ask_cpu" if what == "ask" else "cpu"] for t in theirs]),
                    _median([m["ask_cpu" if what == "ask" else "cpu"] for m in mine]),
                    f"{_median(ratios):.1f}x ({ratios[0]:.1f}-{ratios[-1]:.1f})",
                    f"{loads[0]:.1f}-{loads[-1]:.1f}",
                    verdict(ours_s < GOAL_SECONDS),
                    verdict(_median(ratios) >= GOAL_SPEEDUP),
                ]
            )
    return rows


# --- the floor: what reading the needed columns costs ----------------------------------------

NEEDED = {
    1: {
        "tt_checkpoint_refs": "run_id node_id iteration attempt sequence frame_no",
        "tt_frames": "run_id frame_no kind node_id iteration attempt sequence codec purpose "
        "size_bytes",
    },
    2: {"tt_attempts": "run_id node_id iteration state"},
    3: {
        "tt_checkpoint_refs": "run_id node_id iteration attempt sequence frame_no",
        "tt_frames": "run_id frame_no kind node_id iteration attempt sequence content_hash "
        "size_bytes",
    },
}
"""The store columns each question reads (a ref is checked against its frame's key)."""

_TEXT = {"run_id", "node_id", "kind", "codec", "purpose", "content_hash", "state"}


def _decode_sql(table: str, columns: str, length: str, scan: str) -> str:
    terms = [f"{length}({c})" if c in _TEXT else c for c in columns.split()]
    return f"SELECT sum({' + '.join(terms)}) FROM {scan}"  # noqa: S608 (constants)


def floor(path: Path) -> list[list[Any]]:
    """Per question: CPU seconds SQLite itself spends decoding the needed columns (its C code,
    ``sum(length(...))``), CPU seconds DuckDB's sqlite scanner spends on them (1 thread), its
    wall seconds with every thread, and what binding ``tt_frames`` costs (the scanner runs
    ``SELECT MIN(ROWID), MAX(ROWID)``, a full scan, at every bind)."""
    from smithers_tt.lineage._connect import literal, load_extension, new_connection

    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    one, every = new_connection(threads=1), new_connection()
    for con in (one, every):
        load_extension(con, "sqlite_scanner")
    rows = []
    for number, tables in NEEDED.items():
        sqlite_cpu = scan_cpu = scan_wall = 0.0
        for table, columns in tables.items():
            c = time.process_time()
            conn.execute(_decode_sql(table, columns, "length", table)).fetchall()
            sqlite_cpu += time.process_time() - c
            scan = f"sqlite_scan({literal(str(path))}, {literal(table)})"
            query = _decode_sql(table, columns, "strlen", scan)
            c = time.process_time()
            one.execute(query).fetchall()
            scan_cpu += time.process_time() - c
            t = time.perf_counter()
            every.execute(query).fetchall()
            scan_wall += time.perf_counter() - t
        rows.append([QUESTIONS[number - 1], sqlite_cpu, scan_cpu, scan_wall])
    t = time.perf_counter()
    one.execute(f"SELECT * FROM sqlite_scan({literal(str(path))}, 'tt_frames') LIMIT 0")  # noqa: S608
    bind = time.perf_counter() - t
    note(f"binding tt_frames through the scanner (a MIN/MAX(ROWID) full scan): {bind:.3f} s")
    conn.close()
    return rows


def main() -> None:
    """Generate the store, answer the three questions every way, print the figures."""
    import duckdb
    import pandas as pd

    from smithers_tt.lineage import _cache

    note(
        f"duckdb {duckdb.__version__}, pandas {pd.__version__}, {os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.1f} at start{' (QUICK)' if QUICK else ''}"
    )
    with _store() as (path, totals, build_s):
        note(
            f"store: {totals['runs']:,} runs, {totals['attempts']:,} attempts, "
            f"{totals['refs']:,} refs, {totals['contents']:,} distinct contents, "
            f"{path.stat().st_size / 1e6:,.0f} MB SQLite file (generated in {build_s:.0f} s)"
        )
        time.sleep(_cache.QUIET_SECONDS + 0.5)  # the cache keeps snapshots of quiet stores only
        cache = path.parent / "cache"
        built = _child("cached", 0, path, cache)
        if built["cache"] != "stored":
            raise AssertionError(f"the snapshot was not cached: {built['cache']}")
        found = cold_rounds(path, cache, ROUNDS)
        floors = floor(path)
        db = smithers_tt.connect(f"sqlite:///{path}", migrate_schema=False)
        try:
            load_pd, warm_asks = theirs_warm(path)
            warm, open_snap = _compare(db, warm_asks, snapshot=True)
        finally:
            db.close()
    headers = ["question", "lineage", "pandas s", "lineage s", "pandas CPU", "lineage CPU"]
    headers += ["speedup (range)", "load", "< 1 s", ">= 10x"]
    print_table(
        f"Cold, asking only (each question in a new process, {ROUNDS} interleaved rounds, "
        "median; the speedup is pandas over lineage within each round)",
        headers,
        _cold_table(found, "ask"),
    )
    print_table(
        "Cold, whole process (import, open, ask): same rounds",
        headers,
        _cold_table(found, "total"),
    )
    opens = {
        side + tail: _median([x["open" + tail] for n in (1, 2, 3) for x in found[(side, n)]])
        for side in SIDES[1:]
        for tail in ("", "_cpu")
    }
    note(
        f"opening: live {opens['live']:.2f} s, cached {opens['cached']:.2f} s (median wall; "
        f"CPU {opens['live_cpu']:.2f} / {opens['cached_cpu']:.2f} s); the "
        f"cached snapshot was taken once, in {built['open']:.1f} s ({built['cpu']:.1f} CPU s, "
        f"load {built['load']:.1f})"
    )
    budget = {q: _median([x["ask"] for x in found[("pandas", n)]]) / GOAL_SPEEDUP
              for n, q in enumerate(QUESTIONS, 1)}  # fmt: skip
    print_table(
        "The floor of the live path: reading the needed columns, nothing else (seconds)",
        ["question", "10x budget", "SQLite decode CPU", "scanner CPU (1 thread)", "scanner wall"],
        [[r[0], budget[r[0]], *r[1:]] for r in floors],
    )
    print_table(
        "Warm: data loaded once (pandas DataFrames in memory vs db.lineage(snapshot=True)), "
        f"median of {REPEATS}, seconds",
        ["question", "pandas s", "lineage s", "speedup", "< 1 s", ">= 10x"],
        warm,
    )
    note(
        f"one-off loads: pandas.read_sql of every needed column {load_pd:.2f} s; "
        f"db.lineage(snapshot=True) {open_snap:.2f} s (every table, no content bytes)"
    )
    note(f"load average {os.getloadavg()[0]:.1f} at the end (2 cores: above 2 means contention)")


def _compare(
    db: smithers_tt.Database, pandas_asks: dict[str, Callable[[], Any]], *, snapshot: bool
) -> tuple[list[list[Any]], float]:
    t0 = time.perf_counter()
    lin = db.lineage(snapshot=snapshot)
    opened = time.perf_counter() - t0
    rows: list[list[Any]] = []
    with lin:
        if not snapshot:
            note(f"lineage reader: {lin.reader} ({lin.extension})")
        for question, ask in ours(lin).items():
            pd_s, expected = timed(pandas_asks[question])
            ours_s, got = timed(ask)
            _same(question, got, expected)
            speedup = pd_s / ours_s
            rows.append(
                [
                    question,
                    pd_s,
                    ours_s,
                    f"{speedup:.1f}x",
                    verdict(ours_s < GOAL_SECONDS),
                    verdict(speedup >= GOAL_SPEEDUP),
                ]
            )
    return rows, opened
