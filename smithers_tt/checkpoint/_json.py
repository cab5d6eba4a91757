"""Strict JSON: validation with JSON paths, canonical bytes, content addresses, clones.

The canonical form is what makes content addressing work: equal values give equal bytes in
every process and on every supported Python version.

* objects: keys sorted by code point (which is also UTF-8 byte order), ``{"a":1,"b":2}``;
* no insignificant whitespace, separators ``,`` and ``:``;
* strings: UTF-8, non-ASCII written as is, ``"`` ``\\`` and control characters escaped as
  ``json`` does (``\\n``, ``\\u0000``);
* numbers: ``int`` as plain decimal digits; ``float`` as Python's shortest round-trip
  ``repr`` (``0.1``, ``1.0``, ``1e+16``, ``1.5e-07``). ``int`` and ``float`` are distinct, so
  ``1`` and ``1.0`` are different values with different addresses; this keeps the canonical
  form lossless (parsing it gives back exactly the value published).

Strict JSON accepts ``dict`` (``str`` keys), ``list``, ``str``, ``bool``, ``None``, ``int``
within +-(2**53-1) and finite ``float`` other than ``-0.0``; exact types only, so subclasses
(enums, named tuples, ``str`` subclasses) are rejected rather than silently converted.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

import orjson

from smithers_tt.errors import CheckpointInvalid

MAX_SAFE_INT = 2**53 - 1
"""Largest integer magnitude accepted (what every JSON reader represents exactly)."""

MAX_DEPTH = 256
"""Deepest nesting of objects and arrays accepted; the root container is depth 1."""

_ORJSON_OPTS = orjson.OPT_SORT_KEYS

_encoder = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)


def _child(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    if key.isidentifier():
        return f"{path}.{key}"
    return f"{path}[{json.dumps(key)}]"


def _bad(path: str, what: str) -> CheckpointInvalid:
    return CheckpointInvalid(
        f"checkpoint payload is not strict JSON: {what} at {path}; "
        "convert it to dict/list/str/int/float/bool/None first",
        path=path,
    )


def _walk(value: Any, path: str, depth: int, active: set[int], check_strings: bool) -> bool:
    """Validate ``value``; return True when a float occurs anywhere below it."""
    t = type(value)
    if t is str:
        if check_strings:
            _check_str(value, path, "string")
        return False
    if t is int:
        if -MAX_SAFE_INT <= value <= MAX_SAFE_INT:
            return False
        raise _bad(path, f"integer {value} beyond +-(2**53-1)")
    if t is bool or value is None:
        return False
    if t is float:
        if not math.isfinite(value):
            raise _bad(path, f"non-finite number {value!r}")
        if value == 0.0 and math.copysign(1.0, value) < 0:
            raise _bad(path, "negative zero")
        return True
    if t is dict or t is list:
        if depth >= MAX_DEPTH:
            raise _bad(path, f"nesting deeper than {MAX_DEPTH}")
        ident = id(value)
        if ident in active:
            raise _bad(path, "a cycle (a container that contains itself)")
        active.add(ident)
        has_float = False
        if t is dict:
            for key, item in value.items():
                if type(key) is not str:
                    raise _bad(path, f"non-string object key {key!r} ({type(key).__name__})")
                sub = _child(path, key)
                if check_strings:
                    _check_str(key, sub, "object key")
                has_float |= _walk(item, sub, depth + 1, active, check_strings)
        else:
            for index, item in enumerate(value):
                has_float |= _walk(item, f"{path}[{index}]", depth + 1, active, check_strings)
        active.discard(ident)
        return has_float
    raise _bad(path, f"a value of type {t.__name__}")


def _check_str(value: str, path: str, what: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise _bad(path, f"{what} with a lone surrogate at index {exc.start}") from None


def validate(value: Any, path: str = "$") -> None:
    """Raise :class:`CheckpointInvalid` naming the first value that is not strict JSON."""
    _walk(value, path, 0, set(), True)


def canonical_bytes(value: Any, path: str = "$") -> bytes:
    """Validate ``value`` and return its canonical UTF-8 bytes.

    Raises:
        CheckpointInvalid: ``value`` is not strict JSON; the error names the JSON path.
    """
    # Strings are checked for lone surrogates by the encoder below (it fails on them), so
    # the Python walk only visits containers and scalars; a failure re-walks to find the path.
    has_float = _walk(value, path, 0, set(), False)
    try:
        if not has_float:
            # orjson writes ints, strings and containers exactly like the json module but much
            # faster; floats are formatted differently, so those go through json (tested).
            try:
                return orjson.dumps(value, option=_ORJSON_OPTS)
            except orjson.JSONEncodeError:
                pass  # surrogates or orjson's own depth limit: the json path decides
        return _encoder.encode(value).encode("utf-8")
    except UnicodeEncodeError:
        validate(value, path)
        raise  # pragma: no cover - validate always finds the surrogate first


def content_hash(data: bytes) -> str:
    """The content address of canonical bytes: lowercase hex SHA-256."""
    return hashlib.sha256(data).hexdigest()


def loads(data: bytes | str) -> Any:
    """Parse canonical bytes back into Python values (no object hooks, nothing executed)."""
    return orjson.loads(data)


def clone(value: Any) -> Any:
    """A deep copy of a strict-JSON value that shares nothing mutable with the original."""
    t = type(value)
    if t is dict:
        return {k: clone(v) for k, v in value.items()}
    if t is list:
        return [clone(v) for v in value]
    return value
