"""The demo workflow: research -> write -> review (a task fork of write)."""

from __future__ import annotations

from dataclasses import dataclass

from smithers_tt.demo.agents import Draft, Notes, Researcher, Review, Reviewer, Writer
from smithers_tt.engine import Retry, TaskContext, Workflow


@dataclass
class DemoAgents:
    """The agent objects of one demo workflow (their ``calls`` counters are handy in tests)."""

    researcher: Researcher
    writer: Writer
    reviewer: Reviewer


def _write_prompt(ctx: TaskContext) -> str:
    return f"Write a short piece about {ctx.outputs['research']['topic']} from the notes."


def demo_workflow(
    *,
    flaky: bool = False,
    invalid_first_draft: bool = False,
    steps: int = 4,
    step_delay: float = 0.0,
) -> tuple[Workflow, DemoAgents]:
    """Build the demo workflow and its agents.

    Args:
        flaky: the researcher's first attempt fails after two steps (it retries and resumes).
        invalid_first_draft: the writer's first output misses its title (schema correction).
        steps: how many notes the researcher gathers (one checkpoint each).
        step_delay: seconds each agent step takes (to watch a run live, or to kill it).
    """
    agents = DemoAgents(
        Researcher(
            steps=steps, fail_first_attempt_after=2 if flaky else None, step_delay=step_delay
        ),
        Writer(first_output_invalid=invalid_first_draft, step_delay=step_delay),
        Reviewer(step_delay=step_delay),
    )
    wf = Workflow("demo-report")
    wf.task(
        "research",
        agent=agents.researcher,
        prompt="Gather notes on the topic.",
        output=Notes,
        retry=Retry(count=2),
    )
    wf.task("write", agent=agents.writer, needs=["research"], prompt=_write_prompt, output=Draft)
    wf.task(
        "review", agent=agents.reviewer, fork="write", prompt="Review the draft.", output=Review
    )
    return wf, agents
