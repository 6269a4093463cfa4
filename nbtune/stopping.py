"""Stop criteria for single trials: a dict of thresholds or a function."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from nbtune import objectives
from nbtune.metrics import number
from nbtune.schedulers._base import NO_LIMIT, results_before

StopFunction = Callable[[int, Mapping[str, Any]], bool]


class StopCriteria:
    """The Tuner's `stop` argument as one test, `criteria(trial_id, result) -> bool`.

    A dict stops a trial once any of its keys reaches its value: a tuned metric reaches it in
    the direction of its mode (`{"loss": 0.01}` with mode "min" stops at loss <= 0.01), any other
    key when it is >= the value (`{"training_iteration": 10}` stops after the 10th result).
    """

    def __init__(
        self,
        stop: Mapping[str, float] | StopFunction | None,
        metric: str | Sequence[str] | None,
        mode: str | Sequence[str],
    ) -> None:
        self._function: StopFunction | None = None
        self._thresholds: dict[str, float] = {}
        tuned = zip(objectives.names(metric), objectives.modes(metric, mode), strict=True)
        self._minimised = {name for name, one in tuned if one == "min"}
        if stop is None:
            return
        if callable(stop):
            self._function = stop
            return
        if not isinstance(stop, Mapping):
            raise TypeError(
                f"stop={stop!r}: pass a dict like {{'training_iteration': 10}} "
                "or a function (trial_id, result) -> bool"
            )
        for key, value in stop.items():
            if number(value) is None:
                raise TypeError(f"stop[{key!r}]={value!r}: the threshold must be a number")
            if not math.isfinite(number(value)):
                raise ValueError(
                    f"stop[{key!r}]={value!r}: the threshold must be a finite number; leave "
                    "the key out to have no limit"
                )
        self._thresholds = {key: number(value) for key, value in stop.items()}

    def __call__(self, trial_id: int, result: Mapping[str, Any]) -> bool:
        if self._function is not None:
            return bool(self._function(trial_id, result))
        return any(self._reached(key, result.get(key)) for key in self._thresholds)

    def _reached(self, key: str, reported: Any) -> bool:
        """Whether `reported` reaches the threshold of `key`; what is not a number never does."""
        value = number(reported)
        if value is None:
            return False
        threshold = self._thresholds[key]
        if key in self._minimised:
            return value <= threshold
        return value >= threshold

    @property
    def iteration_limit(self) -> float | None:
        """The `training_iteration` at which every trial stops, if the criteria set one."""
        return self._thresholds.get("training_iteration")

    def free_steps(self, iteration: int) -> int:
        """How many results after the `iteration`th cannot meet the criteria: all of them when
        there are none, those before the iteration limit when it is the only one, else 0."""
        if self._function is not None:
            return 0
        if not self._thresholds:
            return NO_LIMIT
        if set(self._thresholds) != {"training_iteration"}:
            return 0
        return results_before(self._thresholds["training_iteration"], iteration)
