"""ChatAgent against a local OpenAI-compatible server: kill -9 and resume, fork with an edited
conversation, retry, schema correction and tools, never paying twice for a turn."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel

pytest.importorskip("openai")

import smithers_tt as st
from smithers_tt.integrations.openai_agent import CODEC, ChatAgent

from ._fake_openai import FakeOpenAI, user_turns

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
FOLLOWUPS = ["second question", "third question", "fourth question", "fifth question"]


def _child(mode: str, url: str, base_url: str, run_id: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, str(HERE / "_chat_child.py"), mode, url, base_url, run_id],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _by_turn(requests: list[list[dict]]) -> dict[int, list[list[dict]]]:
    out: dict[int, list[list[dict]]] = {}
    for messages in requests:
        out.setdefault(user_turns(messages), []).append(messages)
    return out


def test_killed_after_turn_3_of_5_resumes_without_repeating_turns(db_url: str, tmp_path) -> None:
    run_id = "chat-kill-run"
    with FakeOpenAI(tmp_path / "requests.jsonl", hang_at=4) as server:
        child = _child("run", db_url, server.url, run_id)
        try:
            # the request of turn 4 arrives only after turn 3's checkpoint is durable
            assert server.hung.wait(90), child.stderr.read() if child.poll() is not None else ""
            child.send_signal(signal.SIGKILL)
            assert child.wait(30) == -signal.SIGKILL
        finally:
            if child.poll() is None:
                child.kill()
            server.release()
        before = server.requests()
        assert sorted(user_turns(m) for m in before) == [1, 2, 3, 4]

        resumed = _child("resume", db_url, server.url, run_id)
        out, err = resumed.communicate(timeout=120)
        assert resumed.returncode == 0, err
        result = json.loads(out.strip().splitlines()[-1])
        assert result["status"] == "finished"
        assert result["output"] == {"talk": "answer 5 to fifth question"}

        turns = _by_turn(server.requests())
        for n in (1, 2, 3, 5):
            assert len(turns[n]) == 1, f"turn {n} was requested {len(turns[n])} times"
        # turn 4 was in flight when the process died: asked again, with the same history
        assert len(turns[4]) == 2 and turns[4][0] == turns[4][1]
        # and every request extends the previous conversation exactly
        for n in (2, 3, 4, 5):
            assert turns[n][0][: len(turns[n - 1][0])] == turns[n - 1][0]

    with st.connect(db_url) as db:
        attempts = db.store.list_attempts(run_id, "talk")
        assert [a.state for a in attempts] == ["interrupted", "finished"]
        assert attempts[1].resumed_from is not None
        final = db.snapshot(run_id).payload("talk")
        assert final["turns"] == 5 and len(final["messages"]) == 11  # system + 5 x (user, reply)


def _workflow(server: FakeOpenAI, **agent_options) -> st.Workflow:
    agent = ChatAgent(
        "fake-model",
        base_url=server.url,
        system="You answer briefly.",
        max_retries=0,
        **{"followups": FOLLOWUPS, **agent_options},
    )
    wf = st.Workflow("chat")
    wf.task("talk", agent=agent, prompt="first question", retries=1)
    return wf


def test_fork_from_turn_2_with_an_edited_message(db: st.Database, tmp_path) -> None:
    with FakeOpenAI(tmp_path / "requests.jsonl") as server:
        wf = _workflow(server)
        run = db.run(wf)
        assert run.status == "finished"
        assert server.count == 5
        frames = [f for f in db.store.frames(run.id) if f.kind == "checkpoint"]
        assert len(frames) == 5  # one durable checkpoint per model turn
        turn2 = frames[1]
        payload = db.snapshot(run.id, turn2.frame_no).payload("talk")
        assert payload["turns"] == 2
        edited = json.loads(json.dumps(payload))
        asked = [m for m in edited["messages"] if m["role"] == "user"]
        assert asked[1]["content"] == "second question"
        asked[1]["content"] = "EDITED second question"

        child = db.fork(
            run.id, turn2.frame_no, checkpoints={"talk": st.AgentCheckpoint(CODEC, 1, edited)}
        )
        done = db.resume(child.id, wf)
        assert done.status == "finished"
        after = server.requests()[5:]
        # turns 1-2 are not asked again; turns 3-5 carry the edited history
        assert [user_turns(m) for m in after] == [3, 4, 5]
        for messages in after:
            assert messages[: len(edited["messages"])] == edited["messages"]
            assert any(m.get("content") == "EDITED second question" for m in messages)
        assert done.output == {"talk": "answer 5 to fifth question"}
        # the parent is untouched
        assert db.snapshot(run.id).payload("talk")["messages"][3]["content"] == "second question"


def test_a_failed_turn_retries_from_the_last_checkpoint(db: st.Database, tmp_path) -> None:
    with FakeOpenAI(tmp_path / "requests.jsonl", fail_at=3) as server:
        run = db.run(_workflow(server))
        assert run.status == "finished"
        turns = _by_turn(server.requests())
        assert {n: len(r) for n, r in turns.items()} == {1: 1, 2: 1, 3: 2, 4: 1, 5: 1}
        attempts = db.store.list_attempts(run.id, "talk")
        assert [a.state for a in attempts] == ["failed", "finished"]


class Answer(BaseModel):
    answer: int


def test_schema_correction_continues_the_same_conversation(db: st.Database, tmp_path) -> None:
    with FakeOpenAI(tmp_path / "requests.jsonl") as server:
        agent = ChatAgent("fake-model", base_url=server.url, json_output=True, max_retries=0)
        wf = st.Workflow("chat-json")
        wf.task("talk", agent=agent, prompt="What is it? reply in JSON", output=Answer)
        run = db.run(wf)
        assert run.status == "finished"
        assert run.output == {"talk": {"answer": 42}}
        first, second = server.requests()
        assert second[: len(first)] == first  # the correction extends the conversation
        assert second[len(first)] == {"role": "assistant", "content": "sure! 42"}
        assert "rejected" in second[-1]["content"] and second[-1]["role"] == "user"


def test_tool_calls_and_results_are_part_of_the_checkpoint(db: st.Database, tmp_path) -> None:
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    with FakeOpenAI(tmp_path / "requests.jsonl") as server:
        agent = ChatAgent("fake-model", base_url=server.url, tools={"add": add}, max_retries=0)
        wf = st.Workflow("chat-tools")
        wf.task("talk", agent=agent, prompt="TOOL: add two and three")
        run = db.run(wf)
        assert run.output == {"talk": "tool said 5"}
        messages = db.snapshot(run.id).payload("talk")["messages"]
        assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
        assert messages[1]["tool_calls"][0]["function"]["name"] == "add"
        assert messages[2]["content"] == "5"


def test_declarations_and_environment(monkeypatch) -> None:
    monkeypatch.setenv("SMITHERS_TT_MODEL", "env-model")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    agent = ChatAgent(turns=3)
    assert (agent.model, agent.base_url) == ("env-model", "http://127.0.0.1:9/v1")
    assert len(agent.followups) == 2
    assert [(f.codec, f.versions) for f in agent.checkpoint_formats] == [(CODEC, (1,))]
    (cap,) = agent.checkpoint_capabilities
    assert (cap.codec, cap.versions, set(cap.modes)) == (CODEC, (1,), {"resume", "fork"})
