"""How well a rung rule chooses: ASHA replayed on learning curves computed in advance.

peers.py compares nbtune with Ray Tune and Optuna on 3 seeds, where one trial cut at a rung
can decide a seed's best value. This script puts the question behind those figures to many
seeds. It replays asynchronous successive halving (max_t 27, grace period 1, reduction factor
3, 2 workers) on the learning curves of peers.py's early_stopping and sgd_digits workloads,
computed once, without sleeping, and prints one JSON line per (workload, rule):

    iterations      mean iterations run (the budget spent)
    regret          mean of (best value any configuration reaches) - (best value found),
                    made positive: 0 when early stopping cut nothing that mattered;
                    regret_se is its standard error
    best_3_seeds    mean best value over seeds 0-2 only, the figure peers.py compares

Rules (one bracket unless named):

    nbtune                      nbtune's ASHA: of the n trials at a rung, the best
                                max(1, n // 3) go on (Optuna's SuccessiveHalvingPruner too)
    nbtune-keep-0.4             the same ranking keeping max(1, floor(0.4 n)): looser
    ray                         Ray Tune's ASHAScheduler: a newcomer goes on if it scores at
                                least the interpolated 66.7th percentile of those before it
    ray-q0.78                   the same with the 78th percentile: stricter
    nbtune-4-brackets           ASHA(brackets=4), brackets given by trial order (nbtune)
    nbtune-4-brackets-random    the same shares, brackets drawn at random (as Optuna's
                                HyperbandPruner does, by hashing)

An iteration takes its configuration's seconds (10 ms for the synthetic curves, the measured
epoch for SGD) times 1 + 3 % Gaussian noise, so each repeat has an arrival order of its own,
as real runs do. The nbtune rules drive nbtune's own `ASHA` object.

Usage:
    python benchmarks/rungs.py                     # 200 synthetic seeds, 20 SGD seeds, 5 repeats
    python benchmarks/rungs.py --workload early_stopping --seeds 50
    python benchmarks/rungs.py --quick             # small sizes: a smoke test
"""

from __future__ import annotations

import argparse
import functools
import heapq
import json
import math
import statistics
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from joblib import Parallel, delayed
from overhead import FULL, QUICK, WORKERS, Sizes
from peers import (
    GRACE_PERIOD,
    MAX_T,
    REDUCTION_FACTOR,
    curve_loss,
    curve_points,
    rounded,
    sgd_points,
    sgd_steps,
)

import nbtune as nt
from nbtune.schedulers import Decision
from nbtune.schedulers.asha import milestones
from nbtune.trial import Trial

JITTER = 0.03
"""Relative spread of an iteration's time around its configuration's seconds."""


@dataclass(frozen=True)
class Curves:
    """One seed's configurations: each one's metric at iterations 1..MAX_T, and its seconds
    an iteration."""

    values: list[list[float]]
    seconds: list[float]
    mode: str

    def best(self, values: Sequence[float]) -> float:
        return min(values) if self.mode == "min" else max(values)

    @functools.cached_property
    def optimum(self) -> float:
        """The best value any configuration reaches."""
        return self.best([value for curve in self.values for value in curve])

    def regret(self, best: float) -> float:
        """How far `best` falls short of `optimum`."""
        return abs(self.optimum - best)


def synthetic_curves(seed: int, sizes: Sizes) -> Curves:
    points = curve_points(seed, sizes)
    values = [[curve_loss(p, t) for t in range(1, MAX_T + 1)] for p in points]
    return Curves(values, [0.01] * len(points), "min")


def sgd_curves(seed: int, sizes: Sizes) -> Curves:
    """Every configuration trained to MAX_T epochs, two at a time (one per core)."""
    runs = Parallel(n_jobs=WORKERS)(delayed(timed_curve)(p) for p in sgd_points(seed, sizes))
    return Curves([values for values, _ in runs], [seconds for _, seconds in runs], "max")


def timed_curve(point: dict) -> tuple[list[float], float]:
    began = time.perf_counter()
    values = [metrics["accuracy"] for metrics in sgd_steps(point)]
    return values, (time.perf_counter() - began) / len(values)


# ----- rules: whether a trial goes on after its value at iteration t ---------------------------


class SchedulerRule:
    """nbtune's ASHA itself; trials join it (and so its brackets) in `order`."""

    def __init__(self, scheduler: nt.ASHA, curves: Curves, order: Sequence[int]) -> None:
        scheduler.setup("value", curves.mode, 0)
        self.scheduler = scheduler
        self.trials = [Trial(trial_id=i, config={}) for i in range(len(curves.values))]
        for trial_id in order:
            scheduler.on_trial_add(self.trials[trial_id])

    def goes_on(self, trial_id: int, t: int, value: float) -> bool:
        result = {"training_iteration": t, "value": value}
        return self.scheduler.on_result(self.trials[trial_id], result) is Decision.CONTINUE


class OneBracketRule:
    """A rule that judges a newcomer at a rung by the scores recorded there before it."""

    def __init__(self, curves: Curves) -> None:
        self.sign = 1.0 if curves.mode == "max" else -1.0
        first = milestones(GRACE_PERIOD, REDUCTION_FACTOR, MAX_T)
        self.rungs: dict[int, list[float]] = {m: [] for m in first}

    def goes_on(self, trial_id: int, t: int, value: float) -> bool:
        if t >= MAX_T:
            return False
        earlier = self.rungs.get(t)
        if earlier is None:
            return True
        score = self.sign * value
        verdict = self.admits(earlier, score)
        earlier.append(score)
        return verdict

    def admits(self, earlier: list[float], score: float) -> bool:
        raise NotImplementedError


class KeepBest(OneBracketRule):
    """Ranks the newcomer among all n at the rung; the best max(1, floor(fraction n)) go on."""

    def __init__(self, curves: Curves, fraction: float) -> None:
        super().__init__(curves)
        self.fraction = fraction

    def admits(self, earlier: list[float], score: float) -> bool:
        keep = max(1, math.floor(self.fraction * (len(earlier) + 1) + 1e-9))
        return sum(other > score for other in earlier) < keep


class AtLeastQuantile(OneBracketRule):
    """Ray Tune's rule: the newcomer goes on if it scores at least the `quantile` of those
    before it (linear interpolation); the first one always goes on."""

    def __init__(self, curves: Curves, quantile: float) -> None:
        super().__init__(curves)
        self.quantile = quantile

    def admits(self, earlier: list[float], score: float) -> bool:
        return not earlier or score >= np.percentile(earlier, 100 * self.quantile)


def asha(brackets: int, shuffled: bool) -> Callable[[Curves, np.random.Generator], SchedulerRule]:
    def rule(curves: Curves, rng: np.random.Generator) -> SchedulerRule:
        order = np.arange(len(curves.values))
        if shuffled:
            rng.shuffle(order)
        scheduler = nt.ASHA(
            max_t=MAX_T,
            grace_period=GRACE_PERIOD,
            reduction_factor=REDUCTION_FACTOR,
            brackets=brackets,
        )
        return SchedulerRule(scheduler, curves, order.tolist())

    return rule


RULES: dict[str, Callable[[Curves, np.random.Generator], object]] = {
    "nbtune": asha(1, shuffled=False),
    "nbtune-keep-0.4": lambda curves, rng: KeepBest(curves, 0.4),
    "ray": lambda curves, rng: AtLeastQuantile(curves, 1 - 1 / REDUCTION_FACTOR),
    "ray-q0.78": lambda curves, rng: AtLeastQuantile(curves, 0.78),
    "nbtune-4-brackets": asha(4, shuffled=False),
    "nbtune-4-brackets-random": asha(4, shuffled=True),
}


# ----- the replay ----------------------------------------------------------------------------


def replay(curves: Curves, rule: object, rng: np.random.Generator) -> tuple[int, float]:
    """Every configuration through `rule` on WORKERS simulated workers, in order; the
    iterations run and the best value seen."""
    waiting = deque(range(len(curves.values)))
    running: list[tuple[float, int, int]] = []
    """(time its next value arrives, trial, iteration), earliest first."""

    def step(now: float, trial_id: int, t: int) -> None:
        took = curves.seconds[trial_id] * (1 + JITTER * rng.standard_normal())
        heapq.heappush(running, (now + took, trial_id, t))

    for _ in range(WORKERS):
        step(0.0, waiting.popleft(), 1)
    seen = []
    while running:
        now, trial_id, t = heapq.heappop(running)
        value = curves.values[trial_id][t - 1]
        seen.append(value)
        if rule.goes_on(trial_id, t, value):
            step(now, trial_id, t + 1)
        elif waiting:
            step(now, waiting.popleft(), 1)
    return len(seen), curves.best(seen)


def measure(workload: str, seeds: list[Curves], repeats: int) -> list[dict]:
    """One line per rule: its means over every seed and repeat."""
    lines = []
    for name, make_rule in RULES.items():
        iterations, regrets, bests = [], [], {}
        for seed, curves in enumerate(seeds):
            for repeat in range(repeats):
                rng = np.random.default_rng([seed, repeat])
                ran, best = replay(curves, make_rule(curves, rng), rng)
                iterations.append(ran)
                regrets.append(curves.regret(best))
                bests.setdefault(seed, []).append(best)
        first = [statistics.mean(bests[seed]) for seed in range(min(3, len(seeds)))]
        lines.append(
            {
                "workload": workload,
                "rule": name,
                "seeds": len(seeds),
                "repeats": repeats,
                "iterations": statistics.mean(iterations),
                "regret": statistics.mean(regrets),
                "regret_se": statistics.stdev(regrets) / math.sqrt(len(regrets)),
                "best_3_seeds": statistics.mean(first),
            }
        )
    return lines


WORKLOADS = {"early_stopping": synthetic_curves, "sgd_digits": sgd_curves}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", choices=["all", *WORKLOADS], default="all")
    parser.add_argument("--seeds", type=int, help="seeds (default 200 synthetic, 20 SGD)")
    parser.add_argument("--repeats", type=int, default=5, help="arrival orders per seed")
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke test")
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    defaults = {"early_stopping": 20 if args.quick else 200, "sgd_digits": 2 if args.quick else 20}
    names = list(WORKLOADS) if args.workload == "all" else [args.workload]
    for workload in names:
        count = args.seeds or defaults[workload]
        seeds = [WORKLOADS[workload](seed, sizes) for seed in range(count)]
        for line in measure(workload, seeds, args.repeats):
            print(json.dumps(rounded(line)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
