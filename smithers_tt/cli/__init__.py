"""The ``smithers-tt`` command line: the same operations as the Python API, for terminals."""

from smithers_tt.cli import (  # noqa: F401  (they register commands)
    _calls,
    _commands,
    _failures,
    _history,
    _import,
    _lab,
    _maintenance,
    _pauses,
    _runs,
    _serve,
    _sweeps,
    _workers,
)
from smithers_tt.cli._app import cli


def main() -> None:
    """Entry point of the ``smithers-tt`` script."""
    cli(prog_name="smithers-tt")


__all__ = ["cli", "main"]
