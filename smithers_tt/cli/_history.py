"""Commands that read a run's history: its frames (``timeline``), what it holds at a frame
(``show``) and what changed between two frames or runs (``diff``)."""

from __future__ import annotations

import dataclasses
from typing import Any

import click

from smithers_tt.cli._app import Context, cli, handle_errors, pass_ctx
from smithers_tt.cli._output import emit_json, frame_detail, one_line, started_from, state, text
from smithers_tt.cli._runs import shown_id, shown_ids
from smithers_tt.errors import InvalidArgument
from smithers_tt.timetravel import Snapshot, SnapshotDiff, diff


@cli.command()
@click.argument("run_id")
@click.option("--from", "first", type=int, metavar="N", help="Frames from N on.")
@click.option("--to", "last", type=int, metavar="N", help="Frames up to N.")
@click.option(
    "--tail", type=click.IntRange(min=1), metavar="N", help="The last N frames (a long run)."
)
@pass_ctx
@handle_errors
def timeline(
    ctx: Context, run_id: str, first: int | None, last: int | None, tail: int | None
) -> None:
    """Frames of a run in order, and the tree of runs forked from the same root.

    \b
    Examples:
      smithers-tt timeline RUN
      smithers-tt timeline RUN --from 100 --to 200
      smithers-tt timeline RUN --tail 20
    """
    if tail is not None and first is not None:
        raise click.UsageError("--tail and --from both say where to start: give one")
    if first is not None and last is not None and first > last:
        raise click.UsageError(f"--from {first} is after --to {last}")
    db = ctx.read_db
    clock = None  # the run's newest frame, read when only part of the history is shown
    if first is not None or last is not None or tail is not None:
        clock = db.get_run(run_id).record.clock
        if tail is not None:
            first = max(0, (clock if last is None else min(last, clock)) - tail + 1)
        if first is not None and first > clock:
            raise InvalidArgument(
                f"run {run_id} has frames 0 to {clock}; there is no frame {first}"
            )
    tl = db.timeline(run_id, first=first, last=last)
    if ctx.as_json:
        emit_json(
            {
                "run_id": tl.run_id,
                "root": tl.root,
                "frames": [dataclasses.asdict(f) for f in tl.frames],
                "tree": [dataclasses.asdict(e) for e in tl.tree],
            }
        )
        return
    ctx.out.table(
        ["frame", "kind", "node", "attempt", "seq", "state", "detail"],
        [
            [
                f.frame_no,
                f.kind,
                f.node_id if f.iteration in (None, 0) else f"{f.node_id}[{f.iteration}]",
                f.attempt or "",
                "" if f.sequence is None else f.sequence,
                state(f.state) if f.state else (f.purpose or ""),
                f.content_hash[:12] if f.content_hash else frame_detail(f.data, f.node_id),
            ]
            for f in tl.frames
        ],
        flex=["detail"],
    )
    if clock is not None:
        shown = (
            f"frames {tl.frames[0].frame_no} to {tl.frames[-1].frame_no}"
            if tl.frames
            else "no frame"
        )
        ctx.out.line(f"{shown} of 0 to {clock} shown")
    ctx.out.line()
    ctx.out.title("fork tree")
    depth = {tl.root: 0}
    short = shown_ids(ctx, [edge.run_id for edge in tl.tree])
    for edge in tl.tree:
        level = depth.get(edge.parent_run_id or "", -1) + 1
        depth[edge.run_id] = level
        mark = " <" if edge.run_id == tl.run_id else ""
        origin = f" (from frame {edge.parent_frame_no})" if edge.parent_run_id else ""
        if edge.fork_point_rewound:
            origin += " (that frame was rewound away)"
        ctx.out.line("  " * level, short[edge.run_id], " ", state(edge.shown_status), origin, mark)


def _at(node_id: str, iteration: int) -> str:
    """A node's row as a person reads it: ``write``, ``write[2]`` in a loop's third turn."""
    return node_id if not iteration else f"{node_id}[{iteration}]"


def _only(snap: Snapshot, nodes: set[str]) -> Snapshot:
    """``snap`` with only the rows of ``nodes`` (its run's status, input and output kept)."""
    return dataclasses.replace(
        snap,
        nodes={k: v for k, v in snap.nodes.items() if k[0] in nodes},
        attempts={k: v for k, v in snap.attempts.items() if k[0] in nodes},
        refs={k: v for k, v in snap.refs.items() if k[0] in nodes},
    )


def _snapshot_json(snap: Snapshot) -> dict[str, Any]:
    return {
        "run_id": snap.run_id,
        "frame_no": snap.frame_no,
        "status": snap.status,
        "input": snap.input,
        "nodes": [dataclasses.asdict(n) for n in snap.nodes.values()],
        "attempts": [dataclasses.asdict(a) for a in snap.attempts.values()],
        "checkpoints": [dataclasses.asdict(r) for r in snap.refs.values()],
    }


@cli.command()
@click.argument("run_id")
@click.argument("frame", type=int, required=False)
@click.option("--frame", "frame_no", type=int, help="Show this frame (default: the newest).")
@click.option("--node", "nodes", multiple=True, metavar="NODE", help="Only this node (repeat).")
@pass_ctx
@handle_errors
def show(
    ctx: Context, run_id: str, frame: int | None, frame_no: int | None, nodes: tuple[str, ...]
) -> None:
    """What a run looks like at a frame: nodes, attempts, outputs and checkpoint refs.

    \b
    Examples:
      smithers-tt show RUN
      smithers-tt show RUN 12
      smithers-tt show RUN --frame 12 --json
      smithers-tt show RUN --node write     (a long loop: one node's rows)
    """
    if frame is not None and frame_no is not None and frame != frame_no:
        raise click.UsageError(f"two frames given ({frame} and --frame {frame_no}): give one")
    snap = ctx.read_db.snapshot(run_id, frame if frame is not None else frame_no)
    if nodes:
        known = {node_id for node_id, _ in snap.nodes} | {key[0] for key in snap.attempts}
        unknown = sorted(set(nodes) - known)
        if unknown:
            raise InvalidArgument(
                f"run {snap.run_id} has no node {', '.join(map(repr, unknown))} at frame "
                f"{snap.frame_no}; it has {sorted(known)}"
            )
        snap = _only(snap, set(nodes))
    if ctx.as_json:
        emit_json(_snapshot_json(snap))
        return
    ctx.out.line(f"run {shown_id(ctx, snap.run_id)} at frame {snap.frame_no}: ", state(snap.status))
    ctx.out.table(
        ["node", "state", "last attempt", "output"],
        [
            [
                _at(n.node_id, n.iteration),
                state(n.state),
                n.last_attempt or "-",
                n.output,
            ]
            for n in snap.nodes.values()
        ],
        flex=["output"],
    )
    ctx.out.line()
    ctx.out.table(
        ["attempt", "state", "began", "error"],
        [
            [
                f"{_at(a.node_id, a.iteration)}#{a.attempt}",
                state(a.state),
                started_from(a.node_id, a.resumed_from) if a.resumed_from else "fresh",
                a.error or "",
            ]
            for a in snap.attempts.values()
        ],
        flex=["error"],
    )
    ctx.out.line()
    ctx.out.table(
        ["checkpoint", "codec", "version", "purpose", "hash"],
        [
            [
                f"{_at(r.node_id, r.iteration)}#{r.attempt}.{r.sequence}",
                r.codec,
                r.version,
                r.purpose,
                r.short_hash,
            ]
            for r in snap.refs.values()
        ],
    )


def _diff_json(d: SnapshotDiff) -> dict[str, Any]:
    return dataclasses.asdict(d)


@cli.command("diff")
@click.argument("run_id")
@click.argument("a")
@click.argument("b")
@pass_ctx
@handle_errors
def diff_cmd(ctx: Context, run_id: str, a: str, b: str) -> None:
    """Differences between two frames of a run, or between two runs.

    A and B are frame numbers of RUN_ID, or RUN:FRAME of any run (a fork, say).

    \b
    Examples:
      smithers-tt diff RUN 3 12
      smithers-tt diff RUN 12 CHILD:0
    """

    def side(spec: str) -> Snapshot:
        run, _, frame = spec.rpartition(":")
        try:
            number = int(frame) if frame else None
        except ValueError as error:
            raise InvalidArgument(f"{spec!r} is not FRAME or RUN:FRAME") from error
        return ctx.read_db.snapshot(run or run_id, number)

    result = diff(side(a), side(b))
    if ctx.as_json:
        emit_json(_diff_json(result))
        return
    if result.empty:
        ctx.out.line("no differences")
        return
    if result.status:
        ctx.out.line("status: ", state(result.status[0]), " -> ", state(result.status[1]))
    sections = [
        ("nodes", result.nodes),
        ("attempts", result.attempts),
        ("outputs", result.outputs),
        *((f"checkpoint of {k}", v) for k, v in result.checkpoints.items()),
    ]
    signs = {"add": text("+", "green"), "remove": text("-", "red")}
    for title, changes in sections:
        if not changes:
            continue
        ctx.out.title(title)
        ctx.out.table(
            ["", "path", "before", "after"],
            [
                [
                    signs.get(c.op, text("~", "yellow")),
                    c.path,
                    "" if c.op == "add" else one_line(c.old),
                    "" if c.op == "remove" else one_line(c.new),
                ]
                for c in changes
            ],
            flex=["before", "after"],
        )
