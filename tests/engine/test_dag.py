"""Scheduling: independent tasks overlap, dependencies order, loops make iterations, and a run's
input and outputs are durable."""

from __future__ import annotations

import asyncio

import pytest

import smithers_tt as st
from smithers_tt import GenerateRequest, GenerateResult, Loop, Retry, Workflow

from ._workflows import ScriptedAgent, attempt_states, node_map, state


def test_dag_runs_independent_tasks_concurrently(db: st.Database) -> None:
    # Each agent sets its own event and then waits for the other's: that only finishes when
    # both calls are in flight at the same time (sequential execution would time out).
    events: dict[str, asyncio.Event] = {}

    def event(name: str) -> asyncio.Event:
        return events.setdefault(name, asyncio.Event())

    async def meet(request: GenerateRequest) -> str:
        me, other = request.node_id, "right" if request.node_id == "left" else "left"
        event(me).set()
        await asyncio.wait_for(event(other).wait(), timeout=10)
        return f"{me} met {other}"

    async def join(request: GenerateRequest) -> str:
        return " & ".join(request.needs[n] for n in ("left", "right"))

    agent = ScriptedAgent(meet)
    wf = Workflow("diamond")
    wf.task("left", agent=agent)
    wf.task("right", agent=agent)
    wf.task("join", agent=join, needs=["left", "right"])

    run = db.run(wf, {"x": 1})

    assert run.status == "finished", run.error
    assert run.output == {
        "left": "left met right",
        "right": "right met left",
        "join": "left met right & right met left",
    }
    assert sorted(s.node_id for s in agent.seen) == ["left", "right"]


def test_dag_runs_a_task_only_after_the_tasks_it_needs(db: st.Database) -> None:
    order: list[str] = []

    def step(name: str, delay: float):
        async def run(request: GenerateRequest) -> str:
            order.append(f"start {name}")
            await asyncio.sleep(delay)
            order.append(f"end {name}")
            return name + "".join(f"<{v}" for v in request.needs.values())

        run.__qualname__ = f"step_{name}"
        return run

    wf = Workflow("chain")
    wf.task("a", agent=step("a", 0.05))
    wf.task("b", agent=step("b", 0.0), needs=["a"])
    wf.task("c", agent=step("c", 0.0), needs=["b"])

    run = db.run(wf)

    assert run.output == {"a": "a", "b": "b<a", "c": "c<b<a"}
    assert order == ["start a", "end a", "start b", "end b", "start c", "end c"]


def test_dag_does_not_start_dependents_when_a_task_fails(db: st.Database) -> None:
    async def boom(request: GenerateRequest) -> str:
        raise ValueError("no luck")

    after = ScriptedAgent(lambda r: asyncio.sleep(0, "never"))
    wf = Workflow("broken")
    wf.task("a", agent=boom)
    wf.task("b", agent=after, needs=["a"])

    run = db.run(wf)

    assert run.status == "failed"
    assert "no luck" in (run.error or "")
    assert after.calls == 0
    assert node_map(db, run.id)[("a", 0)].state == "failed"


def test_loop_makes_each_iteration_its_own_node_with_its_own_attempts(db: st.Database) -> None:
    failed_once: set[int] = set()

    async def count(request: GenerateRequest) -> GenerateResult:
        if request.iteration == 2 and 2 not in failed_once:
            failed_once.add(2)
            await request.on_checkpoint(state({"iteration": 2, "partial": True}))
            raise ConnectionError("flaky in iteration 2")
        await request.on_checkpoint(state({"iteration": request.iteration}))
        return GenerateResult({"n": request.iteration, "prompt": request.prompt})

    agent = ScriptedAgent(count)
    wf = Workflow("loop")
    wf.task(
        "count",
        agent=agent,
        prompt=lambda ctx: f"turn {ctx.iteration} after {ctx.previous and ctx.previous['n']}",
        loop=Loop(until=lambda out: out["n"] >= 3, max=10),
        retry=Retry(count=1),
    )

    run = db.run(wf)

    assert run.status == "finished", run.error
    assert run.output == {"count": {"n": 3, "prompt": "turn 3 after 2"}}
    nodes = node_map(db, run.id)
    assert sorted(nodes) == [("count", 0), ("count", 1), ("count", 2), ("count", 3)]
    assert [nodes[("count", i)].state for i in range(4)] == ["finished"] * 4
    assert [nodes[("count", i)].output["n"] for i in range(4)] == [0, 1, 2, 3]
    assert [nodes[("count", i)].last_attempt for i in range(4)] == [1, 1, 2, 1]
    attempts = {(a.key.iteration, a.key.attempt): a.state for a in run.attempts("count")}
    assert attempts == {
        (0, 1): "finished",
        (1, 1): "finished",
        (2, 1): "failed",
        (2, 2): "finished",
        (3, 1): "finished",
    }
    # Each iteration's checkpoints live under that iteration; the retry of iteration 2
    # resumed from iteration 2's own state, and iteration 1 started from iteration 0's.
    by_it = {s.iteration: [] for s in agent.seen}
    for s in agent.seen:
        by_it[s.iteration].append(s.payload)
    assert by_it[0] == [None]
    assert by_it[1] == [{"iteration": 0}]
    assert by_it[2] == [{"iteration": 1}, {"iteration": 2, "partial": True}]
    assert {r.iteration for r in run.checkpoints("count")} == {0, 1, 2, 3}


@pytest.mark.parametrize("maximum", [1, 3])
def test_loop_stops_at_max_when_until_never_holds(db: st.Database, maximum: int) -> None:
    async def echo(request: GenerateRequest) -> int:
        return request.iteration

    wf = Workflow("bounded")
    wf.task("spin", agent=echo, loop=Loop(until=lambda out: False, max=maximum))

    run = db.run(wf)

    assert run.output == {"spin": maximum - 1}
    assert sorted(it for _, it in node_map(db, run.id)) == list(range(maximum))
    assert attempt_states(db, run.id) == ["finished"] * maximum


def test_run_input_and_outputs_are_durable_across_connections(db: st.Database, db_url: str) -> None:
    async def upper(request: GenerateRequest) -> dict:
        return {"text": request.input["text"].upper(), "unicode": "žluťoučký 🐝"}

    async def size(request: GenerateRequest) -> int:
        return len(request.needs["upper"]["text"])

    wf = Workflow("durable")
    wf.task("upper", agent=upper)
    wf.task("size", agent=size, needs=["upper"])
    payload = {"text": "hello", "nested": {"list": [1, 2.5, None, True]}}

    run = db.run(wf, payload)
    db.close()

    other = st.connect(db_url)
    try:
        again = other.get_run(run.id)
        assert again.status == "finished"
        assert again.input == payload
        assert again.output == {
            "upper": {"text": "HELLO", "unicode": "žluťoučký 🐝"},
            "size": 5,
        }
        nodes = node_map(other, run.id)
        assert nodes[("upper", 0)].output == {"text": "HELLO", "unicode": "žluťoučký 🐝"}
        assert nodes[("size", 0)].output == 5
        assert {n.state for n in nodes.values()} == {"finished"}
    finally:
        other.close()
