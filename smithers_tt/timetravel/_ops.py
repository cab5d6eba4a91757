"""Rewind, fork and reset: each one transaction, destructive ones under the run's lease.

Every operation reads the run's frames, folds them into the snapshot it needs, checks that
snapshot is whole (all content stored, sizes within the ceiling, every ref owned by an
attempt) and only then changes anything, with a bounded number of statements per thousand
rows. A rewind of the last few frames of a long history, and its undo, read and change only
what those frames touched instead (:mod:`._delta`); a rewind further back keeps the live rows
at or below its cut and takes away the rest (:func:`._materialize.cut_live_state`). A crash
in the middle leaves the transaction uncommitted: the run is untouched.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from smithers_tt._ids import owner_id
from smithers_tt.checkpoint import AgentCheckpoint, canonical_bytes, size_limit
from smithers_tt.errors import (
    ConfirmationRequired,
    ForkPointRewound,
    InvalidArgument,
    LeaseBusy,
    NothingToUndo,
    RunNotFound,
    SmithersError,
    SnapshotInvalid,
)
from smithers_tt.store import (
    CheckpointRef,
    Frame,
    Refold,
    RunRecord,
    RunState,
    Store,
    Travel,
    new_run_id,
    now_ms,
    travel,
)
from smithers_tt.timetravel import _delta
from smithers_tt.timetravel._at import (
    checked_frame,
    inherited_base,
    load_refs,
    reset_by_fork,
    run_level_state,
    snapshot_at,
)
from smithers_tt.timetravel._materialize import (
    check_contents,
    cut_live_state,
    replace_live_state,
    write_base_frames,
)
from smithers_tt.timetravel._snapshot import AttemptView, LaterSnapshot, Snapshot, apply
from smithers_tt.timetravel._undo import refusal

T = TypeVar("T")

MAX_FRAME_NO = 2**63 - 1
"""Above every frame number (the largest integer the frame tables hold)."""

LEASE_MS = 60_000
"""How long a time-travel lease holds if its holder dies without releasing it."""

LIVE_OWNER_MS = 10_000
"""A running run whose owner heartbeat is younger than this is being executed: hands off."""


@dataclass(frozen=True)
class Lease:
    """A held time-travel lease on one run."""

    run_id: str
    token: str


def acquire_lease(
    store: Store,
    run_id: str,
    operation: str,
    *,
    force: bool = False,
    lease_ms: int | None = None,
) -> Lease:
    """Take the run's durable lease for a destructive operation.

    The lease holds for ``lease_ms`` (default :data:`LEASE_MS`) if its holder dies without
    releasing it; after that anyone may take it. The run is first read without waiting for
    any lock, so an operation that starts while another one holds the lease fails at once;
    one that had to wait for another to finish (both started together) fails too, because
    the run changed under it (its owner epoch moved on): it never acts on a state its caller
    did not see.

    Raises:
        RunNotFound: no such run.
        LeaseBusy: another operation holds the lease or changed the run meanwhile, or a live
            process executes the run (``force=True`` overrides the last, never the others).
    """
    token = f"{owner_id()}:{operation}:{secrets.token_hex(4)}"
    hold = LEASE_MS if lease_ms is None else lease_ms
    if type(hold) is not int or hold <= 0:
        raise InvalidArgument(f"lease_ms must be a positive int, got {lease_ms!r}")

    def check(row: RunState | None, now: int) -> RunState:
        if row is None:
            raise RunNotFound(f"no run {run_id!r}")
        if row.lease_owner is not None and (row.lease_until_ms or 0) > now:
            raise LeaseBusy(
                f"run {run_id} is busy: {row.lease_owner} holds its time-travel lease for "
                f"{((row.lease_until_ms or now) - now) / 1000:.0f} s more; try again later",
                run_id=run_id,
            )
        alive = row.status == "running" and now - (row.heartbeat_at_ms or 0) < LIVE_OWNER_MS
        if alive and not force:
            raise LeaseBusy(
                f"run {run_id} is being executed by {row.owner_id} (heartbeat "
                f"{(now - (row.heartbeat_at_ms or 0)) / 1000:.1f} s ago); cancel it first, "
                "or pass force=True if that process is gone",
                run_id=run_id,
            )
        return row

    seen = check(travel(store.engine, lambda tx: tx.run_state(run_id), write=False), now_ms())

    def work(tx: Travel) -> None:
        row = check(tx.run_state(run_id, lock=True), now_ms())
        if row.owner_epoch != seen.owner_epoch:
            raise LeaseBusy(
                f"run {run_id} changed while this {operation} waited for it (another "
                "operation or a new owner took it); look at it again, then retry",
                run_id=run_id,
            )
        tx.take_lease(run_id, token, now_ms() + hold)

    travel(store.engine, work)
    return Lease(run_id, token)


def release_lease(store: Store, lease: Lease) -> None:
    """Give the lease back (a no-op if it expired and someone else took it)."""
    travel(store.engine, lambda tx: tx.release_lease(lease.run_id, lease.token))


def _check_lease(tx: Travel, lease: Lease) -> RunState:
    row = tx.run_state(lease.run_id, lock=True)
    if row is None:  # deleted after the lease expired (retention)
        raise RunNotFound(f"no run {lease.run_id!r}")
    if row.lease_owner != lease.token:
        raise LeaseBusy(
            f"the lease on run {lease.run_id} expired and was taken over; nothing was changed",
            run_id=lease.run_id,
        )
    return row


def _transaction(store: Store, work: Callable[[Travel, bool], T], *, roomy: bool = True) -> T:
    """Run ``work(tx, exact=False)`` (set-based) in one transaction; if it raises
    :class:`Refold` (that transaction rolled back, nothing changed), run
    ``work(tx, exact=True)`` (full fold) in a new one. ``roomy``: with the larger memory a
    rewind or copy of a long history needs (see :func:`travel`)."""

    def attempt(exact: bool) -> T:
        return travel(store.engine, lambda tx: work(tx, exact), roomy_memory=roomy)

    try:
        return attempt(False)
    except Refold:
        return attempt(True)


def _why(reason: str | None) -> dict[str, str]:
    """The audit entry's ``reason`` (why a person did it), when one was given."""
    if reason is None or not str(reason).strip():
        return {}
    if not isinstance(reason, str):
        raise InvalidArgument(f"reason must be text, not {type(reason).__name__}")
    return {"reason": reason.strip()[:2000]}


def _live_status(status: str) -> str:
    return "interrupted" if status in ("running", "cancelled") else status


def rewind(
    store: Store,
    run_id: str,
    frame_no: int,
    *,
    confirm: bool = False,
    force: bool = False,
    reason: str | None = None,
) -> Snapshot:
    """Put a run back to frame ``frame_no`` in place; return the restored snapshot.

    Restores exactly the nodes, attempts and refs visible at that frame, removes every frame,
    attempt and ref above it (including attempt numbers reused after a reset), fences any
    owner with a new epoch and records an audit row (with ``reason``, why, when given). Other
    runs and shared content are untouched. Runs forked at a frame above ``frame_no`` keep
    working (their base frames restate the parent's state) but their fork point is gone:
    that takes ``force=True``, and the fork tree shows it (:attr:`ForkEdge.fork_point_rewound`).

    Raises:
        ConfirmationRequired: ``confirm`` is not True (nothing changes).
        ForkPointRewound: runs were forked above ``frame_no`` and ``force`` is not True.
        LeaseBusy: another operation or a live process holds the run.
        FrameNotFound, SnapshotInvalid, CheckpointMissing: nothing changes.
    """
    if confirm is not True:
        raise ConfirmationRequired(
            f"rewinding run {run_id} to frame {frame_no} deletes everything after it; "
            "pass confirm=True to do it"
        )
    lease = acquire_lease(store, run_id, "rewind", force=force)
    return _leased(
        store,
        lease,
        lambda: _transaction(
            store,
            lambda tx, exact: _rewind(
                tx, run_id, frame_no, lease, exact, reason, force, later=_later(store)
            ),
        ),
    )


def _later(store: Store) -> Callable[[str, int], Snapshot]:
    """A snapshot of a run at a frame that reads its frames on first access, in a
    transaction of its own (a :class:`LaterSnapshot`)."""

    def snapshot(run_id: str, frame_no: int) -> Snapshot:
        return LaterSnapshot(
            run_id,
            frame_no,
            lambda: travel(store.engine, lambda tx: snapshot_at(tx, run_id, frame_no), write=False),
        )

    return snapshot


def _leased(store: Store, lease: Lease, operation: Callable[[], T]) -> T:
    """Run ``operation`` under ``lease``, whose own transaction gives the lease back as it
    commits: only a failed operation releases it here. A committed operation is never
    reported as failed because the release after it could not reach the database, and a
    release that fails after a failed operation does not hide its error (the lease then
    expires by itself)."""
    try:
        return operation()
    except BaseException:
        with suppress(SmithersError):
            release_lease(store, lease)
        raise


def _cut_forks(tx: Travel, run_id: str, frame_no: int, force: bool, exact: bool) -> None:
    """Before a rewind of ``run_id`` to ``frame_no``: raise :class:`ForkPointRewound` when
    runs were forked from it above ``frame_no`` (the rewind would remove their fork point);
    with ``force``, materialise those that read their history from it instead."""
    cut = [row for row in tx.fork_children([run_id]) if (row[2] or 0) > frame_no]
    if not cut:
        return
    if force:
        names = {row[0] for row in cut}
        for child in tx.inheriting_children([run_id]):
            if child in names:
                materialize_in(tx, child, exact=exact)
        return
    names = [row[0] for row in cut]
    shown = ", ".join(f"{row[0]} (at frame {row[2]})" for row in cut[:10])
    more = f" and {len(cut) - 10} more" if len(cut) > 10 else ""
    raise ForkPointRewound(
        f"rewinding run {run_id} to frame {frame_no} removes the frame {len(cut)} run(s) "
        f"were forked at: {shown}{more}. They keep working (they restate their parent's "
        "state); pass force=True (--force) to rewind anyway; nothing was changed",
        run_id=run_id,
        frame_no=frame_no,
        children=names[:100],
    )


def _rewind(
    tx: Travel,
    run_id: str,
    frame_no: int,
    lease: Lease,
    exact: bool,
    reason: str | None = None,
    force: bool = False,
    later: Callable[[str, int], Snapshot] | None = None,
) -> Snapshot:
    """Rewind inside the transaction: see :func:`rewind`.

    When the frames above ``frame_no`` are few next to the history (and ``later`` builds the
    snapshot to return), only the rows they touched change (:mod:`._delta`). Otherwise the
    snapshot at ``frame_no`` is folded from the whole history (which checks every frame) and
    the live rows are put back to it: by taking away what first appears above the cut when
    no reset lies above it (:func:`cut_live_state`, which checks the rows it keeps), else by
    a full replace. The snapshot returned is read from the frames on first access, by
    ``later``, unless only the full fold could tell it.
    """
    run = _check_lease(tx, lease)
    materialize_in(tx, run_id, exact=exact)  # a fork by reference gets its own rows first
    tail = None if exact or later is None else _delta.tail_of(tx, run_id, frame_no, run.clock)
    if tail is not None and later is not None:
        _cut_forks(tx, run_id, frame_no, force, exact)
        delta = _delta.rewound(tx, run_id, frame_no, tail)
        _delta.write(tx, run_id, frame_no, delta, rewind=True)
        end = delta.snap if tail.run_level else None
        tx.rewind_run(
            run_id,
            clock=frame_no,
            status=_live_status(run.status if end is None else end.status),
            output=None if end is None else end.output,
            error=None if end is None else end.error,
            kept_ending=end is None,
        )
        tx.audit(run_id, "rewind", frame_no, owner_id(), {"from_frame": run.clock, **_why(reason)})
        return later(run_id, frame_no)
    snap = snapshot_at(tx, run_id, frame_no, refs=False, exact=exact)
    _cut_forks(tx, run_id, frame_no, force, exact)
    check_contents(tx, snap)
    if not cut_live_state(tx, snap, run_id, run.clock):
        replace_live_state(tx, snap, run_id)
    tx.rewind_run(
        run_id,
        clock=frame_no,
        status=_live_status(snap.status),
        output=snap.output,
        error=snap.error,
    )
    tx.audit(run_id, "rewind", frame_no, owner_id(), {"from_frame": run.clock, **_why(reason)})
    if later is not None and snap.stored_refs is not None:
        return later(run_id, frame_no)  # its refs are read only if someone looks
    load_refs(tx, snap)  # what this returns: the refs now live
    return snap


def undo_rewind(
    store: Store, run_id: str, *, force: bool = False, reason: str | None = None
) -> Snapshot:
    """Undo the newest rewind of ``run_id``: its frames come back as they were, the run gets
    back its clock, output and error (a run that was ``running`` comes back ``interrupted``)
    and the live state is rebuilt from the frames; return the restored snapshot. Under the
    run's lease like a rewind, one transaction, audited (``undo_rewind``). Calling it again
    undoes the rewind before that one. Once frames are written on top of a rewind, neither it
    nor any rewind before it can be undone (what they removed followed a history that is
    gone): :func:`~smithers_tt.store.collect_garbage` releases them.

    Raises:
        NothingToUndo: no rewind of the run is kept (never rewound, undone already, or
            collected by retention), or new frames were written after it; the message is
            :func:`undo_refusal`'s.
        LeaseBusy: another operation or a live process holds the run.
    """
    lease = acquire_lease(store, run_id, "undo_rewind", force=force)

    def work(tx: Travel, exact: bool) -> Snapshot:
        run = _check_lease(tx, lease)
        kept = tx.kept_rewinds(run_id)
        why = refusal(run_id, run.clock, kept)
        if why is not None:
            raise NothingToUndo(f"{why}; nothing was changed", run_id=run_id)
        kept = kept[0]
        tx.undo_rewind(kept, _live_status(kept.status))
        tail = None if exact else _delta.tail_of(tx, run_id, kept.to_frame, kept.from_clock)
        if tail is not None:  # only what the frames put back touched changes
            _delta.write(
                tx,
                run_id,
                kept.to_frame,
                _delta.undone(tx, run_id, kept.to_frame, tail),
                rewind=False,
            )
            _audit_undo(tx, run_id, kept, reason)
            return later(run_id, kept.from_clock)
        snap = snapshot_at(tx, run_id, kept.from_clock, refs=False, exact=exact)
        check_contents(tx, snap)
        replace_live_state(tx, snap, run_id)
        load_refs(tx, snap)
        _audit_undo(tx, run_id, kept, reason)
        return snap

    later = _later(store)
    return _leased(store, lease, lambda: _transaction(store, work))


def _audit_undo(tx: Travel, run_id: str, kept: Any, reason: str | None) -> None:
    tx.audit(
        run_id,
        "undo_rewind",
        kept.from_clock,
        owner_id(),
        {"from_frame": kept.to_frame, **_why(reason)},
    )


def _expand(graph: dict[str, list[str]] | None, names: set[str], dependents: bool) -> set[str]:
    if not dependents or not graph:
        return set(names)
    found = set(names)
    changed = True
    while changed:
        changed = False
        for task, needs in graph.items():
            if task not in found and found.intersection(needs):
                found.add(task)
                changed = True
    return found


def _check_nodes(run: RunState, names: set[str], snap: Snapshot | None) -> None:
    graph = run.graph
    known = set(graph or {})
    if snap is not None:
        known |= {k[0] for k in snap.nodes} | {k[0] for k in snap.attempts}
    unknown = sorted(names - known)
    if unknown:
        raise InvalidArgument(f"run {run.run_id} has no task(s) {unknown}; it has {sorted(known)}")


def _without(snap: Snapshot, nodes: set[str]) -> Snapshot:
    stored = snap.stored_refs
    return replace(
        snap,
        nodes={k: v for k, v in snap.nodes.items() if k[0] not in nodes},
        attempts={k: v for k, v in snap.attempts.items() if k[0] not in nodes},
        refs={k: v for k, v in snap.refs.items() if k[0] not in nodes},
        stored_refs=None if stored is None else stored.without(nodes),
    )


def _newest_ref(tx: Travel, snap: Snapshot, node_id: str) -> CheckpointRef | None:
    """The newest ref of ``node_id`` at its highest iteration with refs, in ``snap``."""
    if snap.stored_refs is not None:
        return tx.newest_stored_ref(snap.stored_refs, node_id)
    last_iteration = max((k[1] for k in snap.refs if k[0] == node_id), default=0)
    return snap.newest_ref(node_id, last_iteration)


def _edit(
    tx: Travel,
    snap: Snapshot,
    node_id: str,
    checkpoint: AgentCheckpoint,
    limit: int,
    allow_new_format: bool,
    source: Snapshot,
) -> None:
    """Add to ``snap`` an attempt of ``node_id`` whose newest checkpoint is ``checkpoint``.

    ``source`` is the snapshot before its nodes were reset: the edit must keep the format
    of the node's newest checkpoint there.
    """
    if not isinstance(checkpoint, AgentCheckpoint):
        raise InvalidArgument(f"checkpoints[{node_id!r}] must be an AgentCheckpoint")
    iteration = max((k[1] for k in snap.attempts if k[0] == node_id), default=0)
    previous = _newest_ref(tx, source, node_id)
    if (
        previous is not None
        and not allow_new_format
        and (previous.codec, previous.version) != (checkpoint.codec, checkpoint.version)
    ):
        raise InvalidArgument(
            f"the edited checkpoint of {node_id!r} is {checkpoint.codec} v{checkpoint.version}"
            f" but the node's agent published {previous.codec} v{previous.version}; keep the "
            "format (or pass allow_new_format=True)"
        )
    encoded = checkpoint.encode(limit)
    stamp = now_ms()
    tx.insert_content(encoded, stamp)
    attempt = 1 + max((k[2] for k in snap.attempts if k[:2] == (node_id, iteration)), default=0)
    snap.attempts[(node_id, iteration, attempt)] = AttemptView(
        node_id,
        iteration,
        attempt,
        "finished",
        error_code="edited",
        started_at_ms=stamp,
        finished_at_ms=stamp,
    )
    snap.refs[(node_id, iteration, attempt, 0)] = CheckpointRef(
        snap.run_id,
        node_id,
        iteration,
        attempt,
        0,
        encoded.content_hash,
        encoded.codec,
        encoded.version,
        "progress",
        None,
        stamp,
    )


def fork(
    store: Store,
    run_id: str,
    frame_no: int,
    *,
    reset: list[str] | tuple[str, ...] = (),
    input: Any = None,
    checkpoints: dict[str, AgentCheckpoint] | None = None,
    dependents: bool = True,
    allow_new_format: bool = False,
    reason: str | None = None,
) -> RunRecord:
    """Create a child run whose frame 0 is the parent's frame ``frame_no``; return it (as
    :meth:`Store.get_run` would read it).

    The fork is made by reference: it records its parent and frame and copies nothing it
    inherits (no frame, attempt or ref), so its cost does not grow with the parent's history.
    Everything that reads it sees the parent's history up to ``frame_no`` (see
    :mod:`._at`); resuming it, resetting or rewinding it, or removing the frames it reads
    from its parent gives it its own copy first (:func:`materialize`). Nodes in ``reset``
    (and, with ``dependents``, the tasks that need them) start fresh; ``input`` replaces the
    run input; ``checkpoints`` gives a node an edited checkpoint to resume from (the node and
    its dependents run again): only those are written.
    """
    checkpoints = dict(checkpoints or {})
    override_input = input is not None
    if override_input:
        canonical_bytes(input)  # strict JSON, or CheckpointInvalid naming the path

    def work(tx: Travel, exact: bool) -> RunRecord:
        # Locked until the fork commits: a rewind of the parent (which locks it too) either
        # sees this fork, or has rewound before the fork frame is checked.
        parent, probed = tx.run_state_at(run_id, _probe_no(frame_no))
        if parent is None:
            raise RunNotFound(f"no run {run_id!r}")
        at = checked_frame(parent, frame_no)
        named = set(reset) | set(checkpoints)
        graph = parent.graph
        # The parent's snapshot is read only when an edit needs it (the format of the node's
        # newest checkpoint) or a named node is not in the workflow graph.
        snap = None
        if checkpoints or not named <= set(graph or {}):
            snap = snapshot_at(tx, run_id, frame_no, refs=False, exact=exact)
        state = run_level_state(parent, at, probed)
        _check_nodes(parent, named, snap)
        gone = _expand(graph, named, dependents)
        child_id = new_run_id()
        edits = Snapshot(child_id, -1)
        limit = size_limit(parent.max_checkpoint_bytes)
        for node_id, checkpoint in sorted(checkpoints.items()):
            assert snap is not None
            _edit(tx, edits, node_id, checkpoint, limit, allow_new_format, snap)
        status = (
            state.status if state.status in ("finished", "failed") and not gone else "interrupted"
        )
        child_input = input if override_input else state.input
        # A child that keeps its parent's ending (nothing reset) keeps its output and error too.
        ended = status == state.status
        output = state.output if ended else None
        error = state.error if ended else None
        stamp = now_ms()
        return tx.fork_run(
            parent,
            child_id,
            frame_no,
            status=status,
            input=child_input,
            output=output,
            error=error,
            first=Frame(
                child_id,
                0,
                "forked",
                state=status,
                created_at_ms=stamp,
                data={
                    "parent_run_id": run_id,
                    "parent_frame_no": frame_no,
                    "input": child_input,
                    "output": output,
                    "error": error,
                    "reset": sorted(gone),
                    "edited": sorted(checkpoints),
                },
            ),
            # Only the edited checkpoints (with their attempts) become frames of the fork.
            project=(lambda: write_base_frames(tx, edits, child_id)) if edits.refs else None,
            actor=owner_id(),
            detail={"child": child_id, "reset": sorted(gone), **_why(reason)},
            inherits=True,
        )

    # Only an edit reads the parent's snapshot: a plain fork needs no more memory.
    return _transaction(store, work, roomy=bool(checkpoints))


def _probe_no(frame_no: Any) -> int:
    """The frame number to probe the run-level frames at before ``frame_no`` is checked
    against the run (:func:`checked_frame` then refuses whatever is not a frame of it):
    the newest for ``None``, none for what is not a frame number the database can hold."""
    if frame_no is None:
        return MAX_FRAME_NO
    return frame_no if type(frame_no) is int and 0 <= frame_no <= MAX_FRAME_NO else -1


def materialize(store: Store, run_id: str) -> bool:
    """Give a fork by reference its own copy of what it inherits, in one transaction: base
    frames that restate its parent's state at the fork frame (as forks made before forks by
    reference have) and its live nodes, attempts and refs. From then on it reads nothing
    from its parent. Returns False (and changes nothing) for a run that has its own history
    already.

    Resuming, resetting or rewinding a fork by reference calls this first, and so does
    removing the frames it reads (deleting, pruning or rewinding its parent below the fork).
    """
    return _transaction(store, lambda tx, exact: materialize_in(tx, run_id, exact=exact))


def materialize_in(tx: Travel, run_id: str, *, exact: bool = False) -> bool:
    """:func:`materialize` inside the transaction ``tx`` (the run row is locked)."""
    run = tx.run_state(run_id, lock=True)
    if run is None:
        raise RunNotFound(f"no run {run_id!r}")
    if run.base is None:
        return False
    frames = tx.frames(run_id)
    start = inherited_base(tx, run, reset_by_fork(frames), exact=exact, refs=False)
    for frame in frames:  # the edited checkpoints, restated with the rest below
        if frame.frame_no < 0:
            apply(start, frame)
    changing = [f for f in frames if f.frame_no > 0 and f.kind not in _NO_ROWS]
    if changing:  # a fork by reference is claimed, reset or rewound only once materialised
        raise SnapshotInvalid(
            f"run {run_id} reads its parent's history but frame {changing[0].frame_no} "
            f"({changing[0].kind}) changed its live state; the store is inconsistent"
        )
    tx.delete_frames_below(run_id, 0)
    write_base_frames(tx, start, run_id)
    check_contents(tx, start)
    replace_live_state(tx, start, run_id, refs_from_base=True)
    tx.set_inherits(run_id, False)
    return True


_NO_ROWS = frozenset(
    {"cancel_requested", "breakpoints_set", "run_cancelled", "run_released", "run_paused",
     "run_continued"}
)  # fmt: skip
"""Frames that change no live node, attempt or ref (what a fork by reference may have after
frame 0 before it is materialised)."""


def reset(
    store: Store,
    run_id: str,
    node_id: str,
    *,
    dependents: bool = False,
    force: bool = False,
    reason: str | None = None,
) -> list[str]:
    """Retry a node from scratch: its attempts and refs leave the live state (frames keep
    them), its next attempt is number 1 and can never see their checkpoints. With
    ``dependents``, the tasks that need it (from the workflow graph) are reset too.
    Returns the reset node ids; the run becomes ``interrupted`` so ``resume`` runs them.
    """
    lease = acquire_lease(store, run_id, "reset", force=force)

    def work(tx: Travel) -> list[str]:
        run = _check_lease(tx, lease)
        materialize_in(tx, run_id)  # a fork by reference gets its own rows first
        snap = snapshot_at(tx, run_id, refs=False)
        _check_nodes(run, {node_id}, snap)
        gone = sorted(_expand(run.graph, {node_id}, dependents))
        tx.reset_nodes(run_id, node_id, gone)
        tx.audit(run_id, "reset", run.clock + 1, owner_id(), {"nodes": gone, **_why(reason)})
        return gone

    return _leased(store, lease, lambda: travel(store.engine, work))
