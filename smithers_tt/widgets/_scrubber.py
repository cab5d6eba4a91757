"""The frame scrubber: a slider and step / jump buttons; the selected frame drives the rest."""

from __future__ import annotations

from collections.abc import Callable

import ipywidgets as W

from smithers_tt.widgets._frames import ATTEMPT_KINDS, CHECKPOINT_KINDS
from smithers_tt.widgets._model import DebuggerModel


class Scrubber:
    """Slider over frames 0..newest plus |◀ ◀◀ ◀ ▶ ▶▶ ◆▶ ▶| (◀◀ / ▶▶ jump between attempt
    events, ◆▶ to the next checkpoint)."""

    def __init__(self, model: DebuggerModel) -> None:
        self.model = model
        self.slider = W.IntSlider(
            value=model.frame_no,
            min=0,
            max=max(model.last_frame, 1),
            description="frame",
            continuous_update=False,
            layout=W.Layout(flex="1 1 260px", min_width="200px", width="auto"),
        )
        self.slider.add_class("stt-slider")
        self.slider.observe(self._slid, names="value")

        def button(label: str, tooltip: str, action: Callable[[], None]) -> W.Button:
            b = W.Button(description=label, tooltip=tooltip, layout=W.Layout(width="auto"))
            b.on_click(lambda _: action())
            return b

        self.first = button("|◀", "first frame", lambda: model.select_frame(0))
        self.prev_attempt = button(
            "◀◀", "previous attempt start or end", lambda: model.jump(-1, ATTEMPT_KINDS)
        )
        self.prev = button("◀", "previous frame", lambda: model.step(-1))
        self.next = button("▶", "next frame", lambda: model.step(1))
        self.next_attempt = button(
            "▶▶", "next attempt start or end", lambda: model.jump(1, ATTEMPT_KINDS)
        )
        self.next_checkpoint = button(
            "◆▶", "next checkpoint", lambda: model.jump(1, CHECKPOINT_KINDS)
        )
        self.last = button("▶|", "newest frame", lambda: model.select_frame(model.last_frame))
        self.label = W.Label(layout=W.Layout(width="100%"))
        self.label.add_class("stt-scrub-line")  # wraps in a narrow cell (see the stylesheet)
        self.widget = W.VBox(
            [
                W.HBox(
                    [
                        self.slider,
                        self.first,
                        self.prev_attempt,
                        self.prev,
                        self.next,
                        self.next_attempt,
                        self.next_checkpoint,
                        self.last,
                    ],
                    layout=W.Layout(flex_flow="row wrap", width="100%", align_items="center"),
                ),
                self.label,
            ]
        )
        model.on("frame", self.update)
        model.on("frames", self.update)
        model.on("run", self.update)
        self.update()

    def _slid(self, change: dict) -> None:
        self.model.select_frame(change["new"])

    def update(self) -> None:
        """Show the model's selected frame and range."""
        m = self.model
        self.slider.max = max(m.last_frame, 1)
        self.slider.value = m.frame_no
        self.slider.disabled = m.last_frame == 0
        # a Label renders text, never HTML
        self.label.value = f"frame {m.frame_no} of {m.last_frame}: {m.frame_title()}"
        self.first.disabled = self.prev.disabled = m.frame_no <= 0
        self.last.disabled = self.next.disabled = m.frame_no >= m.last_frame
        # a jump that would go nowhere is off, as the steps are at the ends
        self.prev_attempt.disabled = not m.can_jump(-1, ATTEMPT_KINDS)
        self.next_attempt.disabled = not m.can_jump(1, ATTEMPT_KINDS)
        self.next_checkpoint.disabled = not m.can_jump(1, CHECKPOINT_KINDS)
