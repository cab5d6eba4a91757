"""What a LangGraph thread kept by :class:`SmithersSaver` waits on: the values of its
``interrupt(value)`` calls, or the nodes a static breakpoint (``interrupt_before`` /
``interrupt_after``, given to ``compile`` or to ``invoke``) stopped it before or after.

Read only from what the saver stores. An ``interrupt()`` leaves a pending write; a static
breakpoint leaves nothing of its own: LangGraph stops after writing the checkpoint whose next
super-step it refuses to run (before) or just ran (after). So a thread *stopped between
super-steps* is its newest checkpoint with nodes still to run (their trigger channels
``branch:to:NODE`` have versions the node has not seen) and no error among its writes, not
resumed past a breakpoint (LangGraph's own test: a channel changed since the versions it
marked seen at the last interrupt). Given the graph (or the breakpoints), only the nodes that
match its breakpoints count; without them, a thread whose process stopped (or is running that
super-step now) looks the same, and the pause says so.

Continuing in LangGraph (``graph.invoke(None, config)`` or ``Command(resume=...)``) writes
the next checkpoint, which clears the pause.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from smithers_tt.integrations._langgraph_serde import plain
from smithers_tt.integrations.langgraph import SmithersSaver
from smithers_tt.store import RunRecord
from smithers_tt.store.for_langgraph import LANGGRAPH_WORKFLOW

TRIGGER = "branch:to:"
INTERRUPT = "__interrupt__"
ERROR = "__error__"
RESUME_HINT = "continue it in LangGraph: graph.invoke(Command(resume=answer), config)"
STATIC_HINT = "continue it in LangGraph: graph.invoke(None, config)"


def next_nodes(checkpoint: dict[str, Any]) -> list[str]:
    """The nodes a checkpoint's next super-step runs: those whose trigger channel
    (``branch:to:NODE``, as ``StateGraph`` names them) holds a value (running the node
    consumes it) at a version they have not seen."""
    seen = checkpoint.get("versions_seen") or {}
    values = checkpoint.get("channel_values") or {}
    out = []
    for channel, version in (checkpoint.get("channel_versions") or {}).items():
        if channel.startswith(TRIGGER) and channel in values:
            node = channel[len(TRIGGER) :]
            if _newer(version, (seen.get(node) or {}).get(channel)):
                out.append(node)
    return sorted(out)


def _newer(version: Any, than: Any) -> bool:
    return than is None or version > than


def _not_resumed_past(checkpoint: dict[str, Any]) -> bool:
    """LangGraph's ``should_interrupt`` test: a channel changed since the last interrupt."""
    seen = (checkpoint.get("versions_seen") or {}).get(INTERRUPT) or {}
    return any(
        _newer(v, seen.get(c)) for c, v in (checkpoint.get("channel_versions") or {}).items()
    )


def _matches(nodes: Iterable[str], marks: Any) -> list[str]:
    if marks == "*":
        return sorted(nodes)
    return sorted(set(nodes) & set(marks or ()))


class Breakpoints:
    """A graph's static breakpoints: ``compile(interrupt_before=..., interrupt_after=...)``
    read from the compiled graph, plus those given to ``invoke`` (``before`` / ``after``)."""

    def __init__(
        self,
        graph: Any = None,
        before: Sequence[str] | str | None = None,
        after: Sequence[str] | str | None = None,
    ) -> None:
        self.before = _union(getattr(graph, "interrupt_before_nodes", None), before)
        self.after = _union(getattr(graph, "interrupt_after_nodes", None), after)

    @property
    def known(self) -> bool:
        """Whether any breakpoint was given (else any stop between super-steps counts)."""
        return bool(self.before or self.after)


def _union(a: Any, b: Any) -> Any:
    if a == "*" or b == "*":
        return "*"
    return sorted({*(a or ()), *(b or ())})


def waiting(saver: SmithersSaver, run: RunRecord, marks: Breakpoints | None = None) -> Any:
    """What the thread of ``run`` waits on, as the debugger's pause banner shows it (a dict:
    ``reason``, ``when``, ``nodes``, ``question``, ``hint``), or None."""
    found = saver.get_tuple({"configurable": dict(run.input or {})})
    if found is None:
        return None
    interrupts = interrupt_values(found)
    if interrupts:
        return {
            "reason": "LangGraph interrupt",
            "when": "ask",
            "nodes": [],
            "question": interrupts[0] if len(interrupts) == 1 else interrupts,
            "hint": RESUME_HINT,
        }
    writes = found.pending_writes or []
    checkpoint = found.checkpoint
    upcoming = next_nodes(checkpoint)
    if not upcoming or any(w[1] == ERROR for w in writes) or not _not_resumed_past(checkpoint):
        return None
    marks = marks or Breakpoints()
    if not marks.known:
        return _stopped("stopped", "before", upcoming, "a static breakpoint, or its process "
                        "stopped (or runs this super-step now)")  # fmt: skip
    before = _matches(upcoming, marks.before)
    if before:
        return _stopped("interrupt_before", "before", before, "a static breakpoint")
    parent = saver.get_tuple(found.parent_config) if found.parent_config else None
    ran = next_nodes(parent.checkpoint) if parent is not None else []
    after = _matches(ran, marks.after)
    if after:
        return _stopped("interrupt_after", "after", after, "a static breakpoint")
    return None


def _stopped(reason: str, when: str, nodes: list[str], why: str) -> dict[str, Any]:
    return {
        "reason": f"LangGraph {reason}",
        "when": when,
        "nodes": nodes,
        "question": {f"stopped {when}": nodes, "why": why},
        "hint": STATIC_HINT,
    }


def interrupt_values(found: Any) -> list[Any]:
    """The values of the interrupts a checkpoint tuple's pending writes wait on."""
    return [
        plain(getattr(item, "value", item))
        for w in found.pending_writes or []
        if w[1] == INTERRUPT
        for item in (w[2] if isinstance(w[2], list | tuple) else [w[2]])
    ]


def paused_threads(db: Any, limit: int = 100) -> list[tuple[RunRecord, dict[str, Any]]]:
    """The runs of LangGraph threads (oldest first, at most ``limit``) that wait on an
    ``interrupt()`` or stopped between super-steps (see the module docstring)."""
    saver = SmithersSaver(db)
    out: list[tuple[RunRecord, dict[str, Any]]] = []
    cursor = None
    while len(out) < limit:
        page = db.store.list_runs(limit=500, cursor=cursor, status="running")
        for run in page.items:
            if run.workflow == LANGGRAPH_WORKFLOW and len(out) < limit:
                found = waiting(saver, run)
                if found is not None:
                    out.append((run, found))
        cursor = page.next_cursor
        if cursor is None:
            break
    return out
