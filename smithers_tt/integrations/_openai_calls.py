"""Each HTTP try of a :class:`~smithers_tt.integrations.openai_agent.ChatAgent` request, timed
and recorded as a model call.

The ``openai`` client retries on its own (a 429, a 5xx, a dropped connection): a request the
agent makes once can be several HTTP tries, and each is a call of its own. :class:`CallLog`
is given to the client's ``httpx`` event hooks: a try starts when its request is sent and is
answered when its response's headers arrive (status known, body not yet read). When the
agent's request is over, :meth:`CallLog.calls` makes the calls: every try but the last one
failed (its HTTP status, or no answer at all), and the last one carries the outcome (the reply,
its finish reason and tokens, time to first token when streamed, or the error).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from smithers_tt._model_calls import ModelCall, usage_tokens


def _ms(start: float, end: float) -> float:
    return round((end - start) * 1000.0, 3)


@dataclass
class _Try:
    started: float
    started_at_ms: int
    status: int | None = None
    answered: float | None = None


class CallLog:
    """The HTTP tries of one agent's requests (one log per ``generate``: a ChatAgent may run
    in several tasks at once, each with its own client and log)."""

    def __init__(self) -> None:
        self.tries: list[_Try] = []
        self.first_token: float | None = None
        self.opened = _Try(time.perf_counter(), time.time_ns() // 1_000_000)

    def start(self) -> None:
        """A request starts now: forget the last one's tries."""
        self.tries, self.first_token = [], None
        self.opened = _Try(time.perf_counter(), time.time_ns() // 1_000_000)

    def hooks(self) -> dict[str, list[Any]]:
        """``httpx`` event hooks that time every try."""

        async def sent(request: Any) -> None:
            self.tries.append(_Try(time.perf_counter(), time.time_ns() // 1_000_000))

        async def answered(response: Any) -> None:
            if self.tries:
                self.tries[-1].status = response.status_code
                self.tries[-1].answered = time.perf_counter()

        return {"request": [sent], "response": [answered]}

    def token(self) -> None:
        """The first piece of a streamed reply arrived now (later calls change nothing)."""
        if self.first_token is None:
            self.first_token = time.perf_counter()

    def calls(
        self,
        model: str | None,
        request: Any,
        *,
        reply: Any = None,
        finish_reason: str | None = None,
        usage: Any = None,
        answered_by: str | None = None,
        error: BaseException | None = None,
    ) -> list[ModelCall]:
        """The calls of the request just over (since :meth:`start`): one per HTTP try; the
        last carries ``reply`` (with its ``finish_reason``, ``usage`` and the model that
        ``answered_by``), or ``error``. A request that never reached HTTP (a client a test
        gave) is one call, timed from :meth:`start`, with no status."""
        end = time.perf_counter()
        tries, first = self.tries or [self.opened], self.first_token
        if isinstance(reply, dict):  # the message as sent, without the client's empty fields
            reply = {k: v for k, v in reply.items() if v is not None}
        found = [
            ModelCall(
                model,
                request,
                started_at_ms=t.started_at_ms,
                status=t.status,
                latency_ms=_ms(t.started, t.answered if t.answered is not None else end),
                error=f"HTTP {t.status}" if t.status is not None else "no answer (connection)",
            )
            for t in tries[:-1]
        ]
        last = tries[-1]
        found.append(
            ModelCall(
                answered_by or model,
                request,
                reply,
                finish_reason,
                **usage_tokens(usage),
                started_at_ms=last.started_at_ms,
                ttft_ms=None if first is None else _ms(last.started, first),
                latency_ms=_ms(last.started, end),
                status=last.status,
                error=None if error is None else f"{type(error).__name__}: {error}"[:2000],
            )
        )
        return found
