"""Asynchronous successive halving (ASHA): cut trials at rungs without waiting for the others.

Li et al., "A System for Massively Parallel Hyperparameter Tuning" (MLSys 2020). Each bracket
has rungs at `grace_period * reduction_factor**k` units of `time_attr`. A trial that reaches a
rung is ranked among every trial that has reached it so far, itself included: of those n, the
best `max(1, n // reduction_factor)` go on, so the first arrival always goes on and later ones
must be in the top `1 / reduction_factor`. (Optuna's SuccessiveHalvingPruner ranks the same
way; Ray Tune's ASHAScheduler compares a newcomer with an interpolated quantile of those before
it, which lets more of the first arrivals through.) Nobody waits, so workers never idle; the
price is that early arrivals at a rung are judged against fewer peers, and the first one
against none. `bootstrap_count` (as Optuna's pruner has it) judges every trial against peers,
at the price of the first arrivals at each rung, which it stops: by default ASHA does so at the
rungs that the run's planned trials will crowd when a model-based searcher learns from them
(see `AUTO_BOOTSTRAP_ARRIVALS`).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping
from typing import Any

from nbtune.protocol import Decision
from nbtune.schedulers._base import Scheduler, check_positive
from nbtune.trial import Trial

AUTO_BOOTSTRAP_ARRIVALS = 27
"""How many trials a rung must expect, from the trials the run plans, for the default ASHA to
judge every arrival there against peers. Bootstrapping stops the first `reduction_factor - 1`
arrivals at a rung, whatever they are worth. benchmarks/bootstrap.py replays runs of 10 to 200
planned trials (3 or 4 rungs, reduction factors 2 to 4): with every rung bootstrapped, 25% of
the runs of 81 trials with max_t 27 ended with no trial run in full (the share of runs of 20
trials: 95%); with this threshold, none of 8,400 did."""


class ASHA(Scheduler):
    """Stops a trial at a rung unless it is in the top 1/reduction_factor of those that got there.

    Args:
        max_t: a trial stops once `time_attr` reaches this (e.g. the number of epochs).
        grace_period: the first rung: no trial is stopped before this much `time_attr`.
        reduction_factor: keep the top 1/reduction_factor at each rung, rungs grow by it.
        brackets: how many brackets, each with a first rung `reduction_factor` times later than
            the last, which hedges against a grace period too short (asynchronous Hyperband).
            Trials join them in the proportions of Hyperband's brackets: with 4 brackets and
            reduction_factor 3, 27 : 12 : 6 : 4 from the most eager to cut to the most patient.
        time_attr: the result key that measures progress, counted from 1.
        bootstrap_count: how many trials must have reached a rung before a later one may go
            on past it (Optuna's `bootstrap_count`). With 0 the first to arrive goes on
            unjudged, so a run of any size has a trial run in full early. But that trial is a
            random one, and a model-based searcher (TPE), which ranks trials run in full above
            stopped ones, then models it alone and searches near it. With
            `reduction_factor - 1`, no trial goes on unless it is the best of at least
            `reduction_factor`, and the first arrivals stop, however good. The default, None,
            chooses per rung when a model-based searcher learns from the trials
            (`OptunaSearch`): `ceil(reduction_factor) - 1` at a rung that the run's planned
            trials will crowd (`AUTO_BOOTSTRAP_ARRIVALS` expected arrivals or more), 0 at the
            others and whenever the number of trials is not known (a `time_budget_s` may end
            the run first). With random search it is 0: nothing learns from the trial that
            runs in full unjudged. benchmarks/search_quality.py measures what TPE gains.
        metric: compare trials by this reported value rather than the Tuner's metric (which
            a run of several metrics needs: `metric="loss"`).
        mode: "min" or "max" for `metric` (default: the Tuner's mode of it, if it tunes it).
    """

    needs_metric = True

    def __init__(
        self,
        max_t: int,
        grace_period: int = 1,
        reduction_factor: float = 3,
        brackets: int = 1,
        time_attr: str = "training_iteration",
        *,
        bootstrap_count: int | None = None,
        metric: str | None = None,
        mode: str | None = None,
    ) -> None:
        check_positive("ASHA", "max_t", max_t)
        if bootstrap_count is not None and not _is_count(bootstrap_count):
            raise ValueError(
                f"ASHA(bootstrap_count={bootstrap_count!r}): pass an integer >= 0, or None"
            )
        check_positive("ASHA", "grace_period", grace_period)
        check_positive("ASHA", "brackets", brackets, integer=True)
        if grace_period > max_t:
            raise ValueError(f"ASHA(grace_period={grace_period!r}): must not exceed max_t={max_t}")
        if isinstance(reduction_factor, bool) or not reduction_factor > 1:
            raise ValueError(f"ASHA(reduction_factor={reduction_factor!r}): pass a number above 1")
        self.max_t = max_t
        self.grace_period = grace_period
        self.reduction_factor = reduction_factor
        self.time_attr = time_attr
        self.bootstrap_count = bootstrap_count
        self.own_metric(metric, mode)
        self.rungs: list[list[_Rung]] = [
            [
                _Rung(m)
                for m in milestones(grace_period * reduction_factor**s, reduction_factor, max_t)
            ]
            for s in range(brackets)
        ]
        self._shares = bracket_shares(brackets, reduction_factor)
        self._bracket_of: dict[int, int] = {}
        self._joined = [0] * brackets
        self._planned: int | None = None
        self._model_based = False

    def __setstate__(self, state: dict[str, Any]) -> None:
        """An ASHA saved by a version without `bootstrap_count` goes on as it did: with 0."""
        state.setdefault("bootstrap_count", 0)
        state.setdefault("_planned", None)
        state.setdefault("_model_based", False)
        if "_joined" not in state:
            # Saved when the brackets took trials in turn (trial_id % brackets), not by share.
            brackets = len(state["rungs"])
            state["_shares"] = bracket_shares(brackets, state["reduction_factor"])
            joined = [0] * brackets
            for bracket in state["_bracket_of"].values():
                joined[bracket] += 1
            state["_joined"] = joined
        self.__dict__.update(state)

    def plan(self, trials: int | None, *, model_based: bool = False) -> None:
        self._planned = trials
        self._model_based = model_based

    def bootstrap_at(self, bracket: int, rung: int) -> int:
        """The bootstrap count in force at `rung` (0 = the lowest) of `bracket`."""
        if self.bootstrap_count is not None:
            return self.bootstrap_count
        if self._planned is None or not self._model_based:
            return 0
        expected = self._planned * self._shares[bracket] / self.reduction_factor**rung
        if expected < AUTO_BOOTSTRAP_ARRIVALS:
            return 0
        return math.ceil(self.reduction_factor) - 1

    def on_trial_add(self, trial: Trial) -> None:
        self._join(trial.trial_id)

    def _join(self, trial_id: int) -> int:
        """The trial's bracket: for a newcomer, the one furthest behind its share of trials."""
        if trial_id not in self._bracket_of:
            total = len(self._bracket_of) + 1
            behind = [
                share * total - joined
                for share, joined in zip(self._shares, self._joined, strict=True)
            ]
            bracket = behind.index(max(behind))
            self._bracket_of[trial_id] = bracket
            self._joined[bracket] += 1
        return self._bracket_of[trial_id]

    def on_result(self, trial: Trial, result: Mapping[str, Any]) -> Decision:
        progress = self.progress(result)
        if progress >= self.max_t:
            return Decision.STOP
        value = self.score(result)
        value = -math.inf if value is None else value
        bracket = self._join(trial.trial_id)
        rungs = self.rungs[bracket]
        for index in reversed(range(len(rungs))):
            rung = rungs[index]
            if progress < rung.milestone or trial.trial_id in rung.recorded:
                continue
            bootstrap = self.bootstrap_at(bracket, index)
            kept = rung.record(trial.trial_id, value, self.reduction_factor, bootstrap)
            return Decision.CONTINUE if kept else Decision.STOP
        return Decision.CONTINUE

    def next_decision_at(self, trial: Trial) -> float:
        """The trial's next rung not yet reached, or `max_t`."""
        rungs = self.rungs[self._join(trial.trial_id)]
        ahead = [rung.milestone for rung in rungs if trial.trial_id not in rung.recorded]
        return min([self.max_t, *ahead])

    def promoted(self, bracket: int = 0) -> list[list[int]]:
        """For each rung of `bracket`, lowest first, the trials that reached it in order."""
        return [list(rung.recorded) for rung in self.rungs[bracket]]


class _Rung:
    """One rung: where it is, and the score of every trial that reached it, in arrival order."""

    def __init__(self, milestone: float) -> None:
        self.milestone = milestone
        self.recorded: dict[int, float] = {}
        self._ascending: list[float] = []

    def __setstate__(self, state: dict[str, Any]) -> None:
        """A rung saved before it kept its scores sorted has them in `recorded` only."""
        state.setdefault("_ascending", sorted(state["recorded"].values()))
        self.__dict__.update(state)

    def record(
        self, trial_id: int, score: float, reduction_factor: float, bootstrap_count: int
    ) -> bool:
        """Record a trial's score; whether it ranks among the best 1/reduction_factor of the
        scores recorded here (at least the best one), once more than `bootstrap_count` are.
        Ties go the newcomer's way; a diverged trial (-inf) never raises the bar for the
        others."""
        self.recorded[trial_id] = score
        bisect.insort(self._ascending, score)
        if len(self._ascending) <= bootstrap_count:
            return False
        keep = max(1, math.floor(len(self._ascending) / reduction_factor))
        better = len(self._ascending) - bisect.bisect_right(self._ascending, score)
        return better < keep


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def bracket_shares(brackets: int, reduction_factor: float) -> list[float]:
    """The share of trials each bracket gets, most eager first: Hyperband's bracket sizes,
    n_s = ceil((s_max + 1) / (s + 1) * reduction_factor**s) for s = s_max, ..., 0."""
    sizes = [
        math.ceil(brackets / (brackets - b) * reduction_factor ** (brackets - 1 - b) - 1e-9)
        for b in range(brackets)
    ]
    return [size / sum(sizes) for size in sizes]


def milestones(first: float, reduction_factor: float, max_t: float) -> list[float]:
    """The rungs below `max_t`: first, first * reduction_factor, ... (a trial stops at max_t)."""
    rungs = []
    milestone = first
    while milestone < max_t:
        rungs.append(milestone)
        milestone *= reduction_factor
    return rungs
