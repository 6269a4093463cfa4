"""Plotly figures of an experiment, drawn from `nbtune.ui.data`.

Each `*_figure(data, figure=None, ..., dark=False)` draws into `figure` when given (the
dashboard's `nbtune.ui.live.LiveFigure`, a `FigureWidget` safe to redraw from a thread of its
own, updated in place inside one batch, as often as it likes) or into a new `go.Figure`. A
figure remembers what it last drew (`_memo`), so that a redraw sends the browser only what
changed: the theme, the axes or the traces that differ. The `plot_*(source)` functions are the
after-the-run views: `source` is a `Tuner`, an `ExperimentAnalysis` or an experiment directory.

Every chart follows a light or a dark theme (`dark=`, changeable between redraws) on a
transparent background, so that the notebook's own shows through, and prints numbers with
four significant digits.
"""

from __future__ import annotations

import contextlib
import html
import math
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from typing import Any

import plotly.graph_objects as go

from nbtune.analysis import view_of
from nbtune.horizon import view_horizon
from nbtune.metrics import format_number
from nbtune.objectives import MODES, mode_of
from nbtune.optuna_study import param_importances
from nbtune.trial import Trial
from nbtune.ui.bundles import bundle_signature, bundle_trace, overlay_trace, split_curves
from nbtune.ui.data import (
    MIN_IMPORTANCE_TRIALS,
    Axis,
    BestSoFarData,
    Curve,
    ForecastLine,
    HistoryData,
    ImportanceData,
    ParameterData,
    best_so_far_data,
    history_data,
    importance_data,
    log_scale_names,
    numeric_keys,
    parameter_data,
    trial_color,
)
from nbtune.ui.ticks import NUMBER_FORMAT, integer_ticks, log_ticks, nice_ticks

FAINT_COLOR = "rgba(140, 140, 140, 0.35)"
"""The curves that are not among the best ten, when there are more than ten."""
FORECAST_OPACITY = 0.45
"""A forecast's dotted extension of a curve is drawn this faint."""
LINE_DASH = {"paused": "dash", "stopped": "dot"}
"""A curve's line style by its state (`nbtune.ui.data.state_of`); solid otherwise."""
X_AXES = {"iteration": "iteration", "time": "seconds since the start"}
"""What a learning curve can be drawn against, and the title of that axis."""
PANELS_PER_ROW = 4
"""The parameter panels wrap onto a new row past this many."""
_HEIGHT = 320
_MARGIN = {"l": 60, "r": 20, "t": 40, "b": 40}


# ----- the live figures -----------------------------------------------------------------------


@contextlib.contextmanager
def drawing(figure: go.Figure) -> Iterator[None]:
    """One batch of changes to `figure`, sent to its browser views as one message at the end;
    holding the figure's `drawing_lock` if it has one (`nbtune.ui.live.LiveFigure`)."""
    with getattr(figure, "drawing_lock", contextlib.nullcontext()), figure.batch_update():
        yield


def history_figure(
    data: HistoryData,
    figure: go.Figure | None = None,
    drawn: dict | None = None,
    *,
    highlight: int | None = None,
    x: str = "iteration",
    log_y: bool = False,
    dark: bool = False,
) -> go.Figure:
    """The metric against iteration (or time), one line per trial in the trial's own colour.

    The line style tells the trial's state (dashed: paused, dotted: stopped before its end;
    an "x" ends an errored one); a trial that misses a constraint is faded (and never among
    the best); the best three are thicker; past ten curves only the best
    ten are in colour and the rest faint. Hovering any point names the trial, its state and
    its configuration. Past fifty curves, the faint ones of the trials no longer live share a
    trace per 25 trial ids (their hover names the trial only; `nbtune.ui.bundles`), and an
    empty last trace is kept for the browser to draw one of them into, highlighted. Each
    unfinished curve's forecast (`data.forecasts`) extends it as a thin, faint dotted line to
    the horizon, by iteration (not drawn against time); hovering its end gives the forecast
    and its 80 % interval.

    Args:
        drawn: what each trace shows, kept by the caller between calls (by default the figure
            keeps it), so that a redraw touches only the curves that changed: a thousand
            finished trials cost nothing. Drawing another metric redraws every curve.
        highlight: a trial id whose curve is drawn bold, and every other one faint.
        x: "iteration" or "time" (seconds since the run's first result).
        log_y: the metric on a log scale (values <= 0 are then not shown).
        dark: the dark theme.

    Raises:
        ValueError: `x` is neither "iteration" nor "time".
    """
    if x not in X_AXES:
        raise ValueError(f"x={x!r}: draw the learning curves against 'iteration' or 'time'")
    figure = figure if figure is not None else go.Figure()
    drawn = _memo(figure).setdefault("curves", {}) if drawn is None else drawn
    split = split_curves(data.curves, highlight)
    count = len(split.bundles) + len(split.own)
    traces = count + len(data.forecasts) + (1 if split.bundles else 0)
    if drawn.get("figure") != (id(figure), data.metric) or len(figure.data) > traces:
        drawn.clear()
        drawn["figure"] = (id(figure), data.metric)
    with drawing(figure):
        apply_theme(figure, dark)
        _keep_traces(figure, traces, lambda _: go.Scatter(mode="lines"))
        for index, bundle in enumerate(split.bundles):
            _draw_bundle(figure.data[index], bundle, drawn, index, highlight is not None, x)
        for index, curve in enumerate(split.own, start=len(split.bundles)):
            _draw_curve(figure.data[index], curve, drawn, index, data.best, highlight, x)
        for index, line in enumerate(data.forecasts, start=count):
            _draw_forecast(figure.data[index], line, drawn, index, highlight, x)
        if split.bundles and _claim(drawn, traces - 1, "overlay"):
            figure.data[-1].update(overlay_trace())
        _layout(
            figure,
            title=f"{data.metric} by {x}",
            xaxis={"title": X_AXES[x], "hoverformat": NUMBER_FORMAT},
            yaxis={"title": plain_text(data.metric), **_axis_scale(log_y)},
            showlegend=any(curve.featured for curve in data.curves),
            annotations=_notes(not data.curves, f"waiting for a first value of {data.metric}"),
        )
    return figure


def _draw_curve(
    trace: Any,
    curve: Curve,
    drawn: dict,
    index: int,
    best: Sequence[int],
    highlight: int | None,
    x: str,
) -> None:
    """Update one curve's trace: its points if they changed, its style if that changed."""
    points = (curve.trial_id, x, len(curve.x), curve.x[-1:], curve.y[-1:])
    _claim(drawn, index, "curve")
    if drawn.get(index) != points:
        drawn[index] = points
        trace.update(x=curve.seconds if x == "time" else curve.x, y=curve.y)
    shown = curve.featured or curve.trial_id == highlight
    faint = highlight is not None and curve.trial_id != highlight
    width = 3.5 if curve.trial_id == highlight else 2.4 if curve.trial_id in best else 1.4
    ends = len(curve.x) if curve.state == "error" else 0
    style = (curve.label, curve.state, shown, faint, width, x, ends, curve.feasible)
    if drawn.get(("style", index)) == style:
        return
    drawn[("style", index)] = style
    where = f"%{{x:{NUMBER_FORMAT}}} s" if x == "time" else "iteration %{x}"
    trace.update(
        name=f"trial {curve.trial_id}",
        legendgroup=str(curve.trial_id),
        showlegend=shown,
        line={
            "color": curve.color if shown else FAINT_COLOR,
            "width": width,
            "dash": LINE_DASH.get(curve.state, "solid"),
        },
        opacity=0.3 if faint or not curve.feasible else 1.0,
        mode="lines+markers" if curve.state == "error" else "lines",
        marker=_error_marker(curve),
        hovertemplate=(
            f"{_no_variables(curve.label)}{'' if curve.feasible else ' · infeasible'}<br>"
            f"{where}: %{{y:{NUMBER_FORMAT}}}<extra></extra>"
        ),
    )


def _draw_forecast(
    trace: Any, line: ForecastLine, drawn: dict, index: int, highlight: int | None, x: str
) -> None:
    """Draw one forecast line into a trace (which may have drawn a curve or another forecast
    before), if it differs from what the trace shows."""
    faint = highlight is not None and line.trial_id != highlight
    shown = (line, faint, x)
    _claim(drawn, index, "forecast")
    if drawn.get(index) == shown:
        return
    drawn[index] = shown
    interval = f"{format_number(line.low)} to {format_number(line.high)}"
    trace.update(
        x=line.x if x == "iteration" else (),
        y=line.y if x == "iteration" else (),
        name=f"trial {line.trial_id} forecast",
        legendgroup=str(line.trial_id),
        showlegend=False,
        line={"color": line.color, "width": 1.2, "dash": "dot"},
        opacity=0.15 if faint else FORECAST_OPACITY,
        mode="lines",
        marker={"size": 0},
        hovertemplate=(
            f"trial {line.trial_id} forecast<br>iteration %{{x:.0f}}: %{{y:{NUMBER_FORMAT}}}"
            f"<br>80 % interval at {line.horizon:.0f}: {interval}<extra></extra>"
        ),
    )


def _draw_bundle(
    trace: Any, bundle: Sequence[Curve], drawn: dict, index: int, faint: bool, x: str
) -> None:
    """Draw a bundle of faint curves (`nbtune.ui.bundles`) into a trace, if it changed."""
    shown = bundle_signature(bundle, x, faint)
    _claim(drawn, index, "bundle")
    if drawn.get(index) != shown:
        drawn[index] = shown
        trace.update(bundle_trace(bundle, x, faint, FAINT_COLOR))


def _claim(drawn: dict, index: int, kind: str) -> bool:
    """Note that trace `index` draws a `kind` of line ("curve", "forecast", "bundle",
    "overlay"); if it drew another kind before, forget what it showed. True if it did."""
    if drawn.get(("kind", index)) == kind:
        return False
    drawn[("kind", index)] = kind
    drawn.pop(index, None)
    drawn.pop(("style", index), None)
    return True


def _error_marker(curve: Curve) -> dict:
    """An "x" at the last point of an errored curve, nothing elsewhere."""
    if curve.state != "error":
        return {"size": 0}
    sizes = [0] * (len(curve.x) - 1) + [11]
    return {"size": sizes, "symbol": "x", "color": curve.color, "line": {"width": 0}}


def best_so_far_figure(
    data: BestSoFarData, figure: go.Figure | None = None, *, dark: bool = False
) -> go.Figure:
    """The best value of the metric so far against time."""
    figure = figure if figure is not None else go.Figure()
    with drawing(figure):
        apply_theme(figure, dark)
        _keep_traces(figure, 1, lambda index: go.Scatter(mode="lines+markers", line_shape="hv"))
        figure.data[0].update(
            x=data.seconds,
            y=data.values,
            hovertext=[f"trial {i}" for i in data.trial_ids],
            hovertemplate=(
                f"%{{hovertext}}<br>%{{x:{NUMBER_FORMAT}}} s: %{{y:{NUMBER_FORMAT}}}<extra></extra>"
            ),
            name=plain_text(f"best {data.metric}"),
        )
        _layout(
            figure,
            title=f"best {data.metric} so far",
            xaxis={"title": X_AXES["time"]},
            yaxis={"title": plain_text(data.metric)},
            annotations=_notes(not data.values, f"waiting for a first value of {data.metric}"),
        )
    return figure


def parallel_coordinates_figure(
    data: ParameterData, figure: go.Figure | None = None, *, dark: bool = False
) -> go.Figure:
    """Every trial as a line through its parameters and its best metric value.

    A log-scale parameter is drawn as its log10 with ticks labelled with its real values; an
    integer or categorical one gets whole-number ticks only. The title sits above the axis
    labels and the colour bar clear of the metric's ticks. Where trials miss the run's
    constraints, a "feasible" axis before the metric's tells them apart (and can be brushed).
    """
    figure = figure if figure is not None else go.Figure()
    metric = Axis(data.value_name, data.metric_values)
    dimensions = [_dimension(axis) for axis in data.axes]
    if data.infeasible:
        feasible = [int(trial_id not in data.infeasible) for trial_id in data.trial_ids]
        dimensions.append(
            {"label": "feasible", "values": feasible, "tickvals": [0, 1], "ticktext": ["no", "yes"]}
        )
    dimensions.append(_dimension(metric))
    with drawing(figure):
        apply_theme(figure, dark)
        _keep_traces(figure, 1, lambda index: go.Parcoords())
        figure.data[0].update(
            dimensions=dimensions,
            domain={"x": [0.0, 0.86], "y": [0.0, 1.0]},
            labelangle=0,
            labelside="top",
            line={
                "color": data.metric_values,
                "colorscale": "Viridis",
                "showscale": bool(data.metric_values),
                "colorbar": {
                    "x": 0.95,
                    "thickness": 12,
                    "tickformat": NUMBER_FORMAT,
                },
            },
        )
        _layout(
            figure,
            title=f"parameters and {data.value_name}",
            height=_HEIGHT + 60,
            margin={"l": 60, "r": 30, "t": 110, "b": 30},
            annotations=_notes(
                not data.metric_values, f"waiting for a first trial with a value of {metric.name}"
            ),
        )
    return figure


def _dimension(axis: Axis) -> dict:
    """A parallel-coordinates axis, ticks set here at four significant digits: log10 values
    with ticks of the real values for a log parameter, whole-number ticks for an integer or
    categorical one; trials without the parameter on a "none" tick below the others."""
    label = plain_text(axis.name)
    if axis.labels is not None:
        return {
            "label": label,
            "values": axis.values,
            "tickvals": list(range(len(axis.labels))),
            "ticktext": [plain_text(category) for category in axis.labels],
        }
    if not axis.present:
        return {"label": label, "values": axis.values}
    scale = math.log10 if axis.log else float
    low, high = min(axis.present), max(axis.present)
    ticks = (log_ticks if axis.log else integer_ticks if axis.integer else nice_ticks)(low, high)
    tickvals = [scale(tick) for tick in ticks]
    ticktext = [format_number(tick) for tick in ticks]
    bottom, top = scale(low), scale(high)
    if None in axis.values:
        bottom -= 0.15 * (top - bottom) or 1.0
        tickvals.append(bottom)
        ticktext.append("none")
    return {
        "label": f"{label} (log)" if axis.log else label,
        "values": [bottom if value is None else scale(value) for value in axis.values],
        "range": [bottom, top],
        "tickvals": tickvals,
        "ticktext": ticktext,
    }


def parameter_scatter_figure(
    data: ParameterData, figure: go.Figure | None = None, *, dark: bool = False
) -> go.Figure:
    """Each parameter against the best metric value: one panel per parameter, each on its own
    x axis (logarithmic for a log-scale parameter, labelled categories for a categorical one,
    whole numbers for an integer one), `PANELS_PER_ROW` to a row, all sharing the metric's
    scale.

    The panels are laid out in the layout itself, so a live `FigureWidget` made without
    subplots gets them too; when the parameters change between redraws (a define-by-run space
    adds some mid-run) the panels are laid out anew, and axes no longer used are hidden rather
    than removed, so that nothing refers to a missing axis.
    """
    figure = figure if figure is not None else go.Figure()
    count = len(data.axes)
    rows = max(1, math.ceil(count / PANELS_PER_ROW))
    with drawing(figure):
        apply_theme(figure, dark)
        _keep_traces(figure, count, lambda index: go.Scatter(mode="markers"))
        _panels(figure, data)
        for trace, axis in zip(figure.data, data.axes, strict=True):
            trace.update(
                x=axis.values,
                y=data.metric_values,
                hovertext=data.labels,
                hovertemplate=(
                    f"%{{hovertext}}<br>{plain_text(data.value_name)}: %{{y:{NUMBER_FORMAT}}}"
                    "<extra></extra>"
                ),
                name=plain_text(axis.name),
                marker=_points_marker(data),
            )
        _layout(
            figure,
            title=f"{data.value_name} by parameter",
            height=_HEIGHT + 220 * (rows - 1),
            showlegend=False,
            annotations=_notes(
                not count,
                f"waiting for trials with a value of {data.metric} and parameters that vary",
            ),
        )
    return figure


INFEASIBLE_COLOR = "#9e9e9e"
"""The colour of the trials that miss a constraint, in every chart that marks them."""


def _points_marker(data: ParameterData) -> dict:
    """Each trial's point in its own colour; a grey cross for one that misses a constraint."""
    marks = [trial_id in data.infeasible for trial_id in data.trial_ids]
    return {
        "size": 7,
        "opacity": 0.7,
        "color": [
            INFEASIBLE_COLOR if mark else trial_color(trial_id)
            for trial_id, mark in zip(data.trial_ids, marks, strict=True)
        ],
        "symbol": ["x" if mark else "circle" for mark in marks],
    }


def _panels(figure: go.Figure, data: ParameterData) -> None:
    """Lay out one x axis per parameter (and one y axis per row), when the parameters differ
    from those last laid out; hide the axes of panels no longer shown, and the default axes
    while there is no panel."""
    scales = [_x_axis(axis) for axis in data.axes]
    metric = data.value_name
    shape = (repr(scales), metric)
    memo = _memo(figure)
    if memo.get("panels") == shape:
        return
    count = len(data.axes)
    rows = math.ceil(count / PANELS_PER_ROW)
    columns = min(count, PANELS_PER_ROW)
    x_axes = max(count, memo.get("panel_x_axes", 1))
    y_axes = max(rows, memo.get("panel_y_axes", 1))
    hidden = {"visible": False}
    # Each axis is set whole: set by parts, a new axis would go to the browser in the same
    # message as its parts ("xaxis2" and "xaxis2.visible"), which plotly.js refuses.
    layout = {
        f"xaxis{_suffix(index)}": _panel_x_axis(scales[index], index, columns)
        if index < count
        else hidden
        for index in range(x_axes)
    } | {
        f"yaxis{_suffix(row)}": _panel_y_axis(metric, row, rows) if row < rows else hidden
        for row in range(y_axes)
    }
    for name, axis in layout.items():
        figure.layout[name] = axis
    for index, trace in enumerate(figure.data):
        trace.update(xaxis=f"x{_suffix(index)}", yaxis=f"y{_suffix(index // PANELS_PER_ROW)}")
    memo.update(panels=shape, panel_x_axes=x_axes, panel_y_axes=y_axes)


def _panel_x_axis(scale: dict, index: int, columns: int) -> dict:
    """The `index`th panel's x axis, of `scale` (`_x_axis`), placed in its row and column."""
    row, column = divmod(index, PANELS_PER_ROW)
    return {
        "visible": True,
        "domain": _span(column, columns, gap=0.05),
        "anchor": f"y{_suffix(row)}",
        **scale,
    }


def _panel_y_axis(metric: str, row: int, rows: int) -> dict:
    """The metric's axis of a row of panels; every row's matches the first's."""
    return {
        "visible": True,
        "domain": _span(rows - 1 - row, rows, gap=0.3 / rows),
        "anchor": f"x{_suffix(row * PANELS_PER_ROW)}",
        "title": {"text": plain_text(metric)},
        "matches": None if row == 0 else "y",
        "hoverformat": NUMBER_FORMAT,
    }


def _axis_scale(log: bool) -> dict:
    """An axis' scale, logarithmic or linear. On a log scale every tick says its whole number:
    by default plotly writes the ticks between two powers of ten as single digits ("0.1 2 3
    ... 9 1"), which read as other values."""
    if log:
        return {"type": "log", "tickformat": NUMBER_FORMAT}
    return {"type": "linear", "tickformat": None}


def _x_axis(axis: Axis) -> dict:
    """A panel's x axis: its title and its scale."""
    scale: dict[str, Any] = _axis_scale(False) | {"tickvals": None, "ticktext": None}
    if axis.labels is not None:
        scale["tickvals"] = list(range(len(axis.labels)))
        scale["ticktext"] = [plain_text(category) for category in axis.labels]
    elif axis.log and axis.present:
        ticks = log_ticks(min(axis.present), max(axis.present), count=4)
        scale |= _axis_scale(True) | {
            "tickvals": ticks,
            "ticktext": list(map(format_number, ticks)),
        }
    elif axis.integer:
        scale["tickvals"] = integer_ticks(min(axis.present), max(axis.present), 5)
    return {"title": {"text": plain_text(axis.name)}, "hoverformat": NUMBER_FORMAT, **scale}


def _span(position: int, count: int, gap: float) -> list[float]:
    """The [start, end] of the `position`th of `count` equal spans of [0, 1], `gap` apart."""
    width = (1 - gap * (count - 1)) / count
    start = position * (width + gap)
    return [round(start, 6), round(min(1.0, start + width), 6)]


def _suffix(index: int) -> str:
    """Plotly's name of the `index`th axis: "", "2", "3", ..."""
    return str(index + 1) if index else ""


def importance_figure(
    data: ImportanceData,
    figure: go.Figure | None = None,
    *,
    dark: bool = False,
    method: str | None = None,
) -> go.Figure:
    """One bar per parameter: how much of the spread of the metric it explains on its own
    (or, with `method`, its share of the importance by that method, named in the title).

    With too few trials (fewer than `MIN_IMPORTANCE_TRIALS` with a value of the metric) or no
    parameter that varies, the bars are empty and the chart says what it waits for.
    """
    figure = figure if figure is not None else go.Figure()
    shown = data.enough
    with drawing(figure):
        apply_theme(figure, dark)
        _keep_traces(figure, 1, lambda index: go.Bar(orientation="h"))
        figure.data[0].update(
            x=data.importances[::-1] if shown else (),
            y=[plain_text(name) for name in data.names[::-1]] if shown else (),
            hovertemplate="%{y}: %{x:.2f}<extra></extra>",
        )
        by = "" if method is None else f"{IMPORTANCE_NAMES[method]}, "
        _layout(
            figure,
            title=f"what {data.metric} depends on ({by}{data.trials} trials)",
            xaxis={
                "title": "share of the spread explained" if method is None else "importance",
                "range": [0, 1],
            },
            annotations=_notes(not shown, _importance_wait(data)),
        )
    return figure


def _importance_wait(data: ImportanceData) -> str:
    if data.trials < MIN_IMPORTANCE_TRIALS:
        return (
            f"needs more trials: at least {MIN_IMPORTANCE_TRIALS} with a value of "
            f"{data.metric} ({data.trials} so far)"
        )
    return "needs parameters that vary between trials"


# ----- what every figure shares ---------------------------------------------------------------


def _memo(figure: go.Figure) -> dict:
    """What was last drawn into `figure`, kept on the figure itself."""
    memo = getattr(figure, "_nbtune_drawn", None)
    if memo is None:
        memo = figure._nbtune_drawn = {}
    return memo


def _once(figure: go.Figure, key: str, signature: Hashable, draw: Callable[[], None]) -> None:
    """Call `draw()` unless it was last called with the same `signature` for `key`."""
    memo = _memo(figure)
    if memo.get(key) != signature:
        draw()
        memo[key] = signature


def apply_theme(figure: go.Figure, dark: bool) -> None:
    """Give `figure` the light or dark template on a transparent background, so that the
    notebook's own background shows; sent to a live figure only when it changes."""
    _once(
        figure,
        "theme",
        dark,
        lambda: figure.update_layout(
            template="plotly_dark" if dark else "plotly_white",
            paper_bgcolor="rgba(0,0,0,0)",
            plot_bgcolor="rgba(0,0,0,0)",
        ),
    )


def _layout(figure: go.Figure, **layout: Any) -> None:
    """Set titles, size and notes (sent only when they change)."""
    layout = {"height": _HEIGHT, "margin": _MARGIN, **layout}
    layout["title"] = {"text": plain_text(layout["title"]), "x": 0.01, "xanchor": "left"}
    _once(figure, "layout", repr(layout), lambda: figure.update_layout(layout))


def _notes(waiting: bool, text: str) -> list[dict]:
    """A note in the middle of an empty chart that says what it waits for, hidden otherwise
    (an update can change an annotation in place, not remove it)."""
    return [
        {
            "visible": waiting,
            "text": plain_text(text),
            "xref": "paper",
            "yref": "paper",
            "x": 0.5,
            "y": 0.5,
            "showarrow": False,
            "font": {"size": 14},
        }
    ]


def plain_text(text: str) -> str:
    """`text` (a metric's name in a title, say) shown as it is: HTML-escaped, no variables."""
    return _no_variables(html.escape(text, quote=False))


def _no_variables(text: str) -> str:
    """`text` safe inside a plotly hover template: no `%{` taken for a variable."""
    return text.replace("%{", "%\u200b{")


def _keep_traces(figure: go.Figure, count: int, make: Callable[[int], Any]) -> None:
    """Give `figure` exactly `count` traces, keeping the existing ones (and their state);
    new ones are added in one message."""
    have = len(figure.data)
    if have < count:
        figure.add_traces([make(index) for index in range(have, count)])
    elif have > count:
        figure.data = figure.data[:count]
        _memo(figure).pop("panels", None)


# ----- after the run --------------------------------------------------------------------------


def plot_history(
    source: Any,
    *,
    metric: str | None = None,
    mode: str | None = None,
    highlight: int | None = None,
    x: str = "iteration",
    log_y: bool = False,
    dark: bool = False,
) -> go.Figure:
    """A metric against iteration (or time) for every trial of a Tuner, analysis or
    directory, each unfinished one's forecast dotted to its horizon (see `Tuner.forecast`);
    see `history_figure` for the other arguments.

    Args:
        metric: any numeric key the trials reported (default: the tuned metric).
        mode: "min" or "max", to mark the best trials by `metric`; a tuned metric's own by
            default. Without one, no curve is marked best.

    Raises:
        ValueError: no trial reported `metric` as a number, or `mode` is neither "min" nor
            "max"; the message lists the numeric keys reported.
    """
    trials, rows, metric, mode = _read_metric(source, metric, mode)
    horizon = view_horizon(view_of(source), trials)
    data = history_data(trials, rows, metric, mode, horizon=horizon)
    return history_figure(data, highlight=highlight, x=x, log_y=log_y, dark=dark)


def plot_best_so_far(
    source: Any, *, metric: str | None = None, mode: str | None = None, dark: bool = False
) -> go.Figure:
    """The best value of a metric so far against time.

    Args:
        metric: any numeric key the trials reported (default: the tuned metric).
        mode: "min" or "max"; needed for a key the run does not tune.

    Raises:
        ValueError: no trial reported `metric` as a number, or no `mode` for a key the run
            does not tune; the message lists the numeric keys reported.
    """
    _, rows, metric, mode = _read_metric(source, metric, mode, mode_needed=True)
    return best_so_far_figure(best_so_far_data(rows, metric, mode), dark=dark)


def plot_parallel_coordinates(
    source: Any, *, metric: str | None = None, mode: str | None = None, dark: bool = False
) -> go.Figure:
    """Parallel coordinates of every trial's parameters and its value of a metric: its best
    (the tuned metric's by default, or any numeric key's under `mode`), or for a key the run
    does not tune given without a mode, its last. Raises ValueError as `plot_history`."""
    data = _parameters(source, metric, mode)
    return parallel_coordinates_figure(data, dark=dark)


def plot_param_scatter(
    source: Any, *, metric: str | None = None, mode: str | None = None, dark: bool = False
) -> go.Figure:
    """Each parameter against each trial's value of a metric, one panel per parameter: its
    best (the tuned metric's by default, or any numeric key's under `mode`), or for a key the
    run does not tune given without a mode, its last. Raises ValueError as `plot_history`."""
    return parameter_scatter_figure(_parameters(source, metric, mode), dark=dark)


def _parameters(source: Any, metric: str | None, mode: str | None) -> ParameterData:
    """The data of the parameter charts: from each trial's `best_value` for the run's one
    tuned metric in its own mode (as ever), from the result rows for any other choice."""
    view = view_of(source)
    trials, rows, metric, mode = _read_metric(view, metric, mode)
    log_scale = _log_scale(view)
    if metric == view.metric and mode == view.mode:
        return parameter_data(trials, metric, log_scale)
    return parameter_data(trials, metric, log_scale, rows, mode)


IMPORTANCE_NAMES = {"rank": "rank", "ped-anova": "PED-ANOVA", "fanova": "fANOVA"}
"""The methods `plot_param_importance` knows, and how its title names them."""


def plot_param_importance(
    source: Any, *, method: str = "rank", seed: int | None = 0, dark: bool = False
) -> go.Figure:
    """How much the metric depends on each parameter.

    Args:
        method: "rank" (nbtune's own, from every trial's best value: see
            `nbtune.ui.data.importance_data`), or one of Optuna's evaluators run on the run's
            study (`to_optuna_study()`, so from the complete trials' last values): "ped-anova"
            (`PedAnovaImportanceEvaluator`, Optuna 5's default) or "fanova"
            (`FanovaImportanceEvaluator`, a random forest seeded with `seed`), each parameter's
            share of the importance (see `nbtune.optuna_study.param_importances`).
        seed: fANOVA's seed (None: a different forest each time).
        dark: the dark theme.

    Raises:
        ValueError: an unknown `method`, or a run without one metric.
        ImportError: an Optuna method without Optuna installed.
    """
    if method not in IMPORTANCE_NAMES:
        names = ", ".join(map(repr, IMPORTANCE_NAMES))
        raise ValueError(f"method={method!r}: use one of {names} ('rank' is the default)")
    view = view_of(source)
    trials, _, metric, mode = _read(view)
    if method == "rank":
        return importance_figure(importance_data(trials, metric, mode), dark=dark)
    found, complete = param_importances(view.to_optuna_study(), method, seed)
    data = ImportanceData(metric, tuple(found), tuple(found.values()), complete)
    return importance_figure(data, dark=dark, method=method)


def _read(source: Any) -> tuple[Sequence[Trial], Sequence[Mapping[str, Any]], str, str]:
    source = view_of(source)
    trials, rows = source._snapshot()
    return trials, rows, source._require_metric(), source.mode


def _read_metric(
    source: Any, metric: str | None, mode: str | None, mode_needed: bool = False
) -> tuple[Sequence[Trial], Sequence[Mapping[str, Any]], str, str | None]:
    """The trials, the rows, and the metric and mode to plot: the tuned metric and its mode by
    default; any numeric key reported, with the mode given, or the run's own for a tuned one
    (None for another key, unless `mode_needed`).

    Raises:
        ValueError: the run has no (single) metric and none is given, `metric` is neither
            tuned nor reported as a number, `mode` is neither "min" nor "max", or a
            `mode_needed` is missing; one line, with the numeric keys reported.
    """
    view = view_of(source)
    trials, rows = view._snapshot()
    if metric is None:
        metric = view._require_metric()
    keys = numeric_keys(rows, view.metric)
    if metric not in keys:
        raise ValueError(
            f"metric={metric!r}: no trial reported it as a number; the numeric keys reported "
            f"are {list(keys)}"
        )
    if mode is None:
        mode = mode_of(view.metric, view.mode, metric)
    if mode is None and mode_needed:
        raise ValueError(
            f"metric={metric!r} is not tuned by this run: pass mode='min' or mode='max' (the "
            f"numeric keys reported are {list(keys)})"
        )
    if mode not in (None, *MODES):
        raise ValueError(f"mode={mode!r}: use 'min' or 'max'")
    return trials, rows, metric, mode


def _log_scale(source: Any) -> frozenset[str] | None:
    """The log-scale parameters of a Tuner's space; None (inferred) for a run read from disk."""
    return log_scale_names(getattr(source, "space", None))
