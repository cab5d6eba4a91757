"""Workflow definitions: tasks, their dependencies, retries, loops, forks and output schemas."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from smithers_tt._ids import check_id
from smithers_tt.checkpoint import canonical_bytes, content_hash, validate
from smithers_tt.engine._agent import AgentSpec, as_agent
from smithers_tt.errors import CheckpointInvalid, InvalidArgument, OutputInvalid, WorkflowError


@dataclass(frozen=True)
class Retry:
    """How a task retries: ``count`` more attempts after the first, with doubling backoff.

    ``on`` lists the exception types that retry; anything else fails the task at once.
    Losing ownership (``FenceLost``), cancellation and a request the model's server refused
    as it is (``ModelRequestRejected``) never retry.
    """

    count: int = 0
    backoff: float = 0.0
    max_backoff: float = 30.0
    on: tuple[type[BaseException], ...] = (Exception,)

    def delay(self, failures: int) -> float:
        """Seconds to wait before the attempt after ``failures`` failed ones."""
        return min(self.max_backoff, self.backoff * 2 ** max(0, failures - 1))


@dataclass(frozen=True)
class Loop:
    """Repeat a task: each turn is a new ``iteration``, until ``until(output)`` or ``max``."""

    until: Callable[[Any], bool] | None = None
    max: int = 10


@dataclass(frozen=True)
class TaskContext:
    """What a prompt function sees: run input, outputs of finished tasks, loop position."""

    input: Any
    outputs: dict[str, Any]
    iteration: int = 0
    previous: Any = None


@dataclass
class Task:
    """One task of a workflow; made by :meth:`Workflow.task`."""

    id: str
    agent: AgentSpec
    prompt: str | Callable[[TaskContext], str] | None = None
    needs: tuple[str, ...] = ()
    output: Any = None
    retry: Retry = field(default_factory=Retry)
    fork: str | None = None
    cache: bool = False
    loop: Loop | None = None
    schema_retries: int = 2
    timeout: float | None = None
    interrupt: str | Callable[[TaskContext], Any] | None = None
    """Pause the run ``"before"`` or ``"after"`` this task, or before it when a function of
    its :class:`TaskContext` returns a question (anything but None)."""

    def render_prompt(self, ctx: TaskContext) -> str | None:
        """The prompt text for this context."""
        return self.prompt(ctx) if callable(self.prompt) else self.prompt

    def output_schema(self) -> Any:
        """The output schema as JSON (for signatures and cache keys), or None."""
        schema = self.output
        if schema is None:
            return None
        if hasattr(schema, "model_json_schema"):
            return schema.model_json_schema()
        if isinstance(schema, dict):
            return schema
        return _qualname(schema)

    def validate_output(self, value: Any) -> Any:
        """Check ``value`` against the output schema; return it as plain JSON values.

        Every output must also be strict JSON (as checkpoint payloads are, nested at most
        :data:`~smithers_tt.checkpoint.MAX_DEPTH` deep): it is stored with the node.

        Raises:
            OutputInvalid: it does not match, or is not strict JSON (the message is what the
                agent is told; it names the first bad value's JSON path).
        """
        output = self._match_schema(value)
        try:
            validate(output, subject=f"output of task {self.id!r}")
        except CheckpointInvalid as error:
            raise OutputInvalid(str(error), task=self.id, path=error.path) from error
        return output

    def _match_schema(self, value: Any) -> Any:
        schema = self.output
        if schema is None:
            return value
        try:
            if hasattr(schema, "model_validate"):
                return schema.model_validate(value).model_dump(mode="json")
            if isinstance(schema, dict):
                import jsonschema  # lazily: only JSON-schema users need it

                jsonschema.validate(value, schema)
                return value
            return schema(value)
        except OutputInvalid:
            raise
        except Exception as error:  # pydantic ValidationError, jsonschema ValidationError ...
            raise OutputInvalid(
                f"output of task {self.id!r} does not match its schema: {error}", task=self.id
            ) from error


def _interrupt_id(interrupt: Any) -> str:
    return interrupt if isinstance(interrupt, str) else _qualname(interrupt)


def _qualname(obj: Any) -> str:
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', repr(obj))}"


class Workflow:
    """A named set of tasks and their dependencies (a DAG; loops repeat single tasks)."""

    def __init__(self, name: str) -> None:
        if not isinstance(name, str) or not name.strip():
            raise InvalidArgument("a workflow needs a non-empty name")
        self.name = check_id(name, "workflow name")
        self.tasks: dict[str, Task] = {}

    def task(
        self,
        id: str,
        *,
        agent: Any,
        prompt: str | Callable[[TaskContext], str] | None = None,
        needs: Iterable[str] = (),
        output: Any = None,
        retries: int = 0,
        retry: Retry | None = None,
        fork: str | None = None,
        cache: bool = False,
        loop: Loop | None = None,
        schema_retries: int = 2,
        timeout: float | None = None,
        interrupt: str | Callable[[TaskContext], Any] | None = None,
    ) -> Task:
        """Add a task and return it.

        Args:
            id: unique task id (the node id in runs).
            agent: an agent object or function (see :func:`as_agent`).
            prompt: text, or a function of :class:`TaskContext` returning text.
            needs: ids of tasks whose outputs this one needs (they run first).
            output: a pydantic model, a JSON schema dict, or a validating function.
            retries: shorthand for ``retry=Retry(count=retries)``.
            fork: seed this task from that task's newest finished checkpoint (mode ``fork``);
                implies ``needs``.
            cache: reuse the output of an identical earlier call (see the docs on caching).
            loop: repeat the task as iterations until a condition or a maximum.
            schema_retries: schema-correction turns allowed within one attempt.
            timeout: seconds one agent call may take.
            interrupt: pause the run ``"before"`` or ``"after"`` the task (once per
                iteration), or before it with a question: a function of the
                :class:`TaskContext` that returns the question (strict JSON), or None not to
                pause. The answer given on continue is the agent's ``request.answer``.
        """
        check_id(id, "task id")
        if id in self.tasks:
            raise InvalidArgument(f"workflow {self.name!r} already has a task {id!r}")
        if type(retries) is not int or retries < 0:
            raise InvalidArgument(f"retries must be an int >= 0, got {retries!r}")
        if type(schema_retries) is not int or schema_retries < 0:
            raise InvalidArgument(f"schema_retries must be an int >= 0, got {schema_retries!r}")
        if loop is not None and (type(loop.max) is not int or loop.max < 1):
            raise InvalidArgument(f"loop max must be an int >= 1, got {loop.max!r}")
        if not (interrupt is None or interrupt in ("before", "after") or callable(interrupt)):
            raise InvalidArgument(
                f"interrupt of task {id!r} must be 'before', 'after', a function of the task "
                f"context returning a question, or None; got {interrupt!r}"
            )
        deps = tuple(dict.fromkeys([*needs, *([fork] if fork else [])]))
        for dep in deps:
            if dep not in self.tasks:
                raise InvalidArgument(
                    f"task {id!r} needs {dep!r}, which is not defined yet; define tasks after "
                    "the tasks they need"
                )
        task = Task(
            id,
            as_agent(agent),
            prompt,
            deps,
            output,
            retry or Retry(count=retries),
            fork,
            cache,
            loop,
            schema_retries,
            timeout,
            interrupt,
        )
        self.tasks[id] = task
        return task

    def dependents(self, task_id: str) -> list[str]:
        """Tasks that depend on ``task_id`` directly or through others, in definition order."""
        if task_id not in self.tasks:
            raise InvalidArgument(f"workflow {self.name!r} has no task {task_id!r}")
        found: set[str] = {task_id}
        for task in self.tasks.values():  # definition order is a topological order
            if found.intersection(task.needs):
                found.add(task.id)
        return [t for t in self.tasks if t in found and t != task_id]

    def signature(self) -> str:
        """A hash of the definition; a run refuses to resume under a different one."""
        doc = {
            "name": self.name,
            "tasks": [
                {
                    "id": t.id,
                    "needs": list(t.needs),
                    "fork": t.fork,
                    "agent": t.agent.id,
                    "declarations": t.agent.signature,
                    "prompt": _qualname(t.prompt) if callable(t.prompt) else t.prompt,
                    "output": t.output_schema(),
                    "retries": t.retry.count,
                    "cache": t.cache,
                    "loop": None if t.loop is None else t.loop.max,
                    "schema_retries": t.schema_retries,
                }
                # Only a task with an interrupt says so: older definitions keep their hash.
                | ({} if t.interrupt is None else {"interrupt": _interrupt_id(t.interrupt)})
                for t in self.tasks.values()
            ],
        }
        return content_hash(canonical_bytes(doc))

    def check(self) -> None:
        """Raise WorkflowError when the workflow cannot run (no tasks)."""
        if not self.tasks:
            raise WorkflowError(f"workflow {self.name!r} has no tasks; add some with .task()")

    def __repr__(self) -> str:
        return f"<Workflow {self.name!r}: {', '.join(self.tasks)}>"
