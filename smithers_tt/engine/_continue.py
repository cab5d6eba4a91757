"""Continuing a paused run: the answer, edited checkpoints and skipped nodes, checked against
the workflow before anything is written (a refused edit writes nothing)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from smithers_tt._ids import owner_id
from smithers_tt.checkpoint import AgentCheckpoint, EncodedCheckpoint, accepts, bounded_json
from smithers_tt.engine._workflow import Workflow
from smithers_tt.errors import InvalidArgument
from smithers_tt.store import Fence, RunRecord, Store

ACTIONS = ("continue", "step", "abort")
"""How a paused run goes on: to its next pause or end, one node then a pause, or cancelled."""


@dataclass(frozen=True)
class ContinueOptions:
    """How to continue a paused run: the options of ``db.resume`` and ``db.continue_run``
    (see :meth:`smithers_tt.Database.aresume`), carried together from the caller to
    :func:`prepare`."""

    action: str = "continue"
    """One of :data:`ACTIONS` (see :func:`action_of`)."""
    answer: Any = None
    checkpoints: Mapping[str, Any] | None = None
    skip: Mapping[str, Any] | None = None
    break_before: Iterable[str] | None = None
    break_after: Iterable[str] | None = None

    @property
    def given(self) -> bool:
        """Whether an answer, edit, skip or breakpoint is given (only a paused run takes one)."""
        options = (self.answer, self.checkpoints, self.skip, self.break_before, self.break_after)
        return any(o is not None for o in options)


@dataclass
class Continuation:
    """What continuing a run writes (see :meth:`~smithers_tt.store.Store.continue_run`)."""

    data: dict[str, Any]
    edits: list[tuple[str, int, EncodedCheckpoint, str | None]] = field(default_factory=list)
    skips: list[tuple[str, int, Any]] = field(default_factory=list)


def breakpoints(
    wf: Workflow | None, before: Iterable[str] | None, after: Iterable[str] | None
) -> dict[str, list[str]] | None:
    """``{"before": [...], "after": [...]}`` of node ids of ``wf``, or None if neither is given.

    Raises:
        InvalidArgument: a node id that is not a task of ``wf``.
    """
    if before is None and after is None:
        return None
    marks = {"before": sorted(set(before or ())), "after": sorted(set(after or ()))}
    for side, nodes in marks.items():
        for node_id in nodes:
            if not isinstance(node_id, str) or (wf is not None and node_id not in wf.tasks):
                known = ", ".join(wf.tasks) if wf is not None else "?"
                raise InvalidArgument(
                    f"break_{side} names {node_id!r}, which is not a task of workflow "
                    f"{wf.name if wf else '?'!r} (its tasks: {known})"
                )
    return marks


def action_of(step: bool, abort: bool) -> str:
    """The action a continue's ``step`` and ``abort`` ask for (``continue`` when neither).

    Raises:
        InvalidArgument: both: they contradict each other; nothing was written.
    """
    if step and abort:
        raise InvalidArgument(
            "step runs one node and pauses again, abort cancels the run: ask for one of them; "
            "nothing was written"
        )
    return "abort" if abort else "step" if step else "continue"


def prepare(
    store: Store,
    run: RunRecord,
    wf: Workflow | None,
    options: ContinueOptions,
) -> Continuation:
    """Check a continue of ``run`` with ``options`` and say what it writes.

    Raises:
        CheckpointInvalid, CheckpointTooLarge: the answer is not strict JSON, or is larger
            than the run's checkpoint limit (16 MiB unless lowered).
        InvalidArgument: the run is not paused, a node is
            unknown or already finished, an edited checkpoint is one its agent does not
            accept in mode ``resume``, or edits and skips come without the workflow.
        OutputInvalid: a skipped node's output does not match the task's schema.
    """
    if run.status != "paused":
        raise InvalidArgument(
            f"run {run.run_id} is {run.status}, not paused: there is nothing to continue; "
            "nothing was written"
        )
    action, checkpoints, skip = options.action, options.checkpoints, options.skip
    if action not in ACTIONS:
        raise InvalidArgument(f"a paused run goes on by one of {list(ACTIONS)}, not {action!r}")
    bounded_json(options.answer, "the answer", run.max_checkpoint_bytes)
    if (checkpoints or skip) and wf is None:
        raise InvalidArgument(
            "edited checkpoints and skipped nodes are checked against the workflow: give it "
            "(--workflow module:attribute on the command line)"
        )
    states = {(n.node_id, n.iteration): n.state for n in store.list_nodes(run.run_id)}
    out = Continuation({"action": action, "answer": options.answer})
    marks = breakpoints(wf, options.break_before, options.break_after)
    if marks is not None:
        out.data["breakpoints"] = marks
    for node_id, checkpoint in sorted((checkpoints or {}).items()):
        assert wf is not None
        agent = _task(wf, node_id, "checkpoints").agent
        if isinstance(checkpoint, dict):
            checkpoint = AgentCheckpoint.from_json(checkpoint)
        if not isinstance(checkpoint, AgentCheckpoint):
            raise InvalidArgument(
                f"checkpoints[{node_id!r}] must be an AgentCheckpoint (or its envelope "
                "{codec, version, payload})"
            )
        if not accepts(agent.capabilities, checkpoint.codec, checkpoint.version, "resume"):
            raise InvalidArgument(
                f"the edited checkpoint of {node_id!r} is {checkpoint.codec} "
                f"v{checkpoint.version}, which its agent {agent.id!r} does not accept in mode "
                f"'resume' (it accepts {_accepted(agent.capabilities)}); nothing was written"
            )
        iteration = _open_iteration(states, run.run_id, node_id, "edit the checkpoint of")
        encoded = checkpoint.encode(run.max_checkpoint_bytes)
        out.edits.append((node_id, iteration, encoded, agent.id))
    for node_id, output in sorted((skip or {}).items()):
        assert wf is not None
        task = _task(wf, node_id, "skip")
        iteration = _open_iteration(states, run.run_id, node_id, "skip")
        out.skips.append((node_id, iteration, task.validate_output(output)))
    out.data["edited"] = [e[0] for e in out.edits]
    out.data["skipped"] = [s[0] for s in out.skips]
    return out


def continue_paused(
    store: Store, run: RunRecord, wf: Workflow | None, options: ContinueOptions, claim: bool
) -> Fence | None:
    """Continue the paused ``run`` as ``options`` say, checked first (:func:`prepare`), in
    one transaction: with ``claim`` this process takes the run over (its fence is returned),
    else the run is queued for a worker. None when nothing is left to execute here (aborted,
    or queued).

    Raises:
        ConcurrencyError: another process continued (or cancelled) the run first.
    """
    plan = prepare(store, run, wf, options)
    return store.continue_run(
        run.run_id,
        run.owner_epoch,
        plan.data,
        owner_id=owner_id(),
        claim=claim,
        edits=plan.edits,
        skips=plan.skips,
        abort=options.action == "abort",
    )


def _task(wf: Workflow, node_id: str, what: str) -> Any:
    if node_id not in wf.tasks:
        raise InvalidArgument(
            f"{what} names {node_id!r}, which is not a task of workflow {wf.name!r} "
            f"(its tasks: {', '.join(wf.tasks)}); nothing was written"
        )
    return wf.tasks[node_id]


def _open_iteration(
    states: dict[tuple[str, int], str], run_id: str, node_id: str, what: str
) -> int:
    """The iteration of ``node_id`` still to run (its newest, or 0)."""
    iteration = max((it for node, it in states if node == node_id), default=0)
    if states.get((node_id, iteration)) in ("finished", "cached"):
        raise InvalidArgument(
            f"cannot {what} {node_id!r}: it already finished in run {run_id}; fork the run "
            "at an earlier frame with checkpoints={...} instead; nothing was written"
        )
    return iteration


def _accepted(capabilities: Iterable[Any]) -> list[tuple[str, list[int]]]:
    return [(c.codec, list(c.versions)) for c in capabilities if "resume" in c.modes]
