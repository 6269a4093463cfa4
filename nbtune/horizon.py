"""A trial's horizon: the iteration it is expected to end at, if anything says.

The scheduler's `max_t` (where it counts iterations), else the stop criteria's iteration
limit, else the longest trial that ran in full. The forecasts aim there, and a deadline
(`Clocks.can_finish`) judges whether a trial would get there in time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from nbtune.metrics import finite
from nbtune.trial import ITERATION, Trial, TrialStatus


def ran_in_full(trial: Trial) -> bool:
    """Whether a trial ended by reaching its own end (or its stop criteria): a finished curve
    whose length a forecast may aim at and whose shape it may learn from."""
    return trial.status is TrialStatus.TERMINATED and not trial.cut_short


def horizon_of(
    trials: Sequence[Trial], max_t: Any = None, stop_iteration: Any = None
) -> int | None:
    """The iteration a trial is expected to end at: the scheduler's `max_t`, else the stop
    criteria's iteration limit, else the longest trial that ran in full; None if none says."""
    for limit in (max_t, stop_iteration):
        if finite(limit) is not None and limit >= 1:
            return math.ceil(limit)
    lengths = [trial.iteration for trial in trials if ran_in_full(trial)]
    return max(lengths) if lengths else None


def view_horizon(view: Any, trials: Sequence[Trial]) -> int | None:
    """`horizon_of` a run's view: a live `Tuner` knows its scheduler and stop criteria, a run
    loaded from disk only its trials."""
    max_t = scheduler_max_t(getattr(view, "scheduler", None))
    return horizon_of(trials, max_t, stop_iteration(getattr(view, "should_stop", None)))


def scheduler_max_t(scheduler: Any) -> float | None:
    """The scheduler's `max_t`, where it has one counted in iterations."""
    if getattr(scheduler, "time_attr", ITERATION) != ITERATION:
        return None
    return finite(getattr(scheduler, "max_t", None))


def stop_iteration(should_stop: Any) -> float | None:
    """The iteration limit of the stop criteria, if they set one (`StopCriteria`)."""
    return getattr(should_stop, "iteration_limit", None)
