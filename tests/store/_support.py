"""Helpers shared by the store tests: checkpoints, row counts, raw SQL and child processes."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import sqlalchemy as sa

import smithers_tt as st
from smithers_tt.store import AttemptKey, CheckpointRef, Fence, Store
from smithers_tt.store.backend._schema import refs as refs_table


def checkpoint(n: Any = 0, *, codec: str = "test", version: int = 1) -> st.AgentCheckpoint:
    """A small checkpoint whose payload (and so whose content hash) is determined by ``n``."""
    return st.AgentCheckpoint(codec, version, {"n": n})


def count(db: st.Database, table: str, **where: Any) -> int:
    """Rows of ``table`` (optionally only those whose columns equal ``where``)."""
    t = sa.table(table, *(sa.column(c) for c in where))
    stmt = sa.select(sa.func.count()).select_from(t)
    for name, value in where.items():
        stmt = stmt.where(t.c[name] == value)
    return db.engine.transaction(lambda conn: conn.execute(stmt).scalar_one(), write=False)


def execute(db: st.Database, sql: str, **params: Any) -> int:
    """Run raw SQL in a write transaction, bypassing the store; return the affected rows."""
    return db.engine.transaction(lambda conn: conn.execute(sa.text(sql), params).rowcount)


def orphan(db: st.Database, cp: st.AgentCheckpoint) -> str:
    """Publish ``cp`` in a throwaway run, then delete that run outright (its attempts, refs and
    frames cascade away) so that only the content row remains, reached by nothing."""
    store = db.store
    _, fence = store.create_run("throwaway")
    key = store.start_attempt(fence, "node").key
    ref = store.publish(fence, key, cp)
    execute(db, "DELETE FROM tt_runs WHERE run_id = :r", r=fence.run_id)
    assert count(db, "tt_checkpoint_contents", content_hash=ref.content_hash) == 1
    return ref.content_hash


def refs_of(db: st.Database, run_id: str, **filters: Any) -> list[CheckpointRef]:
    """Every ref of a run (walking all pages)."""
    out: list[CheckpointRef] = []
    cursor = None
    while True:
        page = db.store.list_refs(run_id, limit=1000, cursor=cursor, **filters)
        out.extend(page.items)
        cursor = page.next_cursor
        if cursor is None:
            return out


def attempt_args(fence: Fence, key: AttemptKey) -> list[str]:
    """Command-line arguments that let a child process rebuild a fence and an attempt key."""
    return [fence.run_id, str(fence.epoch), key.node_id, str(key.iteration), str(key.attempt)]


def run_together(code: str, argvs: list[list[str]], tmp: Path, timeout: float = 500) -> list[Any]:
    """Run ``python -c code`` once per argv, released at the same moment; return their outputs.

    ``code`` runs after the imports with ``args`` (its argv), ``wait_for_go()`` (call it once
    set up: it tells the parent it is ready and blocks until every child is) and ``emit(obj)``
    (the child's single JSON result). A child that fails fails the test with its stderr.
    """
    go = tmp / f"go-{time.monotonic_ns()}"
    prelude = textwrap.dedent(
        f"""
        import json, os, sys, time
        args = sys.argv[1:]
        def wait_for_go():
            print("ready", flush=True)
            while not os.path.exists({str(go)!r}):
                time.sleep(0.001)
        def emit(obj):
            print(json.dumps(obj), flush=True)
        """
    )
    script = prelude + textwrap.dedent(code)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for argv in argvs
    ]
    try:
        for proc in procs:
            line = proc.stdout.readline()
            if line.strip() != "ready":
                _, err = proc.communicate(timeout=timeout)
                raise AssertionError(f"a child failed before the start: {line}{err}")
        go.touch()
        results = []
        for proc in procs:
            out, err = proc.communicate(timeout=timeout)
            assert proc.returncode == 0, f"a child failed (exit {proc.returncode}):\n{err}"
            results.append(json.loads(out.strip().splitlines()[-1]))
        return results
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def squat_next_sequence(store: Store, fence: Fence, node_id: str) -> None:
    """Write, behind the store's back, a ref of attempt 1 of ``node_id`` at sequence 1 (the
    one the allocator hands out next after one publish): the database then refuses the next
    publish of that attempt with a duplicate key."""
    squatter = {"run_id": fence.run_id, "node_id": node_id, "iteration": 0, "attempt": 1}
    squatter |= {"sequence": 1, "frame_no": store.get_run(fence.run_id).clock}
    store.engine.transaction(lambda conn: conn.execute(refs_table.insert().values(**squatter)))
