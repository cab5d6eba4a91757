"""The ``smithers-tt`` command group: the shared options, opening the store, error handling.

``--db``, ``--json`` and ``--wide`` are accepted before the command and after it (every
command gets them when it is added to the group). Whatever goes wrong becomes one line on
stderr and exit code 1 (2 for a mistyped command line), never a traceback; every line is
printed through :class:`~smithers_tt.cli._output.Output`, which escapes control characters.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import os
import shlex
import shutil
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Any

import click

from smithers_tt.cli._output import Output, json_text
from smithers_tt.database import Database, connect, resolve_url
from smithers_tt.engine import Workflow
from smithers_tt.errors import InvalidArgument, SmithersError


def how_invoked(argv0: str | None = None) -> str:
    """The words that run this program again from where it was run, for hints: ``smithers-tt``
    when that name on PATH is this program, else the path it was started by (in a checkout,
    ``.venv/bin/smithers-tt``, which is not on PATH), or ``python -m smithers_tt.cli``."""
    argv0 = sys.argv[0] if argv0 is None else argv0
    name = os.path.basename(argv0)
    if name == "__main__.py":
        return f"{shlex.quote(_from_here(sys.executable))} -m smithers_tt.cli"
    if not name.startswith("smithers-tt"):
        return "smithers-tt"  # run from another program (click's test runner, say)
    on_path = shutil.which("smithers-tt")
    if on_path and os.path.exists(argv0) and os.path.samefile(on_path, argv0):
        return "smithers-tt"
    return shlex.quote(_from_here(argv0))


def _from_here(path: str) -> str:
    """``path`` relative to the working directory when it lies below it, else absolute."""
    full = os.path.abspath(path)
    below = os.path.relpath(full)
    return below if not below.startswith("..") else full


class Context:
    """What every command gets: how to open the store, and how to print."""

    def __init__(self, url: str | None, as_json: bool, wide: bool = False) -> None:
        self._url = url
        self.as_json = as_json
        self.out = Output(wide=wide)
        self._dbs: dict[str, Database] = {}

    @property
    def url(self) -> str:
        """The database URL (from ``--db``, ``$SMITHERS_TT_DB`` or the default)."""
        return resolve_url(self._url)

    @property
    def db(self) -> Database:
        """The store, for a command that writes: it must exist (it is migrated if older)."""
        return self._open("write", create=False)

    @property
    def read_db(self) -> Database:
        """The store, for a command that only reads: opened read-only, never created or
        migrated (read-only media and files without write permission work)."""
        return self._open("read", read_only=True)

    def create_db(self, *, beside_other_tables: bool = False) -> Database:
        """The store, created when there is none (``migrate``, ``demo``, ``worker``); never
        beside another application's tables unless asked."""
        return self._open("create", create=True, beside_other_tables=beside_other_tables)

    def _open(self, mode: str, **options: Any) -> Database:
        if mode not in self._dbs:
            self._dbs[mode] = connect(self.url, **options)
        return self._dbs[mode]

    def close(self) -> None:
        """Release every database opened."""
        for db in self._dbs.values():
            db.close()
        self._dbs.clear()


pass_ctx = click.make_pass_decorator(Context)


def handle_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Kept for commands to mark themselves: the group (:meth:`Cli.invoke`) already turns
    every error into one clear line and exit code 1."""
    return fn


def _report(error: BaseException, as_json: bool, out: Output) -> None:
    """One line on stderr (JSON with ``--json``) for an error the user can act on."""
    if as_json:
        payload = (
            error.to_dict()
            if isinstance(error, SmithersError)
            else {"code": "usage_error", "message": str(error), "retryable": False}
        )
        sys.stderr.write(json_text({"error": payload}, indent=None) + "\n")
    else:
        out.error(str(error))


def _set_db(click_ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value is None:
        return
    context = click_ctx.find_object(Context)
    if context is None:  # pragma: no cover - the group always makes one
        return
    if context._url is not None and context._url != value and _explicit_db(click_ctx):
        raise click.UsageError(f"--db is given twice ({context._url!r} and {value!r})")
    context._url = value


def _explicit_db(click_ctx: click.Context) -> bool:
    parent = click_ctx.parent
    if parent is None:
        return False
    return parent.get_parameter_source("db_url") == click.core.ParameterSource.COMMANDLINE


def _set_json(click_ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    context = click_ctx.find_object(Context)
    if value and context is not None:
        context.as_json = True


def _set_wide(click_ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    context = click_ctx.find_object(Context)
    if value and context is not None:
        context.out.wide = True


_DB_HELP = "Database URL or SQLite file (env SMITHERS_TT_DB; default ./smithers.db)."
_JSON_HELP = "Print JSON for scripts."
_WIDE_HELP = "Print values whole instead of fitting the terminal's width."


def _shared_options() -> list[click.Option]:
    """``--db``, ``--json`` and ``--wide`` for a command: the same as before the command."""
    return [
        click.Option(["--db"], metavar="URL", expose_value=False, callback=_set_db, help=_DB_HELP),
        click.Option(
            ["--json"], is_flag=True, expose_value=False, callback=_set_json, help=_JSON_HELP
        ),
        click.Option(
            ["--wide"], is_flag=True, expose_value=False, callback=_set_wide, help=_WIDE_HELP
        ),
    ]


def _argv_problem(args: Sequence[str]) -> str | None:
    """Why the command line cannot be used (text that is not UTF-8), or None."""
    for position, arg in enumerate(args, 1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            raw = arg.encode("utf-8", "surrogateescape")
            return f"argument {position} ({raw!r}) is not valid UTF-8; pass text in UTF-8"
    return None


class Cli(click.Group):
    """The command group: adds the shared options to every command, and prints every
    error as one line instead of a traceback."""

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        """Register ``cmd``, giving it ``--db``, ``--json`` and ``--wide``."""
        have = {opt for param in cmd.params for opt in getattr(param, "opts", [])}
        cmd.params.extend(o for o in _shared_options() if not set(o.opts) & have)
        super().add_command(cmd, name)

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command; an error becomes one line on stderr and exit code 1."""
        try:
            return super().invoke(ctx)
        except (
            click.exceptions.Exit,
            click.ClickException,
            click.exceptions.Abort,
            BrokenPipeError,
        ):
            raise
        except Exception as error:
            context = ctx.find_object(Context)
            _report(
                _as_smithers_error(error),
                context.as_json if context else False,
                context.out if context else Output(),
            )
            raise click.exceptions.Exit(1) from error

    def main(self, args: Sequence[str] | None = None, **extra: Any) -> Any:  # type: ignore[override]
        """Run the command line; exit 0 on success, 1 on an error, 2 on a usage error."""
        extra.pop("standalone_mode", None)
        argv = list(sys.argv[1:] if args is None else args)
        out = Output()
        as_json = "--json" in argv
        problem = _argv_problem(argv)
        if problem:
            _report(InvalidArgument(problem), as_json, out)
            sys.exit(1)
        try:
            code = _main_quiet_on_broken_pipe(super().main, argv, extra)
        except click.exceptions.Abort:
            out.error("aborted; nothing was changed")
            sys.exit(1)
        except click.ClickException as error:
            message = error.format_message()
            ctx = getattr(error, "ctx", None)
            if ctx is not None:
                message += f" (see: {ctx.command_path} --help)"
            _report(click.ClickException(message), as_json, out)
            sys.exit(error.exit_code)
        sys.exit(code if isinstance(code, int) else 0)


def _main_quiet_on_broken_pipe(main: Callable[..., Any], argv: list[str], extra: dict) -> Any:
    """Run click's main; a reader that went away (``| head``) ends the command quietly."""
    try:
        try:
            return main(argv, standalone_mode=False, **extra)
        except click.exceptions.NoArgsIsHelpError as error:
            Output().lines(error.format_message())  # no command given: the help, as click does
            return error.exit_code
    except BrokenPipeError:
        # Python would report the broken pipe again when it flushes stdout at exit.
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def _as_smithers_error(error: Exception) -> SmithersError:
    """The error to show for ``error``: ours as it is; the rest named, in one line."""
    if isinstance(error, SmithersError):
        return error
    if isinstance(error, OSError | RecursionError | UnicodeError):
        return InvalidArgument(f"{type(error).__name__}: {error}")
    if os.environ.get("SMITHERS_TT_TRACEBACK") == "1":
        Output().render(traceback.format_exc(), stderr=True, whole=True)
    return InvalidArgument(
        f"unexpected {type(error).__name__}: {error} (a bug: please report it; "
        "SMITHERS_TT_TRACEBACK=1 shows the traceback)"
    )


workflow_option = click.option(
    "--workflow",
    "spec",
    metavar="MODULE:ATTR",
    help="Where the workflow is defined (default: the demo workflow).",
)
"""The ``--workflow MODULE:ATTR`` option of every command that executes a run."""


def load_workflow(spec: str | None, workflow_name: str) -> Workflow:
    """The workflow named by ``module:attr``: a Workflow, or a function taking no arguments
    that returns one (or a ``(workflow, agents)`` pair); the demo workflow for demo runs
    when no spec is given. Nothing else is ever called.

    Raises:
        InvalidArgument: the spec is malformed, cannot be imported, or names something else.
    """
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
    except Exception as error:  # importing runs the module: any failure is the spec's
        raise InvalidArgument(
            f"cannot load workflow {spec!r}: {type(error).__name__}: {error}"
        ) from error
    if not isinstance(target, Workflow):
        target = _call_factory(spec, target)
    if isinstance(target, tuple) and target:
        target = target[0]
    if not isinstance(target, Workflow):
        raise InvalidArgument(
            f"{spec!r} did not give a smithers_tt Workflow (got {type(target).__name__})"
        )
    return target


def _call_factory(spec: str, target: Any) -> Any:
    """Call ``target`` only when it is a Python function that needs no arguments."""
    usage = (
        f"{spec!r} is not a smithers_tt Workflow or a function returning one; --workflow "
        "names a Workflow or a factory function that takes no arguments"
    )
    if not inspect.isfunction(target):
        raise InvalidArgument(f"{usage} (it is a {type(target).__name__})")
    try:
        inspect.signature(target).bind()
    except TypeError as error:
        raise InvalidArgument(f"{usage} ({error})") from error
    try:
        return target()
    except Exception as error:
        raise InvalidArgument(
            f"the workflow factory {spec!r} raised {type(error).__name__}: {error}"
        ) from error


@click.group(
    cls=Cli, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100}
)
@click.option("--db", "db_url", envvar="SMITHERS_TT_DB", metavar="URL", help=_DB_HELP)
@click.option("--json", "as_json", is_flag=True, help=_JSON_HELP)
@click.option("--wide", is_flag=True, help=_WIDE_HELP)
@click.version_option(package_name="smithers-tt", prog_name="smithers-tt")
@click.pass_context
def cli(click_ctx: click.Context, db_url: str | None, as_json: bool, wide: bool) -> None:
    """Durable agent checkpoints and time travel.

    --db, --json and --wide go before or after the command.

    \b
    Examples:
      smithers-tt demo                      build a demo database in ./smithers.db
      smithers-tt runs                      list runs
      smithers-tt runs --json               the same, as JSON
      smithers-tt timeline RUN              frames of a run and its fork tree
      smithers-tt rewind RUN 12 --yes       put RUN back to frame 12
      smithers-tt undo-rewind RUN           undo that rewind
      smithers-tt runs --db postgresql+psycopg://user@host/db
    """
    context = Context(db_url, as_json, wide)
    click_ctx.obj = context
    click_ctx.call_on_close(context.close)
