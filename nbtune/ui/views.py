"""The dashboard's tabs: a chart (live FigureWidget, or static figure where that cannot show)
and the per-trial view."""

from __future__ import annotations

import contextlib
import html
import json
import os
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import ipywidgets as widgets

from nbtune.front_end import DashboardSource
from nbtune.metrics import finite
from nbtune.objectives import names, primary
from nbtune.space import SearchSpace
from nbtune.storage import error_file, output_file
from nbtune.trial import ITERATION, Trial
from nbtune.ui.browser_chart import BrowserChart
from nbtune.ui.data import CurvePoints, trial_color
from nbtune.ui.fallback import DRAWN
from nbtune.ui.static import trial_curve_svg
from nbtune.ui.table import HOVER_CHARS, badge, short, waiting_note

OUTPUT_LINES = 200
"""Lines of a trial's output the per-trial view shows (its last ones)."""
TAIL_BYTES = 64 * 1024
"""How much of the end of a trial's output the per-trial view reads."""
STATIC_EVERY_S = 1.0
"""How often a static chart is drawn again (the whole figure is sent, if it changed)."""
DRAWN_MESSAGES = ["_js2py_traceDeltas", "_js2py_layoutDelta"]
"""What plotly's browser side sends back once it has drawn a FigureWidget. plotly 7.1 sends its
layout as "_js2py_widget_layoutDelta", which the kernel's FigureWidget does not know (and
drops): waiting for the layout alone, the dashboard took every live chart for one the browser
could not draw, and turned its charts static after a few seconds."""
CHART_EVERY_S = 1.0
"""The shortest time between two drawings of the visible tab during a live run, unless the user
asks for one (a tab, an option, a metric, a line picked). A chart's update makes plotly redraw
every curve and send its whole state back to the kernel: ten a second kept a browser busy
all the time in a run of 64 trials. The header and the table still redraw ten times a
second."""
BROWSER_SHARE = 0.3
"""The most of a browser's time the visible chart's drawings may take: a browser that answers
a drawing `t` seconds after it was sent gets the next one `t / BROWSER_SHARE` seconds after the
last, if that is longer than `CHART_EVERY_S` (see `LiveFigures.spacing_s`)."""
UNANSWERED_S = 5.0
"""How long a chart waits for its browser to answer its last drawing before it draws again
anyway (a page closed, or reloaded, answers nothing)."""
SENT_MESSAGES = ["_py2js_update", "_py2js_restyle", "_py2js_addTraces"]
"""The changes of its curves that plotly's FigureWidget sends its browser: each has a
`trace_edit_id` that the browser's `_js2py_traceDeltas` answer repeats, once it has drawn it."""
STATIC_WEBGL_EVERY_S = 5.0
"""The same for parallel coordinates, which plotly.js draws with WebGL: each new drawing costs
a browser without a GPU seconds."""
BROWSER_DRAWN = ("parallel coordinates",)
"""The live charts that the browser draws with the plotly.js its page holds (`BrowserChart`),
not each with a `FigureWidget` of its own: a new FigureWidget's code takes the browser seconds
to load, and plotly.js draws parallel coordinates with WebGL, whose first drawing of a chart
takes a browser without a GPU a second more. Drawn ahead in its hidden tab, the chart shows as
soon as its tab opens."""
AHEAD_EVERY_S = 2.0
"""How often a hidden `BROWSER_DRAWN` chart is sent its figure during a live run: its tab opens
on the run as it was at most this long before (the browser draws it once it shows), and is
drawn afresh once the kernel hears that it shows."""


@dataclass(frozen=True)
class Look:
    """How the dashboard wants its charts drawn now."""

    dark: bool = False
    highlight: int | None = None
    log_scale: frozenset[str] | None = None
    horizon: int | None = None
    """Where the running curves' forecasts end (see `nbtune.forecast.view_horizon`)."""
    infeasible: frozenset[int] = frozenset()
    """The trials that miss one of the run's constraints: marked in the charts."""


class TabPacer:
    """When the dashboard's live refresh draws the visible tab: at most every `CHART_EVERY_S`
    (or a longer `spacing_s`, for a browser slow to draw it), at once when the user asked for
    something or another tab shows, and at the run's end."""

    def __init__(self) -> None:
        self.asked = False
        self.drawn: tuple[str, float] = ("", -float("inf"))
        """The tab drawn last, and when (`time.monotonic`)."""
        self.behind = False
        """Whether the last refresh left the visible tab out."""
        self.spacing_s = CHART_EVERY_S

    def ask(self) -> None:
        """The user changed what the visible tab shows: draw it at the next refresh."""
        self.asked = True

    def due(self, tab: str, ending: bool, spacing_s: float = CHART_EVERY_S) -> bool:
        """Whether to draw `tab` at this refresh, `spacing_s` after its last drawing; noted as
        drawn if so."""
        now = time.monotonic()
        drawn, at = self.drawn
        self.spacing_s = spacing_s
        due = self.asked or ending or tab != drawn or now - at >= spacing_s
        if due:
            self.drawn, self.asked = (tab, now), False
        self.behind = not due
        return due

    def wait_s(self) -> float | None:
        """How long the refresh may sleep if nothing happens: until the tab it left out is due
        (None: until the next event)."""
        if not self.behind:
            return None
        return max(0.0, self.drawn[1] + self.spacing_s - time.monotonic())


class LiveFigures:
    """The dashboard's live charts: a plotly `FigureWidget` per chart tab, made when the tab is
    first drawn, and which of them shows.

    A chart's view is never moved or removed (plotly's browser side keeps listening for a
    removed view, and fails on it); each FigureWidget brings the browser its own copy of
    plotly.js (5 MB of code), which is why a tab's first drawing takes seconds.

    Args:
        tell: called with `by_tab()` whenever that changes, before the tab draws: the
            browser's table, told so, sizes the figure before the browser draws it.
    """

    def __init__(self, tell: Callable[[dict[str, str]], None] | None = None) -> None:
        self._tell = tell or (lambda charts: None)
        self.figures: dict[str, Any] = {}
        self.owner: ChartTab | None = None
        """The tab that drew last (the one shown)."""
        self.made_at: dict[str, float] = {}
        """When each tab's figure was made (`time.monotonic`)."""
        self.rendered: set[str] = set()
        """The tabs whose figure a browser has drawn (see `DRAWN_MESSAGES`)."""
        self.sent: dict[str, tuple[int, float]] = {}
        """Each tab's last change of its curves sent to the browser: its edit id, and when."""
        self.answer_s: dict[str, float] = {}
        """How long each tab's browser took to answer its last drawing that it answered."""

    def take(self, tab: ChartTab) -> Any:
        """`tab`'s figure, made on first use."""
        from nbtune.ui.live import LiveFigure
        from nbtune.ui.subshell import serve_on_subshell

        if tab.name not in self.figures:
            figure = self.figures[tab.name] = LiveFigure()
            figure.observe(partial(self._rendered, tab.name), names=DRAWN_MESSAGES)
            figure.observe(partial(self._sent, tab.name), names=SENT_MESSAGES)
            figure.observe(partial(self._answered, tab.name), names="_js2py_traceDeltas")
            # What the browser sends back is heard while a cell is busy (`tuner.wait()`),
            # as the buttons are: else the chart seems never drawn, and turns static.
            serve_on_subshell([figure])
            self.made_at[tab.name] = time.monotonic()
        if self.owner is not tab:
            self.owner = tab
            self._tell(self.by_tab())
        return self.figures[tab.name]

    def spacing_s(self, name: str) -> float:
        """How long the chart of tab `name` waits between two drawings: `CHART_EVERY_S`, longer
        for a browser slow to draw it (`BROWSER_SHARE`), and until the browser answers the last
        one (at most `UNANSWERED_S`): a busy page is sent no drawings it cannot keep up with,
        and a click on it is not queued behind them. Not before the browser has drawn the
        chart once: its model keeps the drawings, which cost the page nothing until a view
        draws them, and the run's first curves would wait for an answer that no view gives."""
        if name in self.sent and name in self.rendered:
            return UNANSWERED_S
        return max(CHART_EVERY_S, self.answer_s.get(name, 0.0) / BROWSER_SHARE)

    def _rendered(self, name: str, _: Mapping[str, Any]) -> None:
        self.rendered.add(name)
        DRAWN.chart = True

    def _sent(self, name: str, change: Mapping[str, Any]) -> None:
        if change["new"]:
            self.sent[name] = (change["new"]["trace_edit_id"], time.monotonic())

    def _answered(self, name: str, change: Mapping[str, Any]) -> None:
        edit, at = self.sent.get(name, (None, 0.0))
        if change["new"] and change["new"].get("trace_edit_id") == edit:
            self.answer_s[name] = time.monotonic() - at
            self.sent.pop(name, None)

    def drop(self) -> None:
        """No live chart shows any more (the charts turned static)."""
        self.owner = None
        self._tell({})

    def by_tab(self) -> dict[str, str]:
        """The widget model id of the chart shown, by its tab (none before the first chart):
        what the browser's table steers (see `nbtune.ui.table.TrialTableWidget`)."""
        if self.owner is None:
            return {}
        return {self.owner.name: self.figures[self.owner.name].model_id}


class ChartTab:
    """One chart of the dashboard, drawn in place on every redraw.

    With a front end that draws anywidgets, the chart is a plotly `FigureWidget` of the
    dashboard's `LiveFigures`, made when the tab is first drawn, or for the `BROWSER_DRAWN`
    charts a `BrowserChart`, there from the start; otherwise (`static=True`) a plain figure
    sent as plotly's own output about once a second, which every notebook front end renders
    without widgets.

    Args:
        name: the tab's name, which says what it draws.
        changed: called when the user changes one of the chart's own options.
        shared: the dashboard's live charts (by default, of this chart alone).
    """

    def __init__(
        self, name: str, changed: Callable[[], None], shared: LiveFigures | None = None
    ) -> None:
        self.name = name
        self.figure: Any = None
        self.shared = shared or LiveFigures()
        self.options: CurveOptions | ParameterOptions | None = None
        if name == "learning curves":
            self.options = CurveOptions(changed)
        elif name == "parameters":
            # the scatter and the contour differ in traces and axes: each starts on a clean figure
            self.options = ParameterOptions(changed, self.reset)
        self.browser = BrowserChart() if name in BROWSER_DRAWN else None
        # the browser's chart first: the note's removal leaves its view (and drawing) in place
        drawing = [self.browser] if self.browser else []
        self.holder = widgets.Box(
            [*drawing, widgets.HTML("<i>drawing…</i>")], layout=widgets.Layout(width="100%")
        )
        parts = [self.options.widget] if self.options else []
        self.widget = widgets.VBox([*parts, self.holder])
        self._drawn: dict = {}
        self._points: CurvePoints | None = None
        """The learning curves' points gathered so far."""
        self._static_at = -float("inf")
        self._sent_at = -float("inf")
        self._output: widgets.Output | None = None
        self._static_sent = ""

    def controls(self) -> list[widgets.Widget]:
        """The widgets whose messages the kernel must hear while a cell is busy."""
        return [*(self.options.controls if self.options else []), *filter(None, [self.browser])]

    def due_ahead(self, static: bool, ending: bool) -> bool:
        """Whether to draw this chart while its tab is hidden: a `BrowserChart` during a live
        run every `AHEAD_EVERY_S`, and at its end."""
        elapsed = time.monotonic() - self._sent_at
        return self.browser is not None and not static and (ending or elapsed >= AHEAD_EVERY_S)

    @property
    def made_at(self) -> float:
        return self.shared.made_at.get(self.name, -float("inf"))

    def reset(self) -> None:
        """Forget what was drawn: the next draw starts from an empty figure."""
        self._drawn.clear()
        self._static_sent = ""
        if self.browser is not None:
            self.browser.forget()
        if self.figure is None:
            return
        lock = getattr(self.figure, "drawing_lock", None) or contextlib.nullcontext()
        with lock:
            self.figure.data = ()
            self.figure.layout = {}

    def draw(
        self,
        trials: Sequence[Trial],
        rows: Sequence[Mapping[str, Any]],
        metric: Any,
        mode: Any,
        look: Look,
        static: bool,
    ) -> None:
        if static:
            self._draw_static(trials, rows, metric, mode, look)
            return
        if self.browser is not None:
            self._draw_in_browser(trials, rows, metric, mode, look)
            return
        figure = self.shared.take(self)
        if self.figure is not figure:
            self.figure = figure
            self._drawn.clear()
        self._plot(figure, trials, rows, metric, mode, look)
        with figure.drawing_lock:
            _remember_state(figure)
        if tuple(self.holder.children) != (figure,):
            self.holder.children = [figure]  # after its drawing: the browser draws it whole

    def _draw_in_browser(self, trials, rows, metric, mode, look: Look) -> None:
        import plotly.graph_objects as go

        if self.figure is None:
            self.figure = go.Figure()
        self._plot(self.figure, trials, rows, metric, mode, look)
        self.browser.show(self.figure)
        self._sent_at = time.monotonic()
        if tuple(self.holder.children) != (self.browser,):
            self.holder.children = [self.browser]

    def waits_to_render(self) -> bool:
        """Whether the chart is a FigureWidget the browser has not drawn yet."""
        return self.name in self.shared.figures and self.name not in self.shared.rendered

    def _draw_static(self, trials, rows, metric, mode, look: Look) -> None:
        import plotly.graph_objects as go
        import plotly.io

        now = time.monotonic()
        every = STATIC_WEBGL_EVERY_S if self.name == "parallel coordinates" else STATIC_EVERY_S
        if now - self._static_at < every:
            return
        self._static_at = now
        if self._output is None or isinstance(self.figure, go.FigureWidget):
            self.figure = go.Figure()
            self._drawn.clear()
            self._output = widgets.Output(layout=widgets.Layout(width="100%"))
            self._static_sent = ""
            self.holder.children = [self._output]
        self._plot(self.figure, trials, rows, metric, mode, look)
        text = plotly.io.to_json(self.figure, validate=False)
        if text == self._static_sent:
            return
        self._static_sent = text
        spec = json.loads(text)
        # Not plotly's "responsive" config: it ties each drawing to the window for good (a
        # resize listener that JupyterLab's renderer never removes), so every redraw would
        # leave its whole chart behind in the page; the renderer resizes the chart itself.
        bundle = {"application/vnd.plotly.v1+json": spec}
        bundle["text/plain"] = f"nbtune chart: {self.name}"
        self._output.outputs = ({"output_type": "display_data", "data": bundle, "metadata": {}},)

    def _plot(self, figure, trials, rows, metric, mode, look: Look) -> None:
        from nbtune.ui import data as charts
        from nbtune.ui import figures
        from nbtune.ui.pareto import pareto_data, pareto_figure

        if self.name == "pareto":
            data = pareto_data(trials, metric, mode, look.infeasible)
            pareto_figure(data, figure, dark=look.dark)
            return
        metric, mode = primary(metric, mode)
        if self.name == "learning curves":
            if self._points is None or (self._points.metric, self._points.mode) != (metric, mode):
                self._points = CurvePoints(metric, mode)
            data = charts.history_data(
                trials,
                rows,
                metric,
                mode,
                horizon=look.horizon,
                infeasible=look.infeasible,
                points=self._points,
            )
            figures.history_figure(
                data,
                figure,
                self._drawn,
                highlight=look.highlight,
                x=self.options.x.value,
                log_y=self.options.log_y.value,
                dark=look.dark,
            )
        elif self.name == "best so far":
            data = charts.best_so_far_data(rows, metric, mode)
            figures.best_so_far_figure(data, figure, dark=look.dark)
        elif self.name == "parallel coordinates":
            data = charts.parameter_data(trials, metric, look.log_scale, rows, mode)
            figures.parallel_coordinates_figure(data, figure, dark=look.dark)
        elif self.name == "parameters":
            data = charts.parameter_data(
                trials, metric, look.log_scale, rows, mode, infeasible=look.infeasible
            )
            self.options.draw(data, figure, look.dark)
        elif self.name == "importance":
            data = charts.importance_data(trials, metric, mode)
            figures.importance_figure(data, figure, dark=look.dark)


class CurveOptions:
    """The learning curves' own controls: x axis by iteration or time, log-scale y."""

    def __init__(self, changed: Callable[[], None]) -> None:
        self.x = widgets.ToggleButtons(
            options=["iteration", "time"],
            value="iteration",
            description="x axis",
            style={"button_width": "80px", "description_width": "initial"},
        )
        self.log_y = widgets.Checkbox(value=False, description="log y", indent=False)
        self.controls = [self.x, self.log_y]
        for control in self.controls:
            control.observe(lambda _: changed(), names="value")
        self.widget = widgets.HBox(self.controls)


class ParameterOptions:
    """The parameters tab's own controls: each parameter against the metric ("scatter"), or
    the metric's contour over two parameters picked from those that vary ("contour")."""

    def __init__(self, changed: Callable[[], None], restart: Callable[[], None]) -> None:
        self.view = widgets.ToggleButtons(
            options=["scatter", "contour"],
            value="scatter",
            description="view",
            style={"button_width": "80px", "description_width": "initial"},
            layout=widgets.Layout(flex="0 0 auto"),
        )
        self.x = widgets.Dropdown(description="x", layout=widgets.Layout(width="220px"))
        self.y = widgets.Dropdown(description="y", layout=widgets.Layout(width="220px"))
        self.controls = [self.view, self.x, self.y]
        self._offering = False
        self.view.observe(lambda _: self._switched(changed, restart), names="value")
        for picker in (self.x, self.y):
            picker.observe(lambda _: None if self._offering else changed(), names="value")
            picker.layout.display = "none"
        self.widget = widgets.HBox(self.controls)

    def _switched(self, changed: Callable[[], None], restart: Callable[[], None]) -> None:
        for picker in (self.x, self.y):
            picker.layout.display = "" if self.view.value == "contour" else "none"
        restart()
        changed()

    def draw(self, data: Any, figure: Any, dark: bool) -> None:
        """Draw the view picked of the parameters' `data` (`nbtune.ui.data.ParameterData`)."""
        from nbtune.ui import figures
        from nbtune.ui.contour import contour_data, contour_figure

        if self.view.value == "scatter":
            figures.parameter_scatter_figure(data, figure, dark=dark)
            return
        self.offer(tuple(axis.name for axis in data.axes))
        contour_figure(contour_data(data, self.x.value, self.y.value), figure, dark=dark)

    def offer(self, names: tuple[str, ...]) -> None:
        """Let the pickers offer the parameters that vary now (a define-by-run space may add
        some), keeping what was picked while it is still there; by default the first two."""
        if tuple(self.x.options) == names:
            return
        x, y = self.x.value, self.y.value
        self._offering = True  # drawing already: the pickers' changes here need no redraw
        try:
            self.x.options = self.y.options = names
            if len(names) >= 2:
                self.x.value = x if x in names else names[0]
                other = next(name for name in names if name != self.x.value)
                self.y.value = y if y in names and y != self.x.value else other
        finally:
            self._offering = False


def due_ahead(charts: Mapping[str, Any], shown: str, static: bool, ending: bool) -> list[str]:
    """The hidden tabs whose chart to draw now so that the browser has it ready when they
    open (see `ChartTab.due_ahead`)."""
    return [
        name for name, chart in charts.items() if name != shown and chart.due_ahead(static, ending)
    ]


def _remember_state(figure: Any) -> None:
    """Keep the widget's saved state equal to what it shows, without sending it.

    plotly's `FigureWidget` sends each change as a message and leaves its `_widget_data` and
    `_widget_layout` traits as they were when it was first displayed; a browser that reloads
    the page asks the kernel for every widget's state and would draw that stale, empty chart.
    Pointing the traits' values at the figure's own data (no notification, so no message) makes
    a reloaded page, or the dashboard displayed again, draw the chart as it is now.
    """
    values = getattr(figure, "_trait_values", None)
    if values is None or "_widget_data" not in values:
        return
    values["_widget_data"] = figure._data
    values["_widget_layout"] = figure._layout


def trial_html(
    source: DashboardSource,
    trials: Sequence[Trial],
    rows: Sequence[Mapping[str, Any]],
    trial: Trial | None,
) -> str:
    """The per-trial view: status, a small curve of each tuned metric, configuration, every
    metric of its last result (its time as a local date), its error and traceback, and the end
    of what it printed."""
    if trial is None:
        return "<i>no trials yet; click a trial in the table to see it here</i>"
    config = SearchSpace.flatten(trial.config)
    note = waiting_note(trial) if source.live else ""
    parts = [
        f"<b>trial {trial.trial_id}</b> {badge(trial.status.value)} · iteration {trial.iteration}"
        + (f" · {html.escape(note)}" if note else "")
        + (f" · stopped by {html.escape(trial.stopped_by)}" if trial.stopped_by else ""),
        "<i>click a trial in the table to see it here</i>",
        _curves_html(source, rows, trial),
        _pairs_table("configuration", config),
        _pairs_table("last result", _readable(trial.last_result)),
    ]
    if trial.error:
        errors = error_file(source.path, trial.trial_id)
        text = errors.read_text() if errors.exists() else ""
        parts.append(
            f"<details open><summary style='color:#d62728'>error: {html.escape(trial.error)}"
            f"</summary><pre>{html.escape(text)}</pre></details>"
        )
    output = _tail(output_file(source.path, trial.trial_id), OUTPUT_LINES)
    if output:
        parts.append(
            f"<details><summary>output</summary><pre>{html.escape(output)}</pre></details>"
        )
    return "<div class='nbtune-trial'>" + "".join(f"<div>{p}</div>" for p in parts if p) + "</div>"


def _readable(result: Mapping[str, Any]) -> dict[str, Any]:
    """A result as the trial tab lists it: its time (epoch seconds) as a local date and time."""
    shown = dict(result)
    stamp = finite(shown.get("timestamp"))
    if stamp is not None:
        shown["timestamp"] = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(stamp))
    return shown


def _curves_html(source: DashboardSource, rows: Sequence[Mapping[str, Any]], trial: Trial) -> str:
    """A small curve of each tuned metric of the trial, side by side."""
    metrics = names(source.metric)
    if not metrics:
        return ""
    series = _series_of(source).read(rows, trial.trial_id, metrics)
    color = trial_color(trial.trial_id)
    return "".join(trial_curve_svg(metric, *series[metric], color) for metric in metrics)


class TrialSeries:
    """One trial's values of some metrics by iteration, taken from the run's results as they
    come: each read goes through only the rows added since the last one (the results only
    grow), so the trial tab costs the same at every redraw however long the run.

    A trial that starts again from an earlier iteration (from a checkpoint, or from scratch
    after a failure) goes on from there: its later points are dropped.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._key: tuple = ()
        self._read = 0
        self._points: dict[str, tuple[list[int], list[float]]] = {}

    def read(
        self, rows: Sequence[Mapping[str, Any]], trial_id: int, metrics: Sequence[str]
    ) -> dict[str, tuple[list[int], list[float]]]:
        with self._lock:
            key = (trial_id, tuple(metrics))
            if key != self._key or len(rows) < self._read:
                self._key, self._read = key, 0
                self._points = {metric: ([], []) for metric in metrics}
            for index in range(self._read, len(rows)):
                row = rows[index]
                if row.get("trial_id") != trial_id:
                    continue
                iteration = row.get(ITERATION, 0)
                for metric, (xs, ys) in self._points.items():
                    while xs and xs[-1] >= iteration:
                        xs.pop()
                        ys.pop()
                    value = finite(row.get(metric))
                    if value is not None:
                        xs.append(iteration)
                        ys.append(value)
            self._read = len(rows)
            return {metric: (list(xs), list(ys)) for metric, (xs, ys) in self._points.items()}


_SERIES: weakref.WeakKeyDictionary[Any, TrialSeries] = weakref.WeakKeyDictionary()
_SERIES_LOCK = threading.Lock()


def _series_of(source: DashboardSource) -> TrialSeries:
    """The trial tab's `TrialSeries` of a run, kept as long as the run's object lives."""
    with _SERIES_LOCK:
        try:
            return _SERIES.setdefault(source, TrialSeries())
        except TypeError:  # a source that cannot be weakly referenced or hashed
            return TrialSeries()


def _pairs_table(title: str, values: Mapping[str, Any]) -> str:
    cells = "".join(
        f"<tr><td>{html.escape(str(key))}</td><td style='text-align:right'>"
        f"{html.escape(short(value, HOVER_CHARS))}</td></tr>"
        for key, value in values.items()
    )
    return f"<b>{html.escape(title)}</b><table>{cells}</table>"


def _tail(path: Path, lines: int) -> str:
    """The last `lines` lines of a file, read from its end: the view is redrawn ten times a
    second and a trial's output may be long."""
    try:
        with path.open("rb") as file:
            file.seek(max(0, file.seek(0, os.SEEK_END) - TAIL_BYTES))
            text = file.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])
