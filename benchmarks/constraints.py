"""Whether OptunaSearch told the run's constraints finds the constrained optimum.

The problem: minimise (x - 2)^2 + (y - 1)^2 over x, y in [-3, 3] subject to x + y <= 1. The
unconstrained minimum (2, 1) is infeasible; the constrained one is (1, 0), with a loss of 2.
Each trial reports `loss` and `sum` (x + y); the run bounds `sum` with
`Tuner(constraints={"sum": (None, 1)})`, or leaves it unbounded (then only the figures take the
constraint into account).

Two methods, OptunaSearch (TPE, nbtune's defaults) told the constraints and not told them, each
for `--trials` trials and `--seeds` seeds, one trial at a time on a thread executor (a real
Tuner run; the trials are cheap). Prints one JSON line per method:

    {"figure": "constrained_optimum", "method": "TPE told the constraints", "trials": 150,
     "distance": 0.35, "distances": [...], "reached": 0.3, "regret": 0.2, "regrets": [...],
     "late_feasible": 0.66, "late_feasibles": [...], "optuna": "5.0.0"}

- `distance`: the mean over seeds of the distance from (1, 0) of the best feasible trial's
  (x, y) (by loss among trials with x + y <= 1);
- `reached`: the share of seeds whose best feasible trial lies within `REACHED` (0.25) of it;
- `regret`: the mean of the best feasible trial's loss minus the optimum's (2);
- `late_feasible`: the mean share of feasible trials in the second half of each run.

Usage:
    python benchmarks/constraints.py                 # 10 seeds of 150 trials (a few minutes)
    python benchmarks/constraints.py --seeds 3 --trials 40
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import tempfile
from typing import Any

import optuna

import nbtune as nt

OPTIMUM = (1.0, 0.0)
BOUND = {"sum": (None, 1)}
REACHED = 0.25
"""A run reaches the optimum when its best feasible trial lies this close to it."""


def train(config: dict[str, Any]) -> None:
    x, y = config["x"], config["y"]
    nt.report(loss=(x - 2) ** 2 + (y - 1) ** 2, sum=x + y)


def one_run(told: bool, seed: int, trials: int, folder: str) -> tuple[float, float, float]:
    """The distance of the best feasible trial from the optimum, its regret (its loss minus
    the optimum's, 2), and the share of feasible trials in the run's second half."""
    tuner = nt.Tuner(
        train,
        {"x": nt.uniform(-3, 3), "y": nt.uniform(-3, 3)},
        metric="loss",
        constraints=BOUND if told else None,
        searcher=nt.OptunaSearch(),
        executor=nt.ThreadExecutor(),
        num_samples=trials,
        max_concurrent=1,
        seed=seed,
        storage_path=folder,
        name=f"{'told' if told else 'blind'}-{seed}",
        progress=False,
    )
    tuner.run(display=False)
    frame = tuner.dataframe().sort_values("trial_id")
    feasible = frame["sum"] <= 1
    best = frame[feasible].sort_values("loss").iloc[0]
    distance = math.dist((best["config/x"], best["config/y"]), OPTIMUM)
    return distance, best["loss"] - 2.0, float(feasible.iloc[trials // 2 :].mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--trials", type=int, default=150)
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    with tempfile.TemporaryDirectory() as folder:
        for told in (True, False):
            runs = [one_run(told, seed, args.trials, folder) for seed in range(args.seeds)]
            distances = [round(distance, 4) for distance, _, _ in runs]
            regrets = [round(regret, 4) for _, regret, _ in runs]
            late = [round(share, 3) for _, _, share in runs]
            line = {
                "figure": "constrained_optimum",
                "method": "TPE told the constraints" if told else "TPE not told them",
                "trials": args.trials,
                "distance": round(statistics.mean(distances), 4),
                "distances": distances,
                "reached": sum(distance <= REACHED for distance in distances) / len(runs),
                "regret": round(statistics.mean(regrets), 4),
                "regrets": regrets,
                "late_feasible": round(statistics.mean(late), 3),
                "late_feasibles": late,
                "optuna": optuna.__version__,
            }
            print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
