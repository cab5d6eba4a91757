"""Writing a snapshot back into the live tables, after checking it is whole.

The checks and the rows (what the live state and a fork's base frames are) are decided here;
the store writes them in bulk (:class:`smithers_tt.store.for_timetravel.Travel`).
"""

from __future__ import annotations

from typing import Any

from smithers_tt.checkpoint import MAX_CHECKPOINT_BYTES, canonical_bytes
from smithers_tt.errors import CheckpointMissing, SnapshotInvalid
from smithers_tt.store import now_ms
from smithers_tt.store.for_timetravel import ForkRows, Travel
from smithers_tt.timetravel._snapshot import Snapshot


def check_contents(tx: Travel, snap: Snapshot) -> None:
    """Every content the snapshot refers to is stored and within the size ceiling.

    Raises:
        CheckpointMissing: some content is gone (nothing is changed).
        SnapshotInvalid: some content is larger than any checkpoint may be.
    """
    hashes = sorted({ref.content_hash for ref in snap.refs.values()})
    found = tx.content_sizes(hashes)
    missing = [h for h in hashes if h not in found]
    if missing:
        raise CheckpointMissing(
            f"{len(missing)} checkpoint content(s) of run {snap.run_id} at frame "
            f"{snap.frame_no} are not stored (first {missing[0][:12]}); nothing was changed",
            missing=missing[:20],
        )
    oversized = [h for h, size in found.items() if size > MAX_CHECKPOINT_BYTES]
    if oversized:
        raise SnapshotInvalid(
            f"content {oversized[0][:12]} is larger than the 16 MiB checkpoint ceiling; "
            "refusing to restore it; nothing was changed"
        )
    for key in snap.refs:
        if key[:3] not in snap.attempts:
            raise SnapshotInvalid(
                f"checkpoint ref {key} of run {snap.run_id} belongs to no attempt visible at "
                f"frame {snap.frame_no}; nothing was changed"
            )


def live_rows(snap: Snapshot, run_id: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Rows of ``tt_nodes`` and ``tt_attempts`` for a snapshot (its refs are records).

    Attempts keep the state they had at the frame, exactly. One that was in progress stays
    ``in_progress`` under epoch 0, which no owner holds (the run's epoch only grows), so
    nothing can publish into it; the next claim ends it as ``interrupted`` with a frame, as it
    does after a crash, so later snapshots agree with the live tables.
    """
    stamp = now_ms()
    nodes = [
        {
            "run_id": run_id,
            "node_id": n.node_id,
            "iteration": n.iteration,
            "state": n.state,
            "last_attempt": n.last_attempt,
            "updated_at_ms": stamp,
            "output_json": None if n.output is None else canonical_bytes(n.output).decode(),
        }
        for n in snap.nodes.values()
    ]
    next_seq: dict[tuple[str, int, int], int] = {}
    if snap.stored_refs is not None:
        next_seq.update((k, v[1]) for k, v in snap.stored_refs.per_attempt.items())
    for node_id, iteration, attempt, sequence in snap.refs:
        key = (node_id, iteration, attempt)
        next_seq[key] = max(next_seq.get(key, 0), sequence + 1)
    attempts = []
    for key, a in snap.attempts.items():
        src = a.resumed_from
        attempts.append(
            {
                "run_id": run_id,
                "node_id": a.node_id,
                "iteration": a.iteration,
                "attempt": a.attempt,
                "state": a.state,
                "owner_epoch": 0,
                "next_sequence": next_seq.get(key, 0),
                "discard_resume": a.discard_resume,
                "error": a.error,
                "error_code": a.error_code,
                "resumed_run_id": src[0] if src else None,
                "resumed_node_id": src[1] if src else None,
                "resumed_iteration": src[2] if src else None,
                "resumed_attempt": src[3] if src else None,
                "resumed_sequence": src[4] if src else None,
                "started_at_ms": a.started_at_ms,
                "finished_at_ms": None if a.state == "in_progress" else (a.finished_at_ms or stamp),
            }
        )
    return nodes, attempts


def replace_live_state(
    tx: Travel, snap: Snapshot, run_id: str, *, refs_from_base: bool = False
) -> None:
    """Delete a run's live nodes, attempts and refs and write the snapshot's instead.

    Refs the snapshot left in the database (``stored_refs``) are copied from their
    checkpoint frames in the database; they never pass through Python. With
    ``refs_from_base``, every ref is copied from the run's own base frames instead (a fork
    just wrote them with :func:`write_base_frames`: they restate exactly ``snap``'s refs).

    Raises:
        Refold: fewer refs were copied than are visible (see
            :meth:`Travel.replace_live_state`).
    """
    nodes, attempts = live_rows(snap, run_id)
    tx.replace_live_state(
        run_id,
        nodes,
        attempts,
        snap.refs.values(),
        snap.stored_refs,
        refs_from_base=refs_from_base,
    )


def cut_live_state(tx: Travel, snap: Snapshot, run_id: str, clock: int) -> bool:
    """Put the live state of ``run_id`` (at ``clock``) back to ``snap`` by taking away what
    the frames above ``snap.frame_no`` added, keeping the rows at or below it; False (and
    nothing written) where only :func:`replace_live_state` can: refs the fold holds in
    Python, nothing above the cut (a rewind to the newest frame rebuilds the live state), or
    a ``reset`` above the cut (it removed rows the cut shows, which only a copy brings back).

    Leaves what :func:`replace_live_state` leaves (see
    :meth:`Travel.cut_live_state`: what it cannot vouch for raises :class:`Refold`).
    """
    stored = snap.stored_refs
    if stored is None or snap.refs or clock <= snap.frame_no:
        return False
    if tx.reset_after(run_id, snap.frame_no):
        return False
    nodes, attempts = live_rows(snap, run_id)
    tx.cut_live_state(stored, nodes, attempts)
    return True


def write_base_frames(tx: Travel, snap: Snapshot, run_id: str) -> int:
    """Write the frames numbered below 0 that restate ``snap`` as the starting history of
    ``run_id`` (frame 0 is the fork's own); return how many base frames there are: see
    :func:`base_frames`."""
    return tx.write_base_frames(tx.base_frames(run_id, *_restating(snap)))


def fork_rows(tx: Travel, snap: Snapshot, run_id: str) -> ForkRows:
    """What materialising ``run_id`` writes when it starts from ``snap``: base frames that
    restate it (attempts first, by key, each with what its start and end recorded; then the
    refs, those left in the database in the order they were published, then ``snap.refs`` by
    key; then nodes, by key; numbered densely up to -1: see :meth:`Travel.base_frames`), and
    the live rows it folds to (:func:`live_rows`, a ref per checkpoint base frame). Written by
    :meth:`Travel.materialize`, read without writing by :meth:`Travel.fork_rows_read`."""
    nodes, attempts = live_rows(snap, run_id)
    return tx.fork_rows(tx.base_frames(run_id, *_restating(snap)), nodes, attempts)


def _restating(snap: Snapshot) -> tuple[list[tuple[Any, ...]], Any, list[Any], list[Any]]:
    """What :meth:`Travel.base_frames` restates ``snap`` from: its attempts, the refs it left
    in the database, its refs, its nodes (each sorted by key)."""
    attempts = [
        (
            a.node_id,
            a.iteration,
            a.attempt,
            a.state,
            {
                "resumed_from": list(a.resumed_from) if a.resumed_from else None,
                "error": a.error,
                "error_code": a.error_code,
                "discard_resume": a.discard_resume,
                "finished_at_ms": a.finished_at_ms,
            },
            a.started_at_ms,
        )
        for a in sorted(snap.attempts.values(), key=lambda a: (a.node_id, a.iteration, a.attempt))
    ]
    refs = [snap.refs[key] for key in sorted(snap.refs)]
    nodes = [
        (n.node_id, n.iteration, n.last_attempt, n.state, n.output)
        for n in (snap.nodes[key] for key in sorted(snap.nodes))
    ]
    return attempts, snap.stored_refs, refs, nodes
