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


OLD_KINDS = [
    ("run_created", "running", None),
    ("run_claimed", "running", None),
    ("run_finished", "finished", '{"error":null,"output":{}}'),
]
"""The frames of a finished run as :func:`rewound_run` writes them (kind, state, data)."""


def rewound_run(
    conn: sa.Connection, run_id: str, cuts: list[int] | None = None, written: int = 0
) -> list[dict]:
    """A finished run written as a store before migration 0020 kept its rewinds: its frames
    (``OLD_KINDS``, repeated claims in between to make it longer), rewound at each of
    ``cuts`` in turn (default: to frame 1), the frames above each cut moved to
    ``tt_rewound_frames`` for undo; then ``written`` claim frames written on top (which puts
    every rewind out of undo's reach). The tables are those the store's revision made,
    reflected. Returns the frames as they were before the rewinds."""
    cuts = [1] if cuts is None else cuts
    old = sa.MetaData()
    old.reflect(conn, only=["tt_runs", "tt_frames", "tt_rewinds", "tt_rewound_frames"])
    frames_t, rewound_t = old.tables["tt_frames"], old.tables["tt_rewound_frames"]
    kinds = OLD_KINDS[:2] + [OLD_KINDS[1]] * max(0, max(cuts, default=1) - 1) + OLD_KINDS[2:]
    frames = [
        {"run_id": run_id, "frame_no": no, "kind": kind, "created_at_ms": 1, "state": state,
         "data_json": data}
        for no, (kind, state, data) in enumerate(kinds)
    ]  # fmt: skip
    clock = len(frames) - 1
    conn.execute(
        sa.insert(old.tables["tt_runs"]).values(
            run_id=run_id, workflow="w", status="interrupted" if cuts else "finished",
            owner_epoch=2, cancel_requested=False, clock=cuts[-1] if cuts else clock,
            created_at_ms=1, updated_at_ms=1,
        )
    )  # fmt: skip
    conn.execute(sa.insert(frames_t), frames[: (cuts[-1] if cuts else clock) + 1])
    for n, cut in enumerate(cuts):
        rewind = f"{run_id}-rw{n}"
        conn.execute(
            sa.insert(old.tables["tt_rewinds"]).values(
                rewind_id=rewind, run_id=run_id, from_clock=clock, to_frame=cut,
                status="finished" if n == 0 else "interrupted", output_json="{}", error=None,
                created_at_ms=1 + n,
            )
        )  # fmt: skip
        above = [dict(f, rewind_id=rewind) for f in frames[cut + 1 : clock + 1]]
        conn.execute(sa.insert(rewound_t), above)
        clock = cut
    top = [
        {"run_id": run_id, "frame_no": clock + 1 + n, "kind": "run_claimed", "state": "running",
         "created_at_ms": 2}
        for n in range(written)
    ]  # fmt: skip
    if top:
        conn.execute(sa.insert(frames_t), top)
        conn.execute(
            old.tables["tt_runs"].update().where(old.tables["tt_runs"].c.run_id == run_id)
            .values(clock=clock + written, status="running")
        )  # fmt: skip
    return frames
