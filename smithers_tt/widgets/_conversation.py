"""Chat transcripts inside checkpoint payloads: found, rendered as messages, and diffed.

A payload holds a transcript when it is a list of OpenAI-style messages (``{"role": ...,
"content": ...}``, with optional ``tool_calls``, ``name``, ``tool_call_id``), has such a list
under ``messages``, or is the demo's research notes (``{"notes": [str, ...]}``, one ``note``
message per entry). Everything a message holds is untrusted text and is escaped here.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from typing import Any

from smithers_tt.checkpoint import canonical_bytes
from smithers_tt.widgets._html import esc

ROLE_CLASSES = {"system", "user", "assistant", "tool", "function", "note", "developer"}
"""Roles with their own colour; any other role is shown the same neutral way."""

SHOWN_CHARS = 4_000
"""Characters of one message shown before it is cut (the count of the rest is shown)."""


@dataclass(frozen=True)
class ChatMessage:
    """One message of a transcript, normalised for display."""

    role: str
    content: str
    name: str | None = None
    tool_call_id: str | None = None
    tool_calls: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    """(function name, arguments as text) of each tool call."""
    raw: Any = None


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: text, images, audio ...
        parts = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif isinstance(part, dict) and "type" in part:
                parts.append(f"[{part['type']}]")
            else:
                parts.append(json.dumps(part, ensure_ascii=False))
        return "\n".join(parts)
    return json.dumps(content, ensure_ascii=False)


def _is_message(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("role"), str)


def _message(value: dict[str, Any]) -> ChatMessage:
    calls = []
    for call in value.get("tool_calls") or ():
        fn = call.get("function") if isinstance(call, dict) else None
        if isinstance(fn, dict):
            args = fn.get("arguments")
            calls.append(
                (str(fn.get("name", "?")), args if isinstance(args, str) else json.dumps(args))
            )
    return ChatMessage(
        role=value["role"],
        content=_text(value.get("content")),
        name=value.get("name") if isinstance(value.get("name"), str) else None,
        tool_call_id=(
            value.get("tool_call_id") if isinstance(value.get("tool_call_id"), str) else None
        ),
        tool_calls=tuple(calls),
        raw=value,
    )


def find_transcript(payload: Any) -> list[ChatMessage] | None:
    """The transcript a payload holds (see the module docstring), or None."""
    if isinstance(payload, dict):
        messages = payload.get("messages")
        if isinstance(messages, list) and messages and all(map(_is_message, messages)):
            return [_message(m) for m in messages]
        notes = payload.get("notes")
        if isinstance(notes, list) and all(isinstance(n, str) for n in notes):
            return [ChatMessage("note", n, raw=n) for n in notes]
        return None
    if isinstance(payload, list) and payload and all(map(_is_message, payload)):
        return [_message(m) for m in payload]
    return None


def _fingerprint(message: ChatMessage) -> bytes:
    try:
        return canonical_bytes(message.raw)
    except Exception:  # not strict JSON (cannot come from a checkpoint): compare its text
        return repr(message.raw).encode()


def transcript_diff(
    old: list[ChatMessage] | None, new: list[ChatMessage] | None
) -> list[tuple[str, ChatMessage]]:
    """The messages of both sides in order, each marked ``same``, ``add`` or ``remove``
    (a changed message is the old one removed and the new one added)."""
    a, b = old or [], new or []
    matcher = difflib.SequenceMatcher(
        a=[_fingerprint(m) for m in a], b=[_fingerprint(m) for m in b], autojunk=False
    )
    out: list[tuple[str, ChatMessage]] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            out.extend(("same", m) for m in b[j1:j2])
            continue
        out.extend(("remove", m) for m in a[i1:i2])
        out.extend(("add", m) for m in b[j1:j2])
    return out


def _cut(text: str) -> str:
    if len(text) <= SHOWN_CHARS:
        return esc(text)
    return (
        f"{esc(text[:SHOWN_CHARS])}"
        f'<span class="stt-muted"> … {len(text) - SHOWN_CHARS} more characters</span>'
    )


def message_html(message: ChatMessage, mark: str = "same") -> str:
    """One message as escaped HTML (``mark``: same, add or remove)."""
    role_class = message.role if message.role in ROLE_CLASSES else "other"
    sign = {"add": "+ ", "remove": "- "}.get(mark, "")
    who = esc(message.role) + (f" · {esc(message.name)}" if message.name else "")
    if message.tool_call_id:
        who += f' <span class="stt-muted">for call {esc(message.tool_call_id)}</span>'
    calls = "".join(
        f'<div class="stt-call">→ <span class="stt-path">{esc(name)}</span>'
        f'(<span class="stt-value">{_cut(args)}</span>)</div>'
        for name, args in message.tool_calls
    )
    body = f'<div class="stt-msg-text">{_cut(message.content)}</div>' if message.content else ""
    return (
        f'<div class="stt-msg stt-role-{role_class} stt-msg-{mark}">'
        f'<div class="stt-msg-role">{sign}{who}</div>{body}{calls}</div>'
    )


def transcript_html(messages: list[ChatMessage], limit: int = 200) -> str:
    """A transcript as a column of messages (at most ``limit``, the newest)."""
    shown = messages[-limit:]
    more = len(messages) - len(shown)
    head = f'<div class="stt-muted">{more} earlier messages not shown</div>' if more else ""
    body = "".join(message_html(m) for m in shown)
    return f'<div class="stt-conversation">{head}{body}</div>'


def transcript_diff_html(marked: list[tuple[str, ChatMessage]]) -> str:
    """Added and removed messages in place; runs of unchanged ones folded to a count."""
    parts: list[str] = []
    same = 0
    for mark, message in marked:
        if mark == "same":
            same += 1
            continue
        if same:
            parts.append(f'<div class="stt-muted">{same} unchanged message(s)</div>')
            same = 0
        parts.append(message_html(message, mark))
    if same:
        parts.append(f'<div class="stt-muted">{same} unchanged message(s)</div>')
    return f'<div class="stt-conversation">{"".join(parts)}</div>'
