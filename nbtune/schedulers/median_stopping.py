"""Median stopping: end a trial that does worse than the typical trial did at the same point.

Golovin et al., "Google Vizier" (KDD 2017). It needs no brackets and no checkpoints, so it
suits trainables that cannot save their state.
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections.abc import Mapping
from typing import Any

from nbtune.protocol import Decision
from nbtune.schedulers._base import Scheduler, check_positive
from nbtune.trial import Trial


class MedianStopping(Scheduler):
    """Stops a trial whose running average falls below the median of the others' at that step.

    After each result past `grace_period`, the trial's average metric so far is compared with
    the averages of the other trials over their results up to the same step, counting only
    trials that got that far (finished ones included). With fewer than `min_samples_required`
    of them there is nothing to compare with, and the trial goes on.

    Args:
        grace_period: no trial is stopped before this much `time_attr`.
        min_samples_required: how many other trials must have reached the step.
        time_attr: the result key that measures progress, counted from 1.
        metric: compare trials by this reported value rather than the Tuner's metric (which
            a run of several metrics needs: `metric="loss"`).
        mode: "min" or "max" for `metric` (default: the Tuner's mode of it, if it tunes it).
    """

    needs_metric = True

    def __init__(
        self,
        grace_period: float,
        min_samples_required: int = 3,
        time_attr: str = "training_iteration",
        *,
        metric: str | None = None,
        mode: str | None = None,
    ) -> None:
        check_positive("MedianStopping", "grace_period", grace_period)
        check_positive("MedianStopping", "min_samples_required", min_samples_required, integer=True)
        self.grace_period = grace_period
        self.min_samples_required = min_samples_required
        self.time_attr = time_attr
        self.own_metric(metric, mode)
        self._curves: dict[int, _RunningAverage] = {}

    def on_result(self, trial: Trial, result: Mapping[str, Any]) -> Decision:
        progress = self.progress(result)
        curve = self._curves.setdefault(trial.trial_id, _RunningAverage())
        score = self.score(result)
        curve.add(progress, -math.inf if score is None else score)
        if progress < self.grace_period:
            return Decision.CONTINUE
        others = [
            other.at(progress)
            for trial_id, other in self._curves.items()
            if trial_id != trial.trial_id and other.reached(progress)
        ]
        if len(others) < self.min_samples_required:
            return Decision.CONTINUE
        return Decision.STOP if curve.latest < statistics.median(others) else Decision.CONTINUE

    def next_decision_at(self, trial: Trial) -> float:
        """The end of the grace period; any result after it."""
        return self.grace_period


class _RunningAverage:
    """A trial's average score after each of its results, by progress."""

    def __init__(self) -> None:
        self.progress: list[float] = []
        self.averages: list[float] = []
        self._total = 0.0

    def add(self, progress: float, score: float) -> None:
        self._total += score
        self.progress.append(progress)
        self.averages.append(self._total / len(self.progress))

    @property
    def latest(self) -> float:
        return self.averages[-1]

    def reached(self, progress: float) -> bool:
        return bool(self.progress) and self.progress[-1] >= progress

    def at(self, progress: float) -> float:
        """The average over the results up to `progress`."""
        index = bisect.bisect_right(self.progress, progress) - 1
        return self.averages[max(index, 0)]
