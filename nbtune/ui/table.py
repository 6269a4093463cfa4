"""The trials table: one row per trial, a page at a time, with Pause / Resume / Stop per row.

The rows are a fixed set of widgets that show whichever trials the current page holds, so a
run of 1,000 trials costs the browser `page_size` rows, and turning a page only changes text.
"""

from __future__ import annotations

import html
import time
from collections.abc import Callable, Sequence

import ipywidgets as widgets

from nbtune.space import SearchSpace
from nbtune.trial import Trial, TrialStatus
from nbtune.ui.figures import STATUS_COLORS

Command = Callable[[str, int], None]
"""Called with ("pause" | "resume" | "stop", trial_id) when a row's button is clicked."""

_SORTS = {
    "id": ("trial id", False),
    "best": ("best metric", False),
    "newest": ("newest first", True),
}
_CELL = widgets.Layout(width="110px")
_WIDE = widgets.Layout(width="320px")


def badge(status: str) -> str:
    """A status as a small coloured label."""
    return (
        f'<span style="background:{STATUS_COLORS[status]};color:white;border-radius:4px;'
        f'padding:1px 6px;font-size:11px">{status.lower()}</span>'
    )


class _Row:
    """The widgets of one table row; `show(trial)` points them at a trial."""

    def __init__(self, command: Command) -> None:
        self.trial_id: int | None = None
        self.status = widgets.HTML(layout=widgets.Layout(width="90px"))
        self.ident = widgets.HTML(layout=widgets.Layout(width="40px"))
        self.config = widgets.HTML(layout=_WIDE)
        self.last = widgets.HTML(layout=_CELL)
        self.best = widgets.HTML(layout=_CELL)
        self.iteration = widgets.HTML(layout=widgets.Layout(width="60px"))
        self.runtime = widgets.HTML(layout=widgets.Layout(width="70px"))
        self.buttons = {
            action: widgets.Button(
                description=action.capitalize(),
                tooltip=f"{action.capitalize()} this trial",
                layout=widgets.Layout(width="80px"),
            )
            for action in ("pause", "resume", "stop")
        }
        for action, button in self.buttons.items():
            button.on_click(lambda _, action=action: self._click(command, action))
        self.box = widgets.HBox(
            [
                self.status,
                self.ident,
                self.config,
                self.last,
                self.best,
                self.iteration,
                self.runtime,
                *self.buttons.values(),
            ]
        )

    def _click(self, command: Command, action: str) -> None:
        if self.trial_id is not None:
            command(action, self.trial_id)

    def show(self, trial: Trial | None, metric: str | None, live: bool) -> None:
        self.trial_id = None if trial is None else trial.trial_id
        self.box.layout.display = "none" if trial is None else ""
        if trial is None:
            return
        self.status.value = badge(trial.status.value)
        self.ident.value = str(trial.trial_id)
        config = SearchSpace.flatten(trial.config)
        self.config.value = html.escape(", ".join(f"{k}={_short(v)}" for k, v in config.items()))
        last = trial.last_result.get(metric) if metric else None
        self.last.value = _short(last) if last is not None else ""
        self.best.value = "" if trial.best_value is None else _short(trial.best_value)
        self.iteration.value = str(trial.iteration)
        self.runtime.value = f"{_runtime(trial):.1f} s"
        possible = _possible_actions(trial) if live else set()
        for action, button in self.buttons.items():
            button.layout.visibility = "visible" if action in possible else "hidden"
            button.tooltip = f"{action.capitalize()} trial {trial.trial_id}"


def _runtime(trial: Trial) -> float:
    """Seconds the trial has run, the current stretch included."""
    running = trial.status is TrialStatus.RUNNING and trial.started_at is not None
    return trial.runtime_s + (max(0.0, time.time() - trial.started_at) if running else 0.0)


def _possible_actions(trial: Trial) -> set[str]:
    if trial.status in (TrialStatus.PENDING, TrialStatus.RUNNING):
        return {"pause", "stop"}
    if trial.status is TrialStatus.PAUSED:
        return {"resume", "stop"}
    return set()


class TrialTable:
    """A paged, sortable table of trials with per-row controls."""

    def __init__(self, command: Command, page_size: int = 20) -> None:
        self.page_size = page_size
        self.page = 0
        self._trials: Sequence[Trial] = ()
        self._metric: str | None = None
        self._mode = "min"
        self._live = False
        self.rows = [_Row(command) for _ in range(page_size)]
        self.sort = widgets.Dropdown(
            options=[(label, key) for key, (label, _) in _SORTS.items()],
            value="id",
            description="sort by",
            layout=widgets.Layout(width="220px"),
        )
        self.previous = widgets.Button(description="◀", layout=widgets.Layout(width="40px"))
        self.next = widgets.Button(description="▶", layout=widgets.Layout(width="40px"))
        self.where = widgets.HTML()
        self.previous.on_click(lambda _: self._turn(-1))
        self.next.on_click(lambda _: self._turn(+1))
        self.sort.observe(lambda _: self._redraw(), names="value")
        heading = widgets.HTML(
            "<b>"
            + "</b> · <b>".join(["status", "id", "config", "last", "best", "iteration", "runtime"])
            + "</b>"
        )
        self.widget = widgets.VBox(
            [
                widgets.HBox([self.sort, self.previous, self.where, self.next]),
                heading,
                *(row.box for row in self.rows),
            ]
        )

    def update(self, trials: Sequence[Trial], metric: str | None, mode: str, live: bool) -> None:
        """Show `trials` (a snapshot); keeps the page and the sort order."""
        self._trials, self._metric, self._mode, self._live = trials, metric, mode, live
        self._redraw()

    def visible_ids(self) -> list[int]:
        """The ids of the trials the current page shows, top to bottom."""
        return [row.trial_id for row in self.rows if row.trial_id is not None]

    def row_for(self, trial_id: int) -> _Row | None:
        return next((row for row in self.rows if row.trial_id == trial_id), None)

    def _turn(self, step: int) -> None:
        self.page = min(max(0, self.page + step), self._last_page())
        self._redraw()

    def _last_page(self) -> int:
        return max(0, (len(self._trials) - 1) // self.page_size)

    def _redraw(self) -> None:
        ordered = self._ordered()
        self.page = min(self.page, self._last_page())
        start = self.page * self.page_size
        shown = ordered[start : start + self.page_size]
        for index, row in enumerate(self.rows):
            row.show(shown[index] if index < len(shown) else None, self._metric, self._live)
        self.where.value = f"page {self.page + 1} of {self._last_page() + 1}"

    def _ordered(self) -> list[Trial]:
        trials = list(self._trials)
        if self.sort.value == "newest":
            return trials[::-1]
        if self.sort.value == "best":
            sign = -1 if self._mode == "max" else 1
            return sorted(
                trials,
                key=lambda t: (t.best_value is None, sign * (t.best_value or 0.0), t.trial_id),
            )
        return trials


def _short(value: object) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)
