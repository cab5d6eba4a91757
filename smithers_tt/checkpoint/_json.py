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
import sys
from typing import Any

import orjson

from smithers_tt.errors import CheckpointInvalid, InvalidArgument

MAX_SAFE_INT = 2**53 - 1
"""Largest integer magnitude accepted (what every JSON reader represents exactly)."""

MAX_DEPTH = 256
"""Deepest nesting of objects and arrays accepted; the root container is depth 1."""

_SUBJECT = "the value"
"""What a message calls the value checked, unless the caller names it."""

PAYLOAD = "checkpoint payload"
"""What messages call a checkpoint's payload."""

_ORJSON_OPTS = orjson.OPT_SORT_KEYS

_encoder = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)


def child_path(path: str, key: str | int) -> str:
    """The JSON path of ``key`` under ``path``: ``$.a``, ``$[0]``, ``$["odd key"]``."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    if key.isidentifier():
        return f"{path}.{key}"
    return f"{path}[{json.dumps(key)}]"


def _int_text(value: int) -> str:
    """An int for a message: its digits, or only how many when it has too many to print."""
    if value.bit_length() <= 64:
        return str(value)
    digits = int(value.bit_length() * 0.30103) + 1  # log10(2): no str() of a huge int
    return f"of about {digits} digits"


def safe_repr(value: Any, limit: int = 80) -> str:
    """``repr(value)`` for an error message: shortened, and never failing (an int of more than
    4,300 digits has no ``repr`` in Python 3.11+, a hostile object's ``__repr__`` may raise)."""
    if type(value) is int and value.bit_length() > 64:
        return f"<an integer {_int_text(value)}>"
    try:
        text = repr(value)
    except Exception:  # ValueError for a huge int inside a container, anything from __repr__
        return f"<a {type(value).__name__}>"
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def _bad(path: str, what: str, subject: str) -> CheckpointInvalid:
    return CheckpointInvalid(
        f"{subject} is not strict JSON: {what} at {path}; "
        "convert it to dict/list/str/int/float/bool/None first",
        path=path,
    )


def _walk(
    value: Any, path: str, depth: int, active: set[int], check_strings: bool, subject: str
) -> None:
    """Validate ``value`` keeping its JSON path: the slow path, run to name a failure."""
    t = type(value)
    if t is str:
        if check_strings:
            _check_str(value, path, "string", subject)
        return
    if t is int:
        if -MAX_SAFE_INT <= value <= MAX_SAFE_INT:
            return
        raise _bad(path, f"integer {_int_text(value)} beyond +-(2**53-1)", subject)
    if t is bool or value is None:
        return
    if t is float:
        if not math.isfinite(value):
            raise _bad(path, f"non-finite number {value!r}", subject)
        if value == 0.0 and math.copysign(1.0, value) < 0:
            raise _bad(path, "negative zero", subject)
        return
    if t is dict or t is list:
        if depth >= MAX_DEPTH:
            raise _bad(path, f"nesting deeper than {MAX_DEPTH}", subject)
        ident = id(value)
        if ident in active:
            raise _bad(path, "a cycle (a container that contains itself)", subject)
        active.add(ident)
        if t is dict:
            for key, item in value.items():
                if type(key) is not str:
                    raise _bad(
                        path,
                        f"non-string object key {safe_repr(key)} ({type(key).__name__})",
                        subject,
                    )
                sub = child_path(path, key)
                if check_strings:
                    _check_str(key, sub, "object key", subject)
                _walk(item, sub, depth + 1, active, check_strings, subject)
        else:
            for index, item in enumerate(value):
                _walk(item, f"{path}[{index}]", depth + 1, active, check_strings, subject)
        active.discard(ident)
        return
    raise _bad(path, f"a value of type {t.__name__}", subject)


def _check_str(value: str, path: str, what: str, subject: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise _bad(path, f"{what} with a lone surrogate at index {exc.start}", subject) from None


def _orjson_writes_floats_like_repr() -> bool:
    """Whether orjson writes 0.0 and floats of magnitude >= 1e-4 exactly as ``repr`` does.

    orjson writes ints, strings and containers exactly like the json module; its floats agree
    with ``repr`` except below 1e-4 in magnitude (``0.0000999`` for ``9.99e-05``, ``1e-7`` for
    ``1e-07``). A changed formatter in a future orjson must not change our bytes, so this is
    checked on probes once at import (the property tests check it on random floats).
    """
    probes = [0.0, 1.0, -1.5, 0.1, 1 / 3, 1e-4, -1e-4, 1.5e-4, 2.0**-13, 4.35e-3, 0.001]
    probes += [1e15, 123456789012345.6, 9007199254740993.0, 1e16, 1e22, -2.5e100]
    probes += [1.7976931348623157e308]
    return all(orjson.dumps(f) == repr(f).encode() for f in probes)


_ORJSON_FLOATS_OK = _orjson_writes_floats_like_repr()
# Floats of smaller magnitude (other than 0.0) are written by ``repr`` (see _patch); if the
# probe failed, every float is, zero included.
_FAST_FLOAT_MIN = 1e-4 if _ORJSON_FLOATS_OK else math.inf
_PATCH_ZERO = not _ORJSON_FLOATS_OK


class _Invalid(Exception):
    """Raised by the fast scan; the slow walk then finds the first bad value and its path."""


def _scan(container: Any, depth: int, check_strings: bool, patched: set[int]) -> bool:
    """Validate a dict or list without building paths; return True when a float below it
    needs ``repr`` formatting (then ``id(container)`` is added to ``patched``).

    This is the hot loop of every checkpoint: scalars are checked inline, only containers
    recurse, and cycles are caught by the depth bound (the slow walk names them).
    """
    if depth >= MAX_DEPTH:
        raise _Invalid
    if type(container) is dict:
        for key in container:
            if type(key) is not str:
                raise _Invalid
            if check_strings and not key.isascii():
                key.encode("utf-8")  # UnicodeEncodeError on a lone surrogate
        items: Any = container.values()
    else:
        items = container
    needs_patch = False
    big, small = MAX_SAFE_INT, _FAST_FLOAT_MIN  # locals: read once per container, not per item
    for item in items:
        t = type(item)
        if t is str:
            if check_strings and not item.isascii():
                item.encode("utf-8")
        elif t is int:
            if not -big <= item <= big:
                raise _Invalid
        elif t is float:
            if item - item != 0.0:  # NaN or an infinity
                raise _Invalid
            if -small < item < small:
                if item == 0.0 and math.copysign(1.0, item) < 0:
                    raise _Invalid
                if item != 0.0 or _PATCH_ZERO:
                    needs_patch = True
        elif t is dict or t is list:
            if _scan(item, depth + 1, check_strings, patched):
                needs_patch = True
        elif t is not bool and item is not None:
            raise _Invalid
    if needs_patch:
        patched.add(id(container))
    return needs_patch


def _check(
    value: Any, path: str, check_strings: bool, subject: str, wrapping: int
) -> set[int] | None:
    """Validate ``value``; raise :class:`CheckpointInvalid` naming the first bad value.

    ``wrapping`` containers at the top are the caller's own structure around the values it
    holds (a frame's ``{"output": ...}``): they do not count against :data:`MAX_DEPTH`.

    Returns None, or (when some float must be written by ``repr``) the ids of the containers
    that hold or lead to such floats, for :func:`_serialize`.
    """
    patched: set[int] = set()
    root = [value]  # so that a scalar is checked like an item; the root container is depth 0
    try:
        needs_patch = _scan(root, -1 - wrapping, check_strings, patched)
    except (_Invalid, UnicodeEncodeError):
        pass
    else:
        patched.discard(id(root))
        return patched if needs_patch else None
    _walk(value, path, -wrapping, set(), True, subject)
    raise AssertionError(f"strict JSON check failed at {path} but no bad value was found")


def _patch_container(value: Any, patched: set[int]) -> Any:
    """A copy of a container listed in ``patched``, with small floats replaced by their
    ``repr`` as an :class:`orjson.Fragment`; only containers in ``patched`` are copied."""
    small = _FAST_FLOAT_MIN
    out = value.copy()
    for key, item in value.items() if type(value) is dict else enumerate(value):
        t = type(item)
        if t is float:
            if -small < item < small and (item != 0.0 or _PATCH_ZERO):
                out[key] = orjson.Fragment(repr(item).encode("ascii"))
        elif (t is dict or t is list) and id(item) in patched:
            out[key] = _patch_container(item, patched)
    return out


def _patch(value: Any, patched: set[int]) -> Any:
    if type(value) is float:
        return orjson.Fragment(repr(value).encode("ascii"))  # a small float at the root
    return _patch_container(value, patched)


def _serialize(value: Any, patched: set[int] | None) -> bytes:
    """Canonical bytes of a value already checked by :func:`_check` (strings unchecked)."""
    try:
        if patched is None:
            return orjson.dumps(value, option=_ORJSON_OPTS)
        return orjson.dumps(_patch(value, patched), option=_ORJSON_OPTS)
    except orjson.JSONEncodeError:
        # A lone surrogate, or deeper than orjson's own nesting limit (254): the json module
        # writes the same bytes (UnicodeEncodeError on the surrogate).
        return _encoder.encode(value).encode("utf-8")


def validate(value: Any, path: str = "$", *, subject: str = _SUBJECT, wrapping: int = 0) -> None:
    """Raise :class:`CheckpointInvalid` naming the first value that is not strict JSON.

    Args:
        value: the value to check.
        path: the JSON path of ``value`` itself, the start of every path in messages.
        subject: what messages call the value (``"output of task 'research'"``).
        wrapping: levels of containers at the top that are the caller's structure around
            the values it checks (``{"needs": {task: output}}`` has 2): they do not count
            against :data:`MAX_DEPTH`, so each wrapped value may nest as deep as on its own.
    """
    _check(value, path, True, subject, wrapping)


def canonical_bytes(
    value: Any, path: str = "$", *, subject: str = _SUBJECT, wrapping: int = 0
) -> bytes:
    """Validate ``value`` (as :func:`validate` does) and return its canonical UTF-8 bytes.

    Raises:
        CheckpointInvalid: ``value`` is not strict JSON; the error names the JSON path.
    """
    # Strings are checked for lone surrogates by the encoders (they fail on them), so the
    # scan only visits containers and scalars; a failure re-walks to find the path.
    patched = _check(value, path, False, subject, wrapping)
    try:
        return _serialize(value, patched)
    except UnicodeEncodeError:
        validate(value, path, subject=subject, wrapping=wrapping)
        raise  # pragma: no cover - validate always finds the surrogate first


def canonical_envelope(codec: str, version: int, payload: Any) -> bytes:
    """Canonical bytes of ``{"codec", "payload", "version"}``; ``payload`` is validated and
    nested at most :data:`MAX_DEPTH` deep counting from the payload (errors name
    ``$.payload...``). ``codec`` and ``version`` must already be checked."""
    patched = _check(payload, "$.payload", False, PAYLOAD, 0)
    envelope = {"codec": codec, "payload": payload, "version": version}
    if patched is not None:
        patched.add(id(envelope))
    try:
        return _serialize(envelope, patched)
    except UnicodeEncodeError:
        validate(payload, "$.payload", subject=PAYLOAD)
        raise  # pragma: no cover - validate always finds the surrogate first


def content_hash(data: bytes) -> str:
    """The content address of canonical bytes: lowercase hex SHA-256."""
    return hashlib.sha256(data).hexdigest()


class _DuplicateKey(Exception):  # only read_json sees it
    """A key given twice in one object of JSON a person typed."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object's pairs as a dict, refusing a key given twice (:class:`_DuplicateKey`)."""
    value = dict(pairs)
    if len(value) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return value


def read_json(text: str, what: str) -> Any:
    """Parse JSON a person gave (a command-line argument, a widget's box), refusing clearly
    what Python cannot read; whether it is strict JSON is checked where it is used.

    Raises:
        InvalidArgument: ``what`` (its name in the message) is not JSON, names a key twice in
            one object (the first value would be lost), is nested too deeply to read, or holds
            an integer of more digits than Python converts.
    """
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except _DuplicateKey as error:
        raise InvalidArgument(
            f"{what} names the key {error.args[0]!r} twice in one object; JSON keeps only the "
            "last, so the first value would be lost: give each key once"
        ) from None
    except json.JSONDecodeError as error:
        raise InvalidArgument(
            f"{what} is not valid JSON: {error.msg} at line {error.lineno} column {error.colno}"
        ) from error
    except RecursionError as error:
        raise InvalidArgument(
            f"{what} is nested too deeply to read; strict JSON allows {MAX_DEPTH} levels"
        ) from error
    except ValueError as error:  # Python reads no integer of more digits than this
        raise InvalidArgument(
            f"{what} holds a number of more than {sys.get_int_max_str_digits()} digits; "
            f"strict JSON allows integers within +-(2**53-1) ({MAX_SAFE_INT}) and finite floats"
        ) from error


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
