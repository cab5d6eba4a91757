"""How a run's executor heads for a pause: before or after a node (a breakpoint, a step, an
interrupt), or when an agent asks a question that has no recorded answer. A part of
:class:`~smithers_tt.engine._executor.RunExecutor`, which holds the state used here."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from smithers_tt.checkpoint import bounded_json
from smithers_tt.engine._pauses import PauseHistory
from smithers_tt.engine._workflow import Task, TaskContext


class Paused(Exception):
    """Ends a task's coroutine because the run pauses (raised outside any attempt)."""


class Pausing:
    """The executor's pauses (its state is set by the executor)."""

    _pause: tuple[str, int, dict[str, Any]] | None
    """The pause the run heads for (the first one asked for), or None."""
    _pauses: PauseHistory
    _blocked: set[str]
    _wake: asyncio.Event | None
    max_bytes: int

    def _context(self, iteration: int, previous: Any) -> TaskContext:
        raise NotImplementedError  # the executor's

    def _request_pause(self, node_id: str, iteration: int, data: dict[str, Any]) -> None:
        """Head for a pause (the first one asked for wins): no node starts any more; the run
        pauses once the nodes running end (or wait for an answer themselves)."""
        if self._pause is None:
            self._pause = (node_id, iteration, data)
        assert self._wake is not None
        self._wake.set()

    def _pause_before(self, task: Task, iteration: int, previous: Any) -> None:
        """Raise :class:`Paused` if the run pauses before this node (or already pauses)."""
        if self._pause is not None:
            raise Paused
        if ("before", task.id, iteration) in self._pauses.passed:
            return
        data: dict[str, Any] | None = None
        if task.id in self._pauses.before:
            data = {"reason": "breakpoint", "when": "before"}
        if task.interrupt == "before":
            data = {"reason": "interrupt", "when": "before"}
        elif callable(task.interrupt):
            question = task.interrupt(self._context(iteration, previous))
            if question is not None:
                bounded_json(question, f"interrupt question of task {task.id!r}", self.max_bytes)
                data = {"reason": "interrupt", "when": "before", "question": question}
        if data is not None:
            self._request_pause(task.id, iteration, data)
            raise Paused

    def _pause_after(self, task: Task, iteration: int) -> None:
        """Raise :class:`Paused` if the run pauses after this node (which just ended)."""
        if ("after", task.id, iteration) in self._pauses.passed:
            return
        data: dict[str, Any] | None = None
        if self._pauses.step:
            data = {"reason": "step", "when": "after"}
        if task.id in self._pauses.after:
            data = {"reason": "breakpoint", "when": "after"}
        if task.interrupt == "after":
            data = {"reason": "interrupt", "when": "after"}
        if data is not None:
            self._request_pause(task.id, iteration, data)
            raise Paused

    def _asker(self, task: Task, iteration: int) -> Callable[[Any], Any]:
        """The ``request.ask`` of one agent call: the n-th question gets the n-th answer
        recorded for this node; a question without one pauses the run."""
        answers = self._pauses.answers_for(task.id, iteration)
        asked = 0

        async def ask(question: Any) -> Any:
            nonlocal asked
            index, asked = asked, asked + 1
            if index < len(answers):
                return answers[index]
            bounded_json(question, f"question of task {task.id!r}", self.max_bytes)
            self._request_pause(
                task.id, iteration, {"reason": "ask", "when": "ask", "question": question}
            )
            self._blocked.add(task.id)
            assert self._wake is not None
            self._wake.set()
            await asyncio.get_running_loop().create_future()  # stopped when the run pauses
            raise AssertionError("unreachable: the run paused")  # pragma: no cover

        return ask
