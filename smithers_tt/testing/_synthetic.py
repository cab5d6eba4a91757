"""A large, realistic run written in bulk: for benchmarks, tests and trying the debugger at scale.

Executing a 10,000-frame run through the engine takes minutes on a durable SQLite file (every
checkpoint is its own fsync'd commit). :func:`large_run` computes the same history (frames,
and the live nodes, attempts and refs they fold to) in Python and has the store write it in
one transaction (:func:`smithers_tt.store.write_history`), so it looks exactly like a finished
run to everything that reads it: snapshots, diff, rewind, fork and replay work.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from smithers_tt.checkpoint import AgentCheckpoint, EncodedCheckpoint
from smithers_tt.store import Frame, now_ms, write_history
from smithers_tt.timetravel import fold, live_rows

if TYPE_CHECKING:  # pragma: no cover
    from smithers_tt.database import Database

CODEC = "synthetic.state"
NODES = ("plan", "research", "write", "review")


class _Writer:
    """Collects the frames and contents of the synthetic history."""

    def __init__(self, run_id: str, total: int) -> None:
        self.run_id = run_id
        self.total = total
        self.frames: list[Frame] = []
        self.contents: dict[str, EncodedCheckpoint] = {}
        self.stamp = now_ms()

    @property
    def next_no(self) -> int:
        return len(self.frames) + 1  # frame 0 is the run_created frame

    @property
    def room(self) -> int:
        """Frames still to write, the final run_finished included."""
        return self.total - self.next_no

    def add(self, kind: str, **fields: Any) -> None:
        self.frames.append(
            Frame(
                self.run_id, self.next_no, kind, created_at_ms=self.stamp + self.next_no, **fields
            )
        )

    def checkpoint(
        self, node: str, iteration: int, attempt: int, sequence: int, purpose: str, payload: Any
    ) -> None:
        encoded = AgentCheckpoint(CODEC, 1, payload).encode()
        self.contents.setdefault(encoded.content_hash, encoded)
        self.add(
            "checkpoint",
            node_id=node,
            iteration=iteration,
            attempt=attempt,
            sequence=sequence,
            content_hash=encoded.content_hash,
            codec=CODEC,
            version=1,
            purpose=purpose,
            agent_id=f"{node}-agent",
            data={"size": encoded.size},
        )


def _payload(node: str, iteration: int, step: int, width: int) -> dict[str, Any]:
    digest = hashlib.sha256(f"{node}:{iteration}:{step}".encode()).hexdigest()
    return {
        "node": node,
        "iteration": iteration,
        "step": step,
        "notes": [f"note {i} of {node}: {digest[i % 48 : i % 48 + 16]}" for i in range(step % 6)],
        "scratch": (digest * (1 + width // 64))[:width],
        "tokens": 37 * step + iteration,
    }


def _history(w: _Writer, nodes: tuple[str, ...], width: int) -> None:
    block = 0
    while w.room > 1:
        node = nodes[block % len(nodes)]
        iteration = block // len(nodes)
        block += 1
        retry = block % 5 == 0 and w.room > 30
        overhead = 4 + (2 if retry else 0)
        planned = 4 + block % 9
        if w.room - 1 - overhead - planned < 10:  # too little left for another block: take it all
            planned = w.room - 1 - overhead
        if planned < 1:
            overhead, retry, planned = 4, False, w.room - 1 - 4
            if planned < 1:  # not even a minimal block fits: pad with checkpoints of node 0
                break
        w.add("node_state", node_id=node, iteration=iteration, state="running")
        attempt, sequence, step = 1, 0, 0
        w.add("attempt_started", node_id=node, iteration=iteration, attempt=1, state="in_progress")
        fail_at = planned // 2 if retry else -1
        for i in range(planned):
            last = i == planned - 1
            purpose = "turn" if last else "progress"
            if last and block % 7 == 3:
                purpose = "schema-correction"
            payload = _payload(node, iteration, step, width)
            w.checkpoint(node, iteration, attempt, sequence, purpose, payload)
            sequence += 1
            step += 1
            if i == fail_at:
                w.add(
                    "attempt_finished",
                    node_id=node,
                    iteration=iteration,
                    attempt=attempt,
                    state="failed",
                    data={
                        "error": "TimeoutError: the model did not answer in 30 s (synthetic)",
                        "error_code": "TimeoutError",
                        "discard_resume": False,
                    },
                )
                resumed = [w.run_id, node, iteration, attempt, sequence - 1]
                attempt, sequence = attempt + 1, 0
                w.add(
                    "attempt_started",
                    node_id=node,
                    iteration=iteration,
                    attempt=attempt,
                    state="in_progress",
                    data={"resumed_from": resumed},
                )
        w.add(
            "attempt_finished",
            node_id=node,
            iteration=iteration,
            attempt=attempt,
            state="finished",
            data={"error": None, "error_code": None, "discard_resume": False},
        )
        w.add(
            "node_state",
            node_id=node,
            iteration=iteration,
            attempt=attempt,
            state="finished",
            data={"output": {"node": node, "iteration": iteration, "steps": step}},
        )


def large_run(
    db: Database,
    frames: int = 10_000,
    *,
    nodes: tuple[str, ...] = NODES,
    payload_bytes: int = 200,
    workflow: str = "synthetic",
) -> str:
    """Write a finished run with exactly ``frames`` frames and return its id.

    Nodes run one after the other in loop iterations; each attempt publishes a few
    ``progress`` checkpoints and a final ``turn`` (sometimes ``schema-correction``) one; every
    fifth node fails its first attempt halfway and resumes in a second attempt.
    """
    if frames < 8:
        raise ValueError("a synthetic run needs at least 8 frames")
    graph = {node: ([nodes[i - 1]] if i else []) for i, node in enumerate(nodes)}
    record, _ = db.store.create_run(workflow, {"frames": frames}, graph=graph)
    w = _Writer(record.run_id, frames)
    _history(w, nodes, payload_bytes)
    snap = fold(record.run_id, [Frame(record.run_id, 0, "run_created", state="running"), *w.frames])
    output = snap.outputs()
    w.add("run_finished", state="finished", data={"output": output, "error": None})
    snap = fold(record.run_id, [Frame(record.run_id, 0, "run_created", state="running"), *w.frames])
    node_rows, attempt_rows = live_rows(snap, record.run_id)
    write_history(
        db.engine,
        record.run_id,
        w.frames,
        w.contents.values(),
        nodes=node_rows,
        attempts=attempt_rows,
        refs=snap.refs.values(),
        status="finished",
        output=output,
    )
    return record.run_id
