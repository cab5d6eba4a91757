"""A migrated, empty store made once per test process and copied into each test's database.

The ``db`` fixture (tests/conftest.py) hands every test a migrated, empty store on each backend.
Migrating a fresh one runs every Alembic revision and checks the shape: 0.2-0.3 s on SQLite
and 0.7-1.7 s on PostgreSQL (schema, migration and drop) on this 2-core machine under the
suite's load, for each of about 2,200 tests. So each process migrates one store per backend
the same way (``st.connect``), and each test starts from a copy of it:

* SQLite: the migrated file, copied (``shutil.copy``) to where the test's database goes;
* PostgreSQL: what ``pg_dump`` writes of the migrated template schema (tables, indexes,
  constraints, sequences and the rows the migration wrote: the version and ``tt_migrations``),
  with the template's schema name replaced by the test's, run in the test's empty schema in one
  round trip. The migration's commit token is written anew with the current time (a fresh
  migration's token is new; the template's would expire during a long run).

``st.connect`` then opens the copy as it opens any store already at the head revision, which
includes comparing every table with the expected schema (a copy that differed would fail
there, closed). Tests that need an empty database, or migrate one themselves, still ask for
``db_url`` or ``pg_schema_url`` and get it empty. When ``pg_dump`` is missing or fails, each
PostgreSQL test migrates its schema as before.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import unquote

import sqlalchemy as sa

import smithers_tt as st

_SEARCH_PATH = re.compile(r"-csearch_path=([A-Za-z0-9_]+)")


def schema_of(url: str) -> str:
    """The schema a URL of ``schema_url`` points at (its ``search_path`` option)."""
    found = _SEARCH_PATH.search(unquote(str(sa.make_url(url).query.get("options", ""))))
    if not found:
        raise ValueError(f"no search_path in {url!r}")
    return found.group(1)


class StoreTemplate:
    """Migrated stores to copy, made on first use in ``folder`` (one per test process)."""

    def __init__(
        self, folder: Path, admin: Callable[[], sa.Engine], schema_url: Callable[[str, str], str]
    ) -> None:
        self.folder = folder
        self.admin = admin  # tests.conftest's pg_admin: this process's pooled engine
        self.schema_url = schema_url  # tests.conftest's: a URL whose search_path is a schema
        self._sqlite: Path | None = None
        self._pg_ddl: tuple[str, str] | None = None  # (the dump, the template's schema name)
        self._pg_tried = False

    def fill(self, url: str) -> None:
        """Put a migrated, empty store in the empty database ``url`` (SQLite file or
        PostgreSQL schema) by copying the template; nothing when there is none to copy."""
        if url.startswith("sqlite:///"):
            target = Path(url.removeprefix("sqlite:///"))
            if target.is_absolute() and not target.exists():  # a file of the test's own
                shutil.copy(self._sqlite_template(), target)
        elif url.startswith("postgresql") and _SEARCH_PATH.search(unquote(url)):
            made = self._pg_template()
            if made is not None:
                self._pg_fill(url, *made)

    def _sqlite_template(self) -> Path:
        if self._sqlite is None:
            path = self.folder / "migrated.db"
            st.connect(f"sqlite:///{path}").close()
            assert not path.with_name(f"{path.name}-wal").exists()  # all in the one file
            self._sqlite = path
        return self._sqlite

    def _pg_template(self) -> tuple[str, str] | None:
        if not self._pg_tried:
            self._pg_tried = True
            self._pg_ddl = self._pg_dump()
        return self._pg_ddl

    def _pg_dump(self) -> tuple[str, str] | None:
        schema = f"tt_template_{secrets.token_hex(6)}"
        admin = self.admin()
        pg_url = admin.url.render_as_string(hide_password=False)
        with admin.begin() as conn:
            conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
        try:
            st.connect(self.schema_url(pg_url, schema)).close()
            url = admin.url
            command = [
                "pg_dump",
                f"--host={url.host or '127.0.0.1'}",
                f"--port={url.port or 5432}",
                f"--username={url.username or 'postgres'}",
                f"--dbname={url.database}",
                f"--schema={schema}",
                "--inserts",
                "--no-owner",
                "--no-privileges",
            ]
            env = {**os.environ, "PGPASSWORD": url.password or ""}
            try:
                dumped = subprocess.run(
                    command, capture_output=True, text=True, timeout=120, env=env, check=True
                ).stdout
            except (OSError, subprocess.SubprocessError):
                return None  # no pg_dump here (or it cannot read this server): migrate each
        finally:
            with admin.begin() as conn:
                conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        kept = [
            line
            for line in dumped.splitlines()
            if not line.startswith(("--", "\\"))  # comments, psql's \restrict
            and line != f"CREATE SCHEMA {schema};"  # the test's schema exists
            and not line.startswith("SELECT pg_catalog.set_config('search_path'")
            and not line.startswith(f"INSERT INTO {schema}.tt_commit_tokens ")  # made anew
        ]
        return "\n".join(kept), schema

    def _pg_fill(self, url: str, ddl: str, template: str) -> None:
        schema = schema_of(url)  # letters, digits and _ (schema_of's pattern)
        token = (time.time_ns() // 1_000_000, secrets.randbits(62))
        with self.admin().begin() as conn, conn.connection.dbapi_connection.cursor() as cursor:  # type: ignore[union-attr]
            # no parameters: one simple query of many statements (the dump's SETs are the
            # server's defaults or harmless for the fixtures' later statements on this connection)
            cursor.execute(ddl.replace(template, schema))
            cursor.execute(
                f"INSERT INTO {schema}.tt_commit_tokens VALUES (%s, %s)",  # noqa: S608
                token,
            )
