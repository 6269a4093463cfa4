"""`nbtune.compare(*runs)`: several runs' best-so-far curves on one chart.

    runs (Tuners, nbtune.load(...), paths) --compare_data--> CompareData (one RunCurve a run)
                                           --compare_figure--> plotly figure, one named line
                                                               a run, x: trials or time

Each curve steps down (or up, for "max") at every result that beat the run's best so far, and
goes on flat to the run's last result, so a run that found its best early still shows how long
it went on. The x axis is the number of trials that had reported so far, or the seconds since
the run's first result; buttons above the chart switch between the two.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go

from nbtune.analysis import view_of
from nbtune.results import ResultsView
from nbtune.trial import Trial, better_of
from nbtune.ui.figures import apply_theme, plain_text
from nbtune.ui.ticks import NUMBER_FORMAT

X_AXES = {"trials": "trials reported", "time": "seconds since the run's first result"}
"""What the curves can be drawn against, and the title of that axis."""


@dataclass(frozen=True)
class RunCurve:
    """One run's best value so far, a point per improvement and one at its last result.

    Attributes:
        name: the run's name (with " (2)", ... if another run has the same).
        trials: how many trials had reported at each point.
        seconds: seconds since the run's first result at each point.
        values: the best value so far at each point.
        trial_ids: the trial that holds that best.
    """

    name: str
    trials: tuple[int, ...]
    seconds: tuple[float, ...]
    values: tuple[float, ...]
    trial_ids: tuple[int, ...]


@dataclass(frozen=True)
class CompareData:
    metric: str
    modes: tuple[str, ...]
    curves: tuple[RunCurve, ...]


def best_so_far_curve(
    name: str, trials: Sequence[Trial], rows: Sequence[Mapping[str, Any]], metric: str, mode: str
) -> RunCurve:
    """`name`'s curve from its trials and result rows; of a trial that returned its score
    (`Trial.returned`), only that last result counts, as in `nbtune.results.best_row`."""
    returned = {trial.trial_id: trial.iteration for trial in trials if trial.returned}
    points: list[tuple[int, float, float, int]] = []
    seen: set[int] = set()
    best = best_id = None
    start = rows[0].get("timestamp", 0.0) if rows else 0.0
    for row in rows:
        seen.add(row["trial_id"])
        if returned.get(row["trial_id"], row["training_iteration"]) != row["training_iteration"]:
            continue
        value = better_of(best, row.get(metric), mode)
        if value != best:
            best, best_id = value, row["trial_id"]
            points.append((len(seen), row.get("timestamp", start) - start, value, best_id))
    if points and rows:
        last = (len(seen), rows[-1].get("timestamp", start) - start, best, best_id)
        if last[:2] != points[-1][:2]:
            points.append(last)
    columns = tuple(zip(*points, strict=True)) if points else ((), (), (), ())
    return RunCurve(name, *columns)


def compare_data(
    views: Sequence[ResultsView], metric: str | None = None, mode: str | None = None
) -> CompareData:
    """The curves of `views` by `metric` (default: the metric they all tune).

    Raises:
        ValueError: in one line: no run, runs that tune different metrics and no `metric`,
            a metric a run never reported, or one it does not tune without `mode`.
    """
    if not views:
        raise ValueError("compare() needs at least one run: a Tuner, nbtune.load(...) or a path")
    if metric is None:
        tuned = {view.name: view._require_metric() for view in views}
        if len(set(map(str, tuned.values()))) > 1:
            listed = ", ".join(f"{name}: {value}" for name, value in tuned.items())
            raise ValueError(f"the runs tune different metrics ({listed}); pass metric=...")
    curves, modes, names = [], [], set()
    for view in views:
        name = _unique(view.name, names)
        run_metric, run_mode = view._metric_and_mode(metric, mode)
        trials, rows = view.snapshot()
        if rows and not any(run_metric in row for row in rows):
            raise ValueError(f"run {view.name!r} never reported {run_metric!r}; pass metric=...")
        curves.append(best_so_far_curve(name, trials, rows, run_metric, run_mode))
        modes.append(run_mode)
    return CompareData(run_metric, tuple(modes), tuple(curves))


def compare_figure(data: CompareData, *, x: str = "trials", dark: bool = False) -> go.Figure:
    """One stepped line per run, named after it; buttons switch the x axis between trials and
    time."""
    if x not in X_AXES:
        raise ValueError(f"x={x!r}: use one of {', '.join(map(repr, X_AXES))}")
    figure = go.Figure()
    apply_theme(figure, dark)
    for curve in data.curves:
        figure.add_trace(
            go.Scatter(
                x=_xs(curve, x),
                y=curve.values,
                mode="lines+markers",
                line_shape="hv",
                name=plain_text(curve.name),
                hovertext=[f"trial {trial_id}" for trial_id in curve.trial_ids],
                hovertemplate=f"%{{hovertext}}: %{{y:{NUMBER_FORMAT}}}<extra>%{{fullData.name}}"
                "</extra>",
            )
        )
    buttons = [
        {
            "label": f"by {axis}",
            "method": "update",
            "args": [{"x": [_xs(c, axis) for c in data.curves]}, {"xaxis.title.text": title}],
        }
        for axis, title in X_AXES.items()
    ]
    metric = plain_text(data.metric)
    figure.update_layout(
        title={"text": f"best {metric} so far", "x": 0.01, "xanchor": "left"},
        xaxis={"title": {"text": X_AXES[x]}},
        yaxis={"title": {"text": metric}},
        legend={"title": {"text": "run"}},
        height=360,
        margin={"l": 60, "r": 20, "t": 70, "b": 40},
        updatemenus=[
            {
                "type": "buttons",
                "direction": "right",
                "active": list(X_AXES).index(x),
                "buttons": buttons,
                "x": 1,
                "xanchor": "right",
                "y": 1.02,
                "yanchor": "bottom",
                "showactive": True,
            }
        ],
    )
    return figure


def compare(
    *runs: Any,
    metric: str | None = None,
    mode: str | None = None,
    x: str = "trials",
    dark: bool = False,
) -> go.Figure:
    """Compare runs: each one's best value so far against the trials it ran (or the time it
    took: `x="time"`, or the buttons above the chart), one named line per run.

    Args:
        runs: Tuners, `nbtune.load(...)` results or experiment directories (or a list of them,
            such as `nbtune.runs()["path"]`).
        metric: the metric to compare (default: the one every run tunes); a run that does not
            tune it needs `mode`.
        mode: "min" or "max", for a metric a run does not tune.
        x: "trials" or "time", the x axis shown first.
        dark: the dark theme.

    Raises:
        TypeError: something that is not a run, in one line.
        FileNotFoundError: a path that holds no run.
        ValueError: see `compare_data`.
    """
    views = [view_of(run) for run in _flattened(runs)]
    return compare_figure(compare_data(views, metric, mode), x=x, dark=dark)


def _flattened(runs: Sequence[Any]) -> list[Any]:
    """`runs` with a list, a tuple or a pandas Series of runs taken apart."""
    found: list[Any] = []
    for run in runs:
        if isinstance(run, (list, tuple)):
            found.extend(run)
        elif callable(getattr(run, "tolist", None)) and not isinstance(run, (str, os.PathLike)):
            found.extend(run.tolist())
        else:
            found.append(run)
    return found


def _xs(curve: RunCurve, axis: str) -> tuple[float, ...]:
    return curve.trials if axis == "trials" else curve.seconds


def _unique(name: str, taken: set[str]) -> str:
    unique, count = name, 1
    while unique in taken:
        count += 1
        unique = f"{name} ({count})"
    taken.add(unique)
    return unique
