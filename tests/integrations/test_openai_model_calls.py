"""Every model call ChatAgent makes is recorded with its attempt: one per HTTP try (a 429 the
client retried, a continuation after ``length``, a streamed reply, a stream cut off), with
the server's tokens when it reports them, timings, status and error, against the loopback
server's shapes (OpenAI, vLLM, Ollama, llama.cpp), on both backends."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("openai")
pytest.importorskip("pandas")

import smithers_tt as st
from smithers_tt.checkpoint import loads
from smithers_tt.integrations.openai_agent import ChatAgent

from ._fake_openai import FakeOpenAI

PROVIDERS = ["openai", "vllm", "ollama", "llamacpp"]
PRICES = {"fake-model": {"input": 1.0, "output": 2.0, "cached_input": 0.5}}


def _run(db: st.Database, url: str, prompt: str, *, retries: int = 0, **options) -> st.Run:
    options.setdefault("max_retries", 0)
    agent = ChatAgent("fake-model", base_url=url, **options)
    wf = st.Workflow("calls")
    wf.task("talk", agent=agent, prompt=prompt, retries=retries)
    return db.run(wf)


def _request(db: st.Database, content_hash: str) -> list:
    return loads(db.store.read_content(content_hash))["payload"]["messages"]


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_each_request_is_one_call_with_the_servers_tokens_and_the_messages_sent(
    db: st.Database, tmp_path, provider: str, stream: bool
) -> None:
    with FakeOpenAI(tmp_path / "log.jsonl", provider=provider) as server:
        run = _run(db, server.url, "first", followups=["second"], stream=stream)
        sent = server.requests()
    assert run.status == "finished", run.error
    calls = run.model_calls(PRICES)
    assert len(calls) == len(sent) == 2
    assert list(calls["node_id"]) == ["talk", "talk"] and set(calls["attempt"]) == {1}
    assert list(calls["prompt_tokens"]) == [len(m) for m in sent]
    assert list(calls["completion_tokens"]) == [3, 3]
    assert list(calls["finish_reason"]) == ["stop", "stop"]
    assert list(calls["status"]) == [200, 200] and calls["error"].isna().all()
    assert [_request(db, h) for h in calls["request_hash"]] == sent
    assert list(calls["cost"]) == pytest.approx([(n + 6) / 1e6 for n in calls["prompt_tokens"]])
    assert (calls["latency_ms"] > 0).all()
    if stream:  # the first token came before the end of the reply
        assert (calls["ttft_ms"] <= calls["latency_ms"]).all() and calls["ttft_ms"].notna().all()
    else:
        assert calls["ttft_ms"].isna().all()
    # each call rode with the checkpoint of its turn: no frame of its own
    checkpoints = [f.frame_no for f in run.frames() if f.kind == "checkpoint"]
    assert set(calls["frame_no"]) <= set(checkpoints)


def test_cached_and_reasoning_tokens_are_kept_and_cached_ones_priced_as_cached(
    db: st.Database, tmp_path
) -> None:
    with FakeOpenAI(tmp_path / "log.jsonl", usage="detailed") as server:
        run = _run(db, server.url, "first")
    (call,) = run.model_calls(PRICES).itertuples()
    assert (call.prompt_tokens, call.cached_tokens, call.reasoning_tokens) == (1, 1, 2)
    assert call.cost == pytest.approx((1 * 0.5 + 3 * 2.0) / 1e6)


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_a_server_that_reports_no_usage_gives_calls_without_tokens_or_cost(
    db: st.Database, tmp_path, stream: bool
) -> None:
    with FakeOpenAI(tmp_path / "log.jsonl", usage=None) as server:
        run = _run(db, server.url, "first", stream=stream)
    calls = run.model_calls(PRICES)
    assert len(calls) == 1 and calls["status"].tolist() == [200]
    assert calls["prompt_tokens"].isna().all() and calls["total_tokens"].isna().all()
    assert math.isnan(calls["cost"][0])  # a known model, but no tokens: no cost, not 0
    totals = run.model_call_totals(PRICES)
    assert (totals.run.calls, totals.run.total_tokens, totals.run.cost) == (1, 0, None)


def test_a_429_the_client_retried_then_a_200_are_two_calls_of_one_request(
    db: st.Database, tmp_path
) -> None:
    with FakeOpenAI(tmp_path / "log.jsonl", fail_at=1, fail_status=429) as server:
        run = _run(db, server.url, "first", max_retries=1)
        sent = server.requests()
    assert run.status == "finished", run.error
    calls = run.model_calls()
    assert len(sent) == 2 and len(calls) == 2
    assert calls["status"].tolist() == [429, 200]
    assert calls["error"].tolist()[0] == "HTTP 429" and calls["error"].isna().tolist()[1]
    assert calls["prompt_tokens"].isna().tolist() == [True, False]
    # the same request, stored once
    assert calls["request_hash"].nunique() == 1
    assert calls["started_at_ms"].is_monotonic_increasing


def test_a_continuation_after_length_is_a_call_of_its_own(db: st.Database, tmp_path) -> None:
    with FakeOpenAI(tmp_path / "log.jsonl") as server:
        run = _run(db, server.url, "LONG: tell me")
    assert run.status == "finished", run.error
    calls = run.model_calls()
    assert calls["finish_reason"].tolist() == ["length", "stop"]
    first, second = (_request(db, h) for h in calls["request_hash"])
    assert second[: len(first)] == first and len(second) == len(first) + 2


def test_a_cut_off_stream_is_a_failed_call_of_the_failed_attempt_and_the_retry_its_own(
    db: st.Database, tmp_path
) -> None:
    with FakeOpenAI(tmp_path / "log.jsonl", stream_fault="cut") as server:
        run = _run(db, server.url, "first", stream=True, retries=1)
    assert run.status == "finished", run.error
    calls = run.model_calls()
    assert calls["attempt"].tolist() == [1, 2]
    assert "no finish_reason" in calls["error"][0] and calls["finish_reason"].isna()[0]
    assert calls["error"].isna().tolist() == [False, True]
    assert calls["prompt_tokens"].isna().tolist() == [True, False]
    ended = {(f.attempt, f.frame_no) for f in run.frames() if f.kind == "attempt_finished"}
    assert (1, calls["frame_no"][0]) in ended  # recorded with the failed attempt's end


def test_a_rejected_request_is_recorded_with_its_status(db: st.Database, tmp_path) -> None:
    with FakeOpenAI(tmp_path / "log.jsonl", fail_at=1, fail_status=400) as server:
        run = _run(db, server.url, "first", retries=2)
    assert run.status == "failed"
    calls = run.model_calls()
    assert calls["status"].tolist() == [400]
    assert "ModelRequestRejected" in calls["error"][0]


def test_the_debuggers_read_gives_back_each_calls_request_and_reply(
    db: st.Database, tmp_path
) -> None:
    from smithers_tt.store.for_widgets import ModelCallReads

    with FakeOpenAI(tmp_path / "log.jsonl") as server:
        run = _run(db, server.url, "first", followups=["second"])
        sent = server.requests()
    reads = ModelCallReads(db.engine)
    calls = reads.model_calls(run.id)
    exchanges = [reads.model_call_exchange(c) for c in calls]
    assert [request for request, _ in exchanges] == sent
    messages = db.snapshot(run.id).payload("talk")["messages"]
    assert [reply for _, reply in exchanges] == [messages[1], messages[3]]
    totals = reads.model_call_totals(run.id, PRICES)
    assert totals.nodes["talk"].calls == 2 and totals.run.total_tokens == 1 + 3 + 3 + 3
