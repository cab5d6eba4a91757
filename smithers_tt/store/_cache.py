"""The opt-in task cache: outputs (and final checkpoints) keyed by a hash of the call.

A cache row is not a change to a run (it is a memo of a call, shared by every run), so it is
written here and not through the ledger; a cache hit's effect on a run (an attempt started
and finished ``cache_hit``, the node's output) is written by the ledger, through the store.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from smithers_tt.checkpoint import AgentCheckpoint, EncodedCheckpoint, canonical_bytes, loads
from smithers_tt.store._records import AttemptKey, now_ms
from smithers_tt.store._store import Store
from smithers_tt.store.backend import schema as S


@dataclass(frozen=True)
class CacheHit:
    """A cached output and the verified checkpoint that came with it, if any."""

    output: Any
    checkpoint: EncodedCheckpoint | None


def cache_lookup(store: Store, key: str) -> CacheHit | None:
    """The cache entry under ``key``, with its checkpoint content verified, or None."""
    c = S.cache
    rows = store.engine.transaction(
        lambda conn: conn.execute(sa.select(c).where(c.c.cache_key == key)).all(), write=False
    )
    if not rows:
        return None
    row = rows[0]
    encoded = None
    if row.content_hash is not None:
        data = store.read_content(row.content_hash)  # verifies hash and size
        encoded = EncodedCheckpoint(row.codec, row.version, data, row.content_hash)
    return CacheHit(None if row.output_json is None else loads(row.output_json), encoded)


def cache_store(
    store: Store, key: str, origin: AttemptKey, output: Any, checkpoint: AgentCheckpoint | None
) -> None:
    """Remember ``output`` (and the content of ``checkpoint``, already stored) under ``key``."""
    encoded = checkpoint.encode() if checkpoint is not None else None
    values = {
        "cache_key": key,
        "output_json": None if output is None else canonical_bytes(output).decode(),
        "content_hash": encoded.content_hash if encoded else None,
        "codec": encoded.codec if encoded else None,
        "version": encoded.version if encoded else None,
        "run_id": origin.run_id,
        "node_id": origin.node_id,
        "created_at_ms": now_ms(),
    }

    def work(conn: Connection) -> None:
        exists = conn.execute(sa.select(S.cache.c.cache_key).where(S.cache.c.cache_key == key))
        if exists.first() is None:
            conn.execute(S.cache.insert().values(**values))

    store.engine.transaction(work)
