"""``smithers-tt lab``: JupyterLab on the tutorial notebooks, from a checkout or from a wheel.

The notebooks are never opened where they are installed: a wheel ships them inside the package
(``smithers_tt/_notebooks``), a checkout (an editable install) in its ``notebooks/``. Both are
copied into a folder of the user's (``./smithers-tt-notebooks`` unless ``--dir`` says
otherwise), so that the databases they write and the edits JupyterLab autosaves never land in
``site-packages`` or in a tracked file of the checkout. A copy a person already has is never
overwritten; one older than the notebook it was copied from is named, so that a person who
wants the new one can delete theirs.
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import click

from smithers_tt._extras import require_extra
from smithers_tt._links import absolute_url
from smithers_tt.cli._app import Context, cli, handle_errors, pass_ctx
from smithers_tt.errors import InvalidArgument

PACKAGE = Path(__file__).resolve().parents[1]
SHIPPED = PACKAGE / "_notebooks"
"""Where a wheel install keeps the notebooks (hatch puts ``notebooks/`` there)."""
CHECKOUT = PACKAGE.parent / "notebooks"
"""The checkout's notebooks, used by an editable install."""
DEFAULT_NOTEBOOK = "00_tour.ipynb"
DEFAULT_DIR = "smithers-tt-notebooks"


@dataclass(frozen=True)
class NotebookCopies:
    """Where ``lab`` opens the notebooks, and what it did to the copies there."""

    folder: Path
    copied: list[str]
    """Notebooks copied now (the folder had none of that name)."""
    stale: list[str]
    """Copies kept although the installed notebook is newer (a person's copy is never
    overwritten: deleting it brings the new one)."""


def notebook_folder(workdir: Path | None) -> NotebookCopies:
    """Copy the tutorial notebooks into ``workdir`` (default ``./smithers-tt-notebooks``).

    Raises:
        InvalidArgument: neither a checkout nor the installed package holds the notebooks.
    """
    source = SHIPPED if SHIPPED.is_dir() else CHECKOUT
    if not source.is_dir():
        raise InvalidArgument(
            f"the tutorial notebooks are not installed (looked in {SHIPPED} and {CHECKOUT}); "
            "reinstall smithers-tt"
        )
    folder = (workdir or Path(DEFAULT_DIR)).resolve()
    if folder == source.resolve():
        raise InvalidArgument(
            f"--dir {folder} is where the notebooks are installed; give a folder of your own"
        )
    folder.mkdir(parents=True, exist_ok=True)
    copied, stale = [], []
    for notebook in sorted(source.glob("*.ipynb")):
        copy = folder / notebook.name
        if not copy.exists():
            shutil.copy2(notebook, copy)  # keeps the time: a later, newer notebook shows
            copied.append(notebook.name)
        elif copy.stat().st_mtime < notebook.stat().st_mtime:
            stale.append(notebook.name)
    return NotebookCopies(folder, copied, stale)


def jupyter_arguments(extra: tuple[str, ...], *, is_root: bool) -> list[str]:
    """The caller's JupyterLab arguments, with ``--allow-root`` added when running as root
    (JupyterLab refuses to start as root without it, as in most containers)."""
    args = list(extra)
    if is_root and "--allow-root" not in args:
        args.append("--allow-root")
    return args


@cli.command(context_settings={"ignore_unknown_options": True})
@click.option(
    "--notebook", default=DEFAULT_NOTEBOOK, show_default=True, help="The notebook to open."
)
@click.option(
    "--dir",
    "workdir",
    type=click.Path(file_okay=False, path_type=Path),
    help=f"Copy the notebooks here and open them there (default: ./{DEFAULT_DIR}).",
)
@click.argument("jupyter_args", nargs=-1, type=click.UNPROCESSED)
@pass_ctx
@handle_errors
def lab(ctx: Context, notebook: str, workdir: Path | None, jupyter_args: tuple[str, ...]) -> None:
    """Open JupyterLab on the tutorial notebooks, on this database (needs the notebook extra).

    Other arguments and options go to JupyterLab unchanged (after -- too); --allow-root is
    added when running as root. The notebooks open the database as $SMITHERS_TT_DB.

    \b
    Examples:
      smithers-tt lab
      smithers-tt lab --notebook 02_time_travel.ipynb
      smithers-tt lab --no-browser --port 9999 --ip 0.0.0.0
      smithers-tt --db postgresql+psycopg://user@host/db lab --dir my-notebooks
    """
    require_extra("jupyterlab", needed_for="smithers-tt lab")
    copies = notebook_folder(workdir)
    folder = copies.folder
    target = folder / notebook
    if not target.is_file():
        names = ", ".join(sorted(p.name for p in folder.glob("*.ipynb")))
        raise InvalidArgument(f"no notebook {notebook!r} in {folder}; there are: {names}")
    if copies.copied:
        click.echo(f"copied {len(copies.copied)} notebooks into {folder}")
    if copies.stale:
        click.echo(
            f"kept your copies of {', '.join(copies.stale)} in {folder}, older than the"
            " installed ones: delete a copy to get the new notebook"
        )
    url = absolute_url(ctx.url)
    click.echo(f"opening {target} on {url} (Ctrl-C stops JupyterLab)")
    args = jupyter_arguments(jupyter_args, is_root=os.geteuid() == 0)
    env = dict(os.environ, SMITHERS_TT_DB=url)
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable, "-m", "jupyterlab", str(target), *args], env)
