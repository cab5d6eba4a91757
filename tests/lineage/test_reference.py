"""The benchmark's three questions, answered by every lineage path (live, snapshot, a snapshot
kept in the cache and opened from it), equal answers computed another way: rows read with the
stdlib ``sqlite3`` driver and counted in plain Python. Stores generated as the benchmark
generates its 1M-ref store, at a few sizes and seeds."""

from __future__ import annotations

import sqlite3
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

import smithers_tt as st
from benchmarks import bench_lineage as bench
from smithers_tt.lineage import _cache

from .conftest import records


def reference(path: Path) -> dict[str, list[dict[str, Any]]]:
    """Q1-Q3 from the store's rows in Python (each ref's frame looked up by its number)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        frames = {
            (row[0], row[1]): row[2:]
            for row in conn.execute(
                "SELECT run_id, frame_no, kind, node_id, iteration, attempt, sequence, codec, "
                "purpose, content_hash, size_bytes FROM tt_frames"
            )
        }
        refs = conn.execute(
            "SELECT run_id, node_id, iteration, attempt, sequence, frame_no FROM tt_checkpoint_refs"
        ).fetchall()
        attempts = conn.execute("SELECT run_id, node_id, iteration, state FROM tt_attempts")
        attempts = attempts.fetchall()
    finally:
        conn.close()
    per_codec: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    per_run: dict[str, dict[str, list[int]]] = defaultdict(dict)
    for run_id, node_id, iteration, attempt, sequence, frame_no in refs:
        kind, *key, codec, purpose, content_hash, size = frames[(run_id, frame_no)]
        assert (kind, *key) == ("checkpoint", node_id, iteration, attempt, sequence)
        per_codec[(codec, purpose)][0] += 1
        per_codec[(codec, purpose)][1] += size
        per_run[run_id].setdefault(content_hash, [0, size])[0] += 1
    q1 = [
        {"codec": c, "purpose": p, "refs": n, "bytes": b}
        for (c, p), (n, b) in sorted(per_codec.items())
    ]
    nodes: dict[str, set[tuple[str, int]]] = defaultdict(set)
    tried: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for run_id, node_id, iteration, state in attempts:
        nodes[node_id].add((run_id, iteration))
        tried[node_id][0] += 1
        tried[node_id][1] += state == "failed"
    q2 = [
        {
            "node_id": node,
            "nodes": len(nodes[node]),
            "attempts": n,
            "failed": failed,
            "attempts_per_node": n / len(nodes[node]),
            "failure_rate": failed / n,
        }
        for node, (n, failed) in sorted(tried.items())
    ]
    q3 = []
    for run_id, contents in sorted(per_run.items()):
        logical = sum(n * size for n, size in contents.values())
        stored = sum(size for _, size in contents.values())
        q3.append(
            {
                "run_id": run_id,
                "ref_count": sum(n for n, _ in contents.values()),
                "content_count": len(contents),
                "logical_bytes": logical,
                "stored_bytes": stored,
                "ratio": logical / stored,
            }
        )
    return {"q1": q1, "q2": q2, "q3": q3}


def asked(lin: st.Lineage) -> dict[str, list[dict[str, Any]]]:
    """The three questions as the benchmark asks them."""
    return {
        key: records(ask())
        for key, ask in zip(("q1", "q2", "q3"), bench.ours(lin).values(), strict=True)
    }


@pytest.mark.parametrize(("runs", "refs_per_run", "seed"), [(20, 30, 1), (60, 40, 2), (150, 50, 3)])
def test_every_path_answers_the_benchmark_questions_as_plain_python(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, runs: int, refs_per_run: int, seed: int
) -> None:
    monkeypatch.setattr(_cache, "QUIET_SECONDS", 0.2)
    path = tmp_path / "store.db"
    totals = bench.generate(path, runs, refs_per_run, seed=seed)
    assert totals["refs"] == runs * refs_per_run
    expected = reference(path)
    assert len(expected["q3"]) == runs and sum(r["refs"] for r in expected["q1"]) == totals["refs"]
    time.sleep(0.3)  # the generated store ages past the (test's) quiet time
    db = st.connect(f"sqlite:///{path}", migrate_schema=False)
    try:
        paths = [
            ({}, None),
            ({"snapshot": True}, None),
            ({"snapshot": True, "cache": tmp_path / "cache"}, "stored"),
            ({"snapshot": True, "cache": tmp_path / "cache"}, "hit"),
        ]
        for options, cache in paths:
            with db.lineage(**options) as lin:
                assert lin.cache == cache
                assert asked(lin) == expected, options
    finally:
        db.close()
