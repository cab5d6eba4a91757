"""A checkpoint-aware chat agent for any OpenAI-compatible endpoint.

:class:`ChatAgent` talks to ``/v1/chat/completions`` through the official ``openai`` package
(``AsyncOpenAI``): OpenAI itself, or any server speaking the same protocol (vLLM, llama.cpp,
Ollama, LM Studio, a gateway ...). Its conversation is its checkpoint, so work already paid
for is never paid for again: a retry, a schema-correction turn, a process killed with
``kill -9`` and resumed, or a fork from an edited conversation all continue the conversation
from the newest durable checkpoint instead of starting over.

Checkpoint format (codec ``smithers.chat``, version 1)::

    {"messages": [ {"role": "system" | "user" | "assistant" | "tool", "content": ...,
                    "tool_calls": [...], "tool_call_id": ...}, ... ],
     "turns": n,
     "replies": [{"message": i, "finish_reason": "stop", "usage": {...}, "model": ...}, ...],
     "usage": {"prompt_tokens": p, "completion_tokens": c, "total_tokens": t}}

``messages`` is the exact list sent to the model, in OpenAI's chat schema whatever server
answered: replies are normalised before they are checkpointed (an empty ``tool_calls`` list
and server-only fields such as a tool call's ``index`` or vLLM's ``reasoning_content`` are
dropped, a missing tool call id gets a stable one that its tool result refers to, object
arguments become JSON strings, a null answer an empty string), so a conversation started on
vLLM, llama.cpp or Ollama resumes on OpenAI. ``turns`` counts the task's prompts already added
to it. ``replies`` records, for each model reply, the index of its message, its
``finish_reason``, its ``usage`` and the model that answered; ``usage`` sums the replies'
(``replies`` and ``usage`` are absent from checkpoints of earlier releases). Every HTTP try of
every request (a 429 the client retried, a continuation, a streamed reply) is also recorded as
a model call of the attempt (``request.record_model_call``: tokens, time to first token,
latency, status, error; see ``run.model_calls()``). The agent
publishes (``await request.on_checkpoint(...)``, durable when it returns) after every model
turn, once the turn's tool results are appended; with ``stream=True`` too (one checkpoint per
turn, not per token: ``on_delta`` sees the tokens as they arrive).

A reply cut off by the server's length limit (``finish_reason == "length"``) is not a final
answer: it is kept, the model is asked to go on (``max_continuations`` times at most) and the
answer is the pieces joined. A reply with no ``choices``, a streamed reply that ends with no
``finish_reason`` (cut off: it is not kept, the next try asks again) and an error event in the
middle of a stream are a :class:`ModelError`; a server that answers a streaming request with
anything but server-sent events ignored ``stream``, which asking again cannot fix. Errors that
cannot succeed on retry (400 such as a context too long, 401, 403, 404, 422) are raised as
:class:`ModelRequestRejected`, which the task never retries; timeouts, 408, 409, 429, 5xx and
dropped connections are :class:`ModelError`, which its retry policy does.

It consumes the format in modes ``resume`` (continue its own conversation) and ``fork`` (a
task seeded from another task's conversation starts its own prompts on top of it).

Usage::

    import smithers_tt as st
    from smithers_tt.integrations.openai_agent import ChatAgent

    agent = ChatAgent(
        "gpt-4o-mini",                    # or $SMITHERS_TT_MODEL
        base_url=None,                    # or $OPENAI_BASE_URL, e.g. http://localhost:8000/v1
        api_key=None,                     # or $OPENAI_API_KEY
        system="You are a careful analyst.",
        followups=["Now list the risks.", "Summarise in 3 bullets."],
    )
    wf = st.Workflow("report")
    wf.task("draft", agent=agent, prompt=lambda ctx: f"Analyse {ctx.input['topic']}")
    db = st.connect("sqlite:///runs.db")
    run = db.run(wf, {"topic": "solar"})

    # after a crash, in a new process: turns already answered are not asked again
    db.resume(run_id, wf)
    # fork from frame 12 with an edited conversation
    edited = db.snapshot(run_id, 12).payload("draft")
    edited["messages"][1]["content"] = "Analyse wind instead"
    edit = {"draft": st.AgentCheckpoint("smithers.chat", 1, edited)}
    child = db.fork(run_id, 12, checkpoints=edit)
    db.resume(child.id, wf)

``turns=N`` instead of ``followups`` asks ``N - 1`` generic follow-ups ("Continue (turn k of
N)."). ``json_output=True`` parses the final answer as JSON (fences allowed) so a task's
output schema can validate it; a rejected answer comes back as a schema-correction turn, which
appends the error as a user message to the same conversation. ``tools`` maps a tool name to a
function (sync or async) taking the model's JSON arguments as keywords; ``tool_schemas`` gives
each tool's JSON schema of parameters.
"""

from __future__ import annotations

import inspect
import json
import os
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from smithers_tt._extras import extra_needed
from smithers_tt.checkpoint import AgentCheckpoint, CheckpointCapability, CheckpointFormat, clone
from smithers_tt.engine import GenerateRequest, GenerateResult
from smithers_tt.errors import InvalidArgument, ModelError, ModelRequestRejected
from smithers_tt.integrations._openai_calls import CallLog
from smithers_tt.integrations._openai_schema import StreamedReply, normalise_messages

__all__ = ["CODEC", "VERSION", "ChatAgent"]

CODEC = "smithers.chat"
"""Codec of a ChatAgent checkpoint: ``{"messages": [...], "turns": n}``."""
VERSION = 1

_RETRYABLE_STATUS = frozenset({408, 409, 429})
_CONTINUE = "Your reply was cut off by the length limit. Continue exactly where it stopped."
_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)


class ChatAgent:
    """A chat agent on an OpenAI-compatible endpoint whose conversation is its checkpoint.

    Args:
        model: model name (default ``$SMITHERS_TT_MODEL``).
        base_url: endpoint, e.g. ``http://localhost:8000/v1`` (default ``$OPENAI_BASE_URL``,
            else OpenAI's).
        api_key: key (default ``$OPENAI_API_KEY``; a placeholder when only a local
            ``base_url`` is given, since many local servers need none).
        system: system message starting every new conversation.
        id: agent id (recorded with its checkpoints, part of cache keys).
        followups: prompts asked after the task's own prompt, one model turn each.
        turns: total user turns when no ``followups`` are given (generic follow-ups).
        json_output: parse the final answer as JSON.
        tools: tool name -> function called with the model's arguments as keywords.
        tool_schemas: tool name -> JSON schema of its parameters.
        max_tool_rounds: tool-call rounds allowed per prompt before giving up.
        max_retries: retries of the ``openai`` client itself on transient HTTP errors.
        timeout: seconds per request.
        request_options: extra arguments of ``chat.completions.create`` (temperature ...).
        stream: stream each reply (also ``request_options={"stream": True}``); usage is
            asked for with ``stream_options={"include_usage": True}`` unless given.
        on_delta: called with each piece of text as it streams in.
        max_continuations: how many times a reply cut off by the length limit is continued
            before the task fails with :class:`ModelRequestRejected` (raise ``max_tokens``).
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        system: str | None = None,
        id: str = "chat",
        followups: Sequence[str] = (),
        turns: int | None = None,
        json_output: bool = False,
        tools: Mapping[str, Callable[..., Any]] | None = None,
        tool_schemas: Mapping[str, Mapping[str, Any]] | None = None,
        max_tool_rounds: int = 8,
        max_retries: int = 2,
        timeout: float | None = 120.0,
        request_options: Mapping[str, Any] | None = None,
        stream: bool = False,
        on_delta: Callable[[str], Any] | None = None,
        max_continuations: int = 2,
    ) -> None:
        if turns is not None and (type(turns) is not int or turns < 1):
            raise InvalidArgument(f"turns must be an int >= 1, got {turns!r}")
        if turns is not None and followups:
            raise InvalidArgument("give followups or turns, not both")
        self.model = model or os.environ.get("SMITHERS_TT_MODEL")
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL")
        self.api_key = api_key or os.environ.get("OPENAI_API_KEY")
        self.system = system
        self.id = id
        if turns is not None:
            followups = [f"Continue (turn {k} of {turns})." for k in range(2, turns + 1)]
        self.followups = [str(p) for p in followups]
        self.json_output = json_output
        self.tools = dict(tools or {})
        self.tool_schemas = dict(tool_schemas or {})
        self.max_tool_rounds = max_tool_rounds
        self.max_retries = max_retries
        self.timeout = timeout
        self.request_options = dict(request_options or {})
        self.stream = bool(self.request_options.pop("stream", stream))
        self.on_delta = on_delta
        self.max_continuations = max_continuations
        self.checkpoint_formats = [CheckpointFormat(CODEC, (VERSION,))]
        self.checkpoint_capabilities = [CheckpointCapability(CODEC, (VERSION,), ("resume", "fork"))]
        self.requests = 0
        """Model requests this object made (in this process)."""

    # --- the conversation ----------------------------------------------------------------

    def _prompts(self, request: GenerateRequest) -> list[str]:
        first = request.prompt
        if first is None:
            first = request.input if isinstance(request.input, str) else None
        if first is None:
            raise InvalidArgument(f"task {request.node_id!r} gives ChatAgent {self.id!r} no prompt")
        return [first, *self.followups]

    def _start(self, request: GenerateRequest) -> dict[str, Any]:
        """The conversation this call continues (a checkpoint's, or a new one), as a payload:
        ``messages`` (normalised: checkpoints of earlier releases may hold server shapes),
        ``turns``, ``replies`` and ``usage``."""
        checkpoint = request.resume_checkpoint
        if checkpoint is not None and (checkpoint.codec, checkpoint.version) == (CODEC, VERSION):
            payload = checkpoint.payload
            return {
                "messages": normalise_messages(payload.get("messages") or []),
                # a fork: another task's conversation, our prompts go on top
                "turns": 0 if request.checkpoint_mode == "fork" else int(payload.get("turns") or 0),
                "replies": list(payload.get("replies") or []),
                "usage": dict(payload.get("usage") or {}),
            }
        system = [{"role": "system", "content": self.system}] if self.system else []
        return {"messages": system, "turns": 0, "replies": [], "usage": {}}

    def _tool_specs(self) -> list[dict[str, Any]]:
        specs = []
        for name, fn in self.tools.items():
            specs.append(
                {
                    "type": "function",
                    "function": {
                        "name": name,
                        "description": inspect.getdoc(fn) or name,
                        "parameters": dict(
                            self.tool_schemas.get(name)
                            or {"type": "object", "properties": {}, "additionalProperties": True}
                        ),
                    },
                }
            )
        return specs

    async def _call_tool(self, call: dict[str, Any]) -> str:
        function = call.get("function") or {}
        name = function.get("name")
        fn = self.tools.get(name)
        if fn is None:
            return f"error: no tool named {name!r}"
        try:
            arguments = json.loads(function.get("arguments") or "{}")
            result = fn(**arguments) if isinstance(arguments, dict) else fn(arguments)
            if inspect.isawaitable(result):
                result = await result
        except Exception as error:  # the model sees the failure and can recover
            return f"error: {type(error).__name__}: {error}"
        return result if isinstance(result, str) else json.dumps(result, default=str)

    def _client(self, log: CallLog) -> Any:
        """A client whose HTTP tries ``log`` times (one client and log per ``generate``)."""
        with extra_needed("ChatAgent"):  # imported here: only ChatAgent users need openai
            from openai import AsyncOpenAI, DefaultAsyncHttpxClient

        api_key = self.api_key
        if api_key is None and self.base_url is not None:
            api_key = "not-needed"
        return AsyncOpenAI(
            api_key=api_key,
            base_url=self.base_url,
            max_retries=self.max_retries,
            timeout=self.timeout,
            http_client=DefaultAsyncHttpxClient(event_hooks=log.hooks()),
        )

    async def _ask(
        self, client: Any, messages: list[dict[str, Any]], request: GenerateRequest, log: CallLog
    ) -> dict[str, Any]:
        """One model reply: ``{"message", "finish_reason", "usage", "model"}``, the message
        normalised to OpenAI's schema; every HTTP try it took is recorded as a model call
        (``request.record_model_call``), failed ones too. Raises :class:`ModelError` or
        :class:`ModelRequestRejected` (see the module documentation)."""
        if not self.model:
            raise InvalidArgument("ChatAgent needs a model: pass model= or set SMITHERS_TT_MODEL")
        sent = clone(messages)
        log.start()
        try:
            reply = await self._reply(client, messages, log)
        except BaseException as error:
            for call in log.calls(self.model, sent, error=error):
                request.record_model_call(call)
            raise
        calls = log.calls(
            self.model, sent, reply=reply["message"], finish_reason=reply["finish_reason"],
            usage=reply["usage"], answered_by=reply["model"],
        )  # fmt: skip
        for call in calls:
            request.record_model_call(call)
        return reply

    async def _reply(
        self, client: Any, messages: list[dict[str, Any]], log: CallLog
    ) -> dict[str, Any]:
        """The reply of :meth:`_ask`, unrecorded."""
        options = dict(self.request_options)
        if self.tools:
            options["tools"] = self._tool_specs()
        if self.stream:
            options["stream"] = True
            options.setdefault("stream_options", {"include_usage": True})
        self.requests += 1
        try:
            response = await client.chat.completions.create(
                model=self.model, messages=messages, **options
            )
            if self.stream:
                self._check_events(response)
                streamed = StreamedReply(self.on_delta)
                async for chunk in response:
                    streamed.add(chunk.model_dump(mode="json", warnings=False))
                    if streamed.content or streamed.calls or streamed.refusal:
                        log.token()
                if not streamed.choices:
                    raise ModelError(f"{self._where()} streamed a reply with no choices")
                if streamed.finish_reason is None:  # not an answer: the next try asks again
                    raise ModelError(
                        f"{self._where()} ended the streamed reply with no finish_reason: it "
                        "was cut off (a dropped connection, or a server that stopped "
                        "mid-reply), so it is not kept; the task's retry policy may try again"
                    )
                message, finish = streamed.message(), streamed.finish_reason
                usage, model = streamed.usage, streamed.model
            else:
                reply = response.model_dump(mode="json", warnings=False)
                choices = reply.get("choices") or []
                if not choices:
                    raise ModelError(
                        f"{self._where()} answered with no choices (object "
                        f"{str(reply.get('object'))[:40]!r}); the task's retry policy may try "
                        "again"
                    )
                message = choices[0].get("message") or {}
                finish, usage, model = (
                    choices[0].get("finish_reason"),
                    reply.get("usage"),
                    reply.get("model"),
                )
        except Exception as error:
            translated = self._translate(error)
            if translated is None:
                raise
            raise translated from error
        message = {**message, "role": "assistant"}
        return {"message": message, "finish_reason": finish, "usage": usage, "model": model}

    def _check_events(self, stream: Any) -> None:
        """Refuse a reply to a streaming request that is not server-sent events: the server
        ignored ``stream`` (the client would find no events in it)."""
        response = getattr(stream, "response", None)
        kind = "" if response is None else response.headers.get("content-type", "")
        if response is not None and not kind.startswith("text/event-stream"):
            raise ModelRequestRejected(
                f"{self._where()} ignored stream=True: it answered {kind or 'no content type'}"
                ", not server-sent events (text/event-stream); create the ChatAgent with "
                "stream=False for this server"
            )

    def _where(self) -> str:
        return f"the model server at {self.base_url}" if self.base_url else "OpenAI"

    def _translate(self, error: Exception) -> Exception | None:
        """A :class:`ModelError` / :class:`ModelRequestRejected` for an ``openai`` error."""
        import openai

        if isinstance(error, openai.APIStatusError):
            status = error.status_code
            text = f"{self._where()} answered HTTP {status} for model {self.model!r}: "
            text += str(getattr(error, "message", "") or error)[:300]
            if status in _RETRYABLE_STATUS or status >= 500:
                return ModelError(text + "; the task's retry policy may try again", status=status)
            return ModelRequestRejected(
                text + "; asking again cannot succeed: fix the request (a context too long?), "
                "the API key or the model name, then resume the run",
                status=status,
            )
        if isinstance(error, openai.APIConnectionError):
            return ModelError(f"could not reach {self._where()}: {error}")
        if isinstance(error, openai.APIError):  # an error event in a stream, a bad body ...
            during = " in the middle of the streamed reply" if self.stream else ""
            return ModelError(
                f"{self._where()} sent an error{during} for model {self.model!r}: "
                f"{str(getattr(error, 'message', '') or error)[:300]}; the task's retry policy "
                "may try again"
            )
        return None

    def _step(self, conversation: dict[str, Any], prompts: list[str]) -> str | None:
        """What comes next: ``"ask"`` the model, ``"tools"`` to run, or None when every
        prompt is answered (adding the next prompt or a continuation as needed)."""
        messages = conversation["messages"]
        while True:
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant" and last.get("tool_calls"):
                return "tools"  # calls whose results are missing (their results follow them)
            if last is not None and last["role"] == "assistant" and self._cut(conversation):
                pieces = len(_pieces(conversation))
                if pieces > self.max_continuations:
                    raise ModelRequestRejected(
                        f"ChatAgent {self.id!r}: the reply was cut off by the length limit "
                        f"{pieces} times; raise max_tokens (request_options) or "
                        "max_continuations"
                    )
                messages.append({"role": "user", "content": _CONTINUE})
                return "ask"
            if last is None or last["role"] == "system" or last["role"] == "assistant":
                if conversation["turns"] >= len(prompts):
                    return None
                messages.append({"role": "user", "content": prompts[conversation["turns"]]})
                conversation["turns"] += 1
                conversation["rounds"] = 0
                continue
            return "ask"  # a user message or tool results to answer

    @staticmethod
    def _cut(conversation: dict[str, Any]) -> bool:
        """Whether the last message is a reply cut off by the length limit."""
        last = len(conversation["messages"]) - 1
        return any(
            r.get("message") == last and r.get("finish_reason") == "length"
            for r in conversation["replies"]
        )

    async def generate(self, request: GenerateRequest) -> GenerateResult:
        """Continue (or start) the conversation until every prompt is answered."""
        prompts = self._prompts(request)
        conversation = self._start(request)
        conversation["rounds"] = 0
        messages = conversation["messages"]
        if request.schema_error:
            messages.append(
                {
                    "role": "user",
                    "content": "Your answer was rejected: "
                    f"{request.schema_error}\nReply again with a corrected answer only.",
                }
            )
        log = CallLog()
        client = self._client(log)
        try:
            while (step := self._step(conversation, prompts)) is not None:
                if step == "tools":  # a checkpoint holds calls without results: run them
                    await self._run_tools(messages)
                    continue
                if conversation["rounds"] > self.max_tool_rounds:
                    raise RuntimeError(
                        f"ChatAgent {self.id!r}: more than {self.max_tool_rounds} tool rounds "
                        "for one prompt"
                    )
                reply = await self._ask(client, messages, request, log)
                conversation["rounds"] += 1
                messages.append(reply["message"])
                messages[:] = normalise_messages(messages)
                conversation["replies"].append(
                    {
                        "message": len(messages) - 1,
                        "finish_reason": reply["finish_reason"],
                        "usage": reply["usage"],
                        "model": reply["model"],
                    }
                )
                _add_usage(conversation["usage"], reply["usage"])
                await self._run_tools(messages)
                payload = {k: conversation[k] for k in ("messages", "turns", "replies", "usage")}
                await request.on_checkpoint(AgentCheckpoint(CODEC, VERSION, payload))
        finally:
            await _close(client)
        return GenerateResult(self._output(_answer(conversation)))

    async def _run_tools(self, messages: list[dict[str, Any]]) -> None:
        """Append the results of the last assistant message's tool calls that have none yet
        (ids are compared only with the results after that message: servers reuse ids)."""
        asked = max(i for i, m in enumerate(messages) if m["role"] == "assistant")
        answered = {m.get("tool_call_id") for m in messages[asked + 1 :]}
        for call in messages[asked].get("tool_calls") or []:
            if call["id"] not in answered:
                messages.append(
                    {
                        "role": "tool",
                        "tool_call_id": call["id"],
                        "content": await self._call_tool(call),
                    }
                )

    def _output(self, answer: Any) -> Any:
        if not self.json_output or not isinstance(answer, str):
            return answer
        match = _FENCE.match(answer)
        try:
            return json.loads(match.group(1) if match else answer)
        except ValueError:
            return answer  # not JSON: the task's schema rejects it and a correction turn follows

    def __repr__(self) -> str:
        return f"ChatAgent({self.model!r}, id={self.id!r}, base_url={self.base_url!r})"


def _pieces(conversation: dict[str, Any]) -> list[int]:
    """Indices of the messages that make the last answer: the last reply, and the replies cut
    off by the length limit that it continues (each followed by a continuation prompt)."""
    messages, replies = conversation["messages"], conversation["replies"]
    cut = {r.get("message") for r in replies if r.get("finish_reason") == "length"}
    last = next(
        (i for i in range(len(messages) - 1, -1, -1) if messages[i]["role"] == "assistant"), None
    )
    if last is None:
        return []
    pieces = [last]
    while (
        pieces[0] >= 2
        and pieces[0] - 2 in cut
        and messages[pieces[0] - 1].get("content") == _CONTINUE
    ):
        pieces.insert(0, pieces[0] - 2)
    return pieces


def _answer(conversation: dict[str, Any]) -> Any:
    """The final answer: the last reply's content, joined to the cut-off pieces it ends."""
    pieces = [conversation["messages"][i].get("content") for i in _pieces(conversation)]
    if len(pieces) == 1 or not all(isinstance(p, str) for p in pieces):
        return pieces[-1] if pieces else None
    return "".join(pieces)


def _add_usage(total: dict[str, Any], usage: Mapping[str, Any] | None) -> None:
    for key, value in (usage or {}).items():
        if type(value) is int:
            total[key] = total.get(key, 0) + value


async def _close(client: Any) -> None:
    close: Callable[[], Awaitable[None]] | None = getattr(client, "close", None)
    if close is not None:
        await close()
