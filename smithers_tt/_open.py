"""Finding and opening the store a URL names: what :func:`smithers_tt.connect` checks before
it hands out a :class:`~smithers_tt.Database` (a store to create, migrate, refuse, or open
read-only), and the messages that say what to do when it refuses."""

from __future__ import annotations

import os
import re

from smithers_tt.errors import InvalidArgument, SchemaMismatch, StoreNotFound
from smithers_tt.store import (
    Engine,
    RetryPolicy,
    StoreState,
    check_store_shape,
    display_url,
    migrate,
    store_state,
)

DEFAULT_URL = "sqlite:///smithers.db"

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:")


def resolve_url(value: str | None = None) -> str:
    """The database URL meant by ``value``: a URL, or a bare path meaning an SQLite file;
    the default is ``$SMITHERS_TT_DB`` or ``sqlite:///smithers.db``.

    Raises:
        InvalidArgument: the text cannot name a database (a NUL, text that is not UTF-8, or
            something like ``sqlite:/x.db`` that looks like a URL without its ``//``).
    """
    url = value or os.environ.get("SMITHERS_TT_DB") or DEFAULT_URL
    try:
        url.encode("utf-8")
    except UnicodeEncodeError as error:
        raise InvalidArgument(
            f"the database URL {url.encode('utf-8', 'surrogateescape')!r} is not valid UTF-8"
        ) from error
    if "\x00" in url:
        raise InvalidArgument(f"the database URL {url!r} contains a NUL character")
    if "://" in url:
        return url
    if _SCHEME.match(url):  # a URL with a typo, not a file name: never create "sqlite:/"
        raise InvalidArgument(
            f"{url!r} looks like a URL without '//': use sqlite:///path/to/file.db (three "
            "slashes, then the path), postgresql+psycopg://user@host/dbname, or a plain "
            "file path (./name.db)"
        )
    return f"sqlite:///{url}"


def open_engine(
    url: str,
    *,
    create: bool | None,
    read_only: bool,
    beside_other_tables: bool,
    migrate_schema: bool,
    retry: RetryPolicy | None,
    busy_timeout_ms: int,
) -> Engine:
    """The engine of the store at ``url`` (a resolved URL), checked, created and migrated as
    :func:`smithers_tt.connect` documents (its arguments and errors)."""
    if create is None:
        create = not read_only
    if create and read_only:
        raise InvalidArgument("a read-only connection cannot create a store: pass create=False")
    engine: Engine | None = None
    try:
        if read_only:
            engine = _engine(url, retry, busy_timeout_ms, read_only=True)
            if migrate_schema:
                _check_readable(engine, store_state(engine))
        else:
            if migrate_schema and not (create and beside_other_tables):
                # Only a caller that may not create, or not beside other tables, needs to
                # look first; the default creates and migrates whatever is there anyway.
                _check_writable(
                    url,
                    _state_before_writing(url, retry, busy_timeout_ms),
                    create,
                    beside_other_tables,
                )
            engine = _engine(url, retry, busy_timeout_ms, read_only=False, create=create)
            if migrate_schema:
                migrate(engine)
    except BaseException:
        if engine is not None:
            engine.dispose()
        raise
    return engine


def _engine(url: str, retry: RetryPolicy | None, busy_timeout_ms: int, **mode: bool) -> Engine:
    try:
        return Engine(url, retry=retry, busy_timeout_ms=busy_timeout_ms, **mode)
    except StoreNotFound as error:
        raise _no_store(url, str(error)) from error


def _no_store(url: str, why: str) -> StoreNotFound:
    shown = _shown(url)
    return StoreNotFound(
        f"no store at {shown} ({why}); nothing was created. Check --db (or $SMITHERS_TT_DB), "
        f"or create the store with: smithers-tt --db {shown} migrate",
        url=shown,
    )


def _shown(url: str) -> str:
    return url.removeprefix("sqlite:///") if url.startswith("sqlite:///") else display_url(url)


def _state_before_writing(
    url: str, retry: RetryPolicy | None, busy_timeout_ms: int
) -> StoreState | None:
    """What is at ``url``, looked at read-only (opening for writing sets up the file, e.g.
    SQLite's WAL mode, which must not happen to a database that is not a store); None when
    there is no SQLite file yet."""
    try:
        probe = Engine(url, retry=retry, busy_timeout_ms=busy_timeout_ms, read_only=True)
    except StoreNotFound:
        return None
    try:
        return store_state(probe)
    finally:
        probe.dispose()


def _check_writable(
    url: str, state: StoreState | None, create: bool, beside_other_tables: bool
) -> None:
    if state is not None and state.exists:
        return  # migrate() upgrades it, or refuses a newer one
    if not create:
        raise _no_store(url, "no such file" if state is None else "no smithers_tt tables")
    if state is not None and state.other_tables and not beside_other_tables:
        names = ", ".join(state.other_tables[:5]) + (" ..." if len(state.other_tables) > 5 else "")
        raise SchemaMismatch(
            f"{_shown(url)} already holds {len(state.other_tables)} tables that are not "
            f"smithers_tt's ({names}); give the store a database or schema of its own (for "
            "PostgreSQL: CREATE SCHEMA smithers, then ?options=-csearch_path%3Dsmithers in the "
            "URL), or create it beside them on purpose: smithers-tt migrate --beside-other-tables",
            other_tables=list(state.other_tables),
        )


def _check_readable(engine: Engine, state: StoreState) -> None:
    if not state.exists:
        raise _no_store(engine.url, "no smithers_tt tables")
    if state.unknown:
        raise SchemaMismatch(
            f"the store was migrated by a newer smithers_tt (unknown migrations "
            f"{list(state.unknown)}); upgrade smithers_tt to open it"
        )
    if state.pending:
        raise SchemaMismatch(
            f"the store at {_shown(engine.url)} was made by an older smithers_tt and needs "
            f"migrations {list(state.pending)}; a read-only open never migrates: upgrade it "
            f"with smithers-tt --db {_shown(engine.url)} migrate (nothing is lost)"
        )
    check_store_shape(engine)
