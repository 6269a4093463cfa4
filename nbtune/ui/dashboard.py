"""The live dashboard: header, run controls, trials table, charts and views of the run.

    runner thread                 dashboard's refresh thread            browser
    -------------                 --------------------------            -------
    bus.publish(event) ---------> _on_event: set a flag (nothing else)
                                  first: builds the widgets, and imports plotly on a thread
                                  of its own (seconds: never in the user's cell; the charts
                                  wait for it, the table does not)
                                  wakes, at most every `refresh_s`:
                                    snapshot = tuner's trials + results
                                    one hold_sync / batch_update per widget --> comm_msgs
    button click (kernel main thread, or a subshell while a cell is busy) --> tuner.pause(...)
    table message ("rendered", "sort", "hover", "action", ...) ----------> the same, or a redraw

The runner never waits for the dashboard, and a thousand results a second cost the browser
about ten redraws. Updates from the refresh thread are trait changes only: no print, no
display, no clear_output, no log record that a handler could print under some cell.

A part that fails to draw (the header and table, or one chart) shows one line in the dashboard
with its traceback folded under it, and is tried again only after `RETRY_AFTER_S`.

Where no anywidget front end draws the table soon after the dashboard is shown (a front end
that refuses third-party widgets, a notebook opened without its kernel's extensions), the table
becomes plain HTML with core widgets to steer it, and each chart a static plotly figure redrawn
about once a second; where the table draws but a chart does not (plotly's FigureWidget is blank
in some front ends), only the charts become static. A front end that has drawn them before is
given far longer (`nbtune.ui.fallback`): it is slow, not unable.

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
import traceback
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import ipywidgets as widgets

from nbtune.events import Event, ExperimentDone
from nbtune.front_end import DashboardSource
from nbtune.horizon import view_horizon
from nbtune.objectives import is_several, mode_of, primary
from nbtune.storage import error_file
from nbtune.trial import Trial, TrialStatus
from nbtune.ui.artifacts import ArtifactsView
from nbtune.ui.data import ReportedKeys, log_scale_names, ranked
from nbtune.ui.fallback import DRAWN
from nbtune.ui.hints import SpaceHints
from nbtune.ui.summary import (
    SummarySlot,
    best_html,
    counts_html,
    done_html,
    ran_count,
    title_html,
)
from nbtune.ui.table import (
    ACTIONS,
    STATUS_FILTERS,
    StaticTable,
    TableView,
    TrialTableWidget,
    frame_html,
    page_state,
    table_page,
)
from nbtune.ui.timeline import TimelineTab
from nbtune.ui.views import (
    STATIC_EVERY_S,
    ChartTab,
    LiveFigures,
    Look,
    TabPacer,
    due_ahead,
    trial_html,
)

logger = logging.getLogger("nbtune")

CHARTS = ("learning curves", "best so far", "parallel coordinates", "parameters", "importance")
VIEWS = ("trial", "dataframe", "errors")
PICKED = ("learning curves", "parameters", "parallel coordinates")
"""The charts with a picker of the metric they draw: any numeric key the trials reported."""
RETRY_AFTER_S = 5.0
"""How long a part that failed to draw waits before it is tried again."""
BUILD_TIMEOUT_S = 60.0
"""How long a redraw asked for from another thread waits for the widgets to be built."""
_STYLE = (
    "<style>.nbtune-dashboard .jupyter-widgets:has(> .jupyter-widgets-error-widget)"
    "{display:none}</style>"
)
"""Put in the title (a core widget, which every front end draws): a widget the browser cannot
draw (the table or a chart without anywidget) leaves no red error box while the dashboard
waits to fall back to static HTML; a line says the table is being drawn instead."""
_DISK_READ_EVERY_S = 2.0
"""How often the dashboard adds up the checkpoints on disk (it walks the run's folders)."""
_TABLE_CHANGES = ("sort", "descending", "filter", "page", "select")
"""The table's messages that change what it shows: drawn at once (see `_draw_table`)."""


class Dashboard:
    """A live view of a Tuner, or a read-only view of a finished or loaded experiment.

    A live dashboard returns at once: its widgets are built on its refresh thread, and `ready`
    is set once they are.

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
        self.ready = threading.Event()
        self.view = TableView(page_size=page_size)
        self.selected: int | None = None
        self.highlighted: int | None = None
        self.dark = False
        self.rendered = False
        self.static_charts = False
        self.failures: dict[str, tuple[float, str, str]] = {}
        self.command_error = ""
        self.notice = ""
        self._started = time.time()
        self._plan: int | None = None
        """The most trials the run planned while it was live: once it ends, the header says
        how many of them ran."""
        self._shown_at: float | None = None
        self._disk = ""
        self._disk_read_at = -math.inf
        self._failed = FailedTrials(source)
        self.pacer = TabPacer()
        self._dirty = threading.Event()
        self._charts_loaded = threading.Event()
        self._closing = threading.Event()
        self._over = not source.live  # no refresh thread draws: a change is drawn at once
        self._lock = threading.RLock()
        self._table_lock = threading.RLock()
        """Held while the header and table are drawn, or what they show is changed: a click
        redraws them at once, without waiting for the charts that `_lock` guards."""
        self.message = widgets.HTML()
        # The title carries `_STYLE` from the first: the table's red error box (no anywidget)
        # would show until the first redraw put the style in.
        self.title = widgets.HTML(_STYLE + title_html(source.name, "starting"))
        self.widget = widgets.VBox([self.title])
        self.widget.add_class("nbtune-dashboard")
        if not self.live:
            self._charts_loaded.set()
            self._build()
            self.redraw()
            return
        self._dirty.set()
        self._unsubscribe = source.subscribe(self._on_event)
        self._thread = _on_thread("nbtune-dashboard", self._refresh_loop)

    @property
    def live(self) -> bool:
        return self.source.live and not self._over

    # ----- building ---------------------------------------------------------------------------

    def _build(self) -> None:
        self.progress = widgets.IntProgress(min=0, max=1, layout=widgets.Layout(width="240px"))
        self.done = widgets.HTML()
        self.counts = widgets.HTML()
        self.best = widgets.HTML()
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
            description="max concurrent trials",
            style={"description_width": "initial"},
            layout=widgets.Layout(width="220px"),
        )
        self.pause_all.on_click(lambda _: self._act(self.source.pause_all))
        self.resume_all.on_click(lambda _: self._act(self.source.resume_all))
        self.stop_all.on_click(lambda _: self._act(self.source.stop))
        self.concurrency.observe(self._on_concurrency, names="value")
        self.table = TrialTableWidget()
        self.table.on_msg(lambda _, content, __: self._on_table(content))
        self.static_table: StaticTable | None = None
        several = is_several(self.source.metric)
        self.tab_names = (*(("pareto",) if several else ()), *CHARTS, "timeline", *VIEWS)
        self.shared = LiveFigures(lambda charts: self.table.set_trait("charts", charts))
        self.charts = {
            name: TimelineTab(self.source, self._changed, self.shared)
            if name == "timeline"
            else ChartTab(name, self._changed, self.shared)
            for name in self.tab_names
            if name not in VIEWS
        }
        self.pickers = MetricPickers(self.source, self.charts, self._changed)
        self.log_scale = log_scale_names(getattr(self.source, "space", None))
        self.trial_view = widgets.HTML()
        self.artifacts = ArtifactsView()
        self.frame = widgets.HTML()
        self.errors = widgets.HTML()
        trial = widgets.VBox([self.trial_view, self.artifacts.widget])
        views = {"trial": trial, "dataframe": self.frame, "errors": self.errors}
        self.tabs = widgets.Tab(
            children=[
                self.charts[name].widget if name in self.charts else views[name]
                for name in self.tab_names
            ],
            titles=self.tab_names,
        )
        self.tabs.observe(self._on_tab, names="selected_index")
        buttons = [self.pause_all, self.resume_all, self.stop_all]
        for button in buttons:
            button.layout = _whole()
        self.controls = widgets.HBox([*buttons, self.concurrency], layout=_whole("row wrap"))
        self.controls.layout.display = "" if self.live else "none"
        self.hints = SpaceHints(self.source, self._act)
        self.clicks_while_busy = self.live and self._serve_clicks_on_subshell()
        with self.widget.hold_sync():
            self.widget.children = [
                self.title,
                widgets.HBox([self.progress, self.done, self.counts]),
                self.best,
                self.controls,
                self.hints.widget,
                self.message,
                self.table,
                self.tabs,
            ]
        if self.live and not self.clicks_while_busy:
            self.notice = (
                "Buttons act between cells here, and a reloaded page shows this dashboard once "
                "the cell ends: serving them during a cell needs ipykernel 7's subshells."
            )
        self._draw_message()
        self.ready.set()

    def _serve_clicks_on_subshell(self) -> bool:
        from nbtune.ui.subshell import serve_on_subshell

        clickable = [
            self.pause_all,
            self.resume_all,
            self.stop_all,
            self.concurrency,
            self.table,
            self.tabs,
            *(self.static_table.clickable() if self.static_table else ()),
            *(control for chart in self.charts.values() for control in chart.controls()),
            *self.pickers.widgets.values(),
        ]
        return serve_on_subshell(clickable)

    # ----- drawing ----------------------------------------------------------------------------

    @property
    def selected_tab(self) -> str:
        return self.tab_names[self.tabs.selected_index or 0]

    def redraw(self, throttled: bool = False) -> None:
        """Draw the current snapshot; only the visible tab is drawn, `throttled` when due.

        Each part that fails shows one line instead (see `failures`); it does not stop the others.
        Called before the widgets are built and plotly imported, it waits for them (up to
        `BUILD_TIMEOUT_S` each).
        """
        if self.ready.wait(BUILD_TIMEOUT_S) and self._charts_loaded.wait(BUILD_TIMEOUT_S):
            self._draw(throttled)

    def _draw(self, throttled: bool = False) -> None:
        """`redraw`, without waiting for plotly: the charts wait for it, not the rest."""
        with self._lock:
            with self._table_lock:
                trials, rows = self.source.snapshot()
                live = self.live
                self._guarded("table", lambda: self._draw_top(trials, live))
            self._guarded("hints", lambda: self.hints.draw(live))
            tab = self.selected_tab
            spacing = self.shared.spacing_s(tab)
            if not throttled or self.pacer.due(tab, self._closing.is_set(), spacing):
                self._guarded(tab, lambda: self._draw_tab(tab, trials, rows))
            for name in due_ahead(self.charts, tab, self.static_charts, self._closing.is_set()):
                self._guarded(name, lambda name=name: self._draw_tab(name, trials, rows))
            self._draw_message()
            self.redraws += 1

    def _draw_table(self) -> None:
        """The header and table alone, now: what a click changed shows while a chart draws
        (a chart of thousands of results can take the refresh thread half a second)."""
        if not self.ready.is_set():
            return
        with self._table_lock:
            trials, _ = self.source.snapshot()
            live = self.live
            self._guarded("table", lambda: self._draw_top(trials, live))

    def _guarded(self, part: str, draw: Callable[[], None]) -> None:
        failed = self.failures.get(part)
        if failed is not None and time.monotonic() - failed[0] < RETRY_AFTER_S:
            return
        try:
            draw()
        except Exception as exc:
            summary = f"{type(exc).__name__}: {_first_line(exc)}"
            if failed is None or failed[1] != summary:
                logger.debug("nbtune: the dashboard's %s failed to draw", part, exc_info=True)
            self.failures[part] = (time.monotonic(), summary, traceback.format_exc())
            if part in getattr(self, "charts", {}):
                self.charts[part].reset()
            return
        self.failures.pop(part, None)

    def _draw_message(self) -> None:
        lines = [
            f"<details class='nbtune-error'><summary style='color:#d62728'>the {html.escape(part)}"
            f" could not be drawn: {html.escape(summary)} (tried again every"
            f" {RETRY_AFTER_S:.0f} s)</summary><pre>{html.escape(trace)}</pre></details>"
            for part, (_, summary, trace) in self.failures.items()
        ]
        if self.command_error:
            lines.insert(0, f"<span style='color:#d62728'>{html.escape(self.command_error)}</span>")
        held_by = getattr(self.source, "held_by", None) if self.live else None
        if held_by:
            lines.insert(0, f"<b style='color:#d62728'>{html.escape(held_by)}</b>")
        drawing = self._shown_at is not None and not self.rendered and not self.static_table
        notice = _notice_html(self.notice, drawing)
        text = "".join(lines) or notice
        if self.message.value != text:
            self.message.value = text

    def _draw_top(self, trials: Sequence[Trial], live: bool) -> None:
        metric, mode, bounds = self.source.metric, self.source.mode, self.source.constraints
        page = table_page(trials, metric, self.view, live, self._planned(trials), mode, bounds)
        self.view = TableView(
            self.view.sort, self.view.descending, self.view.status, page.page, self.view.page_size
        )
        with self.widget.hold_sync():
            elapsed = time.time() - self._started if live else None
            run_state = self.source.state
            # A Tuner's ETA (an analysis has none), shown while trials run.
            running = live and run_state == "running"
            eta = getattr(self.source, "eta_s", None) if running else None
            self.title.value = _STYLE + title_html(self.source.name, run_state, elapsed, eta)
            finished = sum(trial.status.is_finished for trial in trials)
            planned: int | None = len(trials) + page.unstarted
            if not live:  # how many ran, of the plan seen while live (None: not known)
                finished = ran_count(trials)
                planned = None if self._plan is None else max(self._plan, len(trials))
            self.progress.max = max(1, planned or len(trials))
            self.progress.value = min(finished, self.progress.max)
            self.done.value = done_html(finished, planned, None if live else self.source.state)
            self.counts.value = counts_html(page.counts) + self._checkpoints_on_disk(trials)
            self.best.value = best_html(trials, metric, mode, bounds)
            self.controls.layout.display = "" if live else "none"
            state = page_state(page)
            with self.table.hold_sync():
                self.table.table = state
                self.table.sort = self.view.sort
                self.table.descending = self.view.descending
                self.table.status = self.view.status
                self.table.selected = -1 if self.selected is None else self.selected
                self.table.highlighted = -1 if self.highlighted is None else self.highlighted
            if self.static_table is not None:
                self.static_table.draw(state, self.view, self.selected)

    def _planned(self, trials: Sequence[Trial]) -> int | None:
        """The trials the run will have in all: those the searcher plans, plus those it did not
        suggest (added by hand, forked, cloned by a scheduler); None if it cannot say."""
        planned = self.source.planned_trials
        if planned is None:
            return None
        planned += sum(trial.origin != "searcher" for trial in trials)
        if self.live:
            self._plan = max(self._plan or 0, planned)
        return planned

    def _checkpoints_on_disk(self, trials: Sequence[Trial]) -> str:
        """The run's checkpoints in megabytes, read from disk at most every few seconds."""
        now = time.monotonic()
        if now - self._disk_read_at >= _DISK_READ_EVERY_S:
            self._disk_read_at = now
            total = sum(self.source.checkpoint_mb(trials).values())
            self._disk = f" · checkpoints {total:.1f} MB" if total else ""
        return self._disk

    def _draw_tab(
        self, tab: str, trials: Sequence[Trial], rows: Sequence[Mapping[str, Any]]
    ) -> None:
        metric, mode = self.source.metric, self.source.mode
        if tab == "dataframe":
            from nbtune.results import trials_frame

            bounds = self.source.constraints
            frame = trials_frame(trials, metric, mode, rows=rows, constraints=bounds)
            self.frame.value = frame_html(frame)
        elif tab == "errors":
            self.errors.value = self._failed.html(trials)
        elif tab == "trial":
            shown = trial_shown(self.source, self.selected, trials)
            self.trial_view.value = trial_html(self.source, trials, rows, shown)
            self.artifacts.draw(self.source.path, shown)
        elif (metric is not None or tab == "timeline") and self._charts_loaded.is_set():
            chart = self.charts[tab]
            horizon = view_horizon(self.source, trials) if tab == "learning curves" else None
            infeasible = self.source.constraints.infeasible(trials)
            highlight = self.highlighted if self.static_charts else None  # else: table.js
            look = Look(self.dark, highlight, self.log_scale, horizon, infeasible)
            if tab in self.pickers.widgets:
                metric, mode = self.pickers.picked(tab, rows)
            chart.draw(trials, rows, metric, mode, look, self.static_charts)

    def _on_tab(self, _: Any) -> None:
        """Another tab shown: the trial tab reads the trial's artifacts again when opened."""
        self.artifacts.forget()
        self._changed()

    def _changed(self, table: bool = False) -> None:
        """The user changed what to show: redraw, at once if no refresh thread does (the run has
        ended, or is not live here); locked, so its last redraw or this one draws it. A change
        of the `table` is drawn at once in any case."""
        self.pacer.ask()
        self._dirty.set()
        if table:
            self._draw_table()
        with self._lock:
            if self._over:
                self.redraw()

    @property
    def figures(self) -> dict[str, Any]:
        """The charts drawn so far, by tab: plotly figures (`FigureWidget`s, or plain figures
        where the dashboard fell back to static charts)."""
        return {name: chart.figure for name, chart in self.charts.items() if chart.figure}

    def visible_ids(self) -> list[int]:
        """The ids of the trials the table's current page shows, top to bottom."""
        return [row["id"] for row in self.table.table.get("rows", [])]

    def actions(self, trial_id: int) -> list[str]:
        """The buttons the table offers on a trial's line (none if it is not on the page)."""
        rows = self.table.table.get("rows", [])
        return next((row["actions"] for row in rows if row["id"] == trial_id), [])

    # ----- the browser's messages -------------------------------------------------------------

    def _on_table(self, content: Mapping[str, Any]) -> None:
        """A message from the browser's table (or the static table's widgets)."""
        kind = content.get("type")
        action, trial_id = content.get("action"), _trial_id(content.get("trial_id"))
        if kind == "action" and action in ACTIONS and trial_id is not None and self.live:
            self._act(getattr(self.source, action), trial_id)
            return
        with self._table_lock:
            if kind == "rendered":
                self.rendered = DRAWN.table = True
                self.dark = bool(content.get("dark"))
            elif kind == "sort" and isinstance(content.get("key"), str):
                self.view = self.view.sorted_by(content["key"])
            elif kind == "descending":
                self.view = self.view.sorted_by(self.view.sort)
            elif kind == "filter" and content.get("status") in STATUS_FILTERS:
                self.view = self.view.filtered(content["status"])
            elif kind == "page" and content.get("step") in (-1, 1):
                self.view = self.view.turned(content["step"])
            elif kind == "hover":
                self.highlighted = trial_id
            elif kind == "select":
                self.selected = trial_id
        self._changed(table=kind in _TABLE_CHANGES)

    # ----- live updates -----------------------------------------------------------------------

    def _on_event(self, event: Event) -> None:
        """On the runner thread: only note that something changed."""
        self._dirty.set()
        if isinstance(event, ExperimentDone):
            self._closing.set()

    def _refresh_loop(self) -> None:
        self._guarded("dashboard", self._build)
        if not self.ready.is_set():
            self.widget.children = [self.message]
            self._draw_message()
            return
        _on_thread("nbtune-dashboard-charts", _load_charts, self)
        while True:
            self._dirty.wait(STATIC_EVERY_S if self.static_charts else self.pacer.wait_s())
            self._dirty.clear()
            self._guarded("dashboard", self._check_front_end)
            with self._lock:
                self._over = self._closing.is_set()
                # the last one waits for plotly: the charts too show the end
                (self.redraw if self._over else self._draw)(throttled=True)
            if not self._over:
                self._closing.wait(self.refresh_s)
            elif self._dirty.is_set():  # the end came before the browser drew: check again
                time.sleep(self.refresh_s)
            else:
                self._unsubscribe()
                return

    def _check_front_end(self) -> None:
        """Fall back to static HTML where the browser has not drawn in time: the whole
        dashboard if it did not draw the table (no anywidget), the charts alone if it drew the
        table but not a chart (a front end where plotly's FigureWidget stays blank)."""
        if self.static_charts or self._shown_at is None:
            return
        now = time.monotonic()
        if not self.rendered:
            if now - self._shown_at >= DRAWN.table_grace_s():
                self.use_static()
            else:
                self._dirty.set()
            return
        waiting = [chart for chart in self.charts.values() if chart.waits_to_render()]
        if any(now - chart.made_at >= DRAWN.chart_grace_s() for chart in waiting):
            self.use_static(table=False)
        elif waiting:
            self._dirty.set()

    def use_static(self, table: bool = True) -> None:
        """Show the charts as static figures, and with `table` the table as HTML: nothing
        then needs anywidget."""
        with self._lock:
            if table and self.static_table is None:
                self.static_table = StaticTable(self._on_table)
                children = list(self.widget.children)
                children[children.index(self.table)] = self.static_table.widget
                self.widget.children = children
                if self.clicks_while_busy:
                    from nbtune.ui.subshell import serve_on_subshell

                    serve_on_subshell(self.static_table.clickable())
            if not self.static_charts:
                self.static_charts = True
                for chart in self.charts.values():
                    chart.reset()
                self.shared.drop()
        self._dirty.set()

    # ----- commands ---------------------------------------------------------------------------

    def _on_concurrency(self, change: Mapping[str, Any]) -> None:
        if self.live and change["new"] != self.source.max_concurrent:
            self._act(self.source.set_max_concurrent, change["new"])

    def _act(self, command: Callable[..., Any], *args: Any) -> None:
        """Run a user command from a button; show its error instead of raising it."""
        try:
            command(*args)
        except Exception as exc:
            self.command_error = str(exc)
        else:
            self.command_error = ""
        self._draw_message()
        self._draw_table()
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
        self._shown_at = time.monotonic()
        self._dirty.set()
        shell = get_ipython()
        return None if getattr(shell, "kernel", None) is None else SummarySlot(self.source, shell)

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        """The widget, and a short plain-text line for places that cannot show widgets (a
        saved notebook on GitHub, nbconvert): the run's summary is shown under it instead."""
        if self._shown_at is None:
            self._shown_at = time.monotonic()
            self._dirty.set()
        bundle = self.widget._repr_mimebundle_(**kwargs)
        bundle["text/plain"] = f"nbtune dashboard of {self.source.name!r} (a live widget)"
        return bundle


class MetricPickers:
    """The lists of keys the `PICKED` charts can draw, one in each chart's toolbar (beside the
    learning curves' options, above the other charts): every numeric key the trials reported,
    the tuned metrics first. A tuned metric is drawn in the run's mode; another key without a
    mode (its raw values: no best curve, each trial's last value against its parameters).

    Args:
        source: the dashboard's source (its `metric` and `mode`).
        charts: the dashboard's charts by tab.
        changed: called when the user picks a key.
    """

    def __init__(
        self, source: DashboardSource, charts: Mapping[str, Any], changed: Callable[[], None]
    ) -> None:
        self.source = source
        self.reported = ReportedKeys(source.metric)
        self._changed = changed
        self._updating = False
        self.widgets = {
            name: self._picker(charts[name])
            for name in PICKED
            if source.metric is not None and name in charts
        }

    def _picker(self, chart: Any) -> widgets.Dropdown:
        picker = widgets.Dropdown(
            options=self.reported.keys,
            description="metric",
            style={"description_width": "initial"},
            layout=widgets.Layout(width="240px"),
        )
        picker.observe(self._on_pick, names="value")
        if chart.options is not None:
            chart.options.widget.children = (*chart.options.widget.children, picker)
        else:
            chart.widget.children = (widgets.HBox([picker]), *chart.widget.children)
        return picker

    def _on_pick(self, change: Mapping[str, Any]) -> None:
        if not self._updating:
            self._changed()

    def picked(self, tab: str, rows: Sequence[Mapping[str, Any]]) -> tuple[str, str | None]:
        """The key `tab`'s picker has chosen, and the mode to draw it in (None for a key the
        run does not tune). The pickers first take in the keys of the rows not seen yet; their
        options change (one message each) only when a new key comes."""
        keys = self.reported.update(rows)
        for picker in self.widgets.values():
            if picker.options != keys:
                value = picker.value
                self._updating = True
                try:
                    with picker.hold_sync():
                        picker.options = keys
                        picker.value = value if value in keys else keys[0]
                finally:
                    self._updating = False
        key = self.widgets[tab].value
        return key, mode_of(self.source.metric, self.source.mode, key)


def trial_shown(source: Any, selected: int | None, trials: Sequence[Trial]) -> Trial | None:
    """The trial the "trial" tab shows: the one picked in the table, else the best (of those
    that satisfy the run's constraints)."""
    by_id = {trial.trial_id: trial for trial in trials}
    if selected in by_id:
        return by_id[selected]
    _, mode = primary(source.metric, source.mode)
    infeasible = source.constraints.infeasible(trials)
    scored = ranked([trial for trial in trials if trial.trial_id not in infeasible], mode)
    if not scored:
        return trials[0] if trials else None
    return scored[0]


class FailedTrials:
    """The errors tab's text: each failed trial's error, its traceback folded under it."""

    def __init__(self, source: Any) -> None:
        self.source = source
        self._texts: dict[tuple[int, int], str] = {}

    def html(self, trials: Sequence[Trial]) -> str:
        failed = [t for t in trials if t.status is TrialStatus.ERROR]
        if not failed:
            return "<i>no failed trials</i>"
        parts = []
        for trial in failed:
            text = self._text(trial)
            parts.append(
                f"<details><summary>trial {trial.trial_id}: {html.escape(trial.error or '')}"
                f"</summary><pre>{html.escape(text)}</pre></details>"
            )
        return "".join(parts)

    def _text(self, trial: Trial) -> str:
        """The trial's error.txt, read once per failed attempt rather than at every redraw
        (until it is written: the trial is recorded as failed just before)."""
        key = (trial.trial_id, trial.attempts)
        if not self._texts.get(key):
            path = error_file(self.source.path, trial.trial_id)
            self._texts[key] = path.read_text() if path.exists() else ""
        return self._texts[key]


def _on_thread(name: str, function: Callable[..., None], *args: Any) -> threading.Thread:
    """Run `function(*args)` on a daemon thread started in a copy of the cell's context, so
    that its widget messages stay with the cell that made the dashboard."""
    context = contextvars.copy_context()
    thread = threading.Thread(target=context.run, args=(function, *args), name=name, daemon=True)
    thread.start()
    return thread


def _load_charts(dashboard: Dashboard) -> None:
    """Import plotly, then have `dashboard` redraw: until then its redraws leave the charts
    out, so that the table shows the first results without waiting seconds for plotly."""
    dashboard._guarded("charts", import_plotly)
    dashboard._charts_loaded.set()
    dashboard._changed()


def import_plotly() -> None:
    """Import plotly and its FigureWidget now, on a thread of its own, while the first trials
    start: it takes a second or so (more with nbformat, which `plotly_import` leaves for the
    first `show()`), which would otherwise delay the first chart.

    pandas comes first, by a plain import, which waits for another thread that may be
    importing it at the same moment (the kernel's, for a DataFrame): plotly looks pandas up in
    `sys.modules` as it draws, and would find it half made there ("partially initialized
    module 'pandas' has no attribute 'Series'"). No chart is drawn before it has returned."""
    import pandas  # noqa: F401

    from nbtune.ui.plotly_import import import_renderers

    import_renderers()  # without nbformat: seconds less
    import plotly.graph_objects  # noqa: F401

    import nbtune.ui.live  # noqa: F401  (plotly's FigureWidget: a second or more)


def _notice_html(notice: str, drawing: bool) -> str:
    """The dashboard's notice, under "drawing the table…" while the browser has not drawn it."""
    lines = ["drawing the table…"] if drawing else []
    return "<br>".join(f"<i>{html.escape(line)}</i>" for line in [*lines, notice] if line)


def _whole(flow: str | None = None) -> widgets.Layout:
    """A layout that keeps a control as wide as its label in a narrow window (a flex row would
    shrink a button to "⏸ ..."), and with `flow` ("row wrap") lets a row of them wrap."""
    if flow:
        return widgets.Layout(flex_flow=flow)
    return widgets.Layout(width="auto", flex="0 0 auto")


def _first_line(exc: Exception) -> str:
    """The first line of an exception's message, at most 200 characters (a KeyError's own
    message is the repr of its key, which puts every line of a text key on one)."""
    text = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
    line = (str(text).strip().splitlines() or [""])[0]
    return line if len(line) <= 200 else line[:199] + "…"


def _trial_id(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _close_tree(widget: widgets.Widget) -> None:
    for child in getattr(widget, "children", ()):
        _close_tree(child)
    widget.close()
