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
     "turns": n}

``messages`` is the exact list sent to the model (OpenAI chat format, tool calls and tool
results included); ``turns`` counts the task's prompts already added to it. The agent
publishes (``await request.on_checkpoint(...)``, durable when it returns) after every model
turn, once the turn's tool results are appended. It consumes the format in modes ``resume``
(continue its own conversation) and ``fork`` (a task seeded from another task's
conversation starts its own prompts on top of it).

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
from smithers_tt.checkpoint import AgentCheckpoint, CheckpointCapability, CheckpointFormat
from smithers_tt.engine import GenerateRequest, GenerateResult
from smithers_tt.errors import InvalidArgument

__all__ = ["CODEC", "VERSION", "ChatAgent"]

CODEC = "smithers.chat"
"""Codec of a ChatAgent checkpoint: ``{"messages": [...], "turns": n}``."""
VERSION = 1

_MESSAGE_KEYS = ("role", "content", "name", "tool_calls", "tool_call_id", "refusal")
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

    def _start(self, request: GenerateRequest) -> tuple[list[dict[str, Any]], int]:
        """The conversation this call continues: a checkpoint's, or a new one."""
        checkpoint = request.resume_checkpoint
        if checkpoint is not None and (checkpoint.codec, checkpoint.version) == (CODEC, VERSION):
            payload = checkpoint.payload
            messages = list(payload.get("messages") or [])
            if request.checkpoint_mode == "fork":
                return messages, 0  # another task's conversation: our prompts go on top
            return messages, int(payload.get("turns") or 0)
        return ([{"role": "system", "content": self.system}] if self.system else []), 0

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

    def _client(self) -> Any:
        with extra_needed("ChatAgent"):  # imported here: only ChatAgent users need openai
            from openai import AsyncOpenAI

        api_key = self.api_key
        if api_key is None and self.base_url is not None:
            api_key = "not-needed"
        return AsyncOpenAI(
            api_key=api_key,
            base_url=self.base_url,
            max_retries=self.max_retries,
            timeout=self.timeout,
        )

    async def _ask(self, client: Any, messages: list[dict[str, Any]]) -> dict[str, Any]:
        if not self.model:
            raise InvalidArgument("ChatAgent needs a model: pass model= or set SMITHERS_TT_MODEL")
        options = dict(self.request_options)
        if self.tools:
            options["tools"] = self._tool_specs()
        self.requests += 1
        response = await client.chat.completions.create(
            model=self.model, messages=messages, **options
        )
        raw = response.choices[0].message.model_dump(mode="json", exclude_none=True)
        message = {k: raw[k] for k in _MESSAGE_KEYS if k in raw}
        message["role"] = "assistant"
        message.setdefault("content", None)
        return message

    async def generate(self, request: GenerateRequest) -> GenerateResult:
        """Continue (or start) the conversation until every prompt is answered."""
        prompts = self._prompts(request)
        messages, turns = self._start(request)
        if request.schema_error:
            messages.append(
                {
                    "role": "user",
                    "content": "Your answer was rejected: "
                    f"{request.schema_error}\nReply again with a corrected answer only.",
                }
            )
        rounds = 0
        client = self._client()
        try:
            while True:
                last = messages[-1] if messages else None
                if last is None or last["role"] == "system" or _answered(last):
                    if turns >= len(prompts):
                        break
                    messages.append({"role": "user", "content": prompts[turns]})
                    turns += 1
                    rounds = 0
                    continue
                if last["role"] == "assistant":  # tool calls whose results are missing
                    for call in last.get("tool_calls") or []:
                        messages.append(
                            {
                                "role": "tool",
                                "tool_call_id": call.get("id"),
                                "content": await self._call_tool(call),
                            }
                        )
                    continue
                if rounds > self.max_tool_rounds:
                    raise RuntimeError(
                        f"ChatAgent {self.id!r}: more than {self.max_tool_rounds} tool rounds "
                        "for one prompt"
                    )
                reply = await self._ask(client, messages)
                messages.append(reply)
                rounds += 1
                for call in reply.get("tool_calls") or []:
                    messages.append(
                        {
                            "role": "tool",
                            "tool_call_id": call.get("id"),
                            "content": await self._call_tool(call),
                        }
                    )
                await request.on_checkpoint(
                    AgentCheckpoint(CODEC, VERSION, {"messages": messages, "turns": turns})
                )
        finally:
            await _close(client)
        answer = next(
            (m.get("content") for m in reversed(messages) if m["role"] == "assistant"), None
        )
        return GenerateResult(self._output(answer))

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


def _answered(message: Mapping[str, Any]) -> bool:
    """Whether a message is a final assistant answer (no tool calls pending)."""
    return message.get("role") == "assistant" and not message.get("tool_calls")


async def _close(client: Any) -> None:
    close: Callable[[], Awaitable[None]] | None = getattr(client, "close", None)
    if close is not None:
        await close()
