"""Promoting a sweep's branch: recording which fork a person keeps, and deleting the others
when asked (``sweep.promote(variant, delete_others=True)``).

The choice is written with the sweep (``db.get_sweep(id).promoted``) before anything is
deleted, with the branches to delete, so that a crash in the middle leaves a sweep that says
what was chosen and which branches were meant to go. The others go through the one deletion
path there is, ``db.gc(0, run_ids=...)``: only ended runs are deleted, a branch another run
was forked from stays, and the parent and the promoted branch are never among those asked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from smithers_tt.errors import InvalidArgument


class Promotable(Protocol):
    """What :func:`promote` uses of a :class:`~smithers_tt.sweeps.Sweep` (which imports this
    module: named by protocol, no import cycle)."""

    db: Any
    record: Any

    @property
    def id(self) -> str: ...
    @property
    def run_id(self) -> str: ...
    @property
    def variants(self) -> dict[str, dict[str, Any]]: ...
    def refresh(self) -> Any: ...
    def branches(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Promotion:
    """What :meth:`Sweep.promote` did: the branch kept, and (with ``delete_others``) the other
    branches deleted and those that stayed, with why."""

    sweep_id: str
    variant: str
    run_id: str
    deleted: list[str] = field(default_factory=list)
    """Run ids of the other branches deleted."""
    kept: dict[str, str] = field(default_factory=dict)
    """Run id -> why that other branch stayed (it has not ended, or a run was forked from it)."""

    def to_dict(self) -> dict[str, Any]:
        """As JSON-ready data."""
        return {"sweep_id": self.sweep_id, "variant": self.variant, "run_id": self.run_id,
                "deleted": list(self.deleted), "kept": dict(self.kept)}  # fmt: skip


def promote(sweep: Promotable, variant: str, *, delete_others: bool = False) -> Promotion:
    """Record ``variant``'s branch as the one the sweep keeps; with ``delete_others`` delete
    the other branches (those ended and not forked from). See :meth:`Sweep.promote`."""
    if not isinstance(delete_others, bool):
        raise InvalidArgument(f"delete_others must be True or False, got {delete_others!r}")
    sweep.refresh()
    if variant not in sweep.variants:
        raise InvalidArgument(
            f"sweep {sweep.id} has no variant {variant!r}; its variants: {list(sweep.variants)}"
        )
    branches = sweep.branches()
    chosen = branches[variant]
    if chosen is None:
        gone = "was deleted" if variant in sweep.record.discarded else "is not made yet"
        raise InvalidArgument(f"variant {variant!r} of sweep {sweep.id}: its branch {gone}")
    others = {
        name: run.id
        for name, run in branches.items()
        if run is not None and name != variant and run.id not in (chosen.id, sweep.run_id)
    }
    discarded = {**sweep.record.discarded, **(others if delete_others else {})}
    discarded.pop(variant, None)
    sweep.db.store.sweeps.promote(sweep.id, variant, chosen.id, discarded)
    sweep.refresh()
    if not delete_others or not others:
        return Promotion(sweep.id, variant, chosen.id)
    done = sweep.db.gc(0, run_ids=sorted(others.values()))
    deleted = set(done.deleted)
    return Promotion(
        sweep.id,
        variant,
        chosen.id,
        deleted=[run_id for run_id in others.values() if run_id in deleted],
        kept={
            run_id: done.kept.get(run_id, "it is not in the store any more")
            for run_id in others.values()
            if run_id not in deleted
        },
    )
