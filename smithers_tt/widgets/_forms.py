"""The fork form: validating its reset nodes, input override and checkpoint edit into
``db.fork`` options before anything is written, and previewing an edit against the agent's
declared formats.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from smithers_tt import timetravel as tt
from smithers_tt.checkpoint import AgentCheckpoint, canonical_bytes, read_json
from smithers_tt.errors import InvalidArgument, SmithersError
from smithers_tt.store import CheckpointRef
from smithers_tt.widgets._records import EditPreview
from smithers_tt.widgets._state import DebuggerState


class Forms(DebuggerState):
    """The fork form and the checkpoint editor's checks."""

    def fork_options(
        self,
        *,
        reset: Sequence[str] = (),
        input_text: str = "",
        edit_node: str | None = None,
        edit_text: str | None = None,
        reason: str = "",
    ) -> dict[str, Any]:
        """Validate the fork form into ``db.fork`` options before anything is written.

        Raises:
            InvalidArgument: input or payload is not JSON, or a node is unknown.
            CheckpointInvalid: the input or edited payload is not strict JSON (the error names
                the path), or the edited envelope is not a valid ``AgentCheckpoint``.
        """
        options: dict[str, Any] = {"reset": [str(r) for r in reset]}
        if reason.strip():
            options["reason"] = reason.strip()  # kept in the audit
        known = set(self.node_ids)
        unknown = sorted(set(options["reset"]) - known)
        if unknown:
            raise InvalidArgument(f"run {self.run_id} has no node(s) {unknown} to reset")
        if input_text.strip():
            value = read_json(input_text, "the input override")
            canonical_bytes(value)
            options["input"] = value
        if edit_node:
            checkpoint = self._edited(edit_node, edit_text or "")
            current = self.load(self._edit_ref(edit_node))
            if checkpoint.encode().content_hash != current.encode().content_hash:
                options["checkpoints"] = {edit_node: checkpoint}
        return options

    def _edit_ref(self, node_id: str) -> CheckpointRef:
        ref = self.newest_ref(node_id)
        if ref is None:
            raise InvalidArgument(
                f"{node_id!r} has no checkpoint at frame {self.frame_no}; nothing to edit"
            )
        return ref

    def declared_formats(self, node_id: str) -> list[tuple[str, tuple[int, ...], bool]] | None:
        """What the node's agent declares it publishes: (codec, versions, resumable), where
        ``resumable`` says it also declares consuming that format in ``resume`` mode (a fork
        resumes the node from the edited checkpoint). None without the workflow."""
        task = None if self.workflow is None else self.workflow.tasks.get(node_id)
        if task is None:
            return None
        agent = task.agent
        out = []
        for fmt in agent.formats:
            resumable = any(
                cap.codec == fmt.codec
                and "resume" in cap.modes
                and set(fmt.versions) & set(cap.versions)
                for cap in agent.capabilities
            )
            out.append((fmt.codec, tuple(fmt.versions), resumable))
        return out

    def _edited(self, node_id: str, text: str) -> AgentCheckpoint:
        """The edited checkpoint of a node, validated: JSON, strict JSON (the error names the
        path), and the format the agent declares (when the workflow is known)."""
        ref = self._edit_ref(node_id)
        payload = read_json(text, f"the edited checkpoint of {node_id!r}")
        checkpoint = AgentCheckpoint(ref.codec, ref.version, payload)  # validates
        declared = self.declared_formats(node_id)
        if declared is not None:
            match = [d for d in declared if d[0] == ref.codec and ref.version in d[1]]
            if not match:
                names = ", ".join(f"{c} v{list(v)}" for c, v, _ in declared) or "none"
                raise InvalidArgument(
                    f"agent of {node_id!r} does not declare {ref.codec} v{ref.version} "
                    f"(it declares: {names}); it could not resume from this checkpoint"
                )
            if not match[0][2]:
                raise InvalidArgument(
                    f"agent of {node_id!r} declares no resume capability for {ref.codec} "
                    f"v{ref.version}; a fork could not hand it this checkpoint"
                )
        return checkpoint

    def preview_edit(self, node_id: str, text: str) -> EditPreview:
        """Validate an edited checkpoint without writing anything, and say what it changes."""
        ref = self.newest_ref(node_id)
        if ref is None:
            return EditPreview(node_id, None, error=f"{node_id!r} has no checkpoint here")
        before = self.load(ref).payload
        declared = self.declared_formats(node_id)
        if declared is None:
            note = (
                f"{ref.codec} v{ref.version}, as stored (open the debugger with workflow= to "
                "check it against the agent's declared formats)"
            )
        else:
            note = f"{ref.codec} v{ref.version}, checked against the agent's declared formats"
        try:
            checkpoint = self._edited(node_id, text)
        except SmithersError as error:
            return EditPreview(node_id, before, error=error.message, format_note=note)
        changes = tt.json_diff(before, checkpoint.payload, "$.payload")
        return EditPreview(node_id, before, checkpoint.payload, None, changes, note, checkpoint)

    def newest_ref(self, node_id: str) -> CheckpointRef | None:
        """The newest checkpoint of a node (its newest iteration) at the selected frame."""
        if (newest := self._at_newest) is not None:
            top = newest.top_iteration(node_id)
            return None if top is None else newest.newest_ref((node_id, top))
        snap = self.snapshot
        keys = [k for k in snap.refs if k[0] == node_id]
        if not keys:
            return None
        iteration = max(k[1] for k in keys)
        return snap.newest_ref(node_id, iteration)

    def checkpoint_text(self, node_id: str) -> str:
        """The payload of a node's newest checkpoint as indented JSON, for the editor."""
        ref = self.newest_ref(node_id)
        if ref is None:
            return ""
        return json.dumps(self.load(ref).payload, indent=2, ensure_ascii=False)

    def _describe_options(self, options: dict[str, Any]) -> str:
        parts = []
        if options.get("reset"):
            parts.append(f"reset {', '.join(options['reset'])}")
        if options.get("checkpoints"):
            parts.append(f"edited checkpoint of {', '.join(options['checkpoints'])}")
        if "input" in options:
            text = json.dumps(options["input"], ensure_ascii=False)
            parts.append(f"input {text[:120]}{'…' if len(text) > 120 else ''}")
        if options.get("reason"):
            parts.append(f"reason: {options['reason']}")
        return "; ".join(parts)
