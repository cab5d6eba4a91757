"""Forks by reference, and materialising them (a fork's own copy of what it inherits).

A fork records its parent and frame and copies nothing it inherits; :func:`materialize` gives
it base frames and live rows of its own (see :mod:`._at` for how it reads its parent until
then). :func:`expand` and :func:`check_nodes` name the nodes a fork or a reset starts afresh.
"""

from __future__ import annotations

from typing import Any

from smithers_tt._ids import owner_id
from smithers_tt._labels import check_labels
from smithers_tt.checkpoint import AgentCheckpoint, canonical_bytes, size_limit
from smithers_tt.errors import InvalidArgument, RunNotFound, SnapshotInvalid
from smithers_tt.store import CheckpointRef, Frame, RunRecord, Store, now_ms
from smithers_tt.store.for_timetravel import RunState, Travel, new_run_id
from smithers_tt.timetravel._at import (
    checked_frame,
    inherited_base,
    reset_by_fork,
    run_level_state,
    snapshot_at,
)
from smithers_tt.timetravel._lease import transaction, why
from smithers_tt.timetravel._materialize import (
    check_contents,
    fork_rows,
    write_base_frames,
)
from smithers_tt.timetravel._snapshot import AttemptView, Snapshot, apply

MAX_FRAME_NO = 2**63 - 1
"""Above every frame number (the largest integer the frame tables hold)."""


def expand(graph: dict[str, list[str]] | None, names: set[str], dependents: bool) -> set[str]:
    """``names`` and, with ``dependents``, every task of ``graph`` that needs one of them."""
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


def check_nodes(run: RunState, names: set[str], snap: Snapshot | None) -> None:
    """Refuse (:class:`InvalidArgument`) names that are no task of the run."""
    graph = run.graph
    known = set(graph or {})
    if snap is not None:
        known |= {k[0] for k in snap.nodes} | {k[0] for k in snap.attempts}
    unknown = sorted(names - known)
    if unknown:
        raise InvalidArgument(f"run {run.run_id} has no task(s) {unknown}; it has {sorted(known)}")


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
    labels: dict[str, str | None] | None = None,
) -> RunRecord:
    """Create a child run whose frame 0 is the parent's frame ``frame_no``; return it (as
    :meth:`Store.get_run` would read it). The child carries its parent's labels, with
    ``labels`` over them (a ``None`` value drops an inherited one).

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
    overrides = check_labels(labels, removals=True)  # refused before anything is read
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
        check_nodes(parent, named, snap)
        gone = expand(graph, named, dependents)
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
            detail={"child": child_id, "reset": sorted(gone), **why(reason)},
            inherits=True,
            labels=overrides,
        )

    # Only an edit reads the parent's snapshot: a plain fork needs no more memory.
    return transaction(store, work, roomy=bool(checkpoints))


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
    return transaction(store, lambda tx, exact: materialize_in(tx, run_id, exact=exact))


def materialize_in(tx: Travel, run_id: str, *, exact: bool = False) -> bool:
    """:func:`materialize` inside the transaction ``tx`` (the run row is locked)."""
    run = tx.run_state(run_id, lock=True)
    if run is None:
        raise RunNotFound(f"no run {run_id!r}")
    if run.base is None:
        return False
    start = _starting_state(tx, run, exact=exact)
    check_contents(tx, start)
    tx.materialize(fork_rows(tx, start, run_id))
    return True


def materialized_rows(store: Store) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """What materialising each fork by reference of ``store`` would write, read without
    writing: by run id, the rows of ``tt_frames`` (base frames), ``tt_nodes``,
    ``tt_attempts`` and ``tt_checkpoint_refs`` that :func:`materialize` writes, computed by
    the same code (:meth:`Travel.fork_rows`), in one read-only transaction. What the lineage
    shows for such forks."""

    def read(tx: Travel, exact: bool) -> dict[str, dict[str, list[dict[str, Any]]]]:
        found = {}
        for run_id in tx.inheriting_runs():
            run = tx.run_state(run_id)
            if run is None or run.base is None:  # deleted or materialised since
                continue
            start = _starting_state(tx, run, exact=exact)
            found[run_id] = tx.fork_rows_read(fork_rows(tx, start, run_id))
        return found

    return transaction(store, read, roomy=False, write=False)


def _starting_state(tx: Travel, run: RunState, *, exact: bool) -> Snapshot:
    """What the fork by reference ``run`` starts from once materialised: its parent's state
    at the fork frame without the nodes it reset, with its edited checkpoints (its frames
    below 0) on top, refs left in the database where they can be.

    Raises:
        SnapshotInvalid: a frame after 0 changed its live state (the store is inconsistent).
    """
    run_id = run.run_id
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
    return start


_NO_ROWS = frozenset(
    {"cancel_requested", "breakpoints_set", "run_cancelled", "run_released", "run_paused",
     "run_continued"}
)  # fmt: skip
"""Frames that change no live node, attempt or ref (what a fork by reference may have after
frame 0 before it is materialised)."""
