"""The opt-in task cache: keyed by task identity, input, prompt and the agent's declarations."""

from __future__ import annotations

from typing import Any

import pytest

import smithers_tt as st
from smithers_tt import GenerateRequest, GenerateResult, Workflow

from ._workflows import CODEC, ScriptedAgent, capabilities, formats, node_map, refs, state


async def _answer(request: GenerateRequest) -> GenerateResult:
    await request.on_checkpoint(state({"thinking": request.prompt}))
    return GenerateResult(
        {"answer": f"{request.prompt} -> {request.input}"},
        checkpoint=state({"final": request.input}),
    )


def _workflow(agent: ScriptedAgent, prompt: str = "Answer.", cache: bool = True) -> Workflow:
    wf = Workflow("cached")
    wf.task("ask", agent=agent, prompt=prompt, cache=cache)
    return wf


def test_cache_hit_skips_the_agent_and_marks_the_node_cached(db: st.Database) -> None:
    agent = ScriptedAgent(_answer)
    first = db.run(_workflow(agent), {"q": 1})
    assert agent.calls == 1

    second = db.run(_workflow(agent), {"q": 1})

    assert agent.calls == 1
    assert second.status == "finished", second.error
    assert second.output == first.output == {"ask": {"answer": "Answer. -> {'q': 1}"}}
    node = node_map(db, second.id)[("ask", 0)]
    assert (node.state, node.output, node.last_attempt) == ("cached", first.output["ask"], 1)
    (attempt,) = second.attempts("ask")
    assert (attempt.state, attempt.error_code) == ("finished", "cache_hit")
    # The cached final checkpoint is shared (same content) with the run that made it.
    (copied,) = refs(db, second.id)
    assert copied.content_hash == refs(db, first.id)[-1].content_hash
    assert db.store.load(copied).payload == {"final": {"q": 1}}


def test_cache_hit_survives_a_new_connection(db: st.Database, db_url: str) -> None:
    agent = ScriptedAgent(_answer)
    db.run(_workflow(agent), "x")
    other = st.connect(db_url)
    try:
        again = other.run(_workflow(agent), "x")
    finally:
        other.close()
    assert agent.calls == 1
    assert node_map(db, again.id)[("ask", 0)].state == "cached"


def _other_input(agent: ScriptedAgent) -> tuple[Workflow, Any]:
    return _workflow(agent), {"q": 2}


def _other_prompt(agent: ScriptedAgent) -> tuple[Workflow, Any]:
    return _workflow(agent, prompt="Answer briefly."), {"q": 1}


def _other_declarations(agent: ScriptedAgent) -> tuple[Workflow, Any]:
    # Same id and behaviour, but it can now also consume v2: a different declaration
    # signature, so state cached for the old declarations is not handed to it.
    wider = ScriptedAgent(
        agent.behaviour,
        produces=formats((CODEC, [1])),
        consumes=capabilities((CODEC, [1, 2], ["resume"])),
    )
    wider.seen = agent.seen
    return _workflow(wider), {"q": 1}


def _other_agent_id(agent: ScriptedAgent) -> tuple[Workflow, Any]:
    other = ScriptedAgent(agent.behaviour, id="another-agent")
    other.seen = agent.seen
    return _workflow(other), {"q": 1}


@pytest.mark.parametrize(
    "change", [_other_input, _other_prompt, _other_declarations, _other_agent_id]
)
def test_cache_misses_when_input_prompt_or_agent_declarations_differ(
    db: st.Database, change: Any
) -> None:
    agent = ScriptedAgent(_answer)
    db.run(_workflow(agent), {"q": 1})
    wf, input = change(agent)

    run = db.run(wf, input)

    assert agent.calls == 2
    assert node_map(db, run.id)[("ask", 0)].state == "finished"
    assert run.attempts("ask")[0].error_code is None


def test_cache_is_not_used_unless_the_task_asks_for_it(db: st.Database) -> None:
    agent = ScriptedAgent(_answer)
    db.run(_workflow(agent, cache=False), 1)
    run = db.run(_workflow(agent, cache=False), 1)
    assert agent.calls == 2
    assert node_map(db, run.id)[("ask", 0)].state == "finished"


def test_cache_does_not_store_failed_attempts(db: st.Database) -> None:
    async def fails(request: GenerateRequest) -> Any:
        raise RuntimeError("no")

    agent = ScriptedAgent(fails)
    assert db.run(_workflow(agent), 1).status == "failed"
    assert db.run(_workflow(agent), 1).status == "failed"
    assert agent.calls == 2
