"""The dashboard's hints at the edges of the search space, each with a button that widens it.

A line per parameter whose best trials crowd a bound of its range (`Tuner.space_hints`); its
"widen" button calls `Tuner.update_space` with that bound moved out. The hints are worked out
at most once a second and the lines rebuilt only when they change, so a redraw at 10 Hz costs
a comparison.
"""

from __future__ import annotations

import html
import time
from collections.abc import Callable
from typing import Any

import ipywidgets as widgets

EVERY_S = 1.0
"""How often the hints are worked out again."""


class SpaceHints:
    """A box of hint lines, empty (and hidden) while there is none.

    Args:
        source: the run (a live `Tuner`: it has `space_hints`, `space` and `update_space`).
        act: how the dashboard runs a user's command (showing its error, not raising it).
    """

    def __init__(self, source: Any, act: Callable[..., None]) -> None:
        self.source = source
        self.act = act
        self.widget = widgets.VBox(layout=widgets.Layout(display="none"))
        self.widget.add_class("nbtune-hints")
        self.shown: list[tuple[str, str]] = []
        self._worked_out_at = -EVERY_S

    def draw(self, live: bool) -> None:
        """Show the current hints (none once the run has ended: nothing is left to widen)."""
        now = time.monotonic()
        if live and now - self._worked_out_at < EVERY_S:
            return
        self._worked_out_at = now
        hints = self._hints() if live else []
        if [(hint["param"], hint["edge"]) for hint in hints] == self.shown:
            return
        self.shown = [(hint["param"], hint["edge"]) for hint in hints]
        self.widget.children = [self._line(hint) for hint in hints]
        self.widget.layout.display = "" if hints else "none"

    def _hints(self) -> list[dict[str, Any]]:
        try:
            return self.source.space_hints()
        except (AttributeError, ValueError):
            return []

    def _line(self, hint: dict[str, Any]) -> widgets.HBox:
        text = widgets.HTML(f"<span style='color:#b36b00'>⚠ {html.escape(hint['message'])}</span>")
        button = widgets.Button(
            description="widen",
            icon="arrows-h",
            tooltip=f"search {hint['param']} over {hint['widened']!r} from now on",
            layout=widgets.Layout(width="90px"),
        )
        button.on_click(lambda _: self.act(self._widen, hint))
        return widgets.HBox([button, text])

    def _widen(self, hint: dict[str, Any]) -> None:
        self.source.update_space(self.source.space.with_changes({hint["param"]: hint["widened"]}))
        self._worked_out_at = -EVERY_S
