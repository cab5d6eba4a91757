"""Integers of more than Python's 4,300-digit ``str`` limit are refused like any other value
that is not strict JSON: a :class:`CheckpointInvalid` naming the path, never the bare
``ValueError`` that printing them raises."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from smithers_tt.checkpoint import (
    AgentCheckpoint,
    CheckpointCapability,
    CheckpointFormat,
    canonical_bytes,
)
from smithers_tt.errors import CheckpointInvalid

HUGE = 10**5000  # str(HUGE) raises ValueError: Exceeds the limit (4300 digits)

CASES: dict[str, tuple[Callable[[], Any], str]] = {
    "payload value": (
        lambda: AgentCheckpoint("c", 1, {"n": HUGE}),
        "checkpoint payload is not strict JSON: integer of about 5001 digits beyond "
        "+-(2**53-1) at $.payload.n",
    ),
    "negative payload value": (
        lambda: AgentCheckpoint("c", 1, [-HUGE]),
        "checkpoint payload is not strict JSON: integer of about 5001 digits beyond "
        "+-(2**53-1) at $.payload[0]",
    ),
    "object key": (
        lambda: AgentCheckpoint("c", 1, {"a": {HUGE: 1}}),
        "checkpoint payload is not strict JSON: non-string object key <an integer of about "
        "5001 digits> (int) at $.payload.a",
    ),
    "tuple key holding one": (
        lambda: AgentCheckpoint("c", 1, {(1, HUGE): 1}),
        "checkpoint payload is not strict JSON: non-string object key <a tuple> (tuple) at "
        "$.payload",
    ),
    "canonical bytes": (
        lambda: canonical_bytes({"n": HUGE}),
        "the value is not strict JSON: integer of about 5001 digits beyond +-(2**53-1) at $.n",
    ),
    "version": (
        lambda: AgentCheckpoint("c", HUGE, {}),
        "AgentCheckpoint: version must be an int from 1 to 2147483647 (2**31-1), got <an integer"
        " of about 5001 digits> (int)",
    ),
    "format versions": (
        lambda: CheckpointFormat("c", HUGE),
        "CheckpointFormat: versions must be a list of ints, got <an integer of about 5001 digits>",
    ),
    "capability mode": (
        lambda: CheckpointCapability("c", [1], [HUGE]),
        "CheckpointCapability: modes must be a non-empty subset of ['resume', 'fork'], got "
        "['<an integer of about 5001 digits>']",
    ),
    "envelope field": (
        lambda: AgentCheckpoint.from_json({"codec": "c", "version": 1, "payload": 1, HUGE: 0}),
        "a checkpoint envelope has exactly the fields codec, version and payload; unexpected "
        "<an integer of about 5001 digits>",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_int_over_the_4300_digit_limit_is_refused_as_checkpoint_invalid(case: str) -> None:
    build, message = CASES[case]
    with pytest.raises(CheckpointInvalid) as caught:
        build()
    assert str(caught.value).startswith(message)
