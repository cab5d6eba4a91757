"""Export of a run's history from the debugger: JSON lines, and the lineage as Parquet.

``history.jsonl`` holds one JSON object per line: first the run (``"type": "run"``), then
every frame in order (``"type": "frame"``, base frames of a fork included), each checkpoint
frame with the verified checkpoint it published (``codec``, ``version``, ``payload``). The run
browser's Export writes several runs' histories so, one after another, to one file
(:func:`export_runs`). The
Parquet export is :meth:`smithers_tt.lineage.Lineage.export_parquet` (the ``lineage`` extra):
every lineage view of the store, one file per view.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import ipywidgets as W

from smithers_tt.errors import InvalidArgument, SmithersError
from smithers_tt.store import CheckpointRef, RunRecord
from smithers_tt.widgets._html import esc, read_only_note, wrap
from smithers_tt.widgets._model import DebuggerModel
from smithers_tt.widgets._words import clock_time


def _new_file(path: str | Path) -> Path:
    target = Path(path).expanduser()
    if target.exists():
        raise InvalidArgument(f"{target} already exists; choose another file name")
    if not target.parent.is_dir():
        raise InvalidArgument(f"folder {target.parent} does not exist; create it first")
    return target


def run_lines(
    record: RunRecord, frames: Iterable[Any], load: Callable[[CheckpointRef], Any], payloads: bool
) -> Iterator[str]:
    """The lines of one run's history export (JSON text, one object each), lazily: the run,
    then each frame (``Frame`` records), each checkpoint frame with what ``load`` gives."""
    yield json.dumps(
        {"type": "run", **dataclasses.asdict(record)}, ensure_ascii=False, sort_keys=True
    )
    for f in frames:
        row = {"type": "frame", **dataclasses.asdict(f), "time": clock_time(f.created_at_ms)}
        if payloads and f.kind == "checkpoint" and f.content_hash and f.codec:
            row["checkpoint"] = load(f.checkpoint_ref()).to_json()
        yield json.dumps(row, ensure_ascii=False, sort_keys=True)


def history_lines(model: DebuggerModel, *, payloads: bool = True) -> Iterator[str]:
    """The lines of the history export of the debugger's run, lazily."""
    return run_lines(model.record, model.frames, model.load, payloads)


def _write(target: Path, lines: Iterable[str]) -> int:
    """Write ``lines`` to a new file whole or not at all (through ``<name>.partial``)."""
    count = 0
    partial = target.with_name(target.name + ".partial")
    try:
        with partial.open("w", encoding="utf-8") as out:
            for line in lines:
                out.write(line + "\n")
                count += 1
        partial.replace(target)
    finally:
        partial.unlink(missing_ok=True)
    return count


def export_history(model: DebuggerModel, path: str | Path, *, payloads: bool = True) -> int:
    """Write the run's history as JSON lines to a new file; returns the lines written.

    Raises:
        InvalidArgument: the file exists already, or its folder does not.
        CheckpointCorrupt: a checkpoint failed verification (nothing unverified is written).
    """
    return _write(_new_file(path), history_lines(model, payloads=payloads))


def export_runs(
    db: Any,
    run_ids: Sequence[str],
    path: str | Path,
    on_result: Callable[[str, int | SmithersError], None] = lambda *_: None,
) -> int:
    """Write the histories of several runs, one after another, to one new JSON lines file
    (the format of :func:`export_history`: each run's ``"type": "run"`` line, then its
    frames); returns the lines written. ``on_result(run_id, lines or error)`` is called as
    each run is read: a run that cannot be read whole (gone, or a checkpoint that fails
    verification) is left out and reported, and the others are written.

    Raises:
        InvalidArgument: the file exists already, or its folder does not.
    """
    target = _new_file(path)

    def lines() -> Iterator[str]:
        for run_id in run_ids:
            try:
                run = db.store.get_run(run_id)
                found = list(run_lines(run, db.store.frames(run_id), db.store.load, True))
            except SmithersError as error:
                on_result(run_id, error)
                continue
            on_result(run_id, len(found))
            yield from found

    return _write(target, lines())


def lineage_available() -> bool:
    """Whether the ``lineage`` extra (duckdb) is installed."""
    return importlib.util.find_spec("duckdb") is not None


def export_lineage(model: DebuggerModel, folder: str | Path) -> list[str]:
    """Write every lineage view of the store to ``folder/<view>.parquet``; returns the files.

    Raises:
        InvalidArgument: the ``lineage`` extra is missing, or the folder exists and is not
            empty.
    """
    if not lineage_available():
        raise InvalidArgument("the lineage export needs duckdb: pip install 'smithers-tt[lineage]'")
    target = Path(folder).expanduser()
    if target.exists() and any(target.iterdir()):
        raise InvalidArgument(f"{target} is not empty; choose a new folder")
    target.mkdir(parents=True, exist_ok=True)
    with model.db.lineage() as lin:
        lin.export_parquet(str(target))
    return sorted(p.name for p in target.glob("*.parquet"))


class ExportBox:
    """A file name and two buttons: JSON lines of this run, Parquet of the lineage."""

    def __init__(self, model: DebuggerModel) -> None:
        self.model = model
        self.path = W.Text(
            value="",
            description="export to",
            layout=W.Layout(flex="1 1 200px", min_width="0", width="auto"),
        )
        self.jsonl = W.Button(
            description="JSON lines", tooltip="this run's history, one frame a line"
        )
        self.parquet = W.Button(
            description="lineage Parquet", tooltip="every lineage view of the store, as Parquet"
        )
        self.jsonl.add_class("stt-export-jsonl")
        self.parquet.disabled = not lineage_available()
        if self.parquet.disabled:
            self.parquet.tooltip = "needs the lineage extra: pip install 'smithers-tt[lineage]'"
        if model.read_only is not None:  # a served page writes no file where it is served
            self.jsonl.disabled = self.parquet.disabled = True
            self.jsonl.tooltip = self.parquet.tooltip = model.read_only
        self.jsonl.on_click(lambda _: self.export("jsonl"))
        self.parquet.on_click(lambda _: self.export("parquet"))
        self.report = W.HTML()
        self.report.add_class("stt-export-report")
        self.widget = W.VBox(
            [
                W.HBox(
                    [self.path, self.jsonl, self.parquet],
                    layout=W.Layout(flex_flow="row wrap", width="100%", align_items="center"),
                ),
                self.report,
            ],
            layout=W.Layout(width="100%", min_width="0"),
        )
        model.on("run", self._default_name)
        self._default_name()

    def _default_name(self) -> None:
        self.path.value = f"{self.model.run_id}-history.jsonl"

    def export(self, kind: str) -> None:
        """Export now and report where it went (or why it could not)."""
        if self.model.read_only is not None:
            self.report.value = read_only_note(self.model.read_only)
            return
        try:
            if kind == "jsonl":
                lines = export_history(self.model, self.path.value)
                text = f"wrote {lines} lines to {self.path.value}"
            else:
                folder = str(Path(self.path.value).with_suffix("")) + "-lineage"
                files = export_lineage(self.model, folder)
                text = f"wrote {len(files)} Parquet files to {folder}/"
            self.report.value = wrap(f'<div class="stt-ok">{esc(text)}</div>')
        except SmithersError as error:
            self.report.value = wrap(f'<div class="stt-error">{esc(error.message)}</div>')
        except OSError as error:
            self.report.value = wrap(f'<div class="stt-error">export failed: {esc(error)}</div>')
