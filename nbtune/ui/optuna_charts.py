"""Optuna's own charts of any run, drawn by `optuna.visualization` on the run's study.

    source (Tuner, nbtune.load(...), directory) -> to_optuna_study() -> optuna.visualization

nbtune draws its own charts of what it shows live (`nbtune.ui.figures`); where Optuna already
draws a chart well, these reuse it rather than redraw it: the contour of two parameters, the
rank of every trial by pairs of parameters, the empirical distribution function of the values
(EDF) and, with several metrics, the hypervolume history. Each checks first that the run can
have the chart, and says in one line what to change where it cannot; each takes the light or
dark theme of nbtune's charts.

With several metrics, `metric=` names the one a chart of one value shows. Optuna reads the
trials' last values (see `nbtune.optuna_study`): the complete ones, for most charts.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import plotly.graph_objects as go

from nbtune import objectives
from nbtune.analysis import view_of
from nbtune.results import ResultsView
from nbtune.ui.figures import apply_theme


def plot_contour(
    source: Any,
    params: Sequence[str] | None = None,
    *,
    metric: str | None = None,
    dark: bool = False,
) -> go.Figure:
    """The metric's contour over each pair of `params` (by default every parameter; two make
    one chart), interpolated between the complete trials, as `optuna.visualization.plot_contour`
    draws it.

    Args:
        source: a Tuner, `nbtune.load(...)` or an experiment directory.
        params: the parameters, by their "/"-joined names (`"model/dropout"`); two or more.
        metric: with several metrics, the one to show.
        dark: the dark theme.

    Raises:
        ValueError: the run has fewer than two parameters, or not those named.
    """
    view, study = _study(source)
    chosen = _parameters(study, params, "plot_contour", least=2)
    target = _target(view, metric, "plot_contour")
    return _draw(lambda vis: vis.plot_contour(study, params=chosen, **target), dark)


def plot_rank(
    source: Any,
    params: Sequence[str] | None = None,
    *,
    metric: str | None = None,
    dark: bool = False,
) -> go.Figure:
    """Every complete trial placed by each pair of `params` (by default every parameter),
    coloured by the rank of its value, as `optuna.visualization.plot_rank` draws it.

    Raises:
        ValueError: the run has no parameter, or not those named.
    """
    view, study = _study(source)
    chosen = _parameters(study, params, "plot_rank", least=1)
    target = _target(view, metric, "plot_rank")
    return _draw(lambda vis: vis.plot_rank(study, params=chosen, **target), dark)


def plot_edf(
    source: Any | Sequence[Any], *, metric: str | None = None, dark: bool = False
) -> go.Figure:
    """The empirical distribution function of the complete trials' values: for each value,
    the share of trials that reached it or better. Give several runs (a list) to compare them,
    one line each, named by the run, as `optuna.visualization.plot_edf` draws them.

    Raises:
        ValueError: the runs tune different metrics, or several without `metric=`.
    """
    sources = list(source) if isinstance(source, list | tuple) else [source]
    if not sources:
        raise ValueError("plot_edf([]): give a run, or a list of runs to compare")
    studies, targets = [], []
    for one in sources:
        view, study = _study(one)
        studies.append(study)
        targets.append(_target(view, metric, "plot_edf"))
    names = {target["target_name"] for target in targets}
    if len(names) > 1:
        raise ValueError(
            f"plot_edf: the runs tune {', '.join(sorted(names))}; compare runs of one metric"
        )
    return _draw(lambda vis: vis.plot_edf(studies, **targets[0]), dark)


def plot_hypervolume_history(
    source: Any,
    reference_point: Sequence[float] | Mapping[str, float],
    *,
    dark: bool = False,
) -> go.Figure:
    """With several metrics: the hypervolume of the Pareto front found so far against the
    trial number, as `optuna.visualization.plot_hypervolume_history` draws it: how much of the
    box between the front and `reference_point` the trials have dominated.

    Args:
        reference_point: one value per metric, worse than any that counts (greater for a
            metric to minimise, less for one to maximise): a list in the run's metric order,
            or a dict by metric name.

    Raises:
        ValueError: a run of one metric, or a reference point that does not fit the metrics.
    """
    view, study = _study(source)
    names = objectives.names(view.metric)
    if len(names) < 2:
        raise ValueError(
            f"plot_hypervolume_history needs several metrics; this run tunes {names[0]!r} "
            "alone: use nbtune.plot_best_so_far"
        )
    point = _reference_point(reference_point, names)
    return _draw(lambda vis: vis.plot_hypervolume_history(study, reference_point=point), dark)


# ----- what they share ------------------------------------------------------------------------


def _study(source: Any) -> tuple[ResultsView, Any]:
    view = view_of(source)
    return view, view.to_optuna_study()


def _draw(chart: Callable[[Any], go.Figure], dark: bool) -> go.Figure:
    """Optuna's chart in nbtune's theme; Optuna's warning that the chart is experimental left
    out (nbtune chose it, not the caller)."""
    import optuna.visualization as vis
    from optuna.exceptions import ExperimentalWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExperimentalWarning)
        figure = chart(vis)
    apply_theme(figure, dark)
    return figure


def _parameters(study: Any, params: Sequence[str] | None, chart: str, least: int) -> list[str]:
    """The parameters a chart draws: those named, each checked, or every one of the study's."""
    found = list(dict.fromkeys(name for trial in study.trials for name in trial.params))
    if params is None:
        if len(found) < least:
            have = f"only {', '.join(found)}" if found else "none"
            raise ValueError(
                f"{chart} needs {least} parameter{'s' * (least > 1)} that vary; this run has "
                f"{have}: use nbtune.plot_param_scatter"
            )
        return found
    if isinstance(params, str):
        raise TypeError(f"{chart}(params={params!r}): pass a list of names, e.g. [{params!r}]")
    missing = [name for name in params if name not in found]
    if missing:
        raise ValueError(
            f"{chart}: the run has no parameter {missing[0]!r}; it has {', '.join(found)}"
        )
    if len(set(params)) < least:
        raise ValueError(f"{chart}(params={list(params)!r}): name {least} or more parameters")
    return list(params)


def _target(view: ResultsView, metric: str | None, chart: str) -> dict[str, Any]:
    """Optuna's `target=` and `target_name=` for the metric a chart of one value shows."""
    names = objectives.names(view._require_metric(several=True))
    if metric is None and len(names) > 1:
        raise ValueError(
            f"{chart}: this run tunes {', '.join(names)}; pass metric={names[0]!r} (or another)"
        )
    metric = names[0] if metric is None else metric
    if metric not in names:
        raise ValueError(f"{chart}(metric={metric!r}): the run tunes {', '.join(names)}")
    if len(names) == 1:
        return {"target": None, "target_name": metric}
    index = names.index(metric)
    return {"target": lambda trial: trial.values[index], "target_name": metric}


def _reference_point(
    reference_point: Sequence[float] | Mapping[str, float], names: Sequence[str]
) -> list[float]:
    if isinstance(reference_point, Mapping):
        unknown = set(reference_point) - set(names)
        if unknown or len(reference_point) != len(names):
            raise ValueError(
                f"reference_point={dict(reference_point)!r}: give one value for each of "
                f"{', '.join(names)}"
            )
        reference_point = [reference_point[name] for name in names]
    point = list(reference_point)
    if len(point) != len(names):
        raise ValueError(
            f"reference_point={point!r}: give {len(names)} values, one for each of "
            f"{', '.join(names)}"
        )
    numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in point)
    if not numbers or not all(math.isfinite(v) for v in point):
        raise ValueError(f"reference_point={point!r}: give finite numbers")
    return [float(value) for value in point]
