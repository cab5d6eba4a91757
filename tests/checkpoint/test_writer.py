"""The fast writer: orjson writes the canonical bytes, Python formats only what orjson writes
unlike ``repr`` (floats below 1e-4 in magnitude), and an orjson that starts writing floats
differently is caught at import instead of changing every content address.

Same bytes are not enough here: a writer that silently formats every float in Python, or
copies the whole state to patch one float, gives the right bytes slowly. These tests watch
what the writer does (the floats it hands to ``repr``, the containers it copies) on states a
checkpoint holds.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import orjson
import pytest

from smithers_tt.checkpoint import AgentCheckpoint, _json, canonical_bytes

CODEC = "notes"


@pytest.fixture
def formatted(monkeypatch) -> list[bytes]:
    """The floats (as the bytes written) that the writer formats with ``repr``."""
    made: list[bytes] = []
    fragment = orjson.Fragment

    def recording(data: bytes) -> Any:
        made.append(data)
        return fragment(data)

    monkeypatch.setattr(orjson, "Fragment", recording)
    return made


@pytest.fixture
def copied(monkeypatch) -> list[Any]:
    """The containers the writer copies to put formatted floats into."""
    made: list[Any] = []
    patch_container = _json._patch_container

    def recording(value: Any, patched: set[int]) -> Any:
        made.append(value)
        return patch_container(value, patched)

    monkeypatch.setattr(_json, "_patch_container", recording)
    return made


WRITE: dict[str, Callable[[Any], bytes]] = {
    "canonical_bytes": canonical_bytes,
    "checkpoint": lambda payload: AgentCheckpoint(CODEC, 1, payload).encode().data,
}
BOTH_WRITERS = pytest.mark.parametrize("write", WRITE.values(), ids=list(WRITE))


@BOTH_WRITERS
def test_only_floats_below_1e_4_in_magnitude_are_formatted_by_python(write, formatted):
    # 1e-4 and -1e-4 are the bound: orjson writes them like repr, 0.0 too, even when they sit
    # next to a float that Python formats
    payload = {"zero": 0.0, "big": [0.5, -3.25, 1e16], "n": 1}
    payload["small"] = [9.99e-05, 1e-4, -1e-05, 0.0, -1e-4, 1.5e-07, 0.5]
    data = write(payload)
    assert sorted(formatted) == [b"-1e-05", b"1.5e-07", b"9.99e-05"]
    assert b'"small":[9.99e-05,0.0001,-1e-05,0.0,-0.0001,1.5e-07,0.5]' in data


@BOTH_WRITERS
def test_a_state_without_small_floats_is_written_by_orjson_alone(write, formatted, copied):
    write({"a": [1, 0.0, 0.5, "é😀", None, True], "b": {"c": [2.5e10, 1e-4, -1e-4]}})
    assert formatted == []
    assert copied == []


def test_only_the_containers_that_lead_to_a_small_float_are_copied(copied):
    # a large state with one small float: the writer copies its path, not the state
    messages = [{"role": "user", "content": f"message {i}", "score": 0.5} for i in range(50)]
    tiny = [1e-7]
    payload = {"messages": messages, "stats": {"tiny": tiny, "other": [{"x": 1.0}]}}
    data = AgentCheckpoint(CODEC, 1, payload).encode().data
    assert [id(c) for c in copied[1:]] == [id(payload), id(payload["stats"]), id(tiny)]
    assert copied[0].keys() == {"codec", "payload", "version"}  # the envelope itself
    envelope = {"codec": CODEC, "payload": payload, "version": 1}
    assert data == json.dumps(envelope, sort_keys=True, separators=(",", ":")).encode()


# --- the import-time check of orjson's float format --------------------------------------------


def test_the_installed_orjson_writes_floats_from_1e_4_up_like_repr():
    assert _json._orjson_writes_floats_like_repr() is True
    assert _json._FAST_FLOAT_MIN == 1e-4  # so only smaller floats are formatted by Python
    assert _json._PATCH_ZERO is False


def _unlike_repr(matches: Callable[[float], bool], write: Callable[[float], str]):
    """An orjson.dumps that writes the floats ``matches`` picks with ``write``."""
    real = orjson.dumps

    def dumps(value: Any, *args: Any, **kwargs: Any) -> bytes:
        if type(value) is float and matches(value):
            return write(value).encode()
        return real(value, *args, **kwargs)

    return dumps


# Ways a future orjson could write floats of magnitude >= 1e-4 (or zero) unlike ``repr``.
DIVERGENCES = {
    "zero_without_fraction": _unlike_repr(lambda f: f == 0.0, lambda f: "0"),
    "integral_without_fraction": _unlike_repr(
        lambda f: f != 0.0 and f.is_integer() and abs(f) < 1e16, lambda f: str(int(f))
    ),
    "exponent_without_plus": _unlike_repr(
        lambda f: abs(f) >= 1e16, lambda f: repr(f).replace("e+", "e")
    ),
    "exponent_from_1e15": _unlike_repr(lambda f: 1e15 <= abs(f) < 1e16, lambda f: f"{f:e}"),
    "exponent_below_1e-3": _unlike_repr(
        lambda f: 0.0 < abs(f) < 1e-3, lambda f: repr(f) if "e" in repr(f) else f"{f:e}"
    ),
    "seventeen_digits": _unlike_repr(
        lambda f: f != 0.0 and f"{f:.17g}" != repr(f) and "e" not in f"{f:.17g}",
        lambda f: f"{f:.17g}",
    ),
    "negative_as_positive": _unlike_repr(lambda f: f < 0.0, lambda f: repr(-f)),
    "largest_float_as_infinity": _unlike_repr(lambda f: abs(f) > 1e308, lambda f: "1e309"),
}


@pytest.mark.parametrize("dumps", DIVERGENCES.values(), ids=list(DIVERGENCES))
def test_an_orjson_writing_floats_unlike_repr_is_caught(monkeypatch, dumps):
    monkeypatch.setattr(_json.orjson, "dumps", dumps)
    assert _json._orjson_writes_floats_like_repr() is False
