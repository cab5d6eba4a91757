"""Commands for workers sharing runs on one database."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
import time
from collections.abc import Callable

import click

from smithers_tt.cli._app import Context, cli, handle_errors, load_workflow, pass_ctx
from smithers_tt.cli._output import CleanFormatter, emit_json, state, when
from smithers_tt.cli._progress import progress_bar
from smithers_tt.store.for_cli import count_runs


@cli.command()
@click.option(
    "--workflows",
    "specs",
    multiple=True,
    required=True,
    metavar="MODULE:ATTR",
    help="A workflow this worker can execute; repeatable.",
)
@click.option("--concurrency", default=1, show_default=True, help="Runs executed at once.")
@click.option("--id", "worker_id", help="A name for this worker (default host:pid).")
@click.option(
    "--stale-after",
    default=10.0,
    show_default=True,
    help="Seconds without heartbeat before a running run is taken over.",
)
@click.option(
    "--drain-timeout",
    default=10.0,
    show_default=True,
    help="Seconds to finish runs on SIGTERM before releasing them.",
)
@click.option("--max-runs", type=int, help="Stop after this many runs ended.")
@click.option(
    "--idle-exit",
    type=float,
    metavar="SECONDS",
    help="Stop after this many seconds with nothing to do (default: keep waiting).",
)
@click.option("--quiet", "-q", is_flag=True, help="Log only warnings (takeovers, lost runs).")
@pass_ctx
@handle_errors
def worker(
    ctx: Context,
    specs: tuple[str, ...],
    concurrency: int,
    worker_id: str | None,
    stale_after: float,
    drain_timeout: float,
    max_runs: int | None,
    idle_exit: float | None,
    quiet: bool,
) -> None:
    """Execute queued runs (and take over runs whose owner died) until SIGTERM or Ctrl-C.

    \b
    Example:
      smithers-tt --db postgresql+psycopg://postgres@127.0.0.1/test worker \\
          --workflows smithers_tt.demo:demo_workflow --concurrency 4
    """
    # A SIGTERM that arrives while the worker is still starting (it holds no runs yet) stops
    # it as cleanly as one that arrives later: remembered here, acted on once the loop runs.
    early: list[int] = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, _frame: early.append(signum))
    workflows = [load_workflow(spec, "") for spec in specs]
    w = ctx.create_db().worker(
        workflows,
        concurrency=concurrency,
        worker_id=worker_id,
        stale_after=stale_after,
        drain_timeout=drain_timeout,
    )

    async def main(advance: Callable[[int], None]) -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        if early:
            stop.set()
        working = asyncio.create_task(w.run(stop, max_runs=max_runs, idle_exit=idle_exit))
        shown = 0
        while not working.done():  # the bar follows the runs this worker brought to an end
            await asyncio.wait({working}, timeout=0.2)
            advance(w.completed - shown)
            shown = w.completed
        return working.result()

    ctx.out.line(
        f"worker {w.worker_id} executing {', '.join(w.workflows)} "
        f"({concurrency} at a time); SIGTERM stops it",
        stderr=True,
    )
    with progress_bar("runs ended", total=max_runs, unit="runs") as advance:
        # Claims, takeovers, lost and released runs go to stderr, one line each (above the
        # progress bar on a terminal: sys.stderr is the bar's while it is shown).
        logger = logging.getLogger("smithers_tt.worker")
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(CleanFormatter("%(asctime)s %(levelname)s %(message)s"))
        level, propagate = logger.level, logger.propagate
        logger.addHandler(handler)
        logger.setLevel(logging.WARNING if quiet else logging.INFO)
        logger.propagate = False
        try:
            done = asyncio.run(main(advance))
        finally:
            logger.removeHandler(handler)
            logger.setLevel(level)
            logger.propagate = propagate
    if ctx.as_json:
        emit_json({"worker_id": w.worker_id, "completed": done})
    else:
        ctx.out.line(f"worker {w.worker_id} stopped after {done} run(s)")


@cli.command()
@click.option(
    "--stale-after",
    default=10.0,
    show_default=True,
    help="Seconds without heartbeat before a running worker is shown as unresponsive.",
)
@pass_ctx
@handle_errors
def workers(ctx: Context, stale_after: float) -> None:
    """Registered workers: state, last heartbeat and the runs each owns; runs waiting.

    A worker killed without stopping stays unresponsive (its runs are taken over).

    \b
    Examples:
      smithers-tt workers
      smithers-tt workers --stale-after 3 --json
    """
    found = ctx.read_db.workers(stale_after=stale_after)
    waiting = count_runs(ctx.read_db.store, "queued")
    if ctx.as_json:
        emit_json({"workers": [vars(w) for w in found], "queued": waiting})
        return
    now = time.time() * 1000
    ctx.out.table(
        ["worker", "state", "heartbeat", "workflows", "runs"],
        [
            [
                w.worker_id,
                state(w.state),
                f"{when(w.heartbeat_at_ms)} ({max(0.0, now - w.heartbeat_at_ms) / 1000:.0f} s ago)",
                ",".join(w.workflows),
                " ".join(w.runs) or "-",
            ]
            for w in found
        ],
        flex=["workflows", "runs"],
    )
    ctx.out.line()
    ctx.out.line(f"{waiting} run(s) queued")
