"""The actions that change the database, Rewind, Undo rewind, Fork and Replay: each is asked
for (a :class:`~smithers_tt.widgets._records.Pending` saying what it will do), then carried
out on Confirm or dropped on Cancel, and reported in a message.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import replace
from typing import Any

from smithers_tt import timetravel as tt
from smithers_tt.errors import ForkPointRewound, InvalidArgument, SmithersError
from smithers_tt.widgets._records import ActionResult, Pending
from smithers_tt.widgets._refresh import changed_elsewhere
from smithers_tt.widgets._state import DebuggerState
from smithers_tt.widgets._words import run_status

log = logging.getLogger(__name__)


NO_CHANGES = "no changes, an exact copy of the state"
"""What a fork or replay with nothing edited, reset or given is said to make."""


class Control(DebuggerState):
    """Asking for, confirming and carrying out the actions."""

    def request_rewind(self, reason: str = "") -> Pending | None:
        """Ask to rewind the run to the selected frame; nothing changes until :meth:`confirm`.
        ``reason`` (why) is recorded in the audit with the rewind."""
        if self._blocked():
            return None
        n, last = self.frame_no, self.record.clock
        if n >= last:
            self._say("info", f"run {self.run_id} is already at frame {last}: nothing to rewind")
            return None
        options = {"reason": reason.strip()} if reason.strip() else {}
        summary = (
            f"Rewind run {self.run_id} to frame {n}: frames {n + 1} to {last} are deleted "
            "in place (Undo rewind brings them back)"
            + (f"; reason: {options['reason']}." if options else ".")
        )
        return self._set_pending(Pending("rewind", self.run_id, n, summary, options))

    def undo_refusal(self) -> str | None:
        """Why Undo rewind cannot act on the run now, or None when it can."""
        return self.read_only or tt.undo_refusal(self.db.store, self.run_id)

    def request_undo_rewind(self, reason: str = "") -> Pending | None:
        """Ask to undo the run's newest rewind; nothing changes until :meth:`confirm`."""
        if self._blocked():
            return None
        options = {"reason": reason.strip()} if reason.strip() else {}
        summary = (
            f"Undo the newest rewind of run {self.run_id}: its removed frames come back and "
            "the run is as it was before it"
            + (f"; reason: {options['reason']}." if options else ".")
        )
        return self._set_pending(
            Pending("undo_rewind", self.run_id, self.frame_no, summary, options)
        )

    def request_fork(self, **form: Any) -> Pending | None:
        """Validate the fork form and ask for confirmation (see :meth:`fork_options`)."""
        if self._blocked() or self._branched_elsewhere():
            return None
        try:
            options = self.fork_options(**form)
        except SmithersError as error:
            self._refuse(f"Cannot fork: {error.message}")
            return None
        summary = (
            f"Fork run {self.run_id} at frame {self.frame_no} into a new run: "
            f"{self._describe_options(options) or NO_CHANGES}."
        )
        return self._set_pending(Pending("fork", self.run_id, self.frame_no, summary, options))

    def request_replay(self, **form: Any) -> Pending | None:
        """Validate the form and ask to replay (fork, then execute) from the selected frame."""
        if self._blocked() or self._branched_elsewhere():
            return None
        if self.workflow is None:
            self._refuse(REPLAY_NEEDS_WORKFLOW)
            return None
        try:
            options = self.fork_options(**form)
        except SmithersError as error:
            self._refuse(f"Cannot replay: {error.message}")
            return None
        summary = (
            f"Replay run {self.run_id} from frame {self.frame_no}: fork it with "
            f"{self._describe_options(options) or 'no changes'}, then execute the new run "
            f"with workflow {self.workflow.name!r} (agents are called again)."
        )
        return self._set_pending(Pending("replay", self.run_id, self.frame_no, summary, options))

    def _blocked(self) -> bool:
        """Whether a request is refused before it is looked at: the store is read-only, or
        the run's history was rewritten elsewhere (:meth:`_rewritten`)."""
        if self.read_only is not None:
            self._refuse(f"Nothing was done: {self.read_only}.")
            return True
        return self._rewritten()

    def _branched_elsewhere(self) -> bool:
        """Whether the lens's framework branches this run itself (:meth:`fork_note`): then
        a fork or replay is refused with how to branch it there, and nothing is done."""
        note = self.fork_note()
        if note is None:
            return False
        self._refuse(f"Nothing was done: {note}")
        return True

    def _rewritten(self) -> bool:
        """Whether the run's history was rewritten elsewhere since it was read (it is read
        again, :meth:`catch_up`): then what the person asked for, at a frame of the history
        they saw, is refused, and nothing is done."""
        if not self.catch_up():
            return False
        self._refuse(
            f"{changed_elsewhere(self.run_id, self.last_frame)} Nothing was done: look at it "
            "and ask again."
        )
        return True

    def _refuse(self, text: str) -> None:
        """Say why a request was refused; an action asked for before is no longer pending (a
        Confirm now must not carry out an earlier, other request)."""
        self.pending = None
        self._emit("pending")
        self._say("error", text)

    def _set_pending(self, pending: Pending) -> Pending:
        self.pending = pending
        self.message = None
        self._emit("pending", "message")
        return pending

    def cancel(self) -> None:
        """Drop the pending action; nothing was changed."""
        if self.pending is not None:
            action = self.pending.action
            self.pending = None
            self._emit("pending")
            self._say(
                "info", f"{action.replace('_', ' ').capitalize()} cancelled; nothing was changed."
            )

    def confirm(self) -> ActionResult | None:
        """Carry out the pending action and report what it did (or why it could not)."""
        pending = self.pending
        if pending is None:
            return None
        self.pending = None
        self._emit("pending")
        try:
            if pending.run_id != self.run_id:
                raise InvalidArgument("the debugger shows another run now; ask again")
            if self.catch_up():  # what the person confirmed is about a history now gone
                raise InvalidArgument(
                    f"{changed_elsewhere(self.run_id, self.last_frame)} Nothing was done: "
                    "look at it and ask again"
                )
            result = getattr(self, f"_do_{pending.action}")(pending)
        except ForkPointRewound as error:  # ask again, offering to rewind past the forks
            self._set_pending(
                replace(
                    pending,
                    summary=f"{error.message}. Confirm to rewind anyway: the forked runs stay "
                    "as they are, and the fork tree marks their fork point as rewound away.",
                    options={**pending.options, "force": True},
                )
            )
            result = ActionResult("rewind", False, f"Rewind not done yet: {error.message}")
        except SmithersError as error:
            result = ActionResult(
                pending.action,
                False,
                f"{pending.action.replace('_', ' ').capitalize()} failed: {error.message}",
            )
        except Exception as error:  # report, never a traceback in the widget
            log.exception("%s failed", pending.action)
            result = ActionResult(
                pending.action,
                False,
                f"{pending.action.replace('_', ' ').capitalize()} failed unexpectedly: "
                f"{type(error).__name__}: {error}",
            )
        self.last_result = result
        self._say("success" if result.ok else "error", result.text)
        return result

    def _do_rewind(self, pending: Pending) -> ActionResult:
        before = self.record.clock
        self.db.rewind(pending.run_id, pending.frame_no, confirm=True, **pending.options)
        self._load_run(pending.run_id)
        self.frame_no = min(pending.frame_no, self.last_frame)
        self._default_ref()
        self._emit("run", "tree", "frame", "ref", "diff")
        return ActionResult(
            "rewind",
            True,
            f"Rewound run {pending.run_id} to frame {pending.frame_no}; "
            f"{before - pending.frame_no} later frame(s) removed.",
            pending.run_id,
            pending.frame_no,
        )

    def _do_undo_rewind(self, pending: Pending) -> ActionResult:
        snap = self.db.undo_rewind(pending.run_id, **pending.options)
        self._load_run(pending.run_id)
        self.frame_no = min(snap.frame_no, self.last_frame)
        self._default_ref()
        self._emit("run", "tree", "frame", "ref", "diff")
        return ActionResult(
            "undo_rewind",
            True,
            f"Undid the rewind of run {pending.run_id}: it is back at frame {snap.frame_no}.",
            pending.run_id,
            snap.frame_no,
        )

    def _do_fork(self, pending: Pending) -> ActionResult:
        child = self.db.fork(pending.run_id, pending.frame_no, **pending.options)
        self.breakpoints.give_to(child.id)
        self.root, self.tree = tt.fork_tree(self.db.store, self.run_id)
        self._emit("tree")
        return ActionResult(
            "fork",
            True,
            f"Forked run {pending.run_id} at frame {pending.frame_no}: new run {child.id} "
            f"({run_status(child.status, forked=True, started=False)}, frame 0). Open it in the "
            "fork tree; run it with Replay or "
            f"db.resume({child.id!r}, workflow).",
            child.id,
            0,
        )

    def _do_replay(self, pending: Pending) -> ActionResult:
        replay_of = {"replay_of": pending.run_id}  # the label db.replay gives its child too
        child = self.db.fork(pending.run_id, pending.frame_no, labels=replay_of, **pending.options)
        self.breakpoints.give_to(child.id)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is None:
            try:
                run = self.db.resume(child.id, self.workflow)
            except SmithersError as error:
                self.root, self.tree = tt.fork_tree(self.db.store, self.run_id)
                self._emit("tree")
                return ActionResult(
                    "replay",
                    False,
                    f"Replay failed: run {pending.run_id} was forked at frame "
                    f"{pending.frame_no} into run {child.id}, but executing it failed: "
                    f"{error.message}",
                    child.id,
                    0,
                )
            self.switch_run(child.id)
            return ActionResult(
                "replay",
                True,
                f"Replayed run {pending.run_id} from frame {pending.frame_no} as run {run.id}: "
                f"{run.status} at frame {self.last_frame}.",
                run.id,
                self.last_frame,
            )
        self.switch_run(child.id)
        task = loop.create_task(self.db.aresume(child.id, self.workflow))
        self.background = task
        task.add_done_callback(lambda t: self._replay_done(t, pending, child.id))
        self._emit("frames")  # live refresh starts following the child
        return ActionResult(
            "replay",
            True,
            f"Replaying run {pending.run_id} from frame {pending.frame_no} as run {child.id}; "
            "the timeline follows it live.",
            child.id,
            0,
        )

    def _replay_done(self, task: asyncio.Task[Any], pending: Pending, child_id: str) -> None:
        if task.cancelled():
            self._say("error", f"Replay of run {child_id} was cancelled.")
            return
        error = task.exception()
        if self.run_id == child_id:
            with contextlib.suppress(SmithersError):
                self.refresh()
        if isinstance(error, SmithersError):
            self._say("error", f"Replay of run {child_id} failed: {error.message}")
        elif error is not None:
            self._say("error", f"Replay of run {child_id} failed: {type(error).__name__}: {error}")
        else:
            record = self.db.store.get_run(child_id)
            self._say(
                "success",
                f"Replayed run {pending.run_id} from frame {pending.frame_no} as run {child_id}: "
                f"{record.status} at frame {record.clock}.",
            )


REPLAY_NEEDS_WORKFLOW = (
    "Replay needs the workflow definition to execute agents: open the debugger with "
    "Debugger(db, run_id, workflow=wf)."
)
