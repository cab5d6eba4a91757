"""The checkpoint contract: strict validation + canonical bytes + SHA-256, against naive JSON.

Run with ``./dev bench contract`` (or ``python -m benchmarks contract``).

For each payload, in the same run, we time:

* **ours**: ``AgentCheckpoint(codec, 1, payload).encode()``, i.e. construction (validates the
  payload as strict JSON) followed by ``encode()`` (re-validates, writes canonical bytes and
  their SHA-256 address);
* **naive**: ``hashlib.sha256(json.dumps(envelope, sort_keys=True).encode()).hexdigest()`` of
  the same envelope, which validates nothing (NaN, tuples, ``-0.0`` and non-str keys all go
  through) and is not canonical across ``1``/``1.0`` or ``ensure_ascii`` settings.

Each figure is the best of three alternating rounds, each the median of several calls.
Throughput is the size of the canonical envelope divided by that time, so the two MB/s
columns share one numerator and ``ratio = ours MB/s / naive MB/s = naive time / ours time``
(goal: >= 1.0).
"""

from __future__ import annotations

import gc
import hashlib
import json
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

from smithers_tt.checkpoint import MAX_CHECKPOINT_BYTES, AgentCheckpoint, canonical_bytes

CODEC = "bench.agent-state"
MIB = 1024 * 1024

_WORDS_TEXT = """
the agent calls a tool to search the repository and reads each result before it answers
user question about deployment pipeline retries timeout budget database migration schema
report summary function argument returns error because value missing field config plan
step next check test passes fails rewrite patch commit review latency tokens context
window memory cache retrieval document ranking score embedding vector index query
"""
_WORDS = _WORDS_TEXT.split()
# Some non-ASCII, as transcripts really contain: accents, typography, CJK, emoji.
_FOREIGN = ["café", "naïve", "Zürich", "façade", "—", "“quoted”", "€12", "日本語", "😀", "→", "ß"]


def _sentence(rng: random.Random) -> str:
    words = [rng.choice(_WORDS) for _ in range(rng.randint(6, 18))]
    if rng.random() < 0.3:
        words.insert(rng.randrange(len(words)), rng.choice(_FOREIGN))
    return " ".join(words).capitalize() + rng.choice([".", ".", ".", "?", "!"])


def _text(rng: random.Random, approx_chars: int) -> str:
    parts: list[str] = []
    size = 0
    while size < approx_chars:
        s = _sentence(rng)
        parts.append(s)
        size += len(s) + 1
        if rng.random() < 0.1:
            parts.append("\n\n")
    return " ".join(parts)


def _tool_call(rng: random.Random, i: int) -> dict[str, Any]:
    name = rng.choice(["search_docs", "read_file", "run_tests", "http_get", "sql_query"])
    args = {
        "query": _sentence(rng),
        "limit": rng.randint(1, 50),
        "filters": {"lang": rng.choice(["en", "de", "ja"]), "recent": rng.random() < 0.5},
    }
    return {
        "id": f"call_{i:06d}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)},
    }


def _message(rng: random.Random, i: int, approx_chars: int) -> dict[str, Any]:
    role = ["system", "user", "assistant", "tool"][0 if i == 0 else 1 + (i % 3)]
    msg: dict[str, Any] = {
        "role": role,
        "content": _text(rng, approx_chars),
        "tokens": {"prompt": rng.randint(50, 8000), "completion": rng.randint(1, 1500)},
    }
    if role == "assistant":
        msg["temperature"] = 0.7
        msg["latency_s"] = round(rng.uniform(0.2, 9.0), 3)
        if rng.random() < 0.3:
            msg["tool_calls"] = [_tool_call(rng, i * 10 + k) for k in range(rng.randint(1, 3))]
    if role == "tool":
        msg["tool_call_id"] = f"call_{(i - 1) * 10:06d}"
        msg["score"] = round(rng.random(), 4)
    return msg


def transcript_payload(target_bytes: int = MIB, messages: int = 200) -> dict[str, Any]:
    """(a) an agent's chat state: ``messages`` messages totalling about ``target_bytes``."""
    rng = random.Random(1)
    per_message = target_bytes // messages
    return {
        "model": "example-large-2025",
        "settings": {"temperature": 0.7, "top_p": 0.95, "max_tokens": 4096},
        "messages": [_message(rng, i, per_message) for i in range(messages)],
        "summary": _text(rng, 600),
        "turn": messages // 2,
    }


def _document(rng: random.Random, i: int, dims: int) -> dict[str, Any]:
    return {
        "id": f"doc-{i:05d}",
        "url": f"https://docs.example.com/{rng.choice(_WORDS)}/{i}",
        "title": _sentence(rng),
        "text": _text(rng, 2500),
        "score": round(rng.random(), 6),
        # An embedding as models return it: float32 values widened to Python floats. About
        # one in 600 is below 1e-4 in magnitude, which orjson would not write as ``repr``
        # does, so this also exercises the patched path of canonical_bytes.
        "embedding": [float(f"{rng.gauss(0.0, 0.05):.8g}") for _ in range(dims)],
    }


def large_payload(target_bytes: int = MAX_CHECKPOINT_BYTES - 256 * 1024) -> dict[str, Any]:
    """(b) a big agent state just under the ceiling: transcript, tool outputs, documents."""
    rng = random.Random(2)
    state: dict[str, Any] = {
        "transcript": transcript_payload(target_bytes // 2, messages=1600),
        "tool_outputs": [
            {"call_id": f"call_{i:06d}", "ok": rng.random() < 0.9, "stdout": _text(rng, 6000)}
            for i in range(200)
        ],
        "documents": [],
        "metrics": {"step_latency_s": [round(rng.uniform(0.1, 5), 3) for _ in range(2000)]},
    }
    # Fill up to the target with retrieved documents (text + a 256-dim embedding each).
    size = _canonical_size(state)
    docs = state["documents"]
    while True:
        doc = _document(rng, len(docs), 256)
        grow = len(canonical_bytes(doc)) + (1 if docs else 0)
        if size + grow > target_bytes:
            return state
        docs.append(doc)
        size += grow


def _canonical_size(payload: Any) -> int:
    return AgentCheckpoint(CODEC, 1, payload).encode().size


def _median_seconds(fn: Callable[[], object], repeats: int) -> float:
    fn()  # warm up
    times = []
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def compare(name: str, payload: Any, repeats: int) -> dict[str, Any]:
    """Time ours and naive on ``payload`` (interleaved, same process) and return the figures."""
    envelope = {"codec": CODEC, "version": 1, "payload": payload}
    size = _canonical_size(payload)

    def ours() -> str:
        return AgentCheckpoint(CODEC, 1, payload).encode().content_hash

    def naive() -> str:
        return hashlib.sha256(json.dumps(envelope, sort_keys=True).encode()).hexdigest()

    # Alternate the two so drift on the machine hits both alike.
    t_ours, t_naive = [], []
    for _ in range(3):
        t_ours.append(_median_seconds(ours, repeats))
        t_naive.append(_median_seconds(naive, repeats))
    ours_s, naive_s = min(t_ours), min(t_naive)
    return {
        "payload": name,
        "size": size,
        "ours_ms": ours_s * 1e3,
        "naive_ms": naive_s * 1e3,
        "ours_mbs": size / MIB / ours_s,
        "naive_mbs": size / MIB / naive_s,
        "ratio": naive_s / ours_s,
    }


def print_table(rows: list[dict[str, Any]]) -> None:
    head = (
        f"{'payload':<34} {'canonical':>11} {'ours ms':>9} {'naive ms':>9} "
        f"{'ours MB/s':>10} {'naive MB/s':>10} {'ratio':>6}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        print(
            f"{r['payload']:<34} {r['size'] / MIB:>7.2f} MiB {r['ours_ms']:>9.2f} "
            f"{r['naive_ms']:>9.2f} {r['ours_mbs']:>10.0f} {r['naive_mbs']:>10.0f} "
            f"{r['ratio']:>6.2f}"
        )
    print(
        "MB/s = canonical MiB (2**20 bytes) / seconds, best of 3 alternating rounds of a median;"
        " ratio = ours / naive (goal >= 1.0)"
    )


def main() -> None:
    small = transcript_payload()
    large = large_payload()
    rows = [
        compare("(a) transcript, 200 messages", small, repeats=15),
        compare("(b) agent state near 16 MiB", large, repeats=5),
    ]
    print_table(rows)


if __name__ == "__main__":
    main()
