"""Several objectives: `metric=["loss", "latency_ms"], mode=["min", "min"]`, and their front.

A run tunes one metric (a name, "min" or "max") or several (a list of names, one mode each).
Everything that needs one value to compare (the best trial, a trial's best value, the best
checkpoint, a scheduler's rungs) asks `single`, which is None when there are several: those
parts either do without (a checkpoint's "best" becomes its most recent) or ask for a metric of
their own (`ASHA(metric="loss", mode="min")`).

With several objectives there is no single best, only the Pareto front: the trials that no
other trial beats on every objective at once. Each trial stands for its *last* reported values
(what its configuration reached where it ended, as Optuna tells a trial's final values), and a
trial whose last values are not all finite (see `nbtune.metrics.finite`) is never on it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from nbtune.constraints import UNCONSTRAINED, Constraints
from nbtune.metrics import finite
from nbtune.trial import Trial

MODES = ("min", "max")


def checked(metric: Any, mode: Any) -> tuple[str | list[str] | None, str | list[str]]:
    """The Tuner's `metric` and `mode`, checked: a name and a mode, or a list of names and a
    list of as many modes (one mode applies to every name). A list of one name is that name.

    Raises:
        ValueError, TypeError: one line saying what to change.
    """
    if metric is None or isinstance(metric, str):
        _check_mode(mode)
        return metric, mode
    if not isinstance(metric, (list, tuple)) or not all(isinstance(m, str) for m in metric):
        raise TypeError(
            f"metric={metric!r}: pass the name of a reported value, e.g. 'loss', or a list "
            "of names, e.g. ['loss', 'latency_ms']"
        )
    names = list(metric)
    if not names:
        raise ValueError("metric=[]: name at least one reported value, e.g. ['loss']")
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"metric={metric!r}: {repeated[0]!r} is named twice; name each once")
    modes = [mode] * len(names) if isinstance(mode, str) else mode
    if not isinstance(modes, (list, tuple)) or len(modes) != len(names):
        raise ValueError(
            f"mode={mode!r}: pass one mode per metric ({len(names)} for {names}), "
            f"e.g. {['min'] * len(names)}"
        )
    for one in modes:
        _check_mode(one, mode)
    if len(names) == 1:
        return names[0], modes[0]
    return names, list(modes)


def _check_mode(mode: Any, given: Any = None) -> None:
    if not isinstance(mode, str) or mode not in MODES:
        raise ValueError(f"mode={given if given is not None else mode!r}: use 'min' or 'max'")


def single(metric: str | Sequence[str] | None) -> str | None:
    """The run's one tuned metric; None if it has none, or several."""
    return metric if isinstance(metric, str) else None


def primary(
    metric: str | Sequence[str] | None, mode: str | Sequence[str]
) -> tuple[str | None, str]:
    """The metric (and its mode) that views of one metric show: the only one, or the first of
    several (a dashboard's learning curves, its table's metric column)."""
    if metric is None or isinstance(metric, str):
        return metric, mode
    return metric[0], mode[0]


def names(metric: str | Sequence[str] | None) -> tuple[str, ...]:
    """Every tuned metric's name: none, one or several."""
    if metric is None:
        return ()
    return (metric,) if isinstance(metric, str) else tuple(metric)


def modes(metric: str | Sequence[str] | None, mode: str | Sequence[str]) -> tuple[str, ...]:
    """The mode of each of `names(metric)`."""
    return tuple(mode) if not isinstance(mode, str) else (mode,) * len(names(metric))


def is_several(metric: str | Sequence[str] | None) -> bool:
    """Whether the run tunes several metrics at once."""
    return len(names(metric)) > 1


def mode_of(metric: str | Sequence[str] | None, mode: str | Sequence[str], name: str) -> str | None:
    """The mode the run tunes `name` in; None if it does not tune it."""
    return dict(zip(names(metric), modes(metric, mode), strict=True)).get(name)


def values(
    result: Mapping[str, Any], metric: str | Sequence[str] | None
) -> tuple[float, ...] | None:
    """The result's value of each tuned metric, or None unless every one is finite."""
    found = tuple(finite(result.get(name)) for name in names(metric))
    return None if not found or None in found else found


def non_dominated(points: Sequence[Sequence[float]], modes: Sequence[str]) -> list[bool]:
    """For each point, whether no other point is at least as good on every objective and
    better on one (equal points are all on the front).

    Points are taken in lexicographic order of their costs, so that every point's dominators
    come before it. With two objectives one sweep settles each point against the least second
    cost so far (n log n); with more, each point is compared with the front found so far only
    (a dominator of it is on that front, or is dominated by a point that is), in NumPy.
    """
    signs = [1.0 if mode == "min" else -1.0 for mode in modes]
    costs = [tuple(s * v for s, v in zip(signs, point, strict=True)) for point in points]
    order = sorted(range(len(costs)), key=costs.__getitem__)
    if len(signs) == 2:
        return _sweep(costs, order)
    return _against_front(costs, order)


def _sweep(costs: list[tuple[float, ...]], order: list[int]) -> list[bool]:
    """Two objectives: a point is dominated by an earlier one with a smaller first cost and a
    second cost no greater, or an equal first cost and a smaller second cost."""
    on_front = [False] * len(costs)
    least_before = math.inf
    """The least second cost among points of a smaller first cost."""
    group_first, group_least = None, math.inf
    for index in order:
        first, second = costs[index]
        if first != group_first:
            least_before = min(least_before, group_least)
            group_first, group_least = first, second
        on_front[index] = second < least_before and second <= group_least
    return on_front


def _against_front(costs: list[tuple[float, ...]], order: list[int]) -> list[bool]:
    import numpy as np

    on_front = [False] * len(costs)
    front = np.empty((len(costs), len(costs[0]) if costs else 0))
    size = 0
    for index in order:
        point = np.asarray(costs[index])
        found = front[:size]
        dominated = np.any(np.all(found <= point, axis=1) & np.any(found < point, axis=1))
        if not dominated:
            on_front[index] = True
            front[size] = point
            size += 1
    return on_front


def pareto_trials(
    trials: Sequence[Trial],
    metric: str | Sequence[str] | None,
    mode: str | Sequence[str],
    constraints: Constraints = UNCONSTRAINED,
) -> list[Trial]:
    """The trials on the Pareto front of their last reported values, by id; of those whose
    last result satisfies the `constraints`, if there are any."""
    feasible = [trial for trial in trials if constraints.feasible(trial.last_result)]
    scored = [(trial, values(trial.last_result, metric)) for trial in feasible]
    scored = [(trial, point) for trial, point in scored if point is not None]
    on_front = non_dominated([point for _, point in scored], modes(metric, mode))
    front = [trial for (trial, _), keep in zip(scored, on_front, strict=True) if keep]
    return sorted(front, key=lambda trial: trial.trial_id)
