"""Live refresh: while a run executes (here or in another process) the debugger follows it.

An asyncio task on the kernel's event loop polls the database every ``interval`` seconds:
the read (``store.get_run(...).clock`` and any new frames) happens in a worker thread, so the
kernel never blocks; the widgets are updated back on the loop. It stops by itself when the run
ends (finished, failed, cancelled, or interrupted with nobody executing it).

To watch a run of the same kernel, start it without blocking the cell, e.g.
``task = asyncio.ensure_future(db.arun(wf, input, run_id=run_id))`` and then
``Debugger(db, run_id)``; a blocking ``db.run(...)`` holds the kernel until it returns.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from smithers_tt.errors import RunNotFound, SmithersError
from smithers_tt.widgets._model import DebuggerModel

log = logging.getLogger(__name__)


class LiveRefresh:
    """Polls the database for the model's run while it is live."""

    def __init__(
        self,
        model: DebuggerModel,
        interval: float = 1.0,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        self.model = model
        self.interval = interval
        self.on_change = on_change
        self.enabled = True
        self.polls = 0
        self._task: asyncio.Task[None] | None = None
        model.on("run", self.maybe_start)
        model.on("frames", self.maybe_start)

    @property
    def running(self) -> bool:
        """Whether the polling task is alive."""
        return self._task is not None and not self._task.done()

    def maybe_start(self) -> bool:
        """Start polling if the run is live and a loop runs here; True if it is polling."""
        if not self.enabled or not self.model.live:
            return self.running
        if self.running:
            return True
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # a script without a loop: call model.refresh() instead
            return False
        self._task = loop.create_task(self._poll())
        self._changed()
        return True

    def stop(self) -> None:
        """Stop polling (a later live run starts it again unless ``enabled`` is False)."""
        if self._task is not None:
            self._task.cancel()
        self._task = None
        self._changed()

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()

    async def _poll(self) -> None:
        try:
            while True:
                await asyncio.sleep(self.interval)
                run_id = self.model.run_id
                try:
                    update = await asyncio.to_thread(self.model.fetch_update)
                except RunNotFound:
                    break
                except SmithersError as error:  # transient trouble: try again next tick
                    log.warning("live refresh of run %s: %s", run_id, error)
                    continue
                self.polls += 1
                self.model.apply_update(update)
                if not self.model.live:
                    break
        except asyncio.CancelledError:
            raise
        except Exception:  # a bug must not kill the kernel's loop silently
            log.exception("live refresh stopped")
        finally:
            self._task = None
            self._changed()
