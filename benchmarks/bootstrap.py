"""What ASHA's bootstrapping risks: how often a run ends with no trial run in full.

Bootstrapping a rung (`ASHA(bootstrap_count=reduction_factor - 1)`) stops the first arrivals
there, however good, so that no trial goes on unjudged; in a run of few trials it can stop
every trial before `max_t`. This script replays nbtune's own `ASHA` on trials that arrive one
at a time, each with a quality drawn at random and a score at each rung of that quality plus
Gaussian noise (sd 0.1 of the qualities' range), and prints one JSON line per (shape, planned
trials, rule):

    full_mean       mean number of trials run in full
    none_share      share of runs in which no trial ran in full

Rules: `0` (never bootstrap: Ray Tune's and Optuna's default), `every rung`
(bootstrap_count = ceil(reduction_factor) - 1 everywhere) and `auto` (nbtune's default: only at
the rungs that at least `AUTO_BOOTSTRAP_ARRIVALS` of the planned trials are expected to reach).

Usage:
    python benchmarks/bootstrap.py            # 300 runs per line (~1 minute)
    python benchmarks/bootstrap.py --runs 50  # a smoke test
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics

import nbtune as nt
from nbtune.schedulers.asha import milestones

SHAPES = [(3, 27), (3, 81), (4, 64), (2, 16)]
"""(reduction_factor, max_t) with grace period 1: 3, 4, 3 and 4 rungs."""
PLANNED = [10, 20, 30, 50, 81, 100, 200]
RULES = {"0": 0, "every rung": "every", "auto": None}


def run_in_full(reduction_factor: float, max_t: int, planned: int, rule, seed: int) -> int:
    """How many of `planned` trials one replayed run lets reach `max_t`."""
    every = math.ceil(reduction_factor) - 1
    asha = nt.ASHA(
        max_t=max_t,
        reduction_factor=reduction_factor,
        bootstrap_count=every if rule == "every" else rule,
    )
    asha.setup("loss", "min")
    asha.plan(planned, model_based=True)
    rng = random.Random(seed)
    rungs = milestones(1, reduction_factor, max_t)
    full = 0
    for trial_id in range(planned):
        trial = nt.Trial(trial_id, {})
        asha.on_trial_add(trial)
        quality = rng.random()
        for at in [*rungs, max_t]:
            loss = quality + rng.gauss(0, 0.1)
            if asha.on_result(trial, {"loss": loss, "training_iteration": at}).name == "STOP":
                full += at >= max_t
                break
    return full


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300, help="replayed runs per line")
    args = parser.parse_args(argv)
    for reduction_factor, max_t in SHAPES:
        for planned in PLANNED:
            for name, rule in RULES.items():
                fulls = [
                    run_in_full(reduction_factor, max_t, planned, rule, seed)
                    for seed in range(args.runs)
                ]
                line = {
                    "reduction_factor": reduction_factor,
                    "max_t": max_t,
                    "planned": planned,
                    "rule": name,
                    "full_mean": round(statistics.mean(fulls), 2),
                    "none_share": round(sum(full == 0 for full in fulls) / len(fulls), 3),
                }
                print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
