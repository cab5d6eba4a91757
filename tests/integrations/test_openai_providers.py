"""ChatAgent against the reply shapes of real OpenAI-compatible servers (vLLM, Ollama,
llama.cpp, OpenAI), replayed by a loopback server: what is checkpointed and sent back is
OpenAI's schema, streaming, usage and finish reasons, cut-off replies, and which errors the
task retries."""

from __future__ import annotations

import json
import socket

import pytest

pytest.importorskip("openai")

import smithers_tt as st
from smithers_tt.integrations.openai_agent import ChatAgent

from ._fake_openai import FakeOpenAI, openai_refuses, user_turns

PROVIDERS = ["openai", "vllm", "ollama", "llamacpp"]


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def _run(db: st.Database, url: str, prompt: str, *, retries: int = 0, **options) -> st.Run:
    agent = ChatAgent("fake-model", base_url=url, max_retries=0, tools={"add": add}, **options)
    wf = st.Workflow("providers")
    wf.task("talk", agent=agent, prompt=prompt, retries=retries)
    return db.run(wf)


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_conversation_made_on_any_server_is_checkpointed_in_openai_schema(
    db: st.Database, tmp_path, provider: str, stream: bool
) -> None:
    # replies in the provider's shape; every request checked the way OpenAI checks it
    with FakeOpenAI(tmp_path / "log.jsonl", provider=provider, strict=True) as server:
        run = _run(db, server.url, "TOOL: add", followups=["and now?"], stream=stream)
        assert run.status == "finished", run.error
        assert run.output == {"talk": "answer 2 to and now?"}
        sent = server.requests()
    messages = db.snapshot(run.id).payload("talk")["messages"]
    assert openai_refuses(messages) is None
    roles = ["user", "assistant", "tool", "assistant", "user", "assistant"]
    assert [m["role"] for m in messages] == roles
    (call,) = messages[1]["tool_calls"]
    assert call["function"]["name"] == "add" and isinstance(call["function"]["arguments"], str)
    assert json.loads(call["function"]["arguments"]) == {"a": 2, "b": 3}
    assert messages[2] == {"role": "tool", "tool_call_id": call["id"], "content": "5"}
    assert "tool_calls" not in messages[3] and "tool_calls" not in messages[5]
    # what went back to the server is the checkpointed conversation, which OpenAI accepts
    assert sent[-1] == messages[:-1]


def test_tool_call_ids_reused_across_replies_each_get_their_result(
    db: st.Database, tmp_path
) -> None:
    with FakeOpenAI(tmp_path / "log.jsonl", provider="reused-ids", strict=True) as server:
        run = _run(db, server.url, "TOOL: add", followups=["TOOL: again"])
        assert run.status == "finished", run.error
    messages = db.snapshot(run.id).payload("talk")["messages"]
    assert [m["role"] for m in messages].count("tool") == 2
    assert openai_refuses(messages) is None


def test_a_checkpoint_holding_server_shapes_resumes_on_openai(db: st.Database, tmp_path) -> None:
    """A conversation checkpointed by an earlier release with vLLM's shapes as they came."""
    with FakeOpenAI(tmp_path / "log.jsonl", strict=True) as server:
        run = _run(db, server.url, "first", followups=["second"])
        payload = db.snapshot(run.id).payload("talk")
        frame = next(f for f in db.store.frames(run.id) if f.kind == "checkpoint").frame_no
        first = db.snapshot(run.id, frame).payload("talk")
        first["messages"][-1].update(tool_calls=[], reasoning_content=None)  # as vLLM sent it
        agent = ChatAgent("fake-model", base_url=server.url, max_retries=0, followups=["second"])
        wf = st.Workflow("providers")
        wf.task("talk", agent=agent, prompt="first")
        edited = {"talk": st.AgentCheckpoint("smithers.chat", 1, first)}
        child = db.resume(db.fork(run.id, frame, checkpoints=edited).id, wf)
        assert child.status == "finished", child.error
        assert db.snapshot(child.id).payload("talk")["messages"] == payload["messages"]


def test_streaming_checkpoints_once_per_turn_and_shows_the_tokens(
    db: st.Database, tmp_path
) -> None:
    pieces: list[str] = []
    with FakeOpenAI(tmp_path / "log.jsonl") as server:
        run = _run(
            db, server.url, "TOOL: add", followups=["more"], stream=True, on_delta=pieces.append
        )
        assert run.status == "finished", run.error
        requests = server.count
    checkpoints = [f for f in db.store.frames(run.id) if f.kind == "checkpoint"]
    assert len(checkpoints) == requests == 3  # one per model turn, not one per token
    assert "".join(pieces) == "tool said 5" + "answer 2 to more"
    assert len(pieces) > 3


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_usage_and_finish_reason_of_every_reply_are_recorded(
    db: st.Database, tmp_path, stream: bool
) -> None:
    with FakeOpenAI(tmp_path / "log.jsonl") as server:
        run = _run(db, server.url, "TOOL: add", stream=stream)
    payload = db.snapshot(run.id).payload("talk")
    assert [(r["message"], r["finish_reason"]) for r in payload["replies"]] == [
        (1, "tool_calls"),
        (3, "stop"),
    ]
    assert [r["usage"]["prompt_tokens"] for r in payload["replies"]] == [1, 3]
    assert payload["usage"] == {"prompt_tokens": 4, "completion_tokens": 6, "total_tokens": 10}
    assert {r["model"] for r in payload["replies"]} == {"fake-model"}


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_a_reply_cut_off_by_the_length_limit_is_continued_not_taken_as_the_answer(
    db: st.Database, tmp_path, stream: bool
) -> None:
    with FakeOpenAI(tmp_path / "log.jsonl") as server:
        run = _run(db, server.url, "LONG: tell me everything", stream=stream)
        assert run.output == {"talk": "part one, part two."}
        first, second = server.requests()
    assert second[: len(first)] == first
    assert second[-1]["role"] == "user" and "cut off" in second[-1]["content"]
    finishes = [r["finish_reason"] for r in db.snapshot(run.id).payload("talk")["replies"]]
    assert finishes == ["length", "stop"]


def test_a_reply_always_cut_off_fails_the_task_without_retrying(db: st.Database, tmp_path) -> None:
    with FakeOpenAI(tmp_path / "log.jsonl") as server:
        run = _run(db, server.url, "ENDLESS: go on", retries=2, max_continuations=1)
        assert run.status == "failed"
        assert "length limit" in run.error and "max_tokens" in run.error
        assert server.count == 2  # the reply and one continuation, in one attempt
    assert [a.state for a in db.store.list_attempts(run.id, "talk")] == ["failed"]


def test_a_reply_without_choices_is_a_clear_error(db: st.Database, tmp_path) -> None:
    with FakeOpenAI(tmp_path / "log.jsonl") as server:
        run = _run(db, server.url, "EMPTY: anything")
    assert run.status == "failed"
    assert "no choices" in run.error and server.url in run.error


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_errors_that_cannot_succeed_are_not_retried_by_the_task(
    db: st.Database, tmp_path, status: int
) -> None:
    with FakeOpenAI(tmp_path / "log.jsonl", fail_at=1, fail_status=status) as server:
        run = _run(db, server.url, "hello", retries=2)
        assert run.status == "failed"
        assert server.count == 1
    assert f"HTTP {status}" in run.error and "cannot succeed" in run.error
    attempts = db.store.list_attempts(run.id, "talk")
    assert [a.state for a in attempts] == ["failed"]
    assert attempts[0].error_code == "model_request_rejected"


@pytest.mark.parametrize("status", [408, 409, 429, 500, 503])
def test_transient_errors_are_retried_by_the_task(db: st.Database, tmp_path, status: int) -> None:
    with FakeOpenAI(tmp_path / "log.jsonl", fail_at=1, fail_status=status) as server:
        run = _run(db, server.url, "hello", retries=1)
        assert run.status == "finished"
        assert [user_turns(m) for m in server.requests()] == [1, 1]
    attempts = db.store.list_attempts(run.id, "talk")
    assert [a.state for a in attempts] == ["failed", "finished"]
    assert attempts[0].error_code == "model_error"


def test_a_server_that_cannot_be_reached_is_retried(db: st.Database) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    run = _run(db, url, "hello", retries=1)
    assert run.status == "failed" and "could not reach" in run.error
    attempts = db.store.list_attempts(run.id, "talk")
    assert [(a.state, a.error_code) for a in attempts] == [("failed", "model_error")] * 2


@pytest.mark.parametrize(
    ("fault", "said"),
    [("cut", "no finish_reason"), ("error", "the server is overloaded")],
    ids=["ends-without-finish-reason", "error-event-mid-stream"],
)
def test_a_spoilt_stream_is_a_model_error_the_task_retries_not_an_answer(
    db: st.Database, tmp_path, fault: str, said: str
) -> None:
    with FakeOpenAI(tmp_path / "log.jsonl", stream_fault=fault) as server:
        run = _run(db, server.url, "hello", retries=1, stream=True)
        assert server.count == 2
    assert run.status == "finished" and run.output == {"talk": "answer 1 to hello"}
    attempts = db.store.list_attempts(run.id, "talk")
    assert [(a.state, a.error_code) for a in attempts] == [
        ("failed", "model_error"),
        ("finished", None),
    ]
    assert said in attempts[0].error and server.url in attempts[0].error
    replies = db.snapshot(run.id).payload("talk")["replies"]
    assert [r["finish_reason"] for r in replies] == ["stop"]  # nothing of the spoilt reply


def test_a_plain_reply_to_a_streaming_request_says_the_server_ignored_stream(
    db: st.Database, tmp_path
) -> None:
    with FakeOpenAI(tmp_path / "log.jsonl", ignore_stream=True) as server:
        run = _run(db, server.url, "hello", retries=2, stream=True)
        assert server.count == 1  # asking again cannot help
    assert run.status == "failed"
    assert "ignored stream=True" in run.error and "stream=False" in run.error
    attempts = db.store.list_attempts(run.id, "talk")
    assert [(a.state, a.error_code) for a in attempts] == [("failed", "model_request_rejected")]
