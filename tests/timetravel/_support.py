"""Helpers of the time-travel tests: live state read back, runs built in bulk, raw SQL."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa

import smithers_tt as st
from smithers_tt.checkpoint import AgentCheckpoint
from smithers_tt.engine import GenerateRequest, Workflow
from smithers_tt.store import Frame
from smithers_tt.store._frames import frame_row
from smithers_tt.store._records import now_ms
from smithers_tt.store.backend import _schema as S
from smithers_tt.store.ledger._live import insert_rows
from smithers_tt.timetravel import Snapshot

TOPIC = {"topic": "bee"}


# --- comparing live tables with snapshots ---------------------------------------------------


def snapshot_view(snap: Snapshot) -> dict[str, Any]:
    """What a snapshot shows, in the shape :func:`live_view` reads from the live tables."""
    return {
        "status": snap.status,
        "nodes": {k: (n.state, n.last_attempt, n.output) for k, n in snap.nodes.items()},
        "attempts": {
            k: (a.state, a.resumed_from, a.error, a.error_code, a.discard_resume)
            for k, a in snap.attempts.items()
        },
        "refs": {k: dataclasses.replace(r, run_id="") for k, r in snap.refs.items()},
    }


def live_view(db: st.Database, run_id: str) -> dict[str, Any]:
    """The run's live nodes, attempts and refs, read through the run API: the store's live
    tables, or for a fork by reference not materialised yet, what it inherits."""
    run = db.get_run(run_id)
    return {
        "status": run.status,
        "nodes": {
            (n.node_id, n.iteration): (n.state, n.last_attempt, n.output) for n in run.nodes()
        },
        "attempts": {
            (a.key.node_id, a.key.iteration, a.key.attempt): (
                a.state,
                a.resumed_from,
                a.error,
                a.error_code,
                a.discard_resume,
            )
            for a in run.attempts()
        },
        "refs": {
            (r.node_id, r.iteration, r.attempt, r.sequence): dataclasses.replace(r, run_id="")
            for r in run.checkpoints()
        },
    }


def restored_view(snap: Snapshot) -> dict[str, Any]:
    """What the live tables hold after a rewind to (or a fork at) ``snap``: exactly its nodes,
    attempts and refs (the run status is not compared: a restored run is not running)."""
    return without_status(snapshot_view(snap))


def without_status(view: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in view.items() if k != "status"}


def capture_live(db: st.Database) -> tuple[dict[int, dict[str, Any]], Callable[[], None]]:
    """Record the live state after every frame this database commits (by frame number).

    Returns the dict that fills up and a function that stops the recording.
    """
    seen: dict[int, dict[str, Any]] = {}

    def listener(frame: Frame) -> None:
        seen[frame.frame_no] = live_view(db, frame.run_id)

    db.store.listeners.append(listener)
    return seen, lambda: db.store.listeners.remove(listener)


_JOINT = {
    # (this frame, the next frame): the part of the live state only the next one changes
    ("attempt_finished", "node_state"): "nodes",  # an attempt's end with its node's end
    ("node_state", "attempt_started"): "attempts",  # a node turning running with its attempt
    ("checkpoint", "attempt_finished"): "attempts",  # a result checkpoint with the end
    ("checkpoint", "checkpoint"): "attempts",  # the result and the session, with the end
}


def joint_frames(frames: dict[int, Frame]) -> dict[int, str]:
    """The frames committed together with the next one (an attempt's end and its node's end;
    a node turning running and its first attempt's start, for the same node and iteration;
    an attempt's result checkpoint and its end), each with the parts of the state (joined by
    ``+``) that only later frames of the same commit change: the live state between them
    never existed, so it is never observed."""
    joint: dict[int, str] = {}
    for n in sorted(frames, reverse=True):  # a checkpoint's parts include its end's
        f, nxt = frames[n], frames.get(n + 1)
        part = None if nxt is None else _JOINT.get((f.kind, nxt.kind))
        if part is None or (f.node_id, f.iteration) != (nxt.node_id, nxt.iteration):
            continue
        if part == "nodes" and f.attempt != nxt.attempt:
            continue  # a node's end names the attempt that ended it
        if part == "attempts" and f.kind == "node_state" and f.state != "running":
            continue
        if f.kind == "checkpoint":
            if f.attempt != nxt.attempt:
                continue
            after = joint.get(n + 1)
            if nxt.kind == "checkpoint" and after is None:
                continue  # two checkpoints committed apart
            part = "attempts" if after is None else f"attempts+{after}"
        joint[n] = part
    return joint


def check_joint_frame(
    snap: Snapshot, before: Snapshot, after_live: dict[str, Any], part: str
) -> None:
    """Frame ``snap`` committed together with the next ones: its snapshot is the committed
    state with ``part`` (what only the next frames changed) still as it was one frame before."""
    view, earlier = snapshot_view(snap), snapshot_view(before)
    assert view == {**after_live, **{p: earlier[p] for p in part.split("+")}}, snap.frame_no


# --- raw tables -----------------------------------------------------------------------------

LIVE_TABLES = ("tt_runs", "tt_nodes", "tt_attempts", "tt_checkpoint_refs", "tt_frame_rows")
VOLATILE = {"updated_at_ms", "heartbeat_at_ms"}


def table_rows(db: st.Database, table: str, run_id: str | None = None) -> list[tuple[Any, ...]]:
    """Every row of a table (optionally of one run), sorted, as plain tuples."""
    t = {**S.metadata.tables, **S.views.tables}[table]
    stmt = sa.select(t)
    if run_id is not None:
        stmt = stmt.where(t.c.run_id == run_id)
    with db.engine.sa.connect() as conn:
        rows = conn.execute(stmt).all()
    return sorted((tuple(r) for r in rows), key=repr)


def dump(db: st.Database, run_id: str | None = None) -> dict[str, list[tuple[Any, ...]]]:
    """Every live table (and content) as rows: compare before and after an operation."""
    out = {name: table_rows(db, name, run_id) for name in LIVE_TABLES}
    out["tt_checkpoint_contents"] = table_rows(db, "tt_checkpoint_contents")
    return out


def count(db: st.Database, table: str, where: str = "", **params: Any) -> int:
    with db.engine.sa.connect() as conn:
        sql = f"SELECT count(*) FROM {table}" + (f" WHERE {where}" if where else "")  # noqa: S608
        return int(conn.execute(sa.text(sql), params).scalar_one())


HIDDEN = "tt_frame_rows f"
"""With :data:`ABOVE_CLOCK`, what :func:`count` counts of the frames a rewind hid (stored
above their run's clock, for its undo, until the run's next frame drops them)."""
ABOVE_CLOCK = "f.frame_no > (SELECT r.clock FROM tt_runs r WHERE r.run_id = f.run_id)"


def hidden(db: st.Database, run_id: str | None = None) -> int:
    """How many frames a rewind hid (of ``run_id``, or of every run) are stored."""
    where = ABOVE_CLOCK + ("" if run_id is None else " AND f.run_id = :r")
    return count(db, HIDDEN, where, r=run_id)


def execute(db: st.Database, sql: str, **params: Any) -> None:
    """Raw SQL in a transaction of its own (to corrupt data on purpose)."""
    with db.engine.sa.begin() as conn:
        conn.execute(sa.text(sql), params)


def compact_state(db: st.Database, run_id: str) -> dict[str, Any]:
    """A cheap projection of a (large) run's live state: clock, status, frame count, and the
    keys and states of its nodes, attempts and refs."""
    with db.engine.sa.connect() as conn:
        run = conn.execute(
            sa.select(S.runs.c.clock, S.runs.c.status).where(S.runs.c.run_id == run_id)
        ).one_or_none()
        if run is None:
            return {"exists": False}
        r, a, n, f = S.refs, S.attempts, S.nodes, S.frames
        return {
            "exists": True,
            "clock": run.clock,
            "status": run.status,
            "frames": conn.execute(
                sa.select(sa.func.count(), sa.func.max(f.c.frame_no)).where(f.c.run_id == run_id)
            ).one()[:],
            "refs": set(
                conn.execute(  # a live ref's hash is on the checkpoint frame it points at
                    sa.select(r.c.node_id, r.c.attempt, r.c.sequence, f.c.content_hash)
                    .join(f, (f.c.run_id == r.c.run_id) & (f.c.frame_no == r.c.frame_no))
                    .where(r.c.run_id == run_id)
                ).all()
            ),
            "attempts": set(
                conn.execute(
                    sa.select(a.c.node_id, a.c.attempt, a.c.state).where(a.c.run_id == run_id)
                ).all()
            ),
            "nodes": set(
                conn.execute(sa.select(n.c.node_id, n.c.state).where(n.c.run_id == run_id)).all()
            ),
        }


def compact_snapshot(snap: Snapshot, *, clock: int, frames: tuple[int, int]) -> dict[str, Any]:
    """What :func:`compact_state` reads after a rewind to ``snap`` (or a fork at it)."""
    return {
        "exists": True,
        "clock": clock,
        "status": "interrupted" if snap.status in ("running", "cancelled") else snap.status,
        "frames": frames,
        "refs": {(k[0], k[2], k[3], r.content_hash) for k, r in snap.refs.items()},
        "attempts": {(k[0], k[2], a.state) for k, a in snap.attempts.items()},
        "nodes": {(k[0], n.state) for k, n in snap.nodes.items()},
    }


# --- runs built in bulk ---------------------------------------------------------------------


def fast_commits(db: st.Database) -> None:
    """Stop waiting for the disk at each commit, on every connection opened from now on.

    For tests that make thousands of small transactions to build history and measure
    something other than durability; crash tests never use it.
    """
    db.engine.dispose()

    @sa.event.listens_for(db.engine.sa, "connect")
    def _no_fsync(dbapi_conn: Any, _record: Any) -> None:
        cur = dbapi_conn.cursor()
        try:
            if db.engine.is_sqlite:
                cur.execute("PRAGMA synchronous = OFF")
            else:
                cur.execute("SET synchronous_commit = off")
        finally:
            cur.close()
        if not db.engine.is_sqlite:
            dbapi_conn.commit()


def bulk_content(node: str, step: int) -> Any:
    return AgentCheckpoint("bulk.state", 1, {"node": node, "step": step, "pad": "x" * 40}).encode()


def build_bulk_run(db: st.Database, *, nodes: int, refs_per_node: int) -> str:
    """A finished run of ``nodes`` independent nodes with ``refs_per_node`` checkpoints each
    (one attempt per node, distinct content per checkpoint), written in a few bulk
    statements with exactly the frames, attempts and refs the store would have written."""
    graph = {f"n{i:05d}": [] for i in range(nodes)}
    record, _ = db.store.create_run("bulk", {"nodes": nodes}, graph=graph)
    run_id = record.run_id
    stamp = now_ms()
    frames: list[dict[str, Any]] = []
    attempts: list[dict[str, Any]] = []
    refs: list[dict[str, Any]] = []
    node_rows: list[dict[str, Any]] = []
    contents: dict[str, dict[str, Any]] = {}
    clock = 0

    def frame(kind: str, **fields: Any) -> None:
        nonlocal clock
        clock += 1
        frames.append(frame_row(Frame(run_id, clock, kind, created_at_ms=stamp, **fields)))

    for node in graph:
        frame("attempt_started", node_id=node, iteration=0, attempt=1, state="in_progress")
        for step in range(refs_per_node):
            enc = bulk_content(node, step)
            contents[enc.content_hash] = {
                "content_hash": enc.content_hash,
                "data": enc.data,
                "size_bytes": enc.size,
                "created_at_ms": stamp,
            }
            frame(
                "checkpoint",
                node_id=node,
                iteration=0,
                attempt=1,
                sequence=step,
                content_hash=enc.content_hash,
                codec=enc.codec,
                version=1,
                purpose="progress",
                data={"size": enc.size},
            )
            # A live ref is its key and the checkpoint frame that holds the rest.
            refs.append(
                {"run_id": run_id, "node_id": node, "iteration": 0, "attempt": 1}
                | {"sequence": step, "frame_no": clock}
            )
        frame(
            "attempt_finished",
            node_id=node,
            iteration=0,
            attempt=1,
            state="finished",
            data={"error": None, "error_code": None, "discard_resume": False},
        )
        attempts.append(
            {
                "run_id": run_id,
                "node_id": node,
                "iteration": 0,
                "attempt": 1,
                "state": "finished",
                "owner_epoch": 1,
                "next_sequence": refs_per_node,
                "discard_resume": False,
                "error": None,
                "error_code": None,
                "resumed_run_id": None,
                "resumed_node_id": None,
                "resumed_iteration": None,
                "resumed_attempt": None,
                "resumed_sequence": None,
                "started_at_ms": stamp,
                "finished_at_ms": stamp,
            }
        )
        frame("node_state", node_id=node, iteration=0, attempt=1, state="finished")
        node_rows.append(
            {
                "run_id": run_id,
                "node_id": node,
                "iteration": 0,
                "state": "finished",
                "last_attempt": 1,
                "output_json": None,
                "updated_at_ms": stamp,
            }
        )
    frame("run_finished", state="finished", data={"output": None, "error": None})

    def work(conn: sa.Connection) -> None:
        c = S.contents
        have: set[str] = set()
        hashes = list(contents)
        for start in range(0, len(hashes), 1000):
            part = hashes[start : start + 1000]
            have.update(
                conn.execute(sa.select(c.c.content_hash).where(c.c.content_hash.in_(part)))
                .scalars()
                .all()
            )
        insert_rows(conn, c, [v for k, v in contents.items() if k not in have])
        insert_rows(conn, S.attempts, attempts)
        insert_rows(conn, S.refs, refs)
        insert_rows(conn, S.nodes, node_rows)
        insert_rows(conn, S.frame_rows, frames)
        conn.execute(
            S.runs.update()
            .where(S.runs.c.run_id == run_id)
            .values(status="finished", clock=clock, owner_epoch=2)
        )

    db.engine.transaction(work)
    return run_id


# --- agents that remember what they were given -------------------------------------------


def record_requests(wf: Workflow, task_id: str) -> list[GenerateRequest]:
    """Wrap a task's agent so every request it gets is kept (with a copy of its
    ``resume_checkpoint`` taken before the agent can mutate it); the workflow signature does
    not change."""
    seen: list[GenerateRequest] = []
    task = wf.tasks[task_id]
    inner = task.agent.generate

    async def generate(request: GenerateRequest) -> Any:
        cp = request.resume_checkpoint
        seen.append(dataclasses.replace(request, resume_checkpoint=cp.clone() if cp else None))
        return await inner(request)

    task.agent = dataclasses.replace(task.agent, generate=generate)
    return seen
