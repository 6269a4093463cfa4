"""Stop criteria for single trials: a dict of thresholds or a function."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

StopFunction = Callable[[int, Mapping[str, Any]], bool]


def make_stopper(
    stop: Mapping[str, float] | StopFunction | None, metric: str | None, mode: str
) -> StopFunction:
    """Turn the Tuner's `stop` argument into one function `(trial_id, result) -> bool`.

    A dict stops a trial once any of its keys reaches its value: the tuned metric reaches it in
    the direction of `mode` (`{"loss": 0.01}` with mode "min" stops at loss <= 0.01), any other
    key when it is >= the value (`{"training_iteration": 10}` stops after the 10th result).
    """
    if stop is None:
        return lambda trial_id, result: False
    if callable(stop):
        return stop
    if not isinstance(stop, Mapping):
        raise TypeError(
            f"stop={stop!r}: pass a dict like {{'training_iteration': 10}} "
            "or a function (trial_id, result) -> bool"
        )
    for key, value in stop.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"stop[{key!r}]={value!r}: the threshold must be a number")
    criteria = dict(stop)

    def reached(trial_id: int, result: Mapping[str, Any]) -> bool:
        for key, threshold in criteria.items():
            value = result.get(key)
            if value is None:
                continue
            if key == metric and mode == "min":
                if value <= threshold:
                    return True
            elif value >= threshold:
                return True
        return False

    return reached
