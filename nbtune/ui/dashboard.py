"""The live dashboard: header, run controls, trials table, charts, DataFrame and errors.

    runner thread                 dashboard's refresh thread            browser
    -------------                 --------------------------            -------
    bus.publish(event) ---------> _on_event: set a flag (nothing else)
                                  wakes, at most every `refresh_s`:
                                    snapshot = tuner's trials + results
                                    one hold_sync / batch_update per widget --> comm_msgs
    button click (kernel main thread, or a subshell while a cell is busy) --> tuner.pause(...)

The runner never waits for the dashboard, and a thousand results a second cost the browser
about ten redraws. Updates from the refresh thread are trait changes only: no print, no
display, no clear_output.

The core never imports this module: `import nbtune` registers `Dashboard` in
`nbtune.front_end`, and `Tuner.dashboard()` makes one through it. The dashboard reads its source
only through the `DashboardSource` protocol declared there.
"""

from __future__ import annotations

import contextvars
import html
import logging
import math
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import ipywidgets as widgets
import pandas  # noqa: F401  (imported here, before the refresh thread: plotly looks it up lazily)
import plotly.graph_objects as go

from nbtune.events import Event, ExperimentDone
from nbtune.front_end import DashboardSource
from nbtune.objectives import is_several, primary
from nbtune.results import trials_frame
from nbtune.trial import Trial, TrialStatus
from nbtune.ui.data import best_so_far_data, history_data, parameter_data
from nbtune.ui.figures import (
    best_so_far_figure,
    history_figure,
    parallel_coordinates_figure,
    parameter_scatter_figure,
)
from nbtune.ui.pareto import pareto_data, pareto_figure
from nbtune.ui.subshell import serve_on_subshell
from nbtune.ui.summary import SummarySlot, best_html, counts_html, title_html
from nbtune.ui.table import TrialTable

logger = logging.getLogger("nbtune")
_CHARTS = ("learning curves", "best so far", "parallel coordinates", "parameters")
_TABS = (*_CHARTS, "dataframe", "errors")


_DISK_READ_EVERY_S = 2.0
"""How often the dashboard adds up the checkpoints on disk (it walks the run's folders)."""


class Dashboard:
    """A live view of a Tuner, or a read-only view of a finished or loaded experiment.

    Args:
        source: what to show, read through `DashboardSource`: a `Tuner` (live while it runs)
            or an `ExperimentAnalysis`.
        refresh_s: the shortest time between two redraws.
        page_size: trials per page of the table.
    """

    def __init__(
        self, source: DashboardSource, refresh_s: float = 0.1, page_size: int = 20
    ) -> None:
        self.source = source
        self.refresh_s = refresh_s
        self.redraws = 0
        self._started = time.time()
        self._disk = ""
        self._disk_read_at = -math.inf
        self._dirty = threading.Event()
        self._closing = threading.Event()
        self._lock = threading.Lock()
        self.table = TrialTable(self._command, page_size)
        self._build()
        if not self.live:
            self.redraw()
        else:
            self._dirty.set()
            self._unsubscribe = source.subscribe(self._on_event)
            context = contextvars.copy_context()
            self._thread = threading.Thread(
                target=context.run,
                args=(self._refresh_loop,),
                name="nbtune-dashboard",
                daemon=True,
            )
            self._thread.start()

    # ----- what it shows ----------------------------------------------------------------------

    @property
    def live(self) -> bool:
        return self.source.live

    def _build(self) -> None:
        self.title = widgets.HTML()
        self.progress = widgets.IntProgress(min=0, max=1, layout=widgets.Layout(width="300px"))
        self.counts = widgets.HTML()
        self.best = widgets.HTML()
        self.message = widgets.HTML()
        self.pause_all = widgets.Button(
            description="Pause all", icon="pause", tooltip="Pause every trial; start none"
        )
        self.resume_all = widgets.Button(
            description="Resume all", icon="play", tooltip="Resume every paused trial"
        )
        self.stop_all = widgets.Button(
            description="Stop all",
            icon="stop",
            button_style="danger",
            tooltip="End the run (its state is saved)",
        )
        self.concurrency = widgets.BoundedIntText(
            value=self.source.max_concurrent,
            min=1,
            max=512,
            description="at once",
            layout=widgets.Layout(width="160px"),
        )
        self.pause_all.on_click(lambda _: self._act(self.source.pause_all))
        self.resume_all.on_click(lambda _: self._act(self.source.resume_all))
        self.stop_all.on_click(lambda _: self._act(self.source.stop))
        self.concurrency.observe(self._on_concurrency, names="value")
        self.figures: dict[str, go.FigureWidget] = {}
        self._drawn: dict = {}
        self.frame = widgets.HTML()
        self.errors = widgets.HTML()
        self.tab_names = (*(("pareto",) if is_several(self.source.metric) else ()), *_TABS)
        placeholders = [widgets.HTML("<i>drawing…</i>") for _ in self.tab_names[:-2]]
        self.tabs = widgets.Tab(children=[*placeholders, self.frame, self.errors])
        for index, name in enumerate(self.tab_names):
            self.tabs.set_title(index, name)
        self.tabs.observe(lambda _: self.redraw(), names="selected_index")
        self.controls = widgets.HBox(
            [self.pause_all, self.resume_all, self.stop_all, self.concurrency]
        )
        self.widget = widgets.VBox(
            [
                self.title,
                widgets.HBox([self.progress, self.counts]),
                self.best,
                self.controls,
                self.message,
                self.table.widget,
                self.tabs,
            ]
        )
        self.clicks_while_busy = self.live and serve_on_subshell(self._clickable())
        if self.live and not self.clicks_while_busy:
            self.message.value = (
                "<i>Buttons act between cells here: this kernel cannot serve them while a cell "
                "runs (that needs ipykernel 7's subshells).</i>"
            )
        self.controls.layout.display = "" if self.live else "none"

    def _clickable(self) -> list[widgets.Widget]:
        row_buttons = [b for row in self.table.rows for b in row.buttons.values()]
        return [
            self.pause_all,
            self.resume_all,
            self.stop_all,
            self.concurrency,
            *row_buttons,
            self.table.previous,
            self.table.next,
            self.table.sort,
            self.tabs,
        ]

    def redraw(self) -> None:
        """Draw the current snapshot; only the visible chart or view is recomputed."""
        with self._lock:
            trials, rows = self.source.snapshot()
            metric, mode = self.source.metric, self.source.mode
            live = self.live
            with self.widget.hold_sync():
                self._draw_header(trials, metric, mode, live)
                self.table.update(trials, *primary(metric, mode), live)
                self._draw_tab(trials, rows, metric, mode)
                self.controls.layout.display = "" if live else "none"
            self.redraws += 1

    def _draw_header(
        self, trials: Sequence[Trial], metric: str | None, mode: str, live: bool
    ) -> None:
        elapsed = time.time() - self._started if live else None
        self.title.value = title_html(self.source.name, self.source.state, elapsed)
        finished = sum(trial.status.is_finished for trial in trials)
        self.progress.max = max(1, self._planned(trials))
        self.progress.value = min(finished, self.progress.max)
        self.counts.value = counts_html(trials) + self._checkpoints_on_disk(trials)
        self.best.value = best_html(trials, metric, mode)

    def _checkpoints_on_disk(self, trials: Sequence[Trial]) -> str:
        """The run's checkpoints in megabytes, read from disk at most every few seconds."""
        now = time.monotonic()
        if now - self._disk_read_at >= _DISK_READ_EVERY_S:
            self._disk_read_at = now
            total = sum(self.source.checkpoint_mb(trials).values())
            self._disk = f" · checkpoints {total:.1f} MB" if total else ""
        return self._disk

    def _planned(self, trials: Sequence[Trial]) -> int:
        """The progress bar's end: the trials the searcher plans, plus those it did not suggest
        (added by hand, forked, cloned by a scheduler); the trials so far if it cannot say."""
        planned = self.source.planned_trials
        if planned is None:
            return len(trials)
        unplanned = sum(trial.origin != "searcher" for trial in trials)
        return max(len(trials), planned + unplanned)

    def _draw_tab(
        self,
        trials: Sequence[Trial],
        rows: Sequence[Mapping[str, Any]],
        metric: str | None,
        mode: str,
    ) -> None:
        tab = self.tab_names[self.tabs.selected_index or 0]
        if tab == "dataframe":
            self.frame.value = trials_frame(trials, metric, mode).to_html(max_rows=60)
        elif tab == "errors":
            self.errors.value = self._errors_html(trials)
        elif tab == "pareto":
            pareto_figure(pareto_data(trials, metric, mode), self._figure(tab))
        elif metric is not None:
            self._draw_chart(tab, trials, rows, *primary(metric, mode))

    def _figure(self, tab: str) -> go.FigureWidget:
        """The chart's FigureWidget, made when first shown: plotly's first one takes seconds,
        which a live dashboard spends on its refresh thread, not in the user's cell."""
        if tab not in self.figures:
            self.figures[tab] = go.FigureWidget()
            children = list(self.tabs.children)
            children[self.tab_names.index(tab)] = self.figures[tab]
            self.tabs.children = children
        return self.figures[tab]

    def _draw_chart(
        self,
        tab: str,
        trials: Sequence[Trial],
        rows: Sequence[Mapping[str, Any]],
        metric: str,
        mode: str,
    ) -> None:
        figure = self._figure(tab)
        if tab == "learning curves":
            history_figure(history_data(trials, rows, metric, mode), figure, self._drawn)
        elif tab == "best so far":
            best_so_far_figure(best_so_far_data(rows, metric, mode), figure)
        elif tab == "parallel coordinates":
            parallel_coordinates_figure(parameter_data(trials, metric), figure)
        else:
            parameter_scatter_figure(parameter_data(trials, metric), figure)

    def _errors_html(self, trials: Sequence[Trial]) -> str:
        failed = [t for t in trials if t.status is TrialStatus.ERROR]
        if not failed:
            return "<i>no failed trials</i>"
        parts = []
        for trial in failed:
            error_file = self.source.path / "trials" / str(trial.trial_id) / "error.txt"
            traceback = error_file.read_text() if error_file.exists() else ""
            parts.append(
                f"<details><summary>trial {trial.trial_id}: {html.escape(trial.error or '')}"
                f"</summary><pre>{html.escape(traceback)}</pre></details>"
            )
        return "".join(parts)

    # ----- live updates -----------------------------------------------------------------------

    def _on_event(self, event: Event) -> None:
        """On the runner thread: only note that something changed."""
        self._dirty.set()
        if isinstance(event, ExperimentDone):
            self._closing.set()

    def _refresh_loop(self) -> None:
        while True:
            self._dirty.wait()
            self._dirty.clear()
            self._redraw_safely()
            if self._closing.is_set():
                self._unsubscribe()
                self._redraw_safely()
                return
            self._closing.wait(self.refresh_s)

    def _redraw_safely(self) -> None:
        """Redraw from the refresh thread; a failure shows in the dashboard, not in some cell."""
        try:
            self.redraw()
        except Exception as exc:
            logger.exception("nbtune: the dashboard failed to redraw")
            self.message.value = (
                f"<span style='color:#d62728'>dashboard error: {html.escape(repr(exc))}</span>"
            )

    # ----- commands ---------------------------------------------------------------------------

    def _command(self, action: str, trial_id: int) -> None:
        """A row's button: `action` is "pause", "resume" or "stop"."""
        commands = {
            "pause": self.source.pause,
            "resume": self.source.resume,
            "stop": self.source.stop,
        }
        self._act(commands[action], trial_id)

    def _on_concurrency(self, change: Mapping[str, Any]) -> None:
        if self.live and change["new"] != self.source.max_concurrent:
            self._act(self.source.set_max_concurrent, change["new"])

    def _act(self, command, *args: Any) -> None:
        """Run a user command from a button; show its error instead of raising it."""
        try:
            command(*args)
        except Exception as exc:
            self.message.value = f"<span style='color:#d62728'>{html.escape(str(exc))}</span>"
            return
        self.message.value = ""
        self._dirty.set()

    def close(self) -> None:
        """Stop updating and close the dashboard's widgets."""
        self._closing.set()
        self._dirty.set()
        _close_tree(self.widget)

    def show(self) -> SummarySlot | None:
        """Display the dashboard under the running cell, and in a Jupyter kernel the slot under
        it that the static summary fills once the run ends; return that slot."""
        from IPython import get_ipython
        from IPython.display import display

        display(self)
        shell = get_ipython()
        return None if getattr(shell, "kernel", None) is None else SummarySlot(self.source, shell)

    def _repr_mimebundle_(self, **kwargs: Any):
        return self.widget._repr_mimebundle_(**kwargs)


def _close_tree(widget: widgets.Widget) -> None:
    for child in getattr(widget, "children", ()):
        _close_tree(child)
    widget.close()
