"""The Pareto front of a run of several metrics: every trial's last values, the front marked.

    pareto_data(trials, metric, mode) -> ParetoData    what to draw (no plotly: tests read it)
    pareto_figure(data, figure=None, dark=False) -> go.Figure   draws it, in place into a
                                                                FigureWidget, light or dark
    plot_pareto_front(source, dark=False)        -> go.Figure   after the run

Two metrics are a scatter, three a 3-D scatter, more a parallel-coordinates view; the front is
its own trace ("Pareto front"), the other trials another ("dominated"), and hovering a point
names the trial, its values and its configuration. The front is the one `best_trials` returns
(see `nbtune.objectives`).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go

from nbtune import objectives
from nbtune.analysis import view_of
from nbtune.metrics import format_number
from nbtune.trial import Trial
from nbtune.ui.data import clipped, config_text
from nbtune.ui.figures import apply_theme, drawing, plain_text
from nbtune.ui.table import HOVER_CHARS

FRONT_COLOR = "#d62728"
DOMINATED_COLOR = "#9e9e9e"
_LAYOUT = {
    "height": 420,
    "margin": {"l": 50, "r": 20, "t": 40, "b": 40},
}


@dataclass(frozen=True)
class ParetoPoints:
    """Some trials as points: their ids, their values (one tuple per trial, in the order of
    the metrics) and their hover text."""

    trial_ids: tuple[int, ...]
    values: tuple[tuple[float, ...], ...]
    labels: tuple[str, ...]

    def axis(self, index: int) -> tuple[float, ...]:
        """Every point's value of the `index`th metric."""
        return tuple(point[index] for point in self.values)


@dataclass(frozen=True)
class ParetoData:
    """The trials with a finite last value of every metric, split into the front (sorted by
    the first metric, so that a line through it is the front's staircase) and the rest."""

    metrics: tuple[str, ...]
    modes: tuple[str, ...]
    front: ParetoPoints
    dominated: ParetoPoints


def pareto_data(
    trials: Sequence[Trial],
    metric: Sequence[str],
    mode: str | Sequence[str],
    infeasible: Collection[int] = (),
) -> ParetoData:
    """Each trial with finite last values of every metric, on the front or not; the front is
    that of the trials not `infeasible` (those that miss a constraint, said on hover)."""
    feasible = [trial for trial in trials if trial.trial_id not in infeasible]
    on_front = {trial.trial_id for trial in objectives.pareto_trials(feasible, metric, mode)}
    scored = [(t, objectives.values(t.last_result, metric)) for t in trials]
    scored = [(trial, point) for trial, point in scored if point is not None]
    names = objectives.names(metric)
    front = sorted((pair for pair in scored if pair[0].trial_id in on_front), key=lambda p: p[1])
    rest = [pair for pair in scored if pair[0].trial_id not in on_front]
    return ParetoData(
        names,
        objectives.modes(metric, mode),
        _points(front, names),
        _points(rest, names, infeasible),
    )


def _points(
    scored: list[tuple[Trial, tuple[float, ...]]],
    names: Sequence[str],
    infeasible: Collection[int] = (),
) -> ParetoPoints:
    return ParetoPoints(
        tuple(trial.trial_id for trial, _ in scored),
        tuple(point for _, point in scored),
        tuple(
            _label(trial, point, names) + ("<br>infeasible" if trial.trial_id in infeasible else "")
            for trial, point in scored
        ),
    )


def _label(trial: Trial, point: tuple[float, ...], names: Sequence[str]) -> str:
    """Hover text: the trial, its values, its configuration (cut to `HOVER_CHARS`), each
    shown as text (plotly would draw the tags in a metric's name or a config value)."""
    values = ", ".join(
        f"{name}={format_number(value)}" for name, value in zip(names, point, strict=True)
    )
    config = clipped(config_text(trial.config), HOVER_CHARS)
    lines = (f"trial {trial.trial_id} ({trial.status.value.lower()})", values, config)
    return "<br>".join(plain_text(line) for line in lines)


def pareto_figure(
    data: ParetoData, figure: go.Figure | None = None, *, dark: bool = False
) -> go.Figure:
    """Draw `data` into `figure` (updated in place, in one batch) or a new figure, in the
    light or the dark theme."""
    figure = figure if figure is not None else go.Figure()
    titles = [
        plain_text(f"{name} ({mode})") for name, mode in zip(data.metrics, data.modes, strict=True)
    ]
    with drawing(figure):
        apply_theme(figure, dark)
        if len(data.metrics) > 3:
            _parallel(figure, data, titles)
        else:
            _scatter(figure, data, titles)
        count = len(data.front.trial_ids)
        total = count + len(data.dominated.trial_ids)
        figure.update_layout(title=f"Pareto front: {count} of {total} trials", **_LAYOUT)
    return figure


def _scatter(figure: go.Figure, data: ParetoData, titles: list[str]) -> None:
    three_d = len(data.metrics) == 3
    kind = go.Scatter3d if three_d else go.Scatter
    _keep(figure, [kind, kind])
    for trace, points, name, color in (
        (figure.data[0], data.dominated, "dominated", DOMINATED_COLOR),
        (figure.data[1], data.front, "Pareto front", FRONT_COLOR),
    ):
        shape = {"z": points.axis(2)} if three_d else {"line_shape": _staircase(data.modes[0])}
        trace.update(
            x=points.axis(0),
            y=points.axis(1),
            **shape,
            name=name,
            mode="markers" if points is data.dominated or three_d else "lines+markers",
            customdata=points.trial_ids,
            hovertext=points.labels,
            hovertemplate="%{hovertext}<extra></extra>",
            marker={"color": color, "size": 5 if three_d else 9},
        )
    if three_d:
        figure.update_scenes(xaxis_title=titles[0], yaxis_title=titles[1], zaxis_title=titles[2])
    else:
        figure.update_layout(xaxis_title=titles[0], yaxis_title=titles[1])


def _staircase(first_mode: str) -> str:
    """How the front's line steps from point to point (sorted by the first metric) so that it
    traces the edge of what the front dominates: across then along the second metric when the
    first is minimised, the other way round when it is maximised."""
    return "hv" if first_mode == "min" else "vh"


def _parallel(figure: go.Figure, data: ParetoData, titles: list[str]) -> None:
    """More than three metrics: one axis each, the front in red (hover is not a parallel
    coordinates feature: the dataframe's `pareto` column names the trials)."""
    _keep(figure, [go.Parcoords])
    points = data.front.values + data.dominated.values
    on_front = [1] * len(data.front.values) + [0] * len(data.dominated.values)
    figure.data[0].update(
        dimensions=[
            {"label": title, "values": [point[index] for point in points]}
            for index, title in enumerate(titles)
        ],
        line={
            "color": on_front,
            "colorscale": [[0, DOMINATED_COLOR], [1, FRONT_COLOR]],
            "cmin": 0,
            "cmax": 1,
        },
    )


def _keep(figure: go.Figure, kinds: list[type]) -> None:
    """Give `figure` traces of `kinds`, keeping the ones it has if they are of those kinds."""
    if [type(trace) for trace in figure.data] != kinds:
        figure.data = ()
        for kind in kinds:
            figure.add_trace(kind())


def plot_pareto_front(source: Any, *, dark: bool = False) -> go.Figure:
    """The Pareto front of a run of several metrics: a Tuner, `nbtune.load(...)` or the path
    of an experiment directory; `dark` for the dark theme.

    Raises:
        ValueError: the run tunes fewer than two metrics.
    """
    source = view_of(source)
    if not objectives.is_several(source.metric):
        raise ValueError(
            f"plot_pareto_front needs a run of several metrics; this one tunes "
            f"{source.metric!r}: pass metric=['loss', 'latency_ms'] to the Tuner"
        )
    trials = source.snapshot()[0]
    infeasible = source.constraints.infeasible(trials)
    data = pareto_data(trials, source.metric, source.mode, infeasible)
    return pareto_figure(data, dark=dark)
