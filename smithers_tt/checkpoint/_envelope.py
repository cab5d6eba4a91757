"""The checkpoint envelope and the declarations agents make about the formats they speak."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from smithers_tt._ids import check_id
from smithers_tt.checkpoint._json import (
    PAYLOAD,
    canonical_bytes,
    canonical_envelope,
    clone,
    content_hash,
    loads,
    safe_repr,
    validate,
)
from smithers_tt.errors import CheckpointInvalid, CheckpointTooLarge, InvalidArgument

MAX_CHECKPOINT_BYTES = 16 * 1024 * 1024
"""Hard ceiling on the canonical bytes of one checkpoint (16 MiB). A run may lower it, never
raise it."""

CheckpointMode = Literal["resume", "fork"]
"""How an agent is handed a checkpoint: ``resume`` (its own attempt, continued) or ``fork`` (a
new run or task seeded from it). Capabilities name the modes they accept; neither implies the
other."""

MODES: tuple[CheckpointMode, ...] = ("resume", "fork")
"""Every checkpoint mode, in canonical order."""

MAX_VERSION = 2**31 - 1
"""Highest envelope version accepted (what a 32-bit signed column holds)."""

_FIELDS = frozenset({"codec", "version", "payload"})

_ENCODED = object()
"""Marks an :class:`EncodedCheckpoint` made by :meth:`AgentCheckpoint.encode` (see
:attr:`EncodedCheckpoint.verified`)."""


def size_limit(limit: int | None = None) -> int:
    """Return the checkpoint size limit in force: ``limit`` if given and allowed, else 16 MiB.

    Raises:
        InvalidArgument: ``limit`` is not a positive int or is above the 16 MiB hard ceiling.
    """
    if limit is None:
        return MAX_CHECKPOINT_BYTES
    if type(limit) is not int or limit < 1:
        raise InvalidArgument(f"checkpoint size limit must be a positive int, got {limit!r}")
    if limit > MAX_CHECKPOINT_BYTES:
        raise InvalidArgument(
            f"checkpoint size limit {limit} is above the hard ceiling of "
            f"{MAX_CHECKPOINT_BYTES} bytes (16 MiB); it may only be lowered"
        )
    return limit


def bounded_json(value: Any, subject: str, limit: int | None = None) -> bytes:
    """Canonical bytes of ``value`` under the rules of a checkpoint's payload: strict JSON and
    at most the checkpoint size limit (``limit``, default 16 MiB), for values a person gives a
    run (a pause's answer) that are stored in a frame as a checkpoint is.

    Raises:
        CheckpointInvalid: ``value`` is not strict JSON; the error names the JSON path.
        CheckpointTooLarge: its canonical bytes exceed the limit; nothing was written.
    """
    allowed = size_limit(limit)
    data = canonical_bytes(value, subject=subject)
    if len(data) > allowed:
        raise CheckpointTooLarge(
            f"{subject} is {len(data)} bytes in canonical JSON, above the limit of {allowed} "
            "bytes that bounds a checkpoint of this run; give a smaller value (or a reference "
            "to where the data is kept); nothing was written",
            size=len(data),
            limit=allowed,
        )
    return data


def _check_codec(codec: Any, where: str) -> str:
    if type(codec) is not str or not codec.strip():
        raise CheckpointInvalid(
            f"{where}: codec must be a non-empty string, got {safe_repr(codec)}", path="$.codec"
        )
    validate(codec, "$.codec", subject="checkpoint codec")
    return codec


def _check_version(version: Any, where: str) -> int:
    # bool is a subclass of int in Python; an envelope version of True is a mistake.
    if type(version) is not int or not 1 <= version <= MAX_VERSION:
        raise CheckpointInvalid(
            f"{where}: version must be an int from 1 to {MAX_VERSION} (2**31-1), "
            f"got {safe_repr(version)} "
            f"({type(version).__name__})",
            path="$.version",
        )
    return version


@dataclass(frozen=True, slots=True)
class EncodedCheckpoint:
    """A checkpoint in its canonical form, ready to be stored: bytes, address and size."""

    codec: str
    version: int
    data: bytes
    content_hash: str
    # Not an __init__ argument, so dataclasses.replace() (a new hash, say) drops it.
    _made_by: object = field(default=None, init=False, compare=False, repr=False)

    @property
    def verified(self) -> bool:
        """Whether :meth:`AgentCheckpoint.encode` made it: its address is the SHA-256 of its
        bytes and they were size-checked, so a store need not hash them again."""
        return self._made_by is _ENCODED

    @property
    def size(self) -> int:
        """Length of the canonical bytes."""
        return len(self.data)

    def decode(self) -> AgentCheckpoint:
        """Parse the canonical bytes back into a fresh :class:`AgentCheckpoint`."""
        return AgentCheckpoint.from_json(loads(self.data))


@dataclass(frozen=True, slots=True)
class AgentCheckpoint:
    """The state an agent publishes: ``codec`` names the format, ``version`` (1 to 2**31-1) its
    revision, ``payload`` the strict-JSON state itself.

    Construction validates all three fields and raises :class:`CheckpointInvalid` with the JSON
    path of the first offending value (``$.payload.messages[2].content``).
    """

    codec: str
    version: int
    payload: Any

    def __post_init__(self) -> None:
        _check_codec(self.codec, "AgentCheckpoint")
        _check_version(self.version, "AgentCheckpoint")
        validate(self.payload, "$.payload", subject=PAYLOAD)

    @classmethod
    def from_json(cls, value: Any) -> AgentCheckpoint:
        """Build from a parsed envelope ``{"codec", "version", "payload"}``; no other keys."""
        if type(value) is not dict:
            raise CheckpointInvalid(
                f"a checkpoint envelope must be an object, got {type(value).__name__}", path="$"
            )
        keys = set(value)
        if keys != _FIELDS:
            missing, extra = sorted(_FIELDS - keys), sorted(map(safe_repr, keys - _FIELDS))
            raise CheckpointInvalid(
                "a checkpoint envelope has exactly the fields codec, version and payload"
                + (f"; missing {', '.join(missing)}" if missing else "")
                + (f"; unexpected {', '.join(extra)}" if extra else ""),
                path="$",
            )
        return cls(value["codec"], value["version"], value["payload"])

    def to_json(self) -> dict[str, Any]:
        """The envelope as a plain dict (sharing the payload; see :meth:`clone`)."""
        return {"codec": self.codec, "version": self.version, "payload": self.payload}

    def clone(self) -> AgentCheckpoint:
        """A deep copy whose payload shares nothing mutable with this one."""
        copy = object.__new__(AgentCheckpoint)
        object.__setattr__(copy, "codec", self.codec)
        object.__setattr__(copy, "version", self.version)
        object.__setattr__(copy, "payload", clone(self.payload))
        return copy

    def encode(self, max_bytes: int | None = None) -> EncodedCheckpoint:
        """Canonical bytes and SHA-256 address of the whole envelope.

        Raises:
            CheckpointInvalid: the payload was mutated into something that is not strict JSON.
            CheckpointTooLarge: the canonical bytes exceed ``max_bytes`` (default 16 MiB).
        """
        limit = size_limit(max_bytes)
        # The payload is checked again (it may have been mutated since construction), in one
        # pass fused with writing the bytes; its depth counts from the payload, as at
        # construction.
        data = canonical_envelope(self.codec, self.version, self.payload)
        if len(data) > limit:
            raise CheckpointTooLarge(
                f"checkpoint {self.codec} v{self.version} is {len(data)} bytes in canonical form,"
                f" above the limit of {limit} bytes; publish less state (or a summary of it)",
                size=len(data),
                limit=limit,
            )
        encoded = EncodedCheckpoint(self.codec, self.version, data, content_hash(data))
        object.__setattr__(encoded, "_made_by", _ENCODED)
        return encoded


def _versions(versions: Iterable[int], where: str) -> tuple[int, ...]:
    if isinstance(versions, int | str):
        raise CheckpointInvalid(
            f"{where}: versions must be a list of ints, got {safe_repr(versions)}"
        )
    out = tuple(sorted({_check_version(v, where) for v in versions}))
    if not out:
        raise CheckpointInvalid(f"{where}: versions must not be empty")
    return out


@dataclass(frozen=True, slots=True)
class CheckpointFormat:
    """A codec and the versions of it an agent may *produce* (publish)."""

    codec: str
    versions: tuple[int, ...]

    def __init__(self, codec: str, versions: Iterable[int]) -> None:
        object.__setattr__(
            self, "codec", check_id(_check_codec(codec, "CheckpointFormat"), "codec")
        )
        object.__setattr__(self, "versions", _versions(versions, "CheckpointFormat"))


@dataclass(frozen=True, slots=True)
class CheckpointCapability:
    """A codec, versions and modes (``resume``, ``fork``) an agent may *consume*.

    Matching is exact: ``resume`` never implies ``fork`` and vice versa.
    """

    codec: str
    versions: tuple[int, ...]
    modes: tuple[CheckpointMode, ...]

    def __init__(
        self, codec: str, versions: Iterable[int], modes: Iterable[CheckpointMode] = ("resume",)
    ) -> None:
        object.__setattr__(
            self, "codec", check_id(_check_codec(codec, "CheckpointCapability"), "codec")
        )
        object.__setattr__(self, "versions", _versions(versions, "CheckpointCapability"))
        if isinstance(modes, str):
            modes = (modes,)  # type: ignore[assignment]
        chosen = set(modes)
        unknown = chosen - set(MODES)
        if unknown or not chosen:
            raise CheckpointInvalid(
                f"CheckpointCapability: modes must be a non-empty subset of {list(MODES)}, "
                f"got {sorted(map(safe_repr, modes))}"
            )
        object.__setattr__(self, "modes", tuple(m for m in MODES if m in chosen))


def produces(formats: Iterable[CheckpointFormat], codec: str, version: int) -> bool:
    """Whether any of ``formats`` declares exactly this codec and version."""
    return any(f.codec == codec and version in f.versions for f in formats)


def accepts(
    capabilities: Iterable[CheckpointCapability], codec: str, version: int, mode: CheckpointMode
) -> bool:
    """Whether any of ``capabilities`` consumes exactly this codec, version and mode."""
    return any(c.codec == codec and version in c.versions and mode in c.modes for c in capabilities)


def declaration_signature(
    formats: Iterable[CheckpointFormat], capabilities: Iterable[CheckpointCapability]
) -> str:
    """A stable hash of what an agent declares, ignoring order and duplicates.

    Two agents that produce and consume exactly the same (codec, version[, mode]) tuples get
    the same signature; it goes into cache keys so a cached result is never handed to an agent
    that could not have consumed the state behind it.
    """
    produced = sorted({(f.codec, v) for f in formats for v in f.versions})
    consumed = sorted({(c.codec, v, m) for c in capabilities for v in c.versions for m in c.modes})
    doc = {"formats": [list(p) for p in produced], "capabilities": [list(c) for c in consumed]}
    return content_hash(canonical_bytes(doc))
