"""A third backend is one new file: no store module outside the dialect modules
(``backend/_dialect.py``, ``_sqlite.py``, ``_postgres.py``) branches on which database it runs
on (the differences are methods and statements of the dialect classes)."""

from __future__ import annotations

import re
from pathlib import Path

import smithers_tt.store

STORE = Path(smithers_tt.store.__file__).parent

BRANCH = re.compile(
    r"dialect\.name\s*(==|!=|\bin\b|\bnot in\b)"  # conn.dialect.name == "..."
    r"|\bdialect\s*(==|!=)"  # dialect == "postgresql", self.dialect == "sqlite"
    r"|\bis_sqlite\b"
    r"|(==|!=)\s*[\"'](postgresql|sqlite)[\"']"
    r"|[\"'](postgresql|sqlite)[\"']\s*(==|!=)"
)
"""What a dialect branch looks like (a lookup such as ``DIALECTS[conn.dialect.name]`` is
not one)."""

ALLOWED = {
    # Engine.is_sqlite: a convenience the tests read (they set up each backend their own
    # way); nothing in the store branches on it, which this test checks everywhere else.
    ("backend/_engine.py", "def is_sqlite(self) -> bool:"),
    ("backend/_engine.py", 'return self.dialect == "sqlite"'),
}

DIALECT_MODULES = {"backend/_dialect.py", "backend/_sqlite.py", "backend/_postgres.py"}


def _modules() -> list[tuple[str, Path]]:
    """Every module of the store (its rooms included), by path relative to it."""
    return [(path.relative_to(STORE).as_posix(), path) for path in sorted(STORE.rglob("*.py"))]


def branches() -> list[str]:
    """``file:line: text`` of every dialect branch outside the dialect modules."""
    found = []
    for name, path in _modules():
        if name in DIALECT_MODULES:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            text = line.strip()
            if BRANCH.search(text) and (name, text) not in ALLOWED:
                found.append(f"{name}:{number}: {text}")
    return found


def test_no_store_module_outside_the_dialects_branches_on_the_database() -> None:
    assert branches() == [], (
        "move these into the dialect classes (backend/_dialect.py and its subclasses)"
    )


def test_every_allowed_branch_is_still_there() -> None:
    # An exception nothing needs any more must go, so the list cannot hide a new branch.
    lines = {
        (name, line.strip()) for name, path in _modules() for line in path.read_text().splitlines()
    }
    assert lines >= ALLOWED


def test_the_scan_finds_a_branch_where_there_is_one() -> None:
    # The pattern itself: each spelling of a branch is caught, a dialect lookup is not.
    caught = [
        'if conn.dialect.name == "postgresql":',
        "if conn.dialect.name != 'sqlite':",
        'if dialect == "postgresql":',
        "if engine.is_sqlite:",
        'mark = "?" if kind == "sqlite" else "%s"',
    ]
    assert all(BRANCH.search(line) for line in caught)
    assert not BRANCH.search("dialect = DIALECTS[conn.dialect.name]")


LOOKUP = re.compile(r"\bDIALECTS\[|\.dialect\.name\b")
"""A dialect found by name, from a connection or a URL."""

LOOKUPS_ALLOWED = {
    # register(): the registry itself.
    ("backend/_dialect.py", "DIALECTS[dialect.name] = dialect"),
    # dialect_of(): a connection of a plain SQLAlchemy engine carries no dialect.
    ("backend/_dialect.py", "return DIALECTS[conn.dialect.name] if carried is None else carried"),
    # Making an Engine from a URL, where the dialect is chosen and then carried.
    ("backend/_engine.py", "self.backend: Dialect = DIALECTS[parsed.get_backend_name()]"),
    ("backend/_engine.py", "return DIALECTS[backend].normalize_url(parsed)"),
}


def test_the_dialect_travels_with_the_engine_not_looked_up_by_name() -> None:
    # The engine carries its dialect (backend/_dialect.py: carry, dialect_of); code that holds
    # a connection asks dialect_of(conn), never the registry.
    found = {
        (name, line.strip())
        for name, path in _modules()
        for line in path.read_text().splitlines()
        if LOOKUP.search(line)
    }
    assert found == LOOKUPS_ALLOWED


def test_a_connection_of_the_engine_carries_its_dialect(store) -> None:
    from smithers_tt.store.backend._dialect import dialect_of

    engine = store.engine
    with engine.connect(write=False) as conn:
        assert dialect_of(conn) is engine.backend
    held = engine.hold()
    try:
        with held.connect(write=False) as conn:
            assert dialect_of(conn) is engine.backend
    finally:
        held.release()
