"""Plotly figures of an experiment, drawn from `nbtune.ui.data`.

Each `*_figure(data, figure=None)` draws into `figure` when given (the dashboard's
`FigureWidget`, updated in place inside one batch) or into a new `go.Figure`. The
`plot_*(source)` functions are the after-the-run views: `source` is a `Tuner`, an
`ExperimentAnalysis` or an experiment directory.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go

from nbtune.analysis import view_of
from nbtune.trial import Trial
from nbtune.ui.data import (
    BestSoFarData,
    HistoryData,
    ImportanceData,
    ParameterData,
    best_so_far_data,
    history_data,
    importance_data,
    parameter_data,
)

STATUS_COLORS = {
    "PENDING": "#9e9e9e",
    "RUNNING": "#1f77b4",
    "PAUSED": "#ff9f1c",
    "TERMINATED": "#2ca02c",
    "ERROR": "#d62728",
}
WEBGL_AFTER = 50
"""Curves past this many are drawn with WebGL, which stays fast with hundreds of lines."""
_LAYOUT = {
    "template": "plotly_white",
    "height": 320,
    "margin": {"l": 50, "r": 20, "t": 40, "b": 40},
}


def history_figure(
    data: HistoryData, figure: go.Figure | None = None, drawn: dict | None = None
) -> go.Figure:
    """The metric against iteration, one line per trial, coloured by status, best ones bold.

    `drawn` (kept by the caller between calls) remembers what each trace shows, so that a
    redraw touches only the curves that changed: a thousand finished trials cost nothing.
    """
    figure = figure if figure is not None else go.Figure()
    drawn = {} if drawn is None else drawn
    with figure.batch_update():
        _keep_traces(figure, len(data.curves), _curve_trace)
        for index, (trace, curve) in enumerate(zip(figure.data, data.curves, strict=True)):
            best = curve.trial_id in data.best
            signature = (
                curve.trial_id,
                curve.status,
                best,
                len(curve.x),
                curve.x[-1:],
                curve.y[-1:],
            )
            if drawn.get(index) == signature:
                continue
            drawn[index] = signature
            trace.update(
                x=curve.x,
                y=curve.y,
                name=f"trial {curve.trial_id}",
                hovertext=curve.label,
                line={"color": STATUS_COLORS[curve.status], "width": 3 if best else 1.2},
                opacity=1.0 if best or curve.status == "RUNNING" else 0.55,
            )
        if not drawn.get("layout"):
            drawn["layout"] = True
            figure.update_layout(
                title=f"{data.metric} by iteration",
                xaxis_title="iteration",
                yaxis_title=data.metric,
                **_LAYOUT,
            )
        figure.layout.showlegend = len(data.curves) <= 20
    return figure


def best_so_far_figure(data: BestSoFarData, figure: go.Figure | None = None) -> go.Figure:
    """The best value of the metric so far against time."""
    figure = figure if figure is not None else go.Figure()
    with figure.batch_update():
        _keep_traces(figure, 1, lambda index: go.Scatter(mode="lines+markers", line_shape="hv"))
        figure.data[0].update(
            x=data.seconds,
            y=data.values,
            hovertext=[f"trial {i}" for i in data.trial_ids],
            name=f"best {data.metric}",
        )
        figure.update_layout(
            title=f"best {data.metric} so far",
            xaxis_title="seconds",
            yaxis_title=data.metric,
            **_LAYOUT,
        )
    return figure


def parallel_coordinates_figure(data: ParameterData, figure: go.Figure | None = None) -> go.Figure:
    """Every trial as a line through its parameters and its best metric value."""
    figure = figure if figure is not None else go.Figure()
    dimensions = [
        {"label": axis.name, "values": axis.values}
        | (
            {}
            if axis.labels is None
            else {"tickvals": list(range(len(axis.labels))), "ticktext": list(axis.labels)}
        )
        for axis in data.axes
    ]
    dimensions.append({"label": data.metric, "values": data.metric_values})
    with figure.batch_update():
        _keep_traces(figure, 1, lambda index: go.Parcoords())
        figure.data[0].update(
            dimensions=dimensions,
            line={"color": data.metric_values, "colorscale": "Viridis", "showscale": True},
        )
        figure.update_layout(title=f"parameters and {data.metric}", **_LAYOUT)
    return figure


def parameter_scatter_figure(data: ParameterData, figure: go.Figure | None = None) -> go.Figure:
    """Each parameter against the best metric value, one panel per parameter."""
    figure = figure if figure is not None else go.Figure()
    with figure.batch_update():
        _side_by_side(figure, len(data.axes))
        _keep_traces(figure, len(data.axes), lambda index: go.Scatter(mode="markers"))
        for index, (trace, axis) in enumerate(zip(figure.data, data.axes, strict=True)):
            trace.update(
                x=axis.values,
                y=data.metric_values,
                hovertext=data.labels,
                name=axis.name,
                xaxis=f"x{index + 1 if index else ''}",
                marker={"size": 7, "opacity": 0.7},
            )
            figure.layout[f"xaxis{index + 1 if index else ''}"].update(
                title=axis.name,
                tickvals=None if axis.labels is None else list(range(len(axis.labels))),
                ticktext=None if axis.labels is None else list(axis.labels),
            )
        figure.update_layout(
            title=f"{data.metric} by parameter",
            yaxis_title=data.metric,
            showlegend=False,
            **_LAYOUT,
        )
    return figure


def importance_figure(data: ImportanceData, figure: go.Figure | None = None) -> go.Figure:
    """One bar per parameter: how much of the spread of the metric it explains on its own."""
    figure = figure if figure is not None else go.Figure()
    with figure.batch_update():
        _keep_traces(figure, 1, lambda index: go.Bar(orientation="h"))
        figure.data[0].update(
            x=data.importances[::-1],
            y=data.names[::-1],
            hovertemplate="%{y}: %{x:.2f}<extra></extra>",
        )
        figure.update_layout(
            title=f"what {data.metric} depends on ({data.trials} trials)",
            xaxis={"title": "share of the spread explained", "range": [0, 1]},
            **_LAYOUT,
        )
    return figure


def _curve_trace(index: int) -> go.Scatter | go.Scattergl:
    kind = go.Scattergl if index >= WEBGL_AFTER else go.Scatter
    return kind(mode="lines", hovertemplate="%{hovertext}<br>iteration %{x}: %{y}<extra></extra>")


def _side_by_side(figure: go.Figure, count: int) -> None:
    """Give `figure` `count` x axes side by side that share its y axis: a grid laid out in
    the layout itself, so that a live `FigureWidget` made without subplots gets one too."""
    gap = 0.04
    width = (1 - gap * (count - 1)) / max(1, count)
    for index in range(count):
        start = index * (width + gap)
        figure.update_layout(
            {
                f"xaxis{index + 1 if index else ''}": {
                    "domain": [start, start + width],
                    "anchor": "y",
                }
            }
        )


def _keep_traces(figure: go.Figure, count: int, make) -> None:
    """Give `figure` exactly `count` traces, keeping the existing ones (and their state)."""
    for index in range(len(figure.data), count):
        figure.add_trace(make(index))
    if len(figure.data) > count:
        figure.data = figure.data[:count]


# ----- after the run --------------------------------------------------------------------------


def plot_history(source: Any) -> go.Figure:
    """The metric against iteration for every trial of a Tuner, analysis or directory."""
    trials, rows, metric, mode = _read(source)
    return history_figure(history_data(trials, rows, metric, mode))


def plot_best_so_far(source: Any) -> go.Figure:
    """The best value of the metric so far against time."""
    _, rows, metric, mode = _read(source)
    return best_so_far_figure(best_so_far_data(rows, metric, mode))


def plot_parallel_coordinates(source: Any) -> go.Figure:
    """Parallel coordinates of every trial's parameters and best metric value."""
    trials, _, metric, _ = _read(source)
    return parallel_coordinates_figure(parameter_data(trials, metric))


def plot_param_scatter(source: Any) -> go.Figure:
    """Each parameter against the best metric value, one panel per parameter."""
    trials, _, metric, _ = _read(source)
    return parameter_scatter_figure(parameter_data(trials, metric))


def plot_param_importance(source: Any) -> go.Figure:
    """How much of the spread of the metric each parameter explains on its own (see
    `nbtune.ui.data.importance_data` for how it is measured)."""
    trials, _, metric, mode = _read(source)
    return importance_figure(importance_data(trials, metric, mode))


def _read(source: Any) -> tuple[Sequence[Trial], Sequence[Mapping[str, Any]], str, str]:
    source = view_of(source)
    trials, rows = source._snapshot()
    return trials, rows, source._require_metric(), source.mode
