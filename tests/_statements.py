"""Count the SQL statements a piece of work sends (a SQLAlchemy event on the store's engine)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import sqlalchemy as sa

import smithers_tt as st


@contextlib.contextmanager
def statements(db: st.Database) -> Iterator[list[str]]:
    """The statements sent to ``db`` inside the block, in order."""
    sent: list[str] = []

    def on_execute(*args: Any) -> None:
        sent.append(args[2])

    sa.event.listen(db.engine.sa, "before_cursor_execute", on_execute)
    try:
        yield sent
    finally:
        sa.event.remove(db.engine.sa, "before_cursor_execute", on_execute)
