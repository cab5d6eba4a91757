"""The entry object: ``db = smithers_tt.connect(url)``; everything else is reached from it."""

from __future__ import annotations

import os
from typing import Any

from smithers_tt.store import (
    Engine,
    GcReport,
    RetryPolicy,
    Store,
    VerifyReport,
    collect_garbage,
    migrate,
    verify,
)
from smithers_tt.store._maintenance import Progress

DEFAULT_URL = "sqlite:///smithers.db"


class Database:
    """A smithers_tt database: SQLite file or PostgreSQL, migrated and ready.

    Use :func:`connect` to make one. ``db.store`` is the durable storage layer (runs,
    attempts, fenced checkpoint publication, verified reads).
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.store = Store(engine)

    @property
    def url(self) -> str:
        """The database URL this object was opened with."""
        return self.engine.url

    def verify(self, *, page_size: int = 200, progress: Progress | None = None) -> VerifyReport:
        """Check every stored checkpoint's SHA-256 and size; see :func:`store.verify`."""
        return verify(self.engine, page_size=page_size, progress=progress)

    def collect_garbage(self, **options: Any) -> GcReport:
        """Delete checkpoint content nothing reaches; see :func:`store.collect_garbage`."""
        return collect_garbage(self.engine, **options)

    def close(self) -> None:
        """Release every connection."""
        self.engine.dispose()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<smithers_tt.Database {self.engine.sa.url.render_as_string(hide_password=True)}>"


def connect(
    url: str | None = None,
    *,
    migrate_schema: bool = True,
    retry: RetryPolicy | None = None,
    busy_timeout_ms: int = 5000,
) -> Database:
    """Open (and by default migrate) a smithers_tt database.

    Args:
        url: ``sqlite:///path/to/file.db`` (the default is ``$SMITHERS_TT_DB`` or
            ``sqlite:///smithers.db``) or ``postgresql+psycopg://user@host:5432/dbname``.
        migrate_schema: apply pending migrations and check the schema (default True).
        retry: how transient errors are retried inside the store.
        busy_timeout_ms: SQLite's wait for a lock before a retry.

    Raises:
        InvalidArgument: the URL is not a supported database.
        SchemaMismatch: the database has tables of a shape smithers_tt does not recognise.
    """
    url = url or os.environ.get("SMITHERS_TT_DB") or DEFAULT_URL
    if "://" not in url:  # a bare path means an SQLite file
        url = f"sqlite:///{url}"
    engine = Engine(url, retry=retry, busy_timeout_ms=busy_timeout_ms)
    if migrate_schema:
        try:
            migrate(engine)
        except BaseException:
            engine.dispose()
            raise
    return Database(engine)
