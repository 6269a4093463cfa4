"""The metric's contour over two parameters: the "contour" view of the dashboard's parameters
tab.

    parameter_data(...) -> ParameterData -> contour_data(data, x, y) -> ContourData
                                                 (no plotly: tests read it)
    contour_figure(data, figure=None, dark=False) -> go.Figure   draws it, in place into a
                                                                 FigureWidget

As Optuna's `plot_contour` does, the trials' values are placed on the grid of the distinct
values of the two parameters and plotly interpolates across the empty cells (`connectgaps`);
the trials are drawn on top as points, hovering one names it. A trial whose last result misses
one of the run's constraints is drawn as a grey cross and left out of the contour, as Optuna
leaves infeasible trials out of its own. Log-scale parameters get log axes, categorical ones
their labels.
"""

from __future__ import annotations

from dataclasses import dataclass

import plotly.graph_objects as go

from nbtune.ui.data import Axis, ParameterData
from nbtune.ui.figures import INFEASIBLE_COLOR, _layout, _notes, _x_axis, apply_theme, drawing
from nbtune.ui.ticks import NUMBER_FORMAT


@dataclass(frozen=True)
class ContourData:
    """Two parameters and the metric's value of each trial that has both.

    Attributes:
        x, y: the two parameters' axes (their values: those of the trials kept); None while
            fewer than two parameters vary.
        infeasible: for each trial, whether it misses a constraint.
    """

    metric: str
    x: Axis | None
    y: Axis | None
    values: tuple[float, ...]
    trial_ids: tuple[int, ...]
    labels: tuple[str, ...]
    infeasible: tuple[bool, ...]

    def grid(self) -> tuple[list[float], list[float], list[list[float | None]]]:
        """The distinct x and y values, sorted, and the feasible trials' values on their grid
        (None in a cell no trial has; the last trial wins a cell several share)."""
        assert self.x is not None and self.y is not None
        xs = sorted(set(self.x.values))
        ys = sorted(set(self.y.values))
        column = {value: index for index, value in enumerate(xs)}
        row = {value: index for index, value in enumerate(ys)}
        z: list[list[float | None]] = [[None] * len(xs) for _ in ys]
        points = zip(self.x.values, self.y.values, self.values, self.infeasible, strict=True)
        for x, y, value, infeasible in points:
            if not infeasible:
                z[row[y]][column[x]] = value
        return xs, ys, z


def contour_data(data: ParameterData, x: str | None = None, y: str | None = None) -> ContourData:
    """The contour of `data`'s values over the parameters named `x` and `y` (by default, or
    when one names no varying parameter, the first two that vary; never one twice)."""
    names = [axis.name for axis in data.axes]
    if len(names) < 2:
        return ContourData(data.value_name, None, None, (), (), (), ())
    x = x if x in names else names[0]
    y = y if y in names and y != x else next(name for name in names if name != x)
    x_axis, y_axis = (data.axes[names.index(name)] for name in (x, y))
    kept = [
        index
        for index, (one, other) in enumerate(zip(x_axis.values, y_axis.values, strict=True))
        if one is not None and other is not None
    ]

    def only(axis: Axis) -> Axis:
        values = tuple(axis.values[index] for index in kept)
        return Axis(axis.name, values, axis.labels, axis.log, axis.integer)

    return ContourData(
        metric=data.value_name,
        x=only(x_axis),
        y=only(y_axis),
        values=tuple(data.metric_values[index] for index in kept),
        trial_ids=tuple(data.trial_ids[index] for index in kept),
        labels=tuple(data.labels[index] for index in kept),
        infeasible=tuple(data.trial_ids[index] in data.infeasible for index in kept),
    )


def contour_figure(
    data: ContourData, figure: go.Figure | None = None, *, dark: bool = False
) -> go.Figure:
    """Draw `data` into `figure` (in place, in one batch) or a new figure."""
    figure = figure if figure is not None else go.Figure()
    if [type(trace) for trace in figure.data] != [go.Contour, go.Scatter]:
        figure.data = ()
        figure.add_traces([go.Contour(), go.Scatter(mode="markers")])
    with drawing(figure):
        apply_theme(figure, dark)
        ready = data.x is not None and data.y is not None and bool(data.values)
        contour, points = figure.data
        if ready:
            xs, ys, z = data.grid()
            contour.update(
                x=xs,
                y=ys,
                z=z,
                connectgaps=True,
                colorscale="Viridis",
                colorbar={"thickness": 12, "tickformat": NUMBER_FORMAT},
                hoverinfo="skip",
                line={"width": 0.5},
            )
            points.update(
                x=data.x.values,
                y=data.y.values,
                hovertext=[
                    f"{label}<br>{data.metric}: {value:.4g}"
                    + ("<br>infeasible" if infeasible else "")
                    for label, value, infeasible in zip(
                        data.labels, data.values, data.infeasible, strict=True
                    )
                ],
                hovertemplate="%{hovertext}<extra></extra>",
                marker={
                    "size": 7,
                    "color": ["white" if not bad else INFEASIBLE_COLOR for bad in data.infeasible],
                    "symbol": ["x" if bad else "circle" for bad in data.infeasible],
                    "line": {"width": 1, "color": "black"},
                },
                showlegend=False,
            )
        _layout(
            figure,
            title=f"{data.metric} over {data.x.name} and {data.y.name}"
            if data.x is not None and data.y is not None
            else f"{data.metric} contour",
            xaxis=_x_axis(data.x) if data.x is not None else {},
            yaxis=_x_axis(data.y) if data.y is not None else {},
            annotations=_notes(
                not ready, "waiting for trials with a value and two parameters that vary"
            ),
        )
    return figure
