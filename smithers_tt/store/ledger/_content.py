"""Content stored by a write: immutable bytes under their SHA-256, stored once, checked when
they were there already (a publish's checkpoint, a LangGraph value or document, a model call's
request and reply).

:func:`store_content` inserts first (``ON CONFLICT DO NOTHING``) and, when the row was there,
compares the bytes inside the database, holding the row (``FOR KEY SHARE`` on PostgreSQL)
against a concurrent garbage collection until the write commits. :class:`Stored` is a change
whose content goes with the clock's advance instead (one round trip on PostgreSQL), checked
the same way afterwards; :class:`ContentStored` is that alone, adding no frame.
"""

from __future__ import annotations

from typing import Any

from smithers_tt.checkpoint import EncodedCheckpoint
from smithers_tt.errors import CheckpointCorrupt, TransientStoreError
from smithers_tt.store.backend import Driver
from smithers_tt.store.ledger._write import Change, Step, Write


def store_content(db: Driver, encoded: EncodedCheckpoint, created_at_ms: int) -> None:
    """Store ``encoded`` under its hash unless present; raise
    :class:`~smithers_tt.errors.CheckpointCorrupt` if present with other bytes."""
    sql = db.sql
    digest, data = encoded.content_hash, encoded.data
    for _ in range(5):  # each turn loses only to a concurrent insert or delete of this row
        if db.count(sql.insert_content, (digest, data, len(data), created_at_ms)) == 1:
            return
        same = db.one(sql.check_content, (data, digest))
        if same is not None:
            _check(encoded, same)
            return
    raise TransientStoreError(
        f"content {digest[:12]} kept appearing and disappearing under a "
        "concurrent collection; retry",
        content_hash=digest,
    )


def _check(encoded: EncodedCheckpoint, found: tuple[Any, ...]) -> None:
    """Raise unless ``found`` (stored size, whether the stored bytes are the same) matches."""
    if found[0] != len(encoded.data) or not found[1]:
        raise CheckpointCorrupt(
            f"stored content {encoded.content_hash[:12]} differs from the bytes that "
            "hash to it; run verify() and restore the database from a backup",
            content_hash=encoded.content_hash,
        )


class Stored(Change):
    """A change whose content (:attr:`enc`) is stored with the clock's advance (one round
    trip on PostgreSQL), once per write; content that was there already is checked
    (:meth:`store`, called by :meth:`apply`)."""

    __slots__ = ("sent",)

    enc: EncodedCheckpoint

    def early(self, w: Write) -> Step | None:
        enc = self.enc
        self.sent = enc.content_hash not in w.contents
        if not self.sent:
            return None
        w.contents.add(enc.content_hash)
        return (w.sql.put_content, (enc.content_hash, enc.data, len(enc.data), w.stamp))

    keeps_run = True

    def guess(self, w: Write) -> tuple[Step, Any] | bool | None:
        # Guessed stored, or found with the same bytes (and held against a collection): the
        # guarded statement aborts the transaction otherwise.
        statement = w.sql.put_content_if
        if statement is None:
            return False
        step = self.early(w)
        if step is None:
            return None
        return (statement, step[1]), (len(self.enc.data), True)

    def store(self, w: Write, early: Any) -> None:
        """Check what :meth:`early` found: the content it stored, or stored already."""
        if not self.sent:
            return
        if early is None:  # there already (SQLite), or a collection raced the statement
            early = w.db.one(w.sql.check_content, (self.enc.data, self.enc.content_hash))
        if early is None:
            store_content(w.db, self.enc, w.stamp)
        else:
            _check(self.enc, early)


class ContentStored(Stored):
    """Frameless: content stored with a write, for a row another change of it inserts."""

    __slots__ = ("enc",)

    ticks = 0

    def __init__(self, enc: EncodedCheckpoint) -> None:
        self.enc = enc
        self.sent = False

    def apply(self, w: Write, frame_no: int, early: Any) -> None:
        self.store(w, early)
