"""TuneSearchCV against scikit-learn's RandomizedSearchCV (and Optuna's OptunaSearchCV where
it is installed) on the same machine, 2 workers each.

Prints one JSON line per (model, search) with its wall time and best score, then one line per
goal:

    fifo_wall_ratio   TuneSearchCV (FIFO) wall / RandomizedSearchCV(n_jobs=2) wall: <= 1.05,
                      with the same best score (same candidates, same folds)
    asha_speedup      RandomizedSearchCV wall / TuneSearchCV with ASHA over the folds
                      (max_t = the number of folds, grace 1, reduction 3): >= 1.5, with a best
                      score within 0.005 of RandomizedSearchCV's

Models: HistGradientBoostingClassifier (25 boosting iterations, to keep a run to about a minute
and a half on 2 cores) and SVC (rbf), on load_digits, 40 candidates drawn with random_state=0
(TuneSearchCV and RandomizedSearchCV draw the same ones with scikit-learn's ParameterSampler;
Optuna's TPE draws its own), cv=5. Each search runs once after a small warm-up fit of each
kind, so that every one starts on warm worker pools (joblib's and nbtune's), as a second
search in a notebook does. `data_pickle_mb` is the size of the data the Tuner's trainable
carries to each worker once, `data_pickle_s` the time to pickle it.

A short search, where a fixed cost or an idle worker at the end weighs most (issue 30: 3.42 s
against 2.86 s), is measured by `--short`: SVC on load_digits, 10 candidates, cv=5,
`TuneSearchCV(n_jobs=2)` and `RandomizedSearchCV(n_jobs=2)` in turns, 5 rounds; one line per
search and round, then `short_svc_wall_ratio`, the ratio of the median walls (<= 1.05, same
best score).

Usage:
    python benchmarks/sklearn.py            # 40 candidates, cv=5 (several minutes)
    python benchmarks/sklearn.py --quick    # 6 candidates, cv=3, smaller models: a smoke test
    python benchmarks/sklearn.py --short    # the short search, 5 rounds (about a minute)
"""

from __future__ import annotations

import sys
from pathlib import Path

# This file is named like the library it measures: move its folder from the front of the path
# to the end, so that `import sklearn` (here and in the worker processes, which inherit the
# path) finds scikit-learn, and `import overhead` still finds the benchmarks' helpers.
sys.path.remove(str(Path(__file__).resolve().parent))
sys.path.append(str(Path(__file__).resolve().parent))

import argparse
import json
import pickle
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import scipy.stats as st
from overhead import WORKERS, OtherCpu, Target, figure_row
from sklearn.datasets import load_digits
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.model_selection import RandomizedSearchCV
from sklearn.svm import SVC

import nbtune as nt
from nbtune.sklearn import TuneSearchCV

RANDOM_STATE = 0
FIFO_RATIO = Target("<=", 1.05)
SHORT_ROUNDS = 5
ASHA_SPEEDUP = Target(">=", 1.5)
ASHA_SCORE_GAP = 0.005


@dataclass(frozen=True)
class Sizes:
    n_trials: int
    cv: int
    hgb_iterations: int


FULL = Sizes(n_trials=40, cv=5, hgb_iterations=25)
QUICK = Sizes(n_trials=6, cv=3, hgb_iterations=5)


def models(sizes: Sizes) -> dict[str, tuple[Any, dict[str, Any]]]:
    """Each model and the distributions its candidates are drawn from."""
    hgb = HistGradientBoostingClassifier(max_iter=sizes.hgb_iterations, early_stopping=False)
    return {
        "hgb": (
            hgb,
            {
                "learning_rate": st.loguniform(0.01, 0.5),
                "max_leaf_nodes": st.randint(8, 48),
                "min_samples_leaf": st.randint(5, 50),
                "l2_regularization": st.loguniform(1e-6, 1.0),
            },
        ),
        "svc": (SVC(), {"C": st.loguniform(1e-2, 1e3), "gamma": st.loguniform(1e-5, 1e-1)}),
    }


SHORT = Sizes(n_trials=10, cv=5, hgb_iterations=0)


def randomized(estimator: Any, space: dict, sizes: Sizes, storage: str) -> Any:
    return RandomizedSearchCV(
        estimator, space, n_iter=sizes.n_trials, cv=sizes.cv, n_jobs=WORKERS, random_state=0
    )


def tune(scheduler: Callable[[Sizes], nt.Scheduler | None]) -> Callable[..., Any]:
    def make(estimator: Any, space: dict, sizes: Sizes, storage: str) -> Any:
        return TuneSearchCV(
            estimator,
            space,
            n_trials=sizes.n_trials,
            cv=sizes.cv,
            random_state=RANDOM_STATE,
            n_jobs=WORKERS,
            scheduler=scheduler(sizes),
            storage_path=storage,
            display=False,
        )

    return make


def optuna_search(estimator: Any, space: dict, sizes: Sizes, storage: str) -> Any:
    """Optuna's OptunaSearchCV (TPE) over the same ranges as `space`."""
    from optuna_integration import OptunaSearchCV

    return OptunaSearchCV(
        estimator,
        {name: _optuna_distribution(dist) for name, dist in space.items()},
        n_trials=sizes.n_trials,
        cv=sizes.cv,
        n_jobs=WORKERS,
        random_state=RANDOM_STATE,
    )


def _optuna_distribution(dist: Any) -> Any:
    """scipy's loguniform or randint as the Optuna distribution over the same values."""
    from optuna.distributions import FloatDistribution, IntDistribution

    low, high = dist.support()
    if dist.dist.name == "randint":
        return IntDistribution(int(low), int(high))
    return FloatDistribution(float(low), float(high), log=True)


SEARCHES: dict[str, Callable[..., Any]] = {
    "randomized": randomized,
    "nbtune-fifo": tune(lambda sizes: None),
    "nbtune-asha": tune(lambda sizes: nt.ASHA(max_t=sizes.cv, grace_period=1, reduction_factor=3)),
    "optuna": optuna_search,
}


def measure(model: str, search: str, estimator: Any, space: dict, sizes: Sizes) -> dict:
    X, y = load_digits(return_X_y=True)
    with tempfile.TemporaryDirectory() as storage:
        try:
            made = SEARCHES[search](estimator, space, sizes, storage)
        except ImportError as exc:
            return {"model": model, "search": search, "skipped": f"not installed: {exc.name}"}
        other = OtherCpu()
        began = time.perf_counter()
        made.fit(X, y)
        wall = time.perf_counter() - began
        row = {
            "model": model,
            "search": search,
            "wall_s": round(wall, 3),
            "best_score": round(float(made.best_score_), 5),
            "best_params": {k: _plain(v) for k, v in made.best_params_.items()},
            "fits": _fits(made, sizes),
            "other_cpu_pct": round(other.percent(), 1),
        }
    if search.startswith("nbtune"):
        row.update(_data_cost(made))
    return row


def _fits(search: Any, sizes: Sizes) -> int:
    """How many folds were fitted: all of them but those a scheduler cut."""
    if isinstance(search, TuneSearchCV):
        return int(search.tuner.dataframe()["training_iteration"].sum())
    return len(search.cv_results_["params"]) * sizes.cv


def _data_cost(search: TuneSearchCV) -> dict[str, float]:
    """What the trainable (the data inside) costs to pickle: once per run, sent once per
    worker."""
    began = time.perf_counter()
    size = len(pickle.dumps(search.tuner.trainable, protocol=pickle.HIGHEST_PROTOCOL))
    return {"data_pickle_mb": round(size / 1e6, 3), "data_pickle_s": time.perf_counter() - began}


def _plain(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


def warm_up(sizes: Sizes) -> None:
    """One tiny fit of each kind, so every measured search starts on warm worker pools."""
    X, y = load_digits(return_X_y=True)
    tiny = Sizes(n_trials=2, cv=2, hgb_iterations=1)
    for search in ("randomized", "nbtune-fifo"):
        with tempfile.TemporaryDirectory() as storage:
            SEARCHES[search](SVC(), {"C": [1.0, 2.0]}, tiny, storage).fit(X[:200], y[:200])


def goals(model: str, rows: dict[str, dict]) -> list[dict]:
    """The two goal lines of `model`, from its rows by search."""
    base, fifo, asha = rows["randomized"], rows["nbtune-fifo"], rows["nbtune-asha"]
    ratio = fifo["wall_s"] / base["wall_s"]
    speedup = base["wall_s"] / asha["wall_s"]
    same = abs(fifo["best_score"] - base["best_score"]) < 1e-9
    gap = base["best_score"] - asha["best_score"]
    fifo_row = figure_row(f"{model}_fifo_wall_ratio", ratio, "x", FIFO_RATIO, same_best=same)
    fifo_row["passed"] = fifo_row["passed"] and same
    asha_row = figure_row(
        f"{model}_asha_speedup", speedup, "x", ASHA_SPEEDUP, best_score_gap=round(gap, 5)
    )
    asha_row["passed"] = asha_row["passed"] and gap <= ASHA_SCORE_GAP
    return [fifo_row, asha_row]


def short() -> None:
    """The short search: both searches in turns, then the ratio of their median walls."""
    estimator, space = models(SHORT)["svc"]
    rows: dict[str, list[dict]] = {"randomized": [], "nbtune-fifo": []}
    for round_ in range(SHORT_ROUNDS):
        for search in rows:
            row = measure("svc-short", search, estimator, space, SHORT)
            row["round"] = round_
            rows[search].append(row)
            print(json.dumps(row), flush=True)
    walls = {
        search: statistics.median(r["wall_s"] for r in found) for search, found in rows.items()
    }
    best = {search: {r["best_score"] for r in got} for search, got in rows.items()}
    ratio = walls["nbtune-fifo"] / walls["randomized"]
    line = figure_row(
        "short_svc_wall_ratio",
        ratio,
        "x",
        FIFO_RATIO,
        randomized_median_s=round(walls["randomized"], 3),
        nbtune_median_s=round(walls["nbtune-fifo"], 3),
        same_best=best["randomized"] == best["nbtune-fifo"],
    )
    line["passed"] = line["passed"] and line["same_best"]
    print(json.dumps(line), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke test")
    parser.add_argument("--short", action="store_true", help="the short search, in turns")
    parser.add_argument("--model", choices=("hgb", "svc"), action="append")
    arguments = parser.parse_args()
    sizes = QUICK if arguments.quick else FULL
    chosen = arguments.model or ["hgb", "svc"]
    warm_up(sizes)
    if arguments.short:
        short()
        return
    for model, (estimator, space) in models(sizes).items():
        if model not in chosen:
            continue
        rows = {}
        for search in SEARCHES:
            rows[search] = measure(model, search, estimator, space, sizes)
            print(json.dumps(rows[search]), flush=True)
        for line in goals(model, rows):
            print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
