"""Model calls written with the frame they ride in with: a checkpoint's publish or an
attempt's end (never a commit of their own).

A call's request and reply are content (:func:`encode_call`: the envelope
``smithers.model-request`` / ``smithers.model-reply``, stored once by hash, as checkpoints
are). :func:`call_changes` gives the frameless changes that write a list of calls: their
content stored with the clock's advance (one round trip on PostgreSQL, once per write,
checked when it was there already), then their rows added to the frames' ``executemany`` (no
round trip of their own), numbered with the frame that follows.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from smithers_tt._model_calls import REPLY_CODEC, REQUEST_CODEC, TOKEN_FIELDS, ModelCall
from smithers_tt.checkpoint import AgentCheckpoint, EncodedCheckpoint
from smithers_tt.errors import InvalidArgument, SmithersError
from smithers_tt.store._records import AttemptKey
from smithers_tt.store.backend import schema as S
from smithers_tt.store.ledger._content import ContentStored
from smithers_tt.store.ledger._node_changes import AttemptEnded
from smithers_tt.store.ledger._write import Change, Write

CALL_COLUMNS = (
    "call_id", "run_id", "frame_no", "position", "node_id", "iteration", "attempt", "model",
    "request_hash", "reply_hash", "finish_reason", *TOKEN_FIELDS, "started_at_ms", "ttft_ms",
    "latency_ms", "status", "error", "rewind_id", "lg_key",
)  # fmt: skip
"""The columns of ``tt_model_calls`` in their order (``Statements.insert_model_call``)."""
if tuple(S.model_calls.c.keys()) != CALL_COLUMNS:
    raise RuntimeError("smithers_tt.store.ledger._calls is out of step with _schema; fix it")


@dataclass(frozen=True, slots=True)
class EncodedCall:
    """A :class:`ModelCall` ready to write: its request and reply encoded as content."""

    call: ModelCall
    request: EncodedCheckpoint | None
    reply: EncodedCheckpoint | None


def encode_call(call: ModelCall) -> EncodedCall:
    """Check and encode ``call``'s request and reply (strict JSON, within the content ceiling;
    raises :class:`~smithers_tt.errors.CheckpointInvalid` naming the bad value's path)."""
    if not isinstance(call, ModelCall):
        raise InvalidArgument(f"a model call is a ModelCall, got {type(call).__name__}")
    request = None
    if call.request is not None:
        request = AgentCheckpoint(REQUEST_CODEC, 1, {"messages": call.request}).encode()
    reply = None if call.reply is None else AgentCheckpoint(REPLY_CODEC, 1, call.reply).encode()
    return EncodedCall(call, request, reply)


def call_changes(key: AttemptKey, calls: Sequence[EncodedCall]) -> list[Change]:
    """The frameless changes that write ``calls`` (made by attempt ``key``) with the frame of
    the change that follows them: their content first (each distinct request and reply once),
    then :class:`CallsRecorded`. Empty when there are no calls."""
    if not calls:
        return []
    return [*contents_of(calls), CallsRecorded(key, calls)]


def contents_of(calls: Sequence[EncodedCall]) -> list[Change]:
    """The frameless changes storing the requests and replies of ``calls``, each once."""
    seen: dict[str, EncodedCheckpoint] = {}
    for encoded in calls:
        for enc in (encoded.request, encoded.reply):
            if enc is not None:
                seen.setdefault(enc.content_hash, enc)
    return [ContentStored(enc) for enc in seen.values()]


class CallsRecorded(Change):
    """Frameless: the rows of model calls, inserted with the frames (one ``executemany``, no
    round trip of their own), numbered with the frame of the change that follows this one
    (a frameless change is given the number the next frame gets)."""

    __slots__ = ("calls", "key")

    ticks = 0
    executes = False
    keeps_run = True

    def __init__(self, key: AttemptKey, calls: Sequence[EncodedCall]) -> None:
        self.key, self.calls = key, calls

    def apply(self, w: Write, frame_no: int, early: Any) -> None:
        for position, encoded in enumerate(self.calls):
            row = call_row(secrets.token_hex(12), self.key, frame_no, position, encoded)
            w.defer(w.sql.insert_model_call, row)


def call_row(
    call_id: str,
    key: AttemptKey,
    frame_no: int,
    position: int,
    encoded: EncodedCall,
    rewind_id: str | None = None,
) -> tuple[Any, ...]:
    """The row of ``tt_model_calls`` of a call: its :data:`CALL_COLUMNS` but the last, the
    LangGraph saver's ``lg_key`` (so an agent's calls are written alike before migration 0019
    and after)."""
    c = encoded.call
    return (
        call_id, key.run_id, frame_no, position, key.node_id, key.iteration, key.attempt,
        c.model, None if encoded.request is None else encoded.request.content_hash,
        None if encoded.reply is None else encoded.reply.content_hash,
        c.finish_reason, c.prompt_tokens, c.completion_tokens, c.cached_tokens,
        c.reasoning_tokens, c.started_at_ms, c.ttft_ms, c.latency_ms, c.status, c.error,
        rewind_id,
    )  # fmt: skip


def with_calls(
    ends: Sequence[Change], calls: Mapping[AttemptKey, Sequence[ModelCall]]
) -> list[Change]:
    """``ends`` (what a cancel imposes on the attempts left open) each preceded by the model
    calls its attempt made since its last write, so that they are stored with that end, in
    its frame. A call that cannot be encoded is left out: a cancel must not fail for it."""
    out: list[Change] = []
    for end in ends:
        encoded = []
        made = calls.get(end.key, ()) if isinstance(end, AttemptEnded) else ()
        for call in made:
            try:
                encoded.append(encode_call(call))
            except SmithersError:
                continue
        if encoded:
            assert isinstance(end, AttemptEnded)
            out += call_changes(end.key, encoded)
        out.append(end)
    return out
