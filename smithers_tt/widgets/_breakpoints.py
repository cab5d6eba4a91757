"""Which breakpoints the debugger's run has, as the timeline's toggles set them.

:class:`Breakpoints` (``model.breakpoints``) reads them from the run's history (frame 0,
continues, ``breakpoints_set`` frames; a fork's are its parent's at the fork point) and
writes a change at once while the run can still pause (queued, running, paused, interrupted:
``db.set_breakpoints``, so the process or worker executing it pauses at them from its next
node on). A run that ended keeps them here only. A Fork or Replay started from this
debugger gives the new run the breakpoints shown here (a fork otherwise inherits its
parent's at the fork point, which may be older).
"""

from __future__ import annotations

from typing import Any

from smithers_tt.engine import pause_history
from smithers_tt.errors import SmithersError
from smithers_tt.store import ENDED

WHEN = ("before", "after")


class Breakpoints:
    """The breakpoints of the model's run (see the module docstring)."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.before: set[str] = set()
        self.after: set[str] = set()
        self.held = False
        """Changed here for an ended run, not written (a Fork or Replay takes them)."""
        self.load()

    @property
    def enabled(self) -> bool:
        """Whether the run has breakpoints to toggle (not a run an integration wrote)."""
        return self.model.lens is None

    def load(self) -> None:
        """Read them from the run's history (what every process executing it reads)."""
        if not self.enabled:
            return
        history = pause_history(self.model.db.store.pause_frames(self.model.run_id))
        self.before, self.after, self.held = set(history.before), set(history.after), False

    def is_set(self, node_id: str, when: str) -> bool:
        """Whether the run pauses ``when`` (before or after) ``node_id``."""
        return node_id in (self.before if when == "before" else self.after)

    def toggle(self, node_id: str, when: str) -> bool:
        """Turn the breakpoint ``when`` ``node_id`` on or off; True if it changed.

        Written to the run at once unless it ended (then held for a Fork or Replay); a
        refusal (the run ended meanwhile, an unknown node) is the model's error message.
        """
        if when not in WHEN:
            raise ValueError(f"a breakpoint is {' or '.join(WHEN)} a node, not {when!r}")
        marks = {"before": set(self.before), "after": set(self.after)}
        marks[when] ^= {node_id}
        m = self.model
        if m.read_only is not None:
            m._say("error", f"The breakpoint was not changed: {m.read_only}.")
            return False
        if m.record.status in ENDED:
            self.held = True
            m._say(
                "info",
                f"Run {m.run_id} is {m.record.status}: the breakpoint is kept here for a Fork or "
                "Replay started from this debugger.",
            )
        else:
            try:
                m.db.set_breakpoints(m.run_id, m.workflow, **self.options(marks))
            except SmithersError as error:
                m._say("error", error.message)
                return False
        self.before, self.after = marks["before"], marks["after"]
        m._emit("breakpoints")
        return True

    def options(self, marks: dict[str, set[str]] | None = None) -> dict[str, list[str]]:
        """``break_before`` / ``break_after`` of ``db.run``, ``db.resume``, ... (now's)."""
        marks = marks or {"before": self.before, "after": self.after}
        return {"break_before": sorted(marks["before"]), "break_after": sorted(marks["after"])}

    def give_to(self, run_id: str) -> None:
        """A run started from this debugger (a fork, a replay) gets the breakpoints shown
        here, where they differ from those it inherits (its parent's at the fork point)."""
        if not self.enabled:
            return
        store = self.model.db.store
        inherited = pause_history(store.pause_frames(run_id))
        if (set(inherited.before), set(inherited.after)) == (self.before, self.after):
            return
        try:
            self.model.db.set_breakpoints(run_id, self.model.workflow, **self.options())
        except SmithersError as error:  # a fork that starts ended: nothing would pause it
            self.model._say("error", f"Run {run_id} did not get the breakpoints: {error.message}")
