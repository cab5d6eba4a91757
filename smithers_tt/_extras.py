"""Optional dependencies: which extra installs a module, and the one error that says so.

Every place that needs an extra goes through :func:`require_extra` (a check before importing)
or :func:`extra_needed` (around a call that imports lazily, such as SQLAlchemy loading
psycopg), so a missing extra always reads the same way and names the command that fixes it::

    PostgreSQL needs psycopg, which is not installed: pip install 'smithers-tt[postgres]'
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Iterator
from contextlib import contextmanager

from smithers_tt.errors import ExtraMissing, InvalidArgument, SmithersError

EXTRA_OF = {
    "psycopg": "postgres",
    "duckdb": "lineage",
    "pandas": "lineage",
    "pyarrow": "lineage",
    "ipywidgets": "notebook",
    "plotly": "notebook",
    "anywidget": "notebook",
    "jupyterlab": "notebook",
    "voila": "notebook",
    "openai": "openai",
    "langgraph": "langgraph",
}
"""The extra of ``smithers-tt`` that installs each optional top-level module."""


MODULES_OF: dict[str, tuple[str, ...]] = {}
for _module, _extra in EXTRA_OF.items():
    MODULES_OF[_extra] = (*MODULES_OF.get(_extra, ()), _module)
"""The modules each extra installs (the inverse of :data:`EXTRA_OF`)."""


def install_command(extra: str) -> str:
    """The command that installs an extra: ``pip install 'smithers-tt[EXTRA]'``."""
    return f"pip install 'smithers-tt[{extra}]'"


def missing_message(module: str, needed_for: str) -> str:
    """What to tell a person when ``module`` (a key of :data:`EXTRA_OF`) is not installed."""
    extra = EXTRA_OF[module]
    return f"{needed_for} needs {module}, which is not installed: {install_command(extra)}"


def require_extra(
    *modules: str, needed_for: str, error: type[SmithersError] = ExtraMissing
) -> None:
    """Import each of ``modules`` or raise ``error`` naming the extra that installs it.

    Args:
        modules: top-level module names, each a key of :data:`EXTRA_OF`.
        needed_for: what needs them, as the start of the message ("the notebook debugger").
        error: the class raised (a subsystem may raise its own, e.g. ``LineageUnavailable``).

    Raises:
        ExtraMissing: (or ``error``) a module is not installed.
    """
    for module in modules:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as missing:
            if (missing.name or "").partition(".")[0] != module:
                raise  # the module is there but one of its own dependencies is not
            raise error(
                missing_message(module, needed_for), module=module, extra=EXTRA_OF[module]
            ) from missing


@contextmanager
def extra_needed(needed_for: str) -> Iterator[None]:
    """Turn a ``ModuleNotFoundError`` of an optional module raised inside into
    :class:`ExtraMissing`; any other error passes unchanged."""
    try:
        yield
    except ModuleNotFoundError as missing:
        module = (missing.name or "").partition(".")[0]
        if module not in EXTRA_OF:
            raise
        raise ExtraMissing(
            missing_message(module, needed_for), module=module, extra=EXTRA_OF[module]
        ) from missing


def require_extras(*extras: str, needed_for: str = "this notebook") -> None:
    """Check that the extras a notebook or script needs are installed, before it starts.

    Nothing is imported (a module is looked up, not loaded). In a notebook the error reads
    as one line, not a traceback::

        ExtraMissing: this notebook needs the lineage extra: pip install 'smithers-tt[lineage]'

    Args:
        extras: names of extras of ``smithers-tt`` (``"lineage"``, ``"notebook"``, ...).
        needed_for: what needs them, as the start of the message.

    Raises:
        InvalidArgument: an extra of that name does not exist.
        ExtraMissing: some module of one or more extras is not installed; the message names
            one ``pip install`` command for all of them.
    """
    unknown = sorted(set(extras) - set(MODULES_OF))
    if unknown:
        raise InvalidArgument(
            f"no extra named {', '.join(unknown)}; the extras are {', '.join(sorted(MODULES_OF))}"
        )
    missing = {
        extra: module
        for extra in extras
        for module in MODULES_OF[extra]
        if importlib.util.find_spec(module) is None
    }
    if missing:
        names = ",".join(missing)
        which = " and ".join(missing)
        plural = "s" if len(missing) > 1 else ""
        raise ExtraMissing(
            f"{needed_for} needs the {which} extra{plural}: {install_command(names)}",
            module=next(iter(missing.values())),
            extra=names,
        )
