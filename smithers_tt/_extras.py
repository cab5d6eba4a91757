"""Optional dependencies: which extra installs a module, and the one error that says so.

Every place that needs an extra goes through :func:`require_extra` (a check before importing)
or :func:`extra_needed` (around a call that imports lazily, such as SQLAlchemy loading
psycopg), so a missing extra always reads the same way and names the command that fixes it::

    PostgreSQL needs psycopg, which is not installed: pip install 'smithers-tt[postgres]'
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from contextlib import contextmanager

from smithers_tt.errors import ExtraMissing, SmithersError

EXTRA_OF = {
    "psycopg": "postgres",
    "duckdb": "lineage",
    "pandas": "lineage",
    "pyarrow": "lineage",
    "ipywidgets": "notebook",
    "plotly": "notebook",
    "anywidget": "notebook",
    "jupyterlab": "notebook",
    "openai": "openai",
    "langgraph": "langgraph",
}
"""The extra of ``smithers-tt`` that installs each optional top-level module."""


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
