"""Choosing the checkpoint (or native session) an attempt starts from."""

from __future__ import annotations

from dataclasses import dataclass

from smithers_tt.checkpoint import AgentCheckpoint, CheckpointMode, accepts
from smithers_tt.engine._agent import AgentSpec
from smithers_tt.errors import ForkIncompatible, InvalidArgument
from smithers_tt.store import ENDED, CheckpointRef, Fence, Store

SESSION_CODEC = "smithers.session"
"""Codec of the refs that record a native provider session id (purpose ``session``)."""


@dataclass(frozen=True)
class ResumePoint:
    """Where an attempt starts: a verified checkpoint in a mode, a session, or nothing."""

    ref: CheckpointRef | None = None
    checkpoint: AgentCheckpoint | None = None
    mode: CheckpointMode | None = None
    session: str | None = None


FRESH = ResumePoint()


def _scan(
    store: Store,
    agent: AgentSpec,
    run_id: str,
    node_id: str,
    iteration: int,
    mode: CheckpointMode,
    *,
    finished_only: bool = False,
) -> ResumePoint | None:
    """Newest ref of a node the agent consumes in ``mode``; older compatible ones are not
    hidden by a newer incompatible one. Content is verified before it is handed over."""
    finished = None
    if finished_only:
        finished = {
            a.key.attempt
            for a in store.list_attempts(run_id, node_id)
            if a.key.iteration == iteration and a.state == "finished"
        }
    session: ResumePoint | None = None
    for ref in store.iter_refs_newest_first(run_id, node_id, iteration, skip_discarded=True):
        if finished is not None and ref.attempt not in finished:
            continue
        if ref.codec == SESSION_CODEC:
            if session is None and agent.supports_sessions and mode == "resume":
                payload = store.load(ref).payload
                session = ResumePoint(ref=ref, session=str(payload.get("session")))
            continue
        if accepts(agent.capabilities, ref.codec, ref.version, mode):
            return ResumePoint(ref, store.load(ref), mode)
    return session


def resume_point(
    store: Store,
    agent: AgentSpec,
    run_id: str,
    node_id: str,
    iteration: int,
    *,
    tried: bool = True,
) -> ResumePoint:
    """Where a new attempt of ``node_id`` resumes: its own newest compatible checkpoint in
    mode ``resume`` (falling back to the previous loop iteration's), else a native session,
    else fresh. Agents that declare no capabilities and no sessions always start fresh.

    ``tried=False`` says the node has no attempt at ``iteration`` yet, so no checkpoint there
    (refs belong to attempts): only the previous iteration is scanned.
    """
    if not agent.capabilities and not agent.supports_sessions:
        return FRESH
    own = (iteration,) if tried else ()
    for it in own + ((iteration - 1,) if iteration > 0 else ()):
        point = _scan(store, agent, run_id, node_id, it, "resume")
        if point is not None:
            return point
    return FRESH


def fork_point(
    store: Store, agent: AgentSpec, run_id: str, source: str, iteration: int, task_id: str
) -> ResumePoint:
    """The source task's newest finished checkpoint the agent consumes in mode ``fork``.

    Raises:
        ForkIncompatible: there is none (raised before the agent is called).
    """
    point = _scan(store, agent, run_id, source, iteration, "fork", finished_only=True)
    if point is None or point.checkpoint is None:
        raise ForkIncompatible(
            f"task {task_id!r} forks from {source!r}, but {source!r} has no finished checkpoint "
            f"that agent {agent.id!r} accepts in mode 'fork' (it accepts "
            f"{[(c.codec, list(c.versions), list(c.modes)) for c in agent.capabilities]})",
            task=task_id,
            source=source,
        )
    return point


def claim_unless_ended(store: Store, run_id: str, owner_id: str) -> Fence | None:
    """Claim a run to resume it; None when it ended after the resume read it (an
    ``undo_rewind`` that won the race made it finished again): a resume returns such a run as
    it is, as it does any run that already ended."""
    try:
        return store.claim_run(run_id, owner_id)
    except InvalidArgument:
        if store.get_run(run_id).status in ENDED:
            return None
        raise
