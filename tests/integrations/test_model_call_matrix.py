"""The matrix of issue 36's item 6, cell by cell: every reply shape of the loopback server
(OpenAI, vLLM, llama.cpp, Ollama) x streamed or not x what happens (usage reported, no usage,
a 429 the client retried then a 200, a stream cut off then retried, a reply cut by
``length`` then continued), on SQLite and PostgreSQL (the ``db`` fixture). In every cell each
HTTP request the server saw is one recorded call, in order, with the messages it was sent,
its status, finish reason, error and attempt, and the server's tokens exactly when it
reported them."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("openai")
pytest.importorskip("pandas")

import smithers_tt as st
from smithers_tt.checkpoint import loads
from smithers_tt.integrations.openai_agent import ChatAgent

from ._fake_openai import FakeOpenAI

PROVIDERS = ["openai", "vllm", "llamacpp", "ollama"]

CASES: dict[str, dict[str, Any]] = {
    # server options, prompt, task retries; then per call: status, finish reason, failed,
    # attempt, and whether the server reported its tokens
    "usage": dict(server={}, prompt="hello", retries=0, status=[200], finish=["stop"],
                  failed=[False], attempt=[1], tokens=[True]),
    "no-usage": dict(server={"usage": None}, prompt="hello", retries=0, status=[200],
                     finish=["stop"], failed=[False], attempt=[1], tokens=[False]),
    "429-then-200": dict(server={"fail_at": 1, "fail_status": 429}, prompt="hello", retries=0,
                         status=[429, 200], finish=[None, "stop"], failed=[True, False],
                         attempt=[1, 1], tokens=[False, True]),
    "cut-stream": dict(server={"stream_fault": "cut"}, prompt="hello", retries=1,
                       status=[200, 200], finish=[None, "stop"], failed=[True, False],
                       attempt=[1, 2], tokens=[False, True]),
    "length": dict(server={}, prompt="LONG: tell me", retries=0, status=[200, 200],
                   finish=["length", "stop"], failed=[False, False], attempt=[1, 1],
                   tokens=[True, True]),
}  # fmt: skip

CELLS = [
    pytest.param(provider, stream, case, id=f"{provider}-{'stream' if stream else 'plain'}-{case}")
    for provider in PROVIDERS
    for stream in (False, True)
    for case in CASES
    if stream or case != "cut-stream"  # a plain reply cannot be cut mid-stream
]


def _or_none(value: Any) -> Any:
    import pandas

    return None if pandas.isna(value) else value


@pytest.mark.parametrize(("provider", "stream", "case"), CELLS)
def test_each_http_request_of_each_cell_is_one_call_as_the_server_answered(
    db: st.Database, tmp_path, provider: str, stream: bool, case: str
) -> None:
    c = CASES[case]
    with FakeOpenAI(tmp_path / "log.jsonl", provider=provider, **c["server"]) as server:
        agent = ChatAgent("fake-model", base_url=server.url, stream=stream, max_retries=1)
        wf = st.Workflow("matrix")
        wf.task("talk", agent=agent, prompt=c["prompt"], retries=c["retries"])
        run = db.run(wf)
        sent = server.requests()
    assert run.status == "finished", run.error
    calls = run.model_calls()
    assert len(calls) == len(sent) == len(c["status"])
    assert [
        loads(db.store.read_content(h))["payload"]["messages"] for h in calls.request_hash
    ] == sent
    assert calls.status.tolist() == c["status"]
    assert [_or_none(f) for f in calls.finish_reason] == c["finish"]
    assert calls.error.notna().tolist() == c["failed"]
    assert calls.attempt.tolist() == c["attempt"]
    assert calls.node_id.tolist() == ["talk"] * len(sent)
    expected_prompt = [len(m) if told else None for m, told in zip(sent, c["tokens"], strict=True)]
    assert [_or_none(p) for p in calls.prompt_tokens] == expected_prompt
    assert [_or_none(t) for t in calls.completion_tokens] == [3 if t else None for t in c["tokens"]]
    assert (calls.latency_ms > 0).all() and calls.started_at_ms.is_monotonic_increasing
    answered = calls[calls.error.isna()]
    assert answered.ttft_ms.notna().all() if stream else calls.ttft_ms.isna().all()
    # a reply is kept for each call that got one, none for those that did not
    assert calls.reply_hash.notna().tolist() == [not f for f in c["failed"]]
