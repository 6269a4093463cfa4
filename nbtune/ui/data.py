"""What each chart shows, computed from trials and results alone: no plotly, no widgets.

The live dashboard and the `nbtune.plot_*` functions draw the same data, and tests check these
small records instead of pixels.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nbtune.metrics import finite
from nbtune.space import SearchSpace
from nbtune.trial import Trial, better_of

MAX_POINTS_PER_CURVE = 200


@dataclass(frozen=True)
class Curve:
    """One trial's metric against its iteration (thinned to at most `MAX_POINTS_PER_CURVE`)."""

    trial_id: int
    status: str
    x: tuple[int, ...]
    y: tuple[float, ...]
    label: str


@dataclass(frozen=True)
class HistoryData:
    metric: str
    curves: tuple[Curve, ...]
    best: tuple[int, ...]
    """Ids of the best trials (up to three), to highlight."""


@dataclass(frozen=True)
class BestSoFarData:
    """The best value of the metric over time (seconds since the first result)."""

    metric: str
    seconds: tuple[float, ...]
    values: tuple[float, ...]
    trial_ids: tuple[int, ...]


@dataclass(frozen=True)
class Axis:
    """One parameter as an axis: numbers, or categories shown as their codes' labels."""

    name: str
    values: tuple[float, ...]
    labels: tuple[str, ...] | None = None


@dataclass(frozen=True)
class ParameterData:
    """Each trial's parameters against its best metric value (trials without one left out)."""

    metric: str
    trial_ids: tuple[int, ...]
    metric_values: tuple[float, ...]
    axes: tuple[Axis, ...]
    labels: tuple[str, ...]


@dataclass(frozen=True)
class ImportanceData:
    """How much of the spread of the metric each parameter explains on its own, highest first."""

    metric: str
    names: tuple[str, ...]
    importances: tuple[float, ...]
    trials: int
    """How many trials with a value of the metric it was computed from."""


def history_data(
    trials: Sequence[Trial],
    rows: Sequence[Mapping[str, Any]],
    metric: str,
    mode: str,
    max_points: int = MAX_POINTS_PER_CURVE,
) -> HistoryData:
    """One curve per trial that has reported, in trial order; the best three marked."""
    points: dict[int, tuple[list[int], list[float]]] = {}
    for row in rows:
        value = finite(row.get(metric))
        if value is not None:
            xs, ys = points.setdefault(row["trial_id"], ([], []))
            xs.append(row["training_iteration"])
            ys.append(value)
    curves = tuple(
        Curve(
            trial.trial_id,
            trial.status.value,
            *_thin(*points[trial.trial_id], max_points),
            describe(trial),
        )
        for trial in trials
        if trial.trial_id in points
    )
    return HistoryData(metric, curves, _best_ids(trials, mode))


def best_so_far_data(rows: Sequence[Mapping[str, Any]], metric: str, mode: str) -> BestSoFarData:
    """A step for every result that improved on the best so far."""
    seconds, values, trial_ids = [], [], []
    best = None
    start = rows[0]["timestamp"] if rows else 0.0
    for row in rows:
        improved = better_of(best, row.get(metric), mode)
        if improved != best:
            best = improved
            seconds.append(row["timestamp"] - start)
            values.append(best)
            trial_ids.append(row["trial_id"])
    return BestSoFarData(metric, tuple(seconds), tuple(values), tuple(trial_ids))


def parameter_data(trials: Sequence[Trial], metric: str) -> ParameterData:
    """Parameters against each trial's best value; categorical ones coded 0, 1, 2, ..."""
    scored = [trial for trial in trials if trial.best_value is not None]
    flat = [SearchSpace.flatten(trial.config) for trial in scored]
    names = list(dict.fromkeys(name for config in flat for name in config))
    axes = tuple(_axis(name, [config.get(name) for config in flat]) for name in names)
    return ParameterData(
        metric=metric,
        trial_ids=tuple(trial.trial_id for trial in scored),
        metric_values=tuple(trial.best_value for trial in scored),
        axes=tuple(axis for axis in axes if _varies(axis)),
        labels=tuple(describe(trial) for trial in scored),
    )


def importance_data(trials: Sequence[Trial], metric: str, mode: str) -> ImportanceData:
    """Each varying parameter's share of the spread of the trials' best values.

    The trials are ranked by their best value (so that a few diverged trials do not decide it)
    and grouped by the parameter: by category, or into about sqrt(n) bins of equal count for
    numbers. The importance is the share of the ranks' variance between the groups, corrected
    for the number of groups (epsilon squared), so a parameter that does not matter scores
    about 0 and one that decides the order alone scores 1. Each is measured on its own:
    correlated parameters share credit, and interactions are not seen.
    """
    data = parameter_data(trials, metric)
    ranks = _ranks(data.metric_values, descending=mode == "max")
    scored = [(axis.name, _epsilon_squared(_groups(axis), ranks)) for axis in data.axes]
    scored.sort(key=lambda item: item[1], reverse=True)
    return ImportanceData(
        metric=metric,
        names=tuple(name for name, _ in scored),
        importances=tuple(score for _, score in scored),
        trials=len(ranks),
    )


def _ranks(values: Sequence[float], descending: bool) -> list[float]:
    """Rank 0 for the best value; tied values share the mean of their ranks."""
    order = sorted(range(len(values)), key=lambda i: values[i], reverse=descending)
    ranks = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for position in range(start, end + 1):
            ranks[order[position]] = (start + end) / 2
        start = end + 1
    return ranks


def _groups(axis: Axis) -> list[int]:
    """The group of each trial: its category, or its bin of about equal count for numbers."""
    if axis.labels is not None:
        return [int(value) for value in axis.values]
    bins = max(2, min(10, round(math.sqrt(len(axis.values)))))
    ordered = sorted(axis.values)
    edges = sorted({ordered[len(ordered) * k // bins] for k in range(1, bins)})
    return [bisect.bisect_right(edges, value) for value in axis.values]


def _epsilon_squared(groups: Sequence[int], values: Sequence[float]) -> float:
    """The share of the variance of `values` between `groups`, less what chance would give."""
    members: dict[int, list[float]] = {}
    for group, value in zip(groups, values, strict=True):
        members.setdefault(group, []).append(value)
    count, kinds = len(values), len(members)
    if kinds < 2 or count <= kinds:
        return 0.0
    mean = sum(values) / count
    total = sum((value - mean) ** 2 for value in values)
    if total == 0:
        return 0.0
    between = sum(len(m) * (sum(m) / len(m) - mean) ** 2 for m in members.values())
    within_mean_square = (total - between) / (count - kinds)
    return max(0.0, (between - (kinds - 1) * within_mean_square) / total)


def describe(trial: Trial) -> str:
    """Hover text: the trial's id, status and configuration."""
    config = ", ".join(f"{k}={_short(v)}" for k, v in SearchSpace.flatten(trial.config).items())
    return f"trial {trial.trial_id} ({trial.status.value.lower()})<br>{config}"


def _axis(name: str, values: list[Any]) -> Axis:
    numbers = [finite(value) for value in values]
    if None not in numbers:
        return Axis(name, tuple(numbers))
    categories = list(dict.fromkeys(map(_short, values)))
    codes = {category: code for code, category in enumerate(categories)}
    return Axis(name, tuple(float(codes[_short(value)]) for value in values), tuple(categories))


def _varies(axis: Axis) -> bool:
    return len(set(axis.values)) > 1


def _best_ids(trials: Sequence[Trial], mode: str, count: int = 3) -> tuple[int, ...]:
    scored = [trial for trial in trials if trial.best_value is not None]
    scored.sort(key=lambda trial: trial.best_value, reverse=mode == "max")
    return tuple(trial.trial_id for trial in scored[:count])


def _thin(xs: list[int], ys: list[float], max_points: int) -> tuple[tuple, tuple]:
    """Every k-th point so that at most `max_points` remain, always keeping the last one."""
    if len(xs) <= max_points:
        return tuple(xs), tuple(ys)
    step = math.ceil(len(xs) / max_points)
    keep = [*range(0, len(xs) - 1, step)][: max_points - 1]
    keep.append(len(xs) - 1)
    return tuple(xs[i] for i in keep), tuple(ys[i] for i in keep)


def _short(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)
