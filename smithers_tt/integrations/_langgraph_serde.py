"""What a stored LangGraph value may construct when it is read: an allow-list, enforced.

LangGraph's ``JsonPlusSerializer`` writes a value that is not plain data as a msgpack *ext*
naming a module and a callable, ``("uuid", "UUID", hex)``, and by default calls whatever a
stored value names on reading it: a database someone else wrote could run
``os.system(...)``. Every LangGraph value smithers_tt decodes (``SmithersSaver`` reads, the
import of SqliteSaver/PostgresSaver databases) goes through :class:`GuardedSerializer`:

* LangGraph's own strict msgpack mode decodes (the ``LANGGRAPH_STRICT_MSGPACK`` allow-list:
  datetimes, UUIDs, decimals, sets, paths, LangChain messages and documents, ``Send``,
  ``Interrupt``, ``Command`` ...) plus the types the caller allows; and
* before anything is constructed, the whole value is scanned: a value that names any other
  type (or a method call LangGraph does not allow, or an ext code it does not write) raises
  :class:`~smithers_tt.errors.UnsafeValue` naming the thread, checkpoint, channel and type,
  where strict mode alone would quietly hand back the raw arguments. Pickles are refused.

Allowing types of your own: ``SmithersSaver(db, allowed_types=[MyModel, ("pkg.mod",
"Name")])``, ``import_langgraph(url, db, allowed_types=...)`` or ``smithers-tt import-langgraph
--allow-type pkg.mod.Name``. With ``LANGGRAPH_STRICT_MSGPACK=true`` in the environment,
``graph.compile`` also adds the types of the graph's state schema (LangGraph's
``with_allowlist``).

:func:`plain` goes the other way, for display only: a decoded value as JSON.
"""

from __future__ import annotations

import base64
import inspect
from collections.abc import Iterable
from typing import Any

import ormsgpack
from langgraph.checkpoint.serde import _msgpack as lg_msgpack
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from smithers_tt.checkpoint import validate
from smithers_tt.errors import (
    CheckpointCorrupt,
    CheckpointInvalid,
    InvalidArgument,
    StoreCorrupt,
    UnsafeValue,
)

__all__ = [
    "ENCODINGS",
    "VALUE",
    "AllowedTypes",
    "DeferredSerializer",
    "Encoded",
    "GuardedSerializer",
    "as_mapping",
    "decode_slot",
    "plain",
    "where_of",
]

AllowedTypes = Iterable[type | tuple[str, str] | str]
"""Types a stored value may construct beyond LangGraph's strict list: classes,
``(module, name)`` pairs as LangGraph's ``allowed_msgpack_modules`` takes them, or
``"module.Name"`` strings."""

VALUE = "a stored LangGraph value"
"""How errors name a value when nothing more is known of it."""
_KINDS = ("null", "bytes", "bytearray", "json", "msgpack")
ENCODINGS = ("msgpack", "bytes", "bytearray")
"""How ``SmithersSaver`` stores a value that is not plain JSON (base64 of LangGraph's bytes)."""
_CONSTRUCTORS = (0, 1, 2, 4, 5)  # LangGraph's ext codes that call module.name(...)
_METHOD, _NUMPY, _DELTA = 3, 6, 7
_OPTION = ormsgpack.OPT_NON_STR_KEYS


def _keys(types: AllowedTypes) -> frozenset[tuple[str, str]]:
    if isinstance(types, str | bytes):
        raise InvalidArgument("allowed_types is a list of types, not one string")
    keys: set[tuple[str, str]] = set()
    for item in types:
        if isinstance(item, str):  # "module.Name"
            module, _, name = item.rpartition(".")
            item = (module, name) if module and name else item
        if inspect.isclass(item):
            keys.add((item.__module__, item.__name__))
        elif isinstance(item, tuple) and len(item) == 2 and all(type(p) is str for p in item):
            keys.add((item[0], item[1]))
        else:
            raise InvalidArgument(
                "allowed types are classes, (module, name) pairs or 'module.Name' strings "
                f"(e.g. 'mypkg.state.Note'), not {item!r}"
            )
    return frozenset(keys)


class Encoded:
    """A typed value as a LangGraph saver stored it, not decoded yet (``kind``, ``data``)."""

    __slots__ = ("data", "kind")

    def __init__(self, kind: str, data: bytes) -> None:
        self.kind, self.data = kind, data


def _blocked(data: bytes, allowed: frozenset[tuple[str, str]]) -> str | None:
    """What msgpack ``data`` would construct that is not allowed (``"module.name"``,
    ``"ext code N"`` ...), found without constructing anything; None when all is allowed."""
    found: list[str] = []

    def hook(code: int, payload: bytes) -> None:
        if code in (_DELTA, _NUMPY):  # plain data inside: scan it
            ormsgpack.unpackb(payload, ext_hook=hook, option=_OPTION)
            return None
        if code not in (*_CONSTRUCTORS, _METHOD):
            found.append(f"msgpack ext code {code}, which LangGraph does not write")
            raise ValueError(found[-1])
        tup = ormsgpack.unpackb(payload, ext_hook=hook, option=_OPTION)
        if (
            not isinstance(tup, list | tuple)
            or len(tup) < 3
            or not all(type(p) is str for p in tup[:2])
        ):
            found.append(f"a malformed msgpack ext (code {code})")
            raise ValueError(found[-1])
        key = (tup[0], tup[1])
        if code == _METHOD:
            method = tup[3] if len(tup) > 3 and type(tup[3]) is str else "?"
            if (*key, method) not in lg_msgpack.SAFE_MSGPACK_METHODS:
                found.append(f"a call of {key[0]}.{key[1]}.{method}, which LangGraph never allows")
                raise ValueError(found[-1])
        elif key not in lg_msgpack.SAFE_MSGPACK_TYPES and key not in allowed:
            found.append(f"{key[0]}.{key[1]}")
            raise ValueError(found[-1])
        return None

    try:
        ormsgpack.unpackb(data, ext_hook=hook, option=_OPTION)
    except (ValueError, TypeError) as error:
        if found:
            return found[0]
        raise StoreCorrupt(f"not valid msgpack ({error})") from None
    return None


class GuardedSerializer(JsonPlusSerializer):
    """LangGraph's ``JsonPlusSerializer`` in strict msgpack mode, allowing ``allowed_types``
    besides LangGraph's own list, that refuses (:class:`~smithers_tt.errors.UnsafeValue`)
    a value naming any other type instead of returning its raw arguments, and never
    unpickles (see the module documentation)."""

    def __init__(self, allowed_types: AllowedTypes = ()) -> None:
        self.allowed = _keys(allowed_types)
        super().__init__(pickle_fallback=False, allowed_msgpack_modules=tuple(self.allowed) or None)

    def with_msgpack_allowlist(self, extra_allowlist: Iterable[Any]) -> GuardedSerializer:
        """A copy that also allows ``extra_allowlist`` (what ``graph.compile`` passes in
        LangGraph's strict mode: the types of the graph's state schema)."""
        pairs = [k for k in extra_allowlist if inspect.isclass(k) or len(k) == 2]
        return GuardedSerializer([*self.allowed, *pairs])

    def check(self, kind: str, data: bytes, where: str) -> None:
        """Raise unless decoding ``(kind, data)`` constructs only allowed types.

        Raises:
            UnsafeValue: a type outside the allow-list, a method call, or a pickle.
            StoreCorrupt: an unknown kind, or msgpack that does not parse.
        """
        if kind == "msgpack":
            try:
                blocked = _blocked(data, self.allowed)
            except StoreCorrupt as error:
                raise StoreCorrupt(f"{where}: {error}") from None
            if blocked is not None and " " in blocked:  # nothing anyone can allow
                raise UnsafeValue(
                    f"{where} holds {blocked}; nothing was constructed",
                    type=blocked,
                    where=where,
                )
            if blocked is not None:
                raise UnsafeValue(
                    f"{where} asks to construct {blocked}, which is not in the allow-list of "
                    "types a stored LangGraph value may build; nothing was constructed. If you "
                    "trust the database and the type, allow it: SmithersSaver(db, "
                    "allowed_types=[...]), import_langgraph(..., allowed_types=[...]) or "
                    f"smithers-tt import-langgraph --allow-type {blocked}",
                    type=blocked,
                    where=where,
                )
        elif kind == "pickle":
            raise UnsafeValue(
                f"{where} is a pickle; smithers_tt never unpickles (it can run any code)",
                type="pickle",
                where=where,
            )
        elif kind not in _KINDS:
            raise StoreCorrupt(f"{where} has the unknown serialization type {kind!r}")

    def load(self, serde: Any, kind: str, data: bytes, where: str) -> Any:
        """``(kind, data)`` decoded by ``serde`` once :meth:`check` allowed it."""
        self.check(kind, data, where)
        loads = super().loads_typed if serde is self else serde.loads_typed
        try:
            return loads((kind, data))
        except (ValueError, TypeError) as error:
            raise StoreCorrupt(f"{where} does not decode as {kind} ({error})") from None

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        """LangGraph's ``loads_typed``, refusing what is not allowed."""
        return self.load(self, data[0], bytes(data[1]), VALUE)

    def resolve(self, value: Any, where: str) -> Any:
        """``value`` decoded when it is :class:`Encoded`, else as it is."""
        if isinstance(value, Encoded):
            return self.load(self, value.kind, value.data, where)
        return value


def where_of(thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> str:
    """A checkpoint's thread, namespace and id, as errors name them."""
    ns = f" (namespace {checkpoint_ns!r})" if checkpoint_ns else ""
    return f"thread {thread_id!r}{ns}, checkpoint {checkpoint_id!r}"


def decode_slot(guard: GuardedSerializer, serde: Any, encoded: Any, where: str) -> Any:
    """A value as ``SmithersSaver`` encodes it (``{"json": v}`` or ``{kind: base64}``)
    decoded by ``serde`` once ``guard`` allowed it.

    Raises:
        CheckpointCorrupt: it is not an encoded value.
        UnsafeValue: it names a type that is not allowed.
    """
    if type(encoded) is not dict or len(encoded) != 1:
        raise CheckpointCorrupt(f"{where} is not an encoded LangGraph value: {str(encoded)[:80]}")
    ((kind, data),) = encoded.items()
    if kind == "json":
        return data
    if kind in ENCODINGS and type(data) is str:
        return guard.load(serde, kind, base64.b64decode(data), where)
    raise CheckpointCorrupt(f"{where} has the unknown LangGraph value encoding {kind!r}")


def as_mapping(value: Any, what: str, where: str) -> dict:
    """``value`` when it is a mapping (a checkpoint, its metadata ...), else a clear error.

    Raises:
        StoreCorrupt: it is an int, a list, a string ...
    """
    if not isinstance(value, dict):
        raise StoreCorrupt(
            f"{where}: its {what} is {type(value).__name__} {str(value)[:60]!r}, not a mapping; "
            "the database is damaged or was not written by LangGraph"
        )
    return value


class DeferredSerializer:
    """The serializer of a saver an import reads: ``loads_typed`` hands values back
    :class:`Encoded`, for :meth:`GuardedSerializer.resolve` to decode with the thread,
    checkpoint and channel they belong to (the saver does not say)."""

    def __init__(self, guard: GuardedSerializer) -> None:
        self.guard = guard

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        """``None`` for null, else the value :class:`Encoded`."""
        return None if data[0] == "null" else Encoded(data[0], bytes(data[1]))

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        """Encode (PostgresSaver re-encodes the pending sends of checkpoints older than
        format 4 while it reads them): what is :class:`Encoded` is decoded first."""
        where = "a pending send of a PostgresSaver checkpoint older than format 4"
        if isinstance(obj, list):
            obj = [self.guard.resolve(item, where) for item in obj]
        return self.guard.dumps_typed(self.guard.resolve(obj, where))


def plain(value: Any) -> Any:
    """A channel value as JSON (objects such as LangChain messages by their fields, anything
    else by its ``repr``), for diffs and display."""
    try:
        validate(value)
        return value
    except CheckpointInvalid:
        pass
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [plain(v) for v in value]
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return plain(dump())
    return repr(value)
