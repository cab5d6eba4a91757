"""The checkpoint contract: strict JSON, canonical bytes, the size ceiling, format declarations.

What a user relies on: a payload that is not strict JSON is refused with the JSON path of the
offending value; equal states get equal bytes (and so the same SHA-256 address) whatever the
dict insertion order or process; parsing the bytes gives back exactly what was published; the
16 MiB ceiling is exact and can only be lowered; format matching is exact.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import hashlib
import json
import math
import os
import subprocess
import sys
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from smithers_tt.checkpoint import (
    MAX_CHECKPOINT_BYTES,
    MAX_DEPTH,
    MAX_SAFE_INT,
    MODES,
    AgentCheckpoint,
    CheckpointCapability,
    CheckpointFormat,
    EncodedCheckpoint,
    _json,
    accepts,
    canonical_bytes,
    clone,
    content_hash,
    declaration_signature,
    loads,
    produces,
    size_limit,
    validate,
)
from smithers_tt.errors import CheckpointInvalid, CheckpointTooLarge, InvalidArgument

MIB = 1024 * 1024
CODEC = "test.agent"

PROPERTY = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# --- helpers ---------------------------------------------------------------------------------


def same(a: Any, b: Any) -> bool:
    """Equality that also compares types: ``1``, ``1.0`` and ``True`` are all different."""
    if type(a) is not type(b):
        return False
    if type(a) is dict:
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if type(a) is list:
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if type(a) is float:
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    return a == b


def json_module_bytes(value: Any) -> bytes:
    """The canonical form as the standard library writes it."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def whitespace_outside_strings(data: bytes) -> bool:
    in_string = escaped = False
    for ch in data.decode("utf-8"):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in " \t\r\n":
            return True
    return False


def key_path(path: str, key: str) -> str:
    """The documented JSON path form: ``$.name`` for identifiers, ``$["a b"]`` otherwise."""
    return f"{path}.{key}" if key.isidentifier() else f"{path}[{json.dumps(key)}]"


def nested_lists(levels: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(levels - 1):
        value = [value]
    return value


def nested_dicts(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


def containers(value: Any, path: str = "$", depth: int = 0, above: tuple[Any, ...] = ()):
    """Every dict and list inside ``value``: (container, path, depth, its ancestors)."""
    if type(value) is dict:
        items = [(key_path(path, k), v) for k, v in value.items()]
    elif type(value) is list:
        items = [(f"{path}[{i}]", v) for i, v in enumerate(value)]
    else:
        return
    yield value, path, depth, above
    for sub_path, item in items:
        yield from containers(item, sub_path, depth + 1, (*above, value))


def shuffled_copy(value: Any, rnd: Any) -> Any:
    """The same value with every dict rebuilt in a random key insertion order."""
    if type(value) is dict:
        keys = list(value)
        rnd.shuffle(keys)
        return {k: shuffled_copy(value[k], rnd) for k in keys}
    if type(value) is list:
        return [shuffled_copy(v, rnd) for v in value]
    return value


# --- strategies ------------------------------------------------------------------------------

TEXT = st.text(st.characters(codec="utf-8"), max_size=12)  # any code point but surrogates
KEYS = st.text(st.characters(codec="utf-8"), max_size=6)
INTS = st.integers(-MAX_SAFE_INT, MAX_SAFE_INT) | st.sampled_from([0, MAX_SAFE_INT, -MAX_SAFE_INT])
FLOATS = (
    st.floats(allow_nan=False, allow_infinity=False)
    # magnitudes around 1e-4, where the repr switches to exponent notation
    | st.floats(min_value=-1e-3, max_value=1e-3, allow_nan=False)
).map(lambda f: 0.0 if f == 0 else f)  # -0.0 is rejected; tested on its own below
SCALARS_NO_FLOAT = st.none() | st.booleans() | INTS | TEXT


def json_values(scalars: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.recursive(
        scalars,
        lambda children: (
            st.lists(children, max_size=5) | st.dictionaries(KEYS, children, max_size=5)
        ),
        max_leaves=25,
    )


JSON_NO_FLOATS = json_values(SCALARS_NO_FLOAT)
JSON_ANY = json_values(SCALARS_NO_FLOAT | FLOATS)
# At least one float somewhere, so both writers of canonical_bytes are exercised.
SOME_FLOATS = st.lists(FLOATS, min_size=1, max_size=4)
JSON_WITH_FLOATS = st.one_of(
    FLOATS,
    st.builds(lambda v, fs: [*fs, v], JSON_ANY, SOME_FLOATS),
    st.builds(lambda v, fs: {"value": v, "floats": fs}, JSON_ANY, SOME_FLOATS),
)
CONTAINERS = st.lists(JSON_ANY, max_size=5) | st.dictionaries(KEYS, JSON_ANY, max_size=5)

BOTH_KINDS = pytest.mark.parametrize(
    "values",
    [
        pytest.param(JSON_NO_FLOATS, id="without_floats"),
        pytest.param(JSON_WITH_FLOATS, id="with_floats"),
    ],
)


# --- round trip and canonical bytes (properties) ---------------------------------------------


@BOTH_KINDS
@PROPERTY
@given(data=st.data())
def test_canonical_bytes_round_trip_through_loads_unchanged_with_types(values, data):
    value = data.draw(values)
    assert same(loads(canonical_bytes(value)), value)


@BOTH_KINDS
@PROPERTY
@given(data=st.data())
def test_canonical_bytes_equal_the_json_module_compact_sorted_form(values, data):
    value = data.draw(values)
    out = canonical_bytes(value)
    assert out == json_module_bytes(value)
    assert not whitespace_outside_strings(out)


@BOTH_KINDS
@PROPERTY
@given(data=st.data())
def test_checkpoint_bytes_equal_the_json_module_form_of_the_envelope(values, data):
    value = data.draw(values)
    encoded = AgentCheckpoint(CODEC, 3, value).encode()
    envelope = {"codec": CODEC, "version": 3, "payload": value}
    assert encoded.data == json_module_bytes(envelope)
    assert encoded.content_hash == hashlib.sha256(encoded.data).hexdigest()


@BOTH_KINDS
@PROPERTY
@given(data=st.data())
def test_content_hash_equal_whatever_the_dict_insertion_order(values, data):
    value = data.draw(values)
    reordered = shuffled_copy(value, data.draw(st.randoms(use_true_random=False)))
    assert content_hash(canonical_bytes(reordered)) == content_hash(canonical_bytes(value))
    first = AgentCheckpoint(CODEC, 1, value).encode()
    second = AgentCheckpoint(CODEC, 1, reordered).encode()
    assert first.content_hash == second.content_hash


@PROPERTY
@given(value=JSON_WITH_FLOATS)
def test_canonical_bytes_unchanged_when_orjson_floats_are_not_trusted(value):
    # The mode taken when the import-time probe finds orjson writing floats unlike ``repr``
    # (a future orjson): every float, zero included, is then written by ``repr``.
    expected = json_module_bytes(value)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_json, "_FAST_FLOAT_MIN", math.inf)
        patch.setattr(_json, "_PATCH_ZERO", True)
        assert canonical_bytes(value) == expected
        assert AgentCheckpoint(CODEC, 1, value).encode().data == json_module_bytes(
            {"codec": CODEC, "payload": value, "version": 1}
        )


@PROPERTY
@given(value=JSON_ANY)
def test_encoded_checkpoint_decodes_to_an_equal_checkpoint(value):
    checkpoint = AgentCheckpoint(CODEC, 2, value)
    decoded = checkpoint.encode().decode()
    assert decoded == checkpoint
    assert (decoded.codec, decoded.version) == (CODEC, 2)
    assert same(decoded.payload, value)


# --- invalid values are named by their path (property) ---------------------------------------


class Colour(enum.Enum):
    RED = 1


class StrSub(str):
    pass


class IntSub(int):
    pass


class FloatSub(float):
    pass


class DictSub(dict):
    pass


class ListSub(list):
    pass


class Thing:
    pass


# value that is not strict JSON, at the position it is inserted
BAD_VALUES: dict[str, Callable[[], Any]] = {
    "nan": lambda: float("nan"),
    "plus_infinity": lambda: float("inf"),
    "minus_infinity": lambda: float("-inf"),
    "negative_zero": lambda: -0.0,
    "int_above_max_safe": lambda: MAX_SAFE_INT + 1,
    "int_below_min_safe": lambda: -MAX_SAFE_INT - 1,
    "huge_int": lambda: 10**40,
    "tuple": lambda: (1, "a"),
    "empty_tuple": lambda: (),
    "set": lambda: {1, 2},
    "frozenset": lambda: frozenset({"a"}),
    "bytes": lambda: b"payload",
    "bytearray": lambda: bytearray(b"payload"),
    "lone_high_surrogate": lambda: "abc\ud800",
    "lone_low_surrogate": lambda: "\udc00abc",
    "datetime": lambda: datetime.datetime(2025, 1, 2, 3, 4, 5),
    "date": lambda: datetime.date(2025, 1, 2),
    "decimal": lambda: decimal.Decimal("1.5"),
    "uuid": lambda: uuid.UUID(int=7),
    "enum_member": lambda: Colour.RED,
    "str_subclass": lambda: StrSub("text"),
    "int_subclass": lambda: IntSub(3),
    "float_subclass": lambda: FloatSub(0.5),
    "dict_subclass": lambda: DictSub(a=1),
    "list_subclass": lambda: ListSub([1]),
    "custom_object": lambda: Thing(),
    "complex": lambda: 1j,
    "type_object": lambda: int,
}
# object key that is not allowed; the path names the object holding it
BAD_KEYS: dict[str, Any] = {
    "int_key": 1,
    "none_key": None,
    "tuple_key": ("a", 1),
    "bool_key": True,
    "float_key": 1.5,
    "bytes_key": b"k",
}
SURROGATE_KEYS = {"high_surrogate_key": "k\ud800", "low_surrogate_key": "\udfffk"}


@st.composite
def invalid_insertions(draw: st.DrawFn) -> tuple[Any, Callable[[], None], str]:
    """A valid root container, a function that inserts one invalid thing at a random place
    in it, and the JSON path (relative to ``$``) that must be reported."""
    root = draw(CONTAINERS)
    container, path, depth, above = draw(st.sampled_from(list(containers(root))))
    if type(container) is dict:
        key = draw(KEYS)
        here = key_path(path, key)
    else:
        key = draw(st.integers(0, len(container)))
        here = f"{path}[{key}]"

    kind = draw(st.sampled_from(["value", "key", "surrogate_key", "cycle", "too_deep"]))
    if kind == "value":
        bad = BAD_VALUES[draw(st.sampled_from(sorted(BAD_VALUES)))]()
        expected = here
    elif kind == "key":
        bad = {BAD_KEYS[draw(st.sampled_from(sorted(BAD_KEYS)))]: "x"}
        expected = here
    elif kind == "surrogate_key":
        bad_key = SURROGATE_KEYS[draw(st.sampled_from(sorted(SURROGATE_KEYS)))]
        bad = {"ok": 1, bad_key: 2}
        expected = key_path(here, bad_key)
    elif kind == "cycle":
        bad = draw(st.sampled_from([*above, container]))
        expected = here
    else:
        # the inserted lists sit at depth+1, depth+2, ...; the first at MAX_DEPTH is too deep
        too_deep_at = MAX_DEPTH - (depth + 1)
        bad = nested_lists(too_deep_at + 1 + draw(st.integers(0, 3)))
        expected = here + "[0]" * too_deep_at

    def insert() -> None:
        if type(container) is dict:
            container[key] = bad
        else:
            container.insert(key, bad)

    return root, insert, expected


def _via_validate(root: Any, insert: Callable[[], None]) -> str:
    insert()
    validate(root)
    return "$"


def _via_canonical_bytes(root: Any, insert: Callable[[], None]) -> str:
    insert()
    canonical_bytes(root)
    return "$"


def _via_construction(root: Any, insert: Callable[[], None]) -> str:
    insert()
    AgentCheckpoint(CODEC, 1, root)
    return "$.payload"


def _via_encode_after_mutation(root: Any, insert: Callable[[], None]) -> str:
    checkpoint = AgentCheckpoint(CODEC, 1, root)
    insert()
    checkpoint.encode()
    return "$.payload"


ENTRY_POINTS = {
    "validate": ("$", _via_validate),
    "canonical_bytes": ("$", _via_canonical_bytes),
    "construction": ("$.payload", _via_construction),
    "encode_after_mutation": ("$.payload", _via_encode_after_mutation),
}


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
@PROPERTY
@given(case=invalid_insertions())
def test_invalid_value_anywhere_rejected_with_its_exact_path(entry, case):
    root, insert, expected = case
    prefix, run = ENTRY_POINTS[entry]
    with pytest.raises(CheckpointInvalid) as caught:
        run(root, insert)
    assert caught.value.path == prefix + expected[1:]
    assert caught.value.path in str(caught.value)


# --- clones share nothing (property) ---------------------------------------------------------


def _mutate_every_container(value: Any) -> None:
    for container, _, _, _ in list(containers(value)):
        if type(container) is dict:
            container["__mutated__"] = [1]
            for key in list(container)[:1]:
                container[key] = "changed"
        else:
            container.append({"mutated": True})
            if len(container) > 1:
                container[0] = "changed"


def _container_ids(value: Any) -> set[int]:
    return {id(c) for c, _, _, _ in containers(value)}


@PROPERTY
@given(value=CONTAINERS)
def test_clone_mutation_never_reaches_the_original(value):
    before = canonical_bytes(value)
    copy = clone(value)
    assert same(copy, value)
    assert not _container_ids(copy) & _container_ids(value)
    _mutate_every_container(copy)
    assert canonical_bytes(value) == before


@PROPERTY
@given(value=CONTAINERS)
def test_checkpoint_clone_mutation_never_reaches_the_original(value):
    checkpoint = AgentCheckpoint(CODEC, 1, value)
    address = checkpoint.encode().content_hash
    copy = checkpoint.clone()
    assert copy == checkpoint and same(copy.payload, checkpoint.payload)
    _mutate_every_container(copy.payload)
    assert checkpoint.encode().content_hash == address
    assert copy.encode().content_hash != address


# --- named cases: payload values --------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(BAD_VALUES))
def test_checkpoint_rejects_payload_value_with_its_path(kind):
    payload = {"state": {"items": [1, BAD_VALUES[kind]()]}}
    with pytest.raises(CheckpointInvalid) as caught:
        AgentCheckpoint(CODEC, 1, payload)
    assert caught.value.path == "$.payload.state.items[1]"
    assert "$.payload.state.items[1]" in str(caught.value)


@pytest.mark.parametrize("kind", sorted(BAD_VALUES))
def test_canonical_bytes_rejects_value_when_it_is_the_root(kind):
    with pytest.raises(CheckpointInvalid) as caught:
        canonical_bytes(BAD_VALUES[kind]())
    assert caught.value.path == "$"


@pytest.mark.parametrize("key", BAD_KEYS.values(), ids=list(BAD_KEYS))
def test_checkpoint_rejects_object_key_when_not_str(key):
    with pytest.raises(CheckpointInvalid) as caught:
        AgentCheckpoint(CODEC, 1, {"state": {"ok": 1, key: "value"}})
    assert caught.value.path == "$.payload.state"
    assert "key" in str(caught.value)


@pytest.mark.parametrize(
    ("key", "path"),
    [
        pytest.param("k\ud800", '$.payload.state["k\\ud800"]', id="high_surrogate"),
        pytest.param("\udfff", '$.payload.state["\\udfff"]', id="low_surrogate"),
    ],
)
def test_checkpoint_rejects_object_key_when_it_holds_a_lone_surrogate(key, path):
    with pytest.raises(CheckpointInvalid) as caught:
        AgentCheckpoint(CODEC, 1, {"state": {key: 1}})
    assert caught.value.path == path


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(MAX_SAFE_INT, id="max_safe_int"),
        pytest.param(-MAX_SAFE_INT, id="min_safe_int"),
        pytest.param(0, id="zero"),
        pytest.param(0.0, id="positive_zero"),
        pytest.param(5e-324, id="smallest_subnormal"),
        pytest.param(1.7976931348623157e308, id="largest_float"),
        pytest.param(True, id="true"),
        pytest.param(False, id="false"),
        pytest.param(None, id="null"),
        pytest.param("", id="empty_string"),
        pytest.param("é€😀\u2028\x00", id="non_ascii_and_control_string"),
        pytest.param([], id="empty_list"),
        pytest.param({}, id="empty_object"),
    ],
)
def test_checkpoint_accepts_payload_value_when_strict_json(value):
    payload = {"value": value}
    decoded = AgentCheckpoint(CODEC, 1, payload).encode().decode()
    assert same(decoded.payload, payload)


def test_checkpoint_keeps_bool_distinct_from_int_and_float():
    addresses = {AgentCheckpoint(CODEC, 1, {"x": v}).encode().content_hash for v in (True, 1, 1.0)}
    assert len(addresses) == 3
    assert type(AgentCheckpoint(CODEC, 1, {"x": True}).encode().decode().payload["x"]) is bool


@pytest.mark.parametrize(
    ("payload", "path"),
    [
        pytest.param("list", "$.payload.loop[1]", id="list_contains_itself"),
        pytest.param("dict", "$.payload.loop.self", id="dict_contains_itself"),
        pytest.param("indirect", "$.payload.loop.child[0]", id="indirect_cycle"),
    ],
)
def test_checkpoint_rejects_cycle_with_the_path_that_closes_it(payload, path):
    if payload == "list":
        loop: Any = [1]
        loop.append(loop)
    elif payload == "dict":
        loop = {}
        loop["self"] = loop
    else:
        loop = {"child": []}
        loop["child"].append(loop)
    with pytest.raises(CheckpointInvalid) as caught:
        AgentCheckpoint(CODEC, 1, {"loop": loop})
    assert caught.value.path == path
    assert "cycle" in str(caught.value)


def test_checkpoint_accepts_a_shared_subvalue_that_is_not_a_cycle():
    shared = [1, {"a": 2}]
    payload = {"a": shared, "b": shared, "c": [shared, shared]}
    decoded = AgentCheckpoint(CODEC, 1, payload).encode().decode()
    assert same(decoded.payload, payload)


@pytest.mark.parametrize("build", [nested_lists, nested_dicts], ids=["lists", "dicts"])
def test_checkpoint_accepts_nesting_exactly_max_depth(build):
    payload = build(MAX_DEPTH)
    checkpoint = AgentCheckpoint(CODEC, 1, payload)
    assert same(checkpoint.encode().decode().payload, payload)
    assert same(loads(canonical_bytes(payload)), payload)


@pytest.mark.parametrize(
    ("build", "step"), [(nested_lists, "[0]"), (nested_dicts, ".a")], ids=["lists", "dicts"]
)
def test_checkpoint_rejects_nesting_when_deeper_than_max_depth(build, step):
    payload = build(MAX_DEPTH + 1)
    with pytest.raises(CheckpointInvalid) as caught:
        AgentCheckpoint(CODEC, 1, payload)
    assert caught.value.path == "$.payload" + step * MAX_DEPTH
    with pytest.raises(CheckpointInvalid) as caught:
        canonical_bytes(payload)
    assert caught.value.path == "$" + step * MAX_DEPTH


def test_max_depth_is_documented_bound_of_256():
    assert MAX_DEPTH == 256
    assert MAX_SAFE_INT == 2**53 - 1


# --- named cases: canonical bytes ------------------------------------------------------------

TRICKY = {
    "every_control_character": "".join(map(chr, range(0x20))),
    "quote_and_backslash": 'say "hi" \\ bye /',
    "delete_and_c1_controls": "\x7f\x80\x9f",
    "line_and_paragraph_separators": "\u2028\u2029",
    "byte_order_mark": "\ufeff",
    "html": "</script><!--&amp;",
    "astral_and_private_use": "😀\ue000\uffff\U0010ffff",
}


@pytest.mark.parametrize("text", TRICKY.values(), ids=list(TRICKY))
def test_canonical_bytes_write_strings_like_the_json_module(text):
    value = {"text": text, text: [text], "n": 1}
    assert canonical_bytes(value) == json_module_bytes(value)
    assert same(loads(canonical_bytes(value)), value)


def test_canonical_bytes_sort_keys_by_code_point():
    # UTF-16 order would put the astral key before the private-use ones.
    value = {"😀": 1, "\uffff": 2, "\ue000": 3, "b": 4, "B": 5, "": 6, "ä": 7}
    assert canonical_bytes(value) == (
        '{"":6,"B":5,"b":4,"ä":7,"\ue000":3,"\uffff":2,"😀":1}'.encode()
    )


NUMBERS = [
    (1, "1"),
    (-MAX_SAFE_INT, "-9007199254740991"),
    (1.0, "1.0"),
    (0.1, "0.1"),
    (1e16, "1e+16"),
    (1e15, "1000000000000000.0"),
    (1e-4, "0.0001"),
    (9.99e-05, "9.99e-05"),
    (1.5e-07, "1.5e-07"),
    (-2.5e-10, "-2.5e-10"),
    (5e-324, "5e-324"),
    (1.7976931348623157e308, "1.7976931348623157e+308"),
    (0.30000000000000004, "0.30000000000000004"),
]


@pytest.mark.parametrize(("number", "text"), NUMBERS, ids=[text for _, text in NUMBERS])
def test_canonical_bytes_write_numbers_in_the_single_documented_format(number, text):
    assert canonical_bytes(number) == text.encode()
    assert canonical_bytes([number, "x", {"n": number}]) == f'[{text},"x",{{"n":{text}}}]'.encode()
    envelope = AgentCheckpoint(CODEC, 1, {"n": number}).encode().data
    assert envelope == f'{{"codec":"{CODEC}","payload":{{"n":{text}}},"version":1}}'.encode()


def test_content_hash_equal_in_another_process_with_another_hash_seed():
    payload = {"z": [1, 2.5, 1e-05, "é😀"], "a": {"y": None, "x": True}, "m": "text"}
    here = AgentCheckpoint(CODEC, 1, payload).encode().content_hash
    script = (
        "from smithers_tt.checkpoint import AgentCheckpoint\n"
        "p = {'m': 'text', 'a': {'x': True, 'y': None}, 'z': [1, 2.5, 1e-05, 'é😀']}\n"
        f"print(AgentCheckpoint({CODEC!r}, 1, p).encode().content_hash)\n"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True
    )
    assert out.stdout.strip() == here


# --- named cases: envelope fields ------------------------------------------------------------


@pytest.mark.parametrize(
    "version",
    [True, False, 1.0, 0, -1, "1", None, 2.5],
    ids=["true", "false", "float_one", "zero", "minus_one", "string", "none", "float"],
)
def test_checkpoint_rejects_version_when_not_an_int_of_at_least_one(version):
    with pytest.raises(CheckpointInvalid) as caught:
        AgentCheckpoint(CODEC, version, {})
    assert caught.value.path == "$.version"


@pytest.mark.parametrize("version", [1, 2, 2**31 - 1])
def test_checkpoint_accepts_version_when_a_positive_int(version):
    assert AgentCheckpoint(CODEC, version, {}).encode().decode().version == version


@pytest.mark.parametrize(
    "codec",
    ["", " ", "\t\n ", None, 1, b"codec", ["codec"], "codec\ud800"],
    ids=["empty", "space", "whitespace", "none", "int", "bytes", "list", "lone_surrogate"],
)
def test_checkpoint_rejects_codec_when_not_a_non_blank_str(codec):
    with pytest.raises(CheckpointInvalid) as caught:
        AgentCheckpoint(codec, 1, {})
    assert caught.value.path == "$.codec"


@pytest.mark.parametrize("codec", ["a", "acme.planner/state", "Zürich 😀", 'with "quotes"'])
def test_checkpoint_accepts_codec_when_any_non_blank_str(codec):
    encoded = AgentCheckpoint(codec, 1, {}).encode()
    assert encoded.decode().codec == codec == encoded.codec
    assert encoded.data == json_module_bytes({"codec": codec, "payload": {}, "version": 1})


@pytest.mark.parametrize(
    ("envelope", "words"),
    [
        pytest.param([], ["object"], id="list"),
        pytest.param("envelope", ["object"], id="string"),
        pytest.param(None, ["object"], id="none"),
        pytest.param(("c", 1, {}), ["object"], id="tuple"),
        pytest.param({"codec": "c", "version": 1}, ["missing payload"], id="missing_payload"),
        pytest.param({"payload": {}}, ["missing codec, version"], id="missing_two"),
        pytest.param({}, ["missing codec, payload, version"], id="empty"),
        pytest.param(
            {"codec": "c", "version": 1, "payload": {}, "extra": 1},
            ["unexpected 'extra'"],
            id="extra_field",
        ),
        pytest.param(
            {"codec": "c", "payload": {}, 7: 1},
            ["missing version", "unexpected 7"],
            id="missing_and_extra",
        ),
    ],
)
def test_from_json_rejects_envelope_when_not_exactly_the_three_fields(envelope, words):
    with pytest.raises(CheckpointInvalid) as caught:
        AgentCheckpoint.from_json(envelope)
    assert caught.value.path == "$"
    for word in words:
        assert word in str(caught.value)


def test_from_json_builds_the_checkpoint_of_its_to_json():
    checkpoint = AgentCheckpoint(CODEC, 4, {"messages": [{"role": "user", "content": "hi"}]})
    assert AgentCheckpoint.from_json(checkpoint.to_json()) == checkpoint


def test_from_json_validates_the_payload_with_its_path():
    with pytest.raises(CheckpointInvalid) as caught:
        AgentCheckpoint.from_json({"codec": "c", "version": 1, "payload": {"a": [float("nan")]}})
    assert caught.value.path == "$.payload.a[0]"


def test_encoded_checkpoint_carries_its_bytes_address_and_size():
    checkpoint = AgentCheckpoint(CODEC, 2, {"note": "ünïcode", "n": [1, 2.5]})
    encoded = checkpoint.encode()
    assert isinstance(encoded, EncodedCheckpoint)
    assert (encoded.codec, encoded.version) == (CODEC, 2)
    assert encoded.size == len(encoded.data)
    assert encoded.content_hash == hashlib.sha256(encoded.data).hexdigest()
    assert encoded.decode() == checkpoint
    assert same(encoded.decode().payload, checkpoint.payload)


def test_encoded_checkpoint_is_verified_only_when_encode_made_it():
    encoded = AgentCheckpoint(CODEC, 1, {"n": 1}).encode()
    by_hand = EncodedCheckpoint(CODEC, 1, encoded.data, encoded.content_hash)
    forged = dataclasses.replace(encoded, content_hash="0" * 64)
    assert encoded.verified
    assert not by_hand.verified  # a store hashes these bytes before trusting the address
    assert not forged.verified
    assert by_hand == encoded  # the mark is not part of the value


# --- size limit -----------------------------------------------------------------------------


def test_size_limit_default_is_16_mib():
    assert size_limit() == MAX_CHECKPOINT_BYTES == 16 * MIB


@pytest.mark.parametrize("limit", [1, 4096, MAX_CHECKPOINT_BYTES - 1, MAX_CHECKPOINT_BYTES])
def test_size_limit_accepts_a_lower_or_equal_limit(limit):
    assert size_limit(limit) == limit


@pytest.mark.parametrize(
    "limit",
    [MAX_CHECKPOINT_BYTES + 1, 32 * MIB, 0, -1, True, False, 1.5, float(MIB), "1024"],
    ids=["one_above", "double", "zero", "negative", "true", "false", "float", "float_mib", "str"],
)
def test_size_limit_rejects_limit_when_above_ceiling_or_not_a_positive_int(limit):
    with pytest.raises(InvalidArgument):
        size_limit(limit)
    with pytest.raises(InvalidArgument):
        AgentCheckpoint(CODEC, 1, {}).encode(limit)


def _payload_of_envelope_size(size: int) -> dict[str, Any]:
    """A payload whose canonical envelope is exactly ``size`` bytes, mostly multi-byte text."""
    overhead = len(AgentCheckpoint(CODEC, 1, {"text": ""}).encode().data)
    unit = "é€😀"  # 2 + 3 + 4 bytes in UTF-8
    units, pad = divmod(size - overhead, len(unit.encode()))
    return {"text": unit * units + "a" * pad}


@pytest.mark.parametrize(
    "limit",
    [None, 4096, 1_000_003],
    ids=["default_16_mib", "lowered_to_4_kib", "lowered_to_odd_size"],
)
def test_encode_accepts_exactly_the_limit_and_rejects_one_byte_more(limit):
    size = MAX_CHECKPOINT_BYTES if limit is None else limit
    payload = _payload_of_envelope_size(size)
    encoded = AgentCheckpoint(CODEC, 1, payload).encode(limit)
    assert encoded.size == size
    assert len(payload["text"]) < size  # bytes are counted, not characters

    payload["text"] += "a"
    with pytest.raises(CheckpointTooLarge) as caught:
        AgentCheckpoint(CODEC, 1, payload).encode(limit)
    assert caught.value.details == {"size": size + 1, "limit": size}
    assert not isinstance(caught.value, CheckpointInvalid)


def test_encode_rejects_a_state_that_fits_the_default_when_the_run_lowered_the_limit():
    checkpoint = AgentCheckpoint(CODEC, 1, _payload_of_envelope_size(2048))
    assert checkpoint.encode().size == 2048
    with pytest.raises(CheckpointTooLarge):
        checkpoint.encode(2047)


# --- format declarations --------------------------------------------------------------------


def test_checkpoint_format_sorts_and_deduplicates_versions():
    assert CheckpointFormat("c", [3, 1, 3, 2, 1]).versions == (1, 2, 3)
    assert CheckpointFormat("c", iter([2])).versions == (2,)
    assert CheckpointFormat("c", {5, 4}).versions == (4, 5)


def test_checkpoint_capability_normalises_versions_and_modes():
    capability = CheckpointCapability("c", (2, 1, 2), ["fork", "resume", "fork"])
    assert capability.versions == (1, 2)
    assert capability.modes == ("resume", "fork") == MODES
    assert CheckpointCapability("c", [1]).modes == ("resume",)
    assert CheckpointCapability("c", [1], "fork").modes == ("fork",)


def test_declarations_equal_when_they_declare_the_same():
    assert CheckpointFormat("c", [2, 1]) == CheckpointFormat("c", [1, 2, 2])
    assert CheckpointCapability("c", [1], ["fork", "resume"]) == CheckpointCapability(
        "c", [1], ["resume", "fork"]
    )


BAD_VERSIONS = [
    pytest.param([], id="empty"),
    pytest.param([0], id="zero"),
    pytest.param([-1], id="negative"),
    pytest.param([True], id="true"),
    pytest.param([1, False], id="false"),
    pytest.param([1.0], id="float"),
    pytest.param(["1"], id="str_item"),
    pytest.param(1, id="bare_int"),
    pytest.param("12", id="bare_str"),
]


@pytest.mark.parametrize("versions", BAD_VERSIONS)
def test_checkpoint_format_rejects_versions_when_not_positive_ints(versions):
    with pytest.raises(CheckpointInvalid):
        CheckpointFormat("c", versions)


@pytest.mark.parametrize("versions", BAD_VERSIONS)
def test_checkpoint_capability_rejects_versions_when_not_positive_ints(versions):
    with pytest.raises(CheckpointInvalid):
        CheckpointCapability("c", versions)


@pytest.mark.parametrize(
    "modes",
    [[], ["rewind"], ["Resume"], ["resume", "replay"], [None], "forks"],
    ids=["empty", "unknown", "wrong_case", "one_unknown", "none", "unknown_str"],
)
def test_checkpoint_capability_rejects_modes_when_not_a_subset_of_resume_and_fork(modes):
    with pytest.raises(CheckpointInvalid):
        CheckpointCapability("c", [1], modes)


@pytest.mark.parametrize("codec", ["", "  ", None, 3], ids=["empty", "blank", "none", "int"])
def test_declarations_reject_codec_when_not_a_non_blank_str(codec):
    with pytest.raises(CheckpointInvalid):
        CheckpointFormat(codec, [1])
    with pytest.raises(CheckpointInvalid):
        CheckpointCapability(codec, [1])


FORMATS = [CheckpointFormat("acme.plan", [1, 2]), CheckpointFormat("acme.notes", [3])]


@pytest.mark.parametrize(
    ("codec", "version", "expected"),
    [
        ("acme.plan", 1, True),
        ("acme.plan", 2, True),
        ("acme.notes", 3, True),
        ("acme.plan", 3, False),
        ("acme.notes", 1, False),
        ("acme.Plan", 1, False),
        ("acme", 1, False),
        ("acme.plan ", 1, False),
    ],
)
def test_produces_matches_codec_and_version_exactly(codec, version, expected):
    assert produces(FORMATS, codec, version) is expected


@pytest.mark.parametrize(
    ("declared", "mode", "expected"),
    [
        (["resume"], "resume", True),
        (["resume"], "fork", False),
        (["fork"], "fork", True),
        (["fork"], "resume", False),
        (["resume", "fork"], "resume", True),
        (["resume", "fork"], "fork", True),
    ],
)
def test_accepts_never_takes_one_mode_for_the_other(declared, mode, expected):
    capabilities = [CheckpointCapability("acme.plan", [1, 2], declared)]
    assert accepts(capabilities, "acme.plan", 2, mode) is expected


@pytest.mark.parametrize(
    ("codec", "version"),
    [("acme.plan", 3), ("acme.notes", 1), ("ACME.PLAN", 1)],
    ids=["other_version", "other_codec", "other_case"],
)
def test_accepts_rejects_when_codec_or_version_differs(codec, version):
    capabilities = [CheckpointCapability("acme.plan", [1, 2], ["resume", "fork"])]
    assert not accepts(capabilities, codec, version, "resume")
    assert not accepts(capabilities, codec, version, "fork")


def test_produces_and_accepts_are_false_for_no_declarations():
    assert not produces([], "acme.plan", 1)
    assert not accepts([], "acme.plan", 1, "resume")


BASE_FORMATS = [CheckpointFormat("acme.plan", [1, 2]), CheckpointFormat("acme.notes", [1])]
BASE_CAPABILITIES = [
    CheckpointCapability("acme.plan", [1, 2], ["resume"]),
    CheckpointCapability("acme.notes", [1], ["resume", "fork"]),
]
BASE_SIGNATURE = declaration_signature(BASE_FORMATS, BASE_CAPABILITIES)


@pytest.mark.parametrize(
    ("formats", "capabilities"),
    [
        pytest.param(BASE_FORMATS[::-1], BASE_CAPABILITIES[::-1], id="reordered"),
        pytest.param(
            [CheckpointFormat("acme.notes", [1]), CheckpointFormat("acme.plan", [2, 1, 2])],
            [
                CheckpointCapability("acme.notes", [1], ["fork", "resume"]),
                CheckpointCapability("acme.plan", [2, 1], ["resume"]),
            ],
            id="versions_and_modes_reordered",
        ),
        pytest.param(BASE_FORMATS * 2, BASE_CAPABILITIES * 3, id="duplicated"),
        pytest.param(
            [
                CheckpointFormat("acme.plan", [1]),
                CheckpointFormat("acme.plan", [2]),
                CheckpointFormat("acme.notes", [1]),
            ],
            [
                CheckpointCapability("acme.plan", [2], ["resume"]),
                CheckpointCapability("acme.plan", [1], ["resume"]),
                CheckpointCapability("acme.notes", [1], ["fork"]),
                CheckpointCapability("acme.notes", [1], ["resume"]),
            ],
            id="split_across_declarations",
        ),
    ],
)
def test_declaration_signature_equal_when_the_same_declared_in_another_shape(formats, capabilities):
    assert declaration_signature(formats, capabilities) == BASE_SIGNATURE


def test_declaration_signature_equal_when_declared_as_iterators():
    # made here, not in parametrize: an iterator made at collection is spent after one run
    assert declaration_signature(iter(BASE_FORMATS), iter(BASE_CAPABILITIES)) == BASE_SIGNATURE


@pytest.mark.parametrize(
    ("formats", "capabilities"),
    [
        pytest.param(
            [CheckpointFormat("acme.plan", [1, 3]), BASE_FORMATS[1]],
            BASE_CAPABILITIES,
            id="format_version",
        ),
        pytest.param(
            [CheckpointFormat("acme.planner", [1, 2]), BASE_FORMATS[1]],
            BASE_CAPABILITIES,
            id="format_codec",
        ),
        pytest.param(BASE_FORMATS[:1], BASE_CAPABILITIES, id="format_missing"),
        pytest.param(
            BASE_FORMATS,
            [CheckpointCapability("acme.plan", [1], ["resume"]), BASE_CAPABILITIES[1]],
            id="capability_version",
        ),
        pytest.param(
            BASE_FORMATS,
            [CheckpointCapability("acme.plan", [1, 2], ["fork"]), BASE_CAPABILITIES[1]],
            id="capability_mode",
        ),
        pytest.param(
            BASE_FORMATS,
            [CheckpointCapability("acme.plan", [1, 2], ["resume", "fork"]), BASE_CAPABILITIES[1]],
            id="capability_extra_mode",
        ),
        pytest.param(
            BASE_FORMATS,
            [CheckpointCapability("acme.Plan", [1, 2], ["resume"]), BASE_CAPABILITIES[1]],
            id="capability_codec",
        ),
        pytest.param(BASE_FORMATS, [], id="capabilities_missing"),
    ],
)
def test_declaration_signature_differs_when_any_codec_version_or_mode_differs(
    formats, capabilities
):
    assert declaration_signature(formats, capabilities) != BASE_SIGNATURE


def test_declaration_signature_tells_a_format_from_a_capability():
    produce_only = declaration_signature([CheckpointFormat("acme.plan", [1])], [])
    consume_only = declaration_signature([], [CheckpointCapability("acme.plan", [1])])
    nothing = declaration_signature([], [])
    assert len({produce_only, consume_only, nothing}) == 3
    assert all(len(s) == 64 and set(s) <= set("0123456789abcdef") for s in (produce_only, nothing))
