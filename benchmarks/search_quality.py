"""How good the configurations are that each search finds with the same budget of iterations.

Prints one JSON line per problem and method, for example:

    {"figure": "regret", "problem": "branin", "method": "nbtune TPE+ASHA", "mean": 0.021,
     "seeds": [...], "budget_iterations": 600, ...}

Three problems, each with a fidelity axis (the value a trial reports approaches its true value
as its iterations grow, at a pace that differs between configurations, so early stopping can
misjudge):
- `branin` (2-D, minimum 0.397887) and `hartmann6` (6-D, minimum -3.32237): the figure is the
  regret, the true value of the best configuration that ran in full minus the optimum;
- `sgd_digits`: scikit-learn's SGDClassifier on the digits, one `partial_fit` epoch per
  iteration; the figure is the best validation accuracy of a configuration that ran in full.

Four methods, each stopped once it has run `budget_iterations` iterations in all (a
configuration counts as run in full only if its last iteration is within that budget): nbtune's
RandomSearch with ASHA; nbtune's OptunaSearch (TPE) with ASHA; plain Optuna (TPE with its
HyperbandPruner); and nbtune TPE+ASHA again with `ASHA(bootstrap_count=0)`, which lets the
first trial to reach a rung go on unjudged, as Optuna's pruners and Ray Tune's ASHA do (nbtune's
default bootstraps the rungs that the run's planned trials will crowd; this run plans 10,000
and the budget stops it, so every rung). Means over `SEEDS` seeds, with their standard error.
The goal: nbtune TPE+ASHA (defaults) no worse than Optuna.

Usage:
    python benchmarks/search_quality.py            # every problem (a few minutes)
    python benchmarks/search_quality.py --quick    # 2 seeds, smaller budgets: a smoke test
    python benchmarks/search_quality.py --problem hartmann6 --seeds 50  # a tighter mean
    python benchmarks/search_quality.py --problem branin --seeds 50 --budget 1200
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import tempfile
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import optuna

import nbtune as nt
from nbtune.events import TrialResult
from nbtune.search.optuna import distributions
from nbtune.space import SearchSpace

MAX_T = 27
"""Iterations of a configuration run in full (ASHA's and Hyperband's maximum resource)."""
SEEDS = 5


@dataclass(frozen=True)
class Problem:
    """An objective with a fidelity axis: `value(config, t)` at iteration t of MAX_T."""

    name: str
    space: Mapping[str, Any]
    value: Callable[[Mapping[str, Any], int], float]
    final: Callable[[Mapping[str, Any]], float]
    mode: str
    optimum: float | None
    budget: int


def branin(config: Mapping[str, Any]) -> float:
    x, y = config["x"], config["y"]
    a, b, c, r, s, t = 1, 5.1 / (4 * math.pi**2), 5 / math.pi, 6, 10, 1 / (8 * math.pi)
    return a * (y - b * x**2 + c * x - r) ** 2 + s * (1 - t) * math.cos(x) + s


_H_ALPHA = np.array([1.0, 1.2, 3.0, 3.2])
_H_A = np.array(
    [
        [10, 3, 17, 3.5, 1.7, 8],
        [0.05, 10, 17, 0.1, 8, 14],
        [3, 3.5, 1.7, 10, 17, 8],
        [17, 8, 0.05, 10, 0.1, 14],
    ]
)
_H_P = 1e-4 * np.array(
    [
        [1312, 1696, 5569, 124, 8283, 5886],
        [2329, 4135, 8307, 3736, 1004, 9991],
        [2348, 1451, 3522, 2883, 3047, 6650],
        [4047, 8828, 8732, 5743, 1091, 381],
    ]
)


def hartmann6(config: Mapping[str, Any]) -> float:
    x = np.array([config[f"x{i}"] for i in range(6)])
    return float(-np.sum(_H_ALPHA * np.exp(-np.sum(_H_A * (x - _H_P) ** 2, axis=1))))


def with_fidelity(final: Callable[[Mapping[str, Any]], float], scale: float):
    """The value at iteration t: the true one plus a gap that closes as t grows, faster for
    some configurations than for others."""

    def value(config: Mapping[str, Any], t: int) -> float:
        pace = 1.0 + 0.5 * math.sin(7.0 * sum(float(v) for v in config.values()))
        return final(config) + scale * pace * (1.0 - t / MAX_T) ** 2

    return value


def digits_data():
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    features, labels = load_digits(return_X_y=True)
    features = StandardScaler().fit_transform(features)
    return train_test_split(features, labels, test_size=0.3, random_state=0)


_DIGITS = None


def sgd_accuracies(config: Mapping[str, Any]) -> list[float]:
    """Validation accuracy after each of MAX_T epochs (cached: the same config, the same run)."""
    global _DIGITS
    if _DIGITS is None:
        _DIGITS = digits_data()
    from sklearn.linear_model import SGDClassifier

    x_train, x_valid, y_train, y_valid = _DIGITS
    model = SGDClassifier(
        alpha=config["alpha"],
        learning_rate="invscaling",
        eta0=config["eta0"],
        penalty="elasticnet",
        l1_ratio=config["l1_ratio"],
        random_state=0,
    )
    accuracies = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(MAX_T):
            model.partial_fit(x_train, y_train, classes=np.arange(10))
            accuracies.append(float(model.score(x_valid, y_valid)))
    return accuracies


def problems(budget: int = 600) -> list[Problem]:
    """The three problems; `sgd_digits` gets half of `budget` (its epochs are slower)."""
    return [
        Problem(
            "branin",
            {"x": nt.uniform(-5, 10), "y": nt.uniform(0, 15)},
            with_fidelity(branin, 30.0),
            branin,
            "min",
            0.397887,
            budget,
        ),
        Problem(
            "hartmann6",
            {f"x{i}": nt.uniform(0, 1) for i in range(6)},
            with_fidelity(hartmann6, 1.0),
            hartmann6,
            "min",
            -3.32237,
            budget,
        ),
        Problem(
            "sgd_digits",
            {
                "alpha": nt.loguniform(1e-6, 1e-1),
                "eta0": nt.loguniform(1e-4, 1.0),
                "l1_ratio": nt.uniform(0.0, 1.0),
            },
            lambda config, t: sgd_accuracies(config)[t - 1],
            lambda config: sgd_accuracies(config)[-1],
            "max",
            None,
            budget // 2,
        ),
    ]


def run_nbtune(
    problem: Problem, searcher: nt.Searcher, seed: int, bootstrap_count: int | None = None
) -> list[Mapping[str, Any]]:
    """The configurations that ran in full within the budget, with nbtune and ASHA."""

    def train(config):
        for t in range(1, MAX_T + 1):
            nt.report(value=problem.value(config, t))

    with tempfile.TemporaryDirectory() as storage:
        tuner = nt.Tuner(
            train,
            problem.space,
            metric="value",
            mode=problem.mode,
            num_samples=10_000,
            max_concurrent=1,
            searcher=searcher,
            scheduler=nt.ASHA(
                max_t=MAX_T, grace_period=1, reduction_factor=3, bootstrap_count=bootstrap_count
            ),
            executor=nt.ThreadExecutor(),
            storage_path=storage,
            seed=seed,
            progress=False,
        )
        spent = [0]
        in_full = []

        def count(event):
            if not isinstance(event, TrialResult) or spent[0] >= problem.budget:
                return
            spent[0] += 1
            if event.result["training_iteration"] == MAX_T:
                in_full.append(event.trial_id)
            if spent[0] == problem.budget:
                tuner.stop()

        tuner.subscribe(count)
        tuner.run()
        configs = {trial.trial_id: trial.config for trial in tuner.trials}
        return [configs[trial_id] for trial_id in in_full]


def run_optuna(problem: Problem, seed: int) -> list[Mapping[str, Any]]:
    """The configurations that ran in full within the budget, with plain Optuna (TPE,
    HyperbandPruner)."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(
        study_name=f"{problem.name}-{seed}",  # Hyperband's brackets hash the study's name
        direction="minimize" if problem.mode == "min" else "maximize",
        sampler=optuna.samplers.TPESampler(seed=seed),
        pruner=optuna.pruners.HyperbandPruner(min_resource=1, max_resource=MAX_T),
    )
    space = distributions(SearchSpace(problem.space))
    spent = [0]

    def objective(trial):
        config = {
            name: trial.suggest_float(name, d.low, d.high, log=d.log) for name, d in space.items()
        }
        for t in range(1, MAX_T + 1):
            if spent[0] == problem.budget:
                study.stop()
                raise optuna.TrialPruned  # out of budget before its end: not run in full
            value = problem.value(config, t)
            spent[0] += 1
            trial.report(value, t)
            if trial.should_prune():
                raise optuna.TrialPruned
        return value

    study.optimize(objective, n_trials=10_000)
    complete = optuna.trial.TrialState.COMPLETE
    return [t.params for t in study.trials if t.state == complete]


def score(problem: Problem, configs: list[Mapping[str, Any]]) -> float:
    """Regret of the best configuration run in full, or its accuracy (sgd_digits)."""
    finals = [problem.final(config) for config in configs]
    if not finals:
        return math.inf if problem.mode == "min" else 0.0
    if problem.mode == "max":
        return max(finals)
    return min(finals) - problem.optimum


METHODS: dict[str, Callable[[Problem, int], list[Mapping[str, Any]]]] = {
    "nbtune random+ASHA": lambda problem, seed: run_nbtune(problem, nt.RandomSearch(), seed),
    "nbtune TPE+ASHA": lambda problem, seed: run_nbtune(problem, nt.OptunaSearch(), seed),
    "optuna TPE+Hyperband": run_optuna,
    "nbtune TPE+ASHA(bootstrap_count=0)": lambda problem, seed: run_nbtune(
        problem, nt.OptunaSearch(), seed, bootstrap_count=0
    ),
}


def standard_error(scores: list[float]) -> float:
    """The standard error of the mean of `scores` (0 for a single one; inf if one is)."""
    if not all(math.isfinite(score) for score in scores):
        return math.inf
    if len(scores) < 2:
        return 0.0
    return statistics.stdev(scores) / math.sqrt(len(scores))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 seeds, half the budget")
    parser.add_argument("--budget", type=int, help="iterations per run (default 600; sgd half)")
    parser.add_argument("--problem", action="append", help="only this problem (repeatable)")
    parser.add_argument("--seeds", type=int, help=f"how many seeds (default {SEEDS})")
    parser.add_argument("--first-seed", type=int, default=0, help="seeds from this one on")
    args = parser.parse_args(argv)
    count = args.seeds or (2 if args.quick else SEEDS)
    seeds = range(args.first_seed, args.first_seed + count)
    budget = args.budget or (300 if args.quick else 600)
    chosen = [p for p in problems(budget) if not args.problem or p.name in args.problem]
    for problem in chosen:
        for method, run in METHODS.items():
            found = [run(problem, seed) for seed in seeds]
            scores = [score(problem, configs) for configs in found]
            print(
                json.dumps(
                    {
                        "figure": "accuracy" if problem.mode == "max" else "regret",
                        "problem": problem.name,
                        "method": method,
                        "mean": round(statistics.mean(scores), 5),
                        "standard_error": round(standard_error(scores), 5),
                        "seeds": [round(value, 5) for value in scores],
                        "seeds_with_none_in_full": sum(not configs for configs in found),
                        "first_seed": args.first_seed,
                        "budget_iterations": problem.budget,
                        "max_t": MAX_T,
                    }
                ),
                flush=True,
            )


if __name__ == "__main__":
    main()
