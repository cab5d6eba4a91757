"""The contract's bounds, and the messages people see when a checkpoint crosses one.

Each bound is tested on both sides: the last value accepted and the first refused, and every
refusal names the JSON path of the offending value and says what to do.
"""

from __future__ import annotations

from typing import Any

import pytest

from smithers_tt.checkpoint import (
    MAX_CHECKPOINT_BYTES,
    AgentCheckpoint,
    CheckpointCapability,
    CheckpointFormat,
    _json,
    canonical_bytes,
    loads,
    size_limit,
)
from smithers_tt.checkpoint._json import MAX_DEPTH, MAX_SAFE_INT
from smithers_tt.errors import CheckpointInvalid

CODEC = "notes"
ADVICE = "convert it to dict/list/str/int/float/bool/None first"


def refused(payload: Any) -> CheckpointInvalid:
    """The error a checkpoint of ``payload`` is refused with."""
    with pytest.raises(CheckpointInvalid) as caught:
        AgentCheckpoint(CODEC, 1, payload)
    return caught.value


def nested(levels: int) -> Any:
    """``levels`` lists, one inside the other: ``[[...[]...]]``."""
    value: Any = []
    for _ in range(levels - 1):
        value = [value]
    return value


# --- the envelope version: 1 ... 2**31-1 ------------------------------------------------------


@pytest.mark.parametrize(
    "version",
    [2**31, 2**31 + 1, 2**32, 2**63, -(2**31), 0, -1],
    ids=["2**31", "2**31+1", "2**32", "2**63", "-2**31", "zero", "minus_one"],
)
def test_checkpoint_refuses_version_outside_1_to_2_31_minus_1_saying_the_range(version):
    with pytest.raises(CheckpointInvalid) as caught:
        AgentCheckpoint(CODEC, version, {})
    assert caught.value.path == "$.version"
    assert str(caught.value) == (
        f"AgentCheckpoint: version must be an int from 1 to 2147483647 (2**31-1), "
        f"got {version} (int)"
    )


def test_checkpoint_accepts_the_largest_version():
    checkpoint = AgentCheckpoint(CODEC, 2**31 - 1, {})
    assert checkpoint.encode().decode().version == 2**31 - 1


@pytest.mark.parametrize("declare", [CheckpointFormat, CheckpointCapability])
def test_declarations_refuse_a_version_past_the_bound_saying_the_range(declare):
    with pytest.raises(CheckpointInvalid) as caught:
        declare(CODEC, [1, 2**31])
    assert f"{declare.__name__}: version must be an int from 1 to 2147483647" in str(caught.value)
    assert declare(CODEC, [2**31 - 1]).versions == (2**31 - 1,)


# --- ints: +-(2**53-1) ------------------------------------------------------------------------


@pytest.mark.parametrize("number", [MAX_SAFE_INT, -MAX_SAFE_INT], ids=["max", "min"])
def test_checkpoint_keeps_an_int_at_the_safe_bound_exactly(number):
    payload = {"n": number, "in": [number]}
    decoded = AgentCheckpoint(CODEC, 1, payload).encode().decode().payload
    assert decoded == payload
    assert type(decoded["n"]) is int


@pytest.mark.parametrize(
    ("number", "shown"),
    [(MAX_SAFE_INT + 1, "9007199254740992"), (-MAX_SAFE_INT - 1, "-9007199254740992")],
    ids=["one_above", "one_below"],
)
def test_checkpoint_refuses_an_int_one_past_the_safe_bound_at_its_path(number, shown):
    error = refused({"counts": [1, 2, number]})
    assert error.path == "$.payload.counts[2]"
    assert str(error) == (
        f"checkpoint payload is not strict JSON: integer {shown} beyond +-(2**53-1) at "
        f"$.payload.counts[2]; {ADVICE}"
    )


def test_canonical_bytes_refuse_an_int_one_past_the_bound_at_the_root():
    with pytest.raises(CheckpointInvalid) as caught:
        canonical_bytes(MAX_SAFE_INT + 1)
    assert caught.value.path == "$"
    assert canonical_bytes(MAX_SAFE_INT) == b"9007199254740991"


# --- nesting: MAX_DEPTH (256) containers ------------------------------------------------------


def test_max_depth_is_256_as_documented():
    assert MAX_DEPTH == 256


def test_checkpoint_accepts_256_levels_of_nesting_and_gives_them_back():
    payload = nested(256)
    decoded = AgentCheckpoint(CODEC, 1, payload).encode().decode().payload
    assert canonical_bytes(decoded) == b"[" * 256 + b"]" * 256


def test_checkpoint_refuses_257_levels_naming_the_deepest_container():
    error = refused({"deep": nested(256)})  # the payload object is level 1
    path = "$.payload.deep" + "[0]" * 255
    assert error.path == path
    assert str(error) == (
        f"checkpoint payload is not strict JSON: nesting deeper than 256 at {path}; {ADVICE}"
    )


# --- a value after a shared container is reported where it is, not as a cycle -----------------


@pytest.mark.parametrize(
    ("build", "path"),
    [
        (lambda s, bad: {"a": s, "b": s, "c": bad}, "$.payload.c"),
        (lambda s, bad: [s, s, bad], "$.payload[2]"),
        (lambda s, bad: {"a": [s], "b": {"s": s, "x": [1, bad]}}, "$.payload.b.x[1]"),
    ],
    ids=["object", "list", "nested"],
)
@pytest.mark.parametrize(
    ("bad", "what"),
    [
        (float("nan"), "non-finite number nan"),
        (float("inf"), "non-finite number inf"),
        (-0.0, "negative zero"),
        (MAX_SAFE_INT + 1, "integer 9007199254740992 beyond +-(2**53-1)"),
    ],
    ids=["nan", "inf", "negative_zero", "big_int"],
)
def test_checkpoint_reports_a_bad_value_after_a_shared_list_at_its_own_path(build, path, bad, what):
    shared = [1, {"k": [2]}]
    error = refused(build(shared, bad))
    assert error.path == path
    assert str(error) == f"checkpoint payload is not strict JSON: {what} at {path}; {ADVICE}"
    assert "cycle" not in str(error)


# --- floats: -0.0 ----------------------------------------------------------------------------


def test_checkpoint_refuses_negative_zero_but_keeps_zero():
    error = refused({"x": [0.0, -0.0]})
    assert error.path == "$.payload.x[1]"
    assert "negative zero" in str(error)
    decoded = AgentCheckpoint(CODEC, 1, {"x": [0.0]}).encode().decode().payload
    assert decoded == {"x": [0.0]}
    assert type(decoded["x"][0]) is float


def test_canonical_bytes_refuse_negative_zero_at_the_root():
    with pytest.raises(CheckpointInvalid) as caught:
        canonical_bytes(-0.0)
    assert caught.value.path == "$"
    assert canonical_bytes(0.0) == b"0.0"


# --- strings: lone surrogates in keys and values ----------------------------------------------


@pytest.mark.parametrize(
    ("payload", "path", "what"),
    [
        ({"note": "ok\ud800"}, "$.payload.note", "string with a lone surrogate at index 2"),
        ({"notes": ["\udfff"]}, "$.payload.notes[0]", "string with a lone surrogate at index 0"),
        ({"x\udc00y": 1}, '$.payload["x\\udc00y"]', "object key with a lone surrogate at index 1"),
        ({"a": {"\ud83d": 1}}, '$.payload.a["\\ud83d"]', "object key with a lone surrogate at index 0"),  # noqa: E501
    ],
    ids=["value", "value_in_list", "key", "nested_key"],
)  # fmt: skip
def test_checkpoint_refuses_a_lone_surrogate_naming_key_or_value_and_its_path(payload, path, what):
    error = refused(payload)
    assert error.path == path
    assert str(error) == f"checkpoint payload is not strict JSON: {what} at {path}; {ADVICE}"


def test_canonical_bytes_refuse_a_lone_surrogate_that_the_fast_scan_does_not_check():
    # canonical_bytes leaves strings to the encoder; its error must still name the path
    with pytest.raises(CheckpointInvalid) as caught:
        canonical_bytes({"a": ["fine", "bad\ud800"]})
    assert caught.value.path == "$.a[1]"
    assert "lone surrogate at index 3" in str(caught.value)


def test_checkpoint_keeps_a_surrogate_pair_written_as_one_code_point():
    payload = {"emoji \U0001f600": "\U0001f600"}
    data = AgentCheckpoint(CODEC, 1, payload).encode().data
    assert "\U0001f600".encode() in data
    assert loads(data)["payload"] == payload


# --- messages name the path, whatever the kind of container leads there -----------------------


@pytest.mark.parametrize(
    ("payload", "path"),
    [
        ({"messages": [{"content": b"x"}]}, "$.payload.messages[0].content"),
        ({"odd key": {"two words": (1,)}}, '$.payload["odd key"]["two words"]'),
        ([[[], [{"1a": {1, 2}}]]], '$.payload[0][1][0]["1a"]'),
        ({"": object()}, '$.payload[""]'),
    ],
    ids=["object_path", "quoted_keys", "lists", "empty_key"],
)
def test_error_message_names_the_json_path_of_the_bad_value(payload, path):
    error = refused(payload)
    assert error.path == path
    assert str(error).endswith(f" at {path}; {ADVICE}")
    assert str(error).startswith("checkpoint payload is not strict JSON: a value of type ")


# --- the other messages people see ------------------------------------------------------------


def looped() -> list[Any]:
    loop: list[Any] = []
    loop.append(loop)
    return loop


def message(call: Any) -> str:
    with pytest.raises(Exception) as caught:
        call()
    return f"{type(caught.value).__name__}: {caught.value}"


@pytest.mark.parametrize(
    ("call", "text"),
    [
        (lambda: size_limit(0), "InvalidArgument: checkpoint size limit must be a positive int, got 0"),  # noqa: E501
        (lambda: size_limit(MAX_CHECKPOINT_BYTES + 1), "InvalidArgument: checkpoint size limit 16777217 is above the hard ceiling of 16777216 bytes (16 MiB); it may only be lowered"),  # noqa: E501
        (lambda: AgentCheckpoint(" ", 1, {}), "CheckpointInvalid: AgentCheckpoint: codec must be a non-empty string, got ' '"),  # noqa: E501
        (lambda: AgentCheckpoint("c\ud800", 1, {}), "CheckpointInvalid: checkpoint codec is not strict JSON: string with a lone surrogate at index 1 at $.codec; " + ADVICE),  # noqa: E501
        (lambda: AgentCheckpoint(CODEC, "x" * 100, {}), "CheckpointInvalid: AgentCheckpoint: version must be an int from 1 to 2147483647 (2**31-1), got '" + "x" * 76 + "... (str)"),  # noqa: E501
        (lambda: AgentCheckpoint(CODEC, 2**64 - 1, {}), "CheckpointInvalid: AgentCheckpoint: version must be an int from 1 to 2147483647 (2**31-1), got 18446744073709551615 (int)"),  # noqa: E501
        (lambda: AgentCheckpoint(CODEC, 2**64, {}), "CheckpointInvalid: AgentCheckpoint: version must be an int from 1 to 2147483647 (2**31-1), got <an integer of about 20 digits> (int)"),  # noqa: E501
        (lambda: AgentCheckpoint(CODEC, 1, {"n": 2**64 - 1}), "CheckpointInvalid: checkpoint payload is not strict JSON: integer 18446744073709551615 beyond +-(2**53-1) at $.payload.n; " + ADVICE),  # noqa: E501
        (lambda: AgentCheckpoint(CODEC, 1, {"n": 2**64}), "CheckpointInvalid: checkpoint payload is not strict JSON: integer of about 20 digits beyond +-(2**53-1) at $.payload.n; " + ADVICE),  # noqa: E501
        (lambda: AgentCheckpoint.from_json([]), "CheckpointInvalid: a checkpoint envelope must be an object, got list"),  # noqa: E501
        (lambda: AgentCheckpoint.from_json({"codec": "c", "version": 1}), "CheckpointInvalid: a checkpoint envelope has exactly the fields codec, version and payload; missing payload"),  # noqa: E501
        (lambda: AgentCheckpoint.from_json({"codec": "c", "version": 1, "payload": 1, "b": 0, "a": 0}), "CheckpointInvalid: a checkpoint envelope has exactly the fields codec, version and payload; unexpected 'a', 'b'"),  # noqa: E501
        (lambda: AgentCheckpoint(CODEC, 1, "x" * 100).encode(max_bytes=50), "CheckpointTooLarge: checkpoint notes v1 is 142 bytes in canonical form, above the limit of 50 bytes; publish less state (or a summary of it)"),  # noqa: E501
        (lambda: CheckpointFormat(CODEC, []), "CheckpointInvalid: CheckpointFormat: versions must not be empty"),  # noqa: E501
        (lambda: CheckpointFormat("", [1]), "CheckpointInvalid: CheckpointFormat: codec must be a non-empty string, got ''"),  # noqa: E501
        (lambda: CheckpointCapability("", [1]), "CheckpointInvalid: CheckpointCapability: codec must be a non-empty string, got ''"),  # noqa: E501
        (lambda: CheckpointFormat("a\x00b", [1]), "InvalidArgument: codec 'a\\x00b' contains NUL at index 1; choose another"),  # noqa: E501
        (lambda: CheckpointCapability("a\x00b", [1]), "InvalidArgument: codec 'a\\x00b' contains NUL at index 1; choose another"),  # noqa: E501
        (lambda: canonical_bytes({"loop": looped()}), "CheckpointInvalid: the value is not strict JSON: a cycle (a container that contains itself) at $.loop[0]; " + ADVICE),  # noqa: E501
    ],
    ids=["limit_not_positive", "limit_above_ceiling", "blank_codec", "surrogate_codec", "long_repr",
         "version_64_bits", "version_65_bits", "int_64_bits", "int_65_bits", "envelope_not_object",
         "envelope_missing", "envelope_unexpected", "too_large", "no_versions", "format_codec",
         "capability_codec", "format_codec_id", "capability_codec_id", "cycle"],
)  # fmt: skip
def test_the_message_people_see_says_what_was_wrong_and_where(call, text):
    assert message(call) == text


@pytest.mark.parametrize(
    ("version", "shown"),
    [("x" * 78, "'" + "x" * 78 + "'"), ("x" * 79, "'" + "x" * 76 + "...")],
    ids=["80_chars_in_full", "81_chars_shortened"],
)
def test_the_message_shows_a_value_of_80_characters_in_full_and_shortens_a_longer_one(
    version, shown
):
    assert message(lambda: AgentCheckpoint(CODEC, version, {})) == (
        "CheckpointInvalid: AgentCheckpoint: version must be an int from 1 to 2147483647 "
        f"(2**31-1), got {shown} (str)"
    )


def test_canonical_bytes_name_a_lone_surrogate_deep_in_a_wrapped_value_not_its_depth():
    # {"output": value} with wrapping=1: the value may nest 256 levels of its own; a lone
    # surrogate at the bottom is what the message names, not a nesting the caller's wrapper made
    deepest: list[Any] = ["bad\ud800"]
    value: Any = deepest
    for _ in range(255):
        value = [value]
    path = "$.output" + "[0]" * 256
    with pytest.raises(CheckpointInvalid) as caught:
        canonical_bytes({"output": value}, wrapping=1)
    assert caught.value.path == path
    assert str(caught.value) == (
        f"the value is not strict JSON: string with a lone surrogate at index 3 at {path}; {ADVICE}"
    )
    deepest[0] = "fine"
    assert canonical_bytes({"output": value}, wrapping=1).count(b"[") == 256


def test_a_zero_before_a_bad_value_is_not_what_the_message_names():
    error = refused({"a": 0.0, "b": [0.0, float("nan")]})
    assert error.path == "$.payload.b[1]"


# --- the fast writer: orjson, not the json module, writes every strict-JSON checkpoint ---------


@pytest.mark.parametrize(
    "payload",
    [
        1.5e-07,
        [0.0, 9.99e-05, -1e-05, 1e-4, 0.5],
        {"a": {"b": [1e-7, {"c": 2.5e-6}]}, "z": "é😀", "n": MAX_SAFE_INT},
        {"a": [1, "é😀", None, True, 0.5, 0.0, 1e16], "b": {"c": []}},
        "text",
    ],
    ids=["small_float_root", "floats_around_1e-4", "nested", "no_small_float", "scalar_root"],
)
def test_checkpoint_bytes_are_written_without_the_slow_fallback(monkeypatch, payload):
    expected = AgentCheckpoint(CODEC, 1, payload).encode().data
    expected_value = canonical_bytes(payload)

    class NoFallback:
        def encode(self, value: Any) -> str:
            raise AssertionError("the json module fallback was taken")

    monkeypatch.setattr(_json, "_encoder", NoFallback())
    assert AgentCheckpoint(CODEC, 1, payload).encode().data == expected
    assert canonical_bytes(payload) == expected_value


@pytest.mark.parametrize(
    ("bad", "what"),
    [
        (float("nan"), "non-finite number nan"),
        ("x\ud800", "string with a lone surrogate at index 1"),
    ],
    ids=["nan", "lone_surrogate"],
)
def test_encode_names_a_bad_value_put_into_the_payload_after_construction(bad, what):
    checkpoint = AgentCheckpoint(CODEC, 1, {"notes": ["ok"]})
    checkpoint.payload["notes"].append(bad)  # the agent kept a reference and changed it
    with pytest.raises(CheckpointInvalid) as caught:
        checkpoint.encode()
    assert caught.value.path == "$.payload.notes[1]"
    assert str(caught.value) == (
        f"checkpoint payload is not strict JSON: {what} at $.payload.notes[1]; {ADVICE}"
    )


def test_canonical_bytes_name_a_lone_surrogate_with_the_callers_path_and_subject():
    with pytest.raises(CheckpointInvalid) as caught:
        canonical_bytes({"a": ["bad\ud800"]}, "$.output", subject="output of task 'write'")
    assert str(caught.value) == (
        "output of task 'write' is not strict JSON: string with a lone surrogate at index 3 at "
        f"$.output.a[0]; {ADVICE}"
    )
