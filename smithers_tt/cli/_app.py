"""The ``smithers-tt`` command group: database option, JSON switch and error handling."""

from __future__ import annotations

import functools
import importlib
import json
import sys
from collections.abc import Callable
from typing import Any

import click

from smithers_tt.database import DEFAULT_URL, Database, connect
from smithers_tt.engine import Workflow
from smithers_tt.errors import InvalidArgument, SmithersError


class Context:
    """What every command gets: how to open the database, and whether to print JSON."""

    def __init__(self, url: str, as_json: bool) -> None:
        self.url = url
        self.as_json = as_json
        self._db: Database | None = None

    @property
    def db(self) -> Database:
        """The database, opened (and migrated) on first use."""
        if self._db is None:
            self._db = connect(self.url)
        return self._db

    def close(self) -> None:
        """Release the database."""
        if self._db is not None:
            self._db.close()


pass_ctx = click.make_pass_decorator(Context)


def handle_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Expected errors become one clear line and exit code 1, never a traceback."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except SmithersError as error:
            ctx = click.get_current_context().find_object(Context)
            if ctx is not None and ctx.as_json:
                click.echo(json.dumps({"error": error.to_dict()}), err=True)
            else:
                click.echo(click.style("error: ", fg="red", bold=True) + str(error), err=True)
            sys.exit(1)

    return wrapper


def url_from(value: str | None) -> str:
    """A database URL from ``--db`` (a URL or an SQLite file path)."""
    url = value or DEFAULT_URL
    return url if "://" in url else f"sqlite:///{url}"


def load_workflow(spec: str | None, workflow_name: str) -> Workflow:
    """The workflow named by ``module:attr`` (a Workflow, or a function returning one or a
    ``(workflow, agents)`` pair); the demo workflow for demo runs when no spec is given."""
    if spec is None:
        if workflow_name != "demo-report":  # only the demo's definition is known by default
            raise InvalidArgument(
                f"this run is of workflow {workflow_name!r}: say where it is defined with "
                "--workflow module:attribute"
            )
        spec = "smithers_tt.demo:demo_workflow"
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise InvalidArgument(f"--workflow must look like package.module:attribute, got {spec!r}")
    try:
        target = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as error:
        raise InvalidArgument(f"cannot load workflow {spec!r}: {error}") from error
    if callable(target) and not isinstance(target, Workflow):
        target = target()
    if isinstance(target, tuple):
        target = target[0]
    if not isinstance(target, Workflow):
        raise InvalidArgument(f"{spec!r} is not a smithers_tt Workflow")
    return target


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option(
    "--db",
    "db_url",
    envvar="SMITHERS_TT_DB",
    metavar="URL",
    help="Database URL or SQLite file (env SMITHERS_TT_DB; default ./smithers.db).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
@click.version_option(package_name="smithers-tt", prog_name="smithers-tt")
@click.pass_context
def cli(click_ctx: click.Context, db_url: str | None, as_json: bool) -> None:
    """Durable agent checkpoints and time travel.

    \b
    Examples:
      smithers-tt demo                      build a demo database in ./smithers.db
      smithers-tt runs                      list runs
      smithers-tt timeline RUN              frames of a run and its fork tree
      smithers-tt rewind RUN 12 --yes       put RUN back to frame 12
      smithers-tt --db postgresql+psycopg://user@host/db runs
    """
    context = Context(url_from(db_url), as_json)
    click_ctx.obj = context
    click_ctx.call_on_close(context.close)


from smithers_tt.cli import _import  # noqa: E402, F401  (registers import-langgraph)
