"""nbtune against its peers, Ray Tune and Optuna, on the same workloads and the same machine.

Prints one JSON line per (workload, framework, seed), then one summary line per workload with
the means over the seeds and, where nbtune and a peer both ran, whether nbtune met its target.

Workloads (each framework runs the same configurations, drawn from one seeded list, on 2
parallel workers; metric and mode come from the workload):

    dispatch        200 trials of a no-op trainable that reports 10 times (trials/s)
    parallel        8 trials that burn 1 s of CPU in 10 reports (wall time / ideal)
    early_stopping  64 synthetic learning curves, max 27 iterations of ~10 ms, ASHA
                    (grace 1, reduction 3); Optuna: SuccessiveHalving and Hyperband pruners
    sgd_digits      SGDClassifier.partial_fit on load_digits, 40 configurations, max 27
                    epochs, the same early stopping; best validation accuracy

Parallel workers: nbtune runs 2 loky processes (`max_concurrent=2`), Ray Tune 2 worker
processes (`ray.init(num_cpus=2)`, one CPU a trial), Optuna `study.optimize(n_jobs=2)`, which
is 2 *threads* of this process: the GIL serialises pure-Python work (the `parallel` workload
shows it), while sleeps and NumPy release it. Ray's `ray.init()` is timed once, apart
(`ray_init_s`); each run's wall time is its `fit()`/`run()`/`optimize()` call.

Usage:
    python benchmarks/peers.py                                 # every framework, 3 seeds
    python benchmarks/peers.py --framework ray --workload early_stopping --seeds 1
    python benchmarks/peers.py --quick                         # small sizes: a smoke test
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from overhead import FULL, QUICK, WORKERS, OtherCpu, Sizes, figure_row, timed_run

import nbtune as nt

MAX_T = 27
"""Most iterations of a trial in the early-stopping workloads (ASHA's max_t)."""
GRACE_PERIOD = 1
REDUCTION_FACTOR = 3
FRAMEWORKS = (
    "nbtune",
    "nbtune-hyperband",
    "nbtune-threads",
    "ray",
    "optuna-sha",
    "optuna-hyperband",
)
BRACKETS = 4
"""Brackets of the Hyperband variants: Optuna's HyperbandPruner(1, 27, 3) makes
floor(log_3(27 / 1)) + 1 of them, and nbtune's ASHA(brackets=4) the same rungs."""
COUNTERPART = {"ray": "nbtune", "optuna-sha": "nbtune", "optuna-hyperband": "nbtune-hyperband"}
"""Which nbtune run each peer's early stopping is compared with: like with like. `nbtune-threads`
(ASHA with trials on threads of this process, as Optuna runs them) is for information: it tells
what nbtune's worker processes cost on a workload that sleeps."""

Point = Mapping[str, Any]
"""One configuration of a workload."""

# ----- the trainables' work, as generators of results: each framework only reports them ------


def noop_steps(point: Point) -> Iterator[dict[str, float]]:
    """`point["reports"]` results and nothing else."""
    for step in range(point["reports"]):
        yield {"loss": float(step)}


def burn_steps(point: Point) -> Iterator[dict[str, float]]:
    """Burns `point["cpu_s"]` seconds of this thread's CPU before each of its results.

    Thread CPU time, unlike `overhead.burn_train`'s process time, stays right when Optuna runs
    two trials as threads of one process.
    """
    for step in range(point["reports"]):
        began = time.thread_time()
        while time.thread_time() - began < point["cpu_s"]:
            pass
        yield {"loss": float(step)}


def curve_steps(point: Point) -> Iterator[dict[str, float]]:
    """A learning curve of ~10 ms an iteration (see `curve_loss`)."""
    for t in range(1, point["max_t"] + 1):
        time.sleep(0.01)
        yield {"loss": curve_loss(point, t)}


def curve_loss(point: Point, t: int) -> float:
    """The synthetic curve's loss at iteration t: final + exp(-speed * t).

    Fast learners (high y) are not all good ones, so curves cross and early stopping can err.
    """
    x, y = point["x"], point["y"]
    final = (x - 0.3) ** 2 + (y - 0.6) ** 2
    speed = 0.05 + 0.5 * y
    return final + math.exp(-speed * t)


def sgd_steps(point: Point) -> Iterator[dict[str, float]]:
    """One epoch of `SGDClassifier.partial_fit` on the digits per result; validation accuracy."""
    from sklearn.linear_model import SGDClassifier

    x_train, x_valid, y_train, y_valid = digits()
    model = SGDClassifier(
        loss=point["loss"],
        alpha=point["alpha"],
        learning_rate="constant",
        eta0=point["eta0"],
        random_state=0,
    )
    classes = np.arange(10)
    for _ in range(point["max_t"]):
        model.partial_fit(x_train, y_train, classes=classes)
        yield {"accuracy": float(model.score(x_valid, y_valid))}


_DIGITS: list[np.ndarray] = []
"""The split digits, once loaded in this process (a plain list: Ray and loky pickle this module's
functions by value, which a `functools.cache` wrapper does not survive)."""


def digits() -> list[np.ndarray]:
    """The digits, scaled to [0, 1], split 75/25 into training and validation (once a process)."""
    if not _DIGITS:
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split

        data = load_digits()
        # One assignment, so that two Optuna threads loading at once leave one split.
        _DIGITS[:] = train_test_split(data.data / 16.0, data.target, random_state=0)
    return _DIGITS


STEPS: dict[str, Callable[[Point], Iterator[dict[str, float]]]] = {
    "dispatch": noop_steps,
    "parallel": burn_steps,
    "early_stopping": curve_steps,
    "sgd_digits": sgd_steps,
}
"""Workload name -> its trainable's work; the trainables look it up by the config's name."""


# ----- the workloads --------------------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    """What to run: its configurations, its objective and whether trials stop early."""

    name: str
    metric: str
    mode: str
    early_stopping: bool
    points: Callable[[int, Sizes], list[Point]]
    """(seed, sizes) -> the configurations, the same for every framework."""

    def better(self, values: list[float]) -> float:
        return min(values) if self.mode == "min" else max(values)


def dispatch_points(seed: int, sizes: Sizes) -> list[Point]:
    return [{"reports": sizes.dispatch_reports, "i": i} for i in range(sizes.dispatch_trials)]


def parallel_points(seed: int, sizes: Sizes) -> list[Point]:
    point = {"reports": sizes.burn_reports, "cpu_s": sizes.burn_cpu_s}
    return [{**point, "i": i} for i in range(sizes.burn_trials)]


def curve_points(seed: int, sizes: Sizes) -> list[Point]:
    rng = np.random.default_rng(seed)
    return [
        {"x": float(rng.uniform()), "y": float(rng.uniform()), "max_t": MAX_T}
        for _ in range(16 if sizes is QUICK else 64)
    ]


def sgd_points(seed: int, sizes: Sizes) -> list[Point]:
    rng = np.random.default_rng(seed)
    return [
        {
            "loss": str(rng.choice(["hinge", "log_loss", "modified_huber"])),
            "alpha": float(10 ** rng.uniform(-6, -1)),
            "eta0": float(10 ** rng.uniform(-4, 0)),
            "max_t": MAX_T,
        }
        for _ in range(10 if sizes is QUICK else 40)
    ]


WORKLOADS = {
    "dispatch": Workload("dispatch", "loss", "min", False, dispatch_points),
    "parallel": Workload("parallel", "loss", "min", False, parallel_points),
    "early_stopping": Workload("early_stopping", "loss", "min", True, curve_points),
    "sgd_digits": Workload("sgd_digits", "accuracy", "max", True, sgd_points),
}


@dataclass(frozen=True)
class Outcome:
    """One run: its wall time, the iterations its trials ran, and the best value reported."""

    wall_s: float
    iterations: int
    best: float


# ----- one function per framework ---------------------------------------------------------------


def nbtune_trainable(config: dict[str, Any]) -> None:
    for metrics in STEPS[config["workload"]](config["point"]):
        nt.report(**metrics)


def run_nbtune(
    workload: Workload,
    points: list[Point],
    seed: int,
    storage: str,
    brackets: int = 1,
    executor: nt.Executor | None = None,
) -> Outcome:
    """nbtune with 2 loky workers (or `executor`); ASHA for the early-stopping workloads, with
    `brackets` brackets (asynchronous Hyperband, as Li et al. describe it, when there are
    several)."""
    scheduler = None
    if workload.early_stopping:
        scheduler = nt.ASHA(
            max_t=MAX_T,
            grace_period=GRACE_PERIOD,
            reduction_factor=REDUCTION_FACTOR,
            brackets=brackets,
        )
    tuner = nt.Tuner(
        nbtune_trainable,
        space={"workload": workload.name, "point": nt.grid(points)},
        metric=workload.metric,
        mode=workload.mode,
        max_concurrent=WORKERS,
        scheduler=scheduler,
        executor=executor,
        name=f"{workload.name}-{seed}",
        storage_path=storage,
        seed=seed,
        progress=False,
        overwrite=True,
    )
    wall_s = timed_run(tuner)
    values = tuner.history()[workload.metric].tolist()
    return Outcome(wall_s, len(values), workload.better(values))


def ray_trainable(config: dict[str, Any]) -> None:
    from ray import tune

    for metrics in STEPS[config["workload"]](config["point"]):
        tune.report(metrics)


def run_ray(workload: Workload, points: list[Point], seed: int, storage: str) -> Outcome:
    """Ray Tune on `ray.init(num_cpus=2)`, one CPU a trial; its ASHAScheduler to stop early."""
    from ray import tune
    from ray.tune.schedulers import ASHAScheduler

    scheduler = None
    if workload.early_stopping:
        scheduler = ASHAScheduler(
            max_t=MAX_T, grace_period=GRACE_PERIOD, reduction_factor=REDUCTION_FACTOR
        )
    tuner = tune.Tuner(
        ray_trainable,
        param_space={"workload": workload.name, "point": tune.grid_search(points)},
        tune_config=tune.TuneConfig(
            metric=workload.metric,
            mode=workload.mode,
            scheduler=scheduler,
            max_concurrent_trials=WORKERS,
        ),
        run_config=tune.RunConfig(name=f"{workload.name}-{seed}", storage_path=storage, verbose=0),
    )
    began = time.perf_counter()
    grid = tuner.fit()
    wall_s = time.perf_counter() - began
    if grid.errors:
        raise RuntimeError(f"{len(grid.errors)} Ray trials failed: {grid.errors[0]!r}")
    values = [v for result in grid for v in result.metrics_dataframe[workload.metric]]
    return Outcome(wall_s, len(values), workload.better(values))


def start_nbtune() -> float:
    """Start nbtune's 2 loky workers, once, as `start_ray` starts Ray; the seconds it took."""
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="nbtune-peers-") as storage:
        points = dispatch_points(0, QUICK)[: 2 * WORKERS]
        run_nbtune(WORKLOADS["dispatch"], points, 0, storage)
    return time.perf_counter() - began


def start_ray() -> float:
    """Start Ray with 2 CPUs, once; the seconds it took."""
    import ray

    if ray.is_initialized():
        return 0.0
    began = time.perf_counter()
    ray.init(num_cpus=WORKERS, include_dashboard=False, logging_level="ERROR")
    return time.perf_counter() - began


def run_optuna(
    workload: Workload, points: list[Point], seed: int, storage: str, pruner_name: str
) -> Outcome:
    """Optuna with `n_jobs=2` (threads); the points are enqueued, so no sampler chooses."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(
        direction="minimize" if workload.mode == "min" else "maximize",
        sampler=optuna.samplers.RandomSampler(seed=seed),
        pruner=optuna_pruner(pruner_name if workload.early_stopping else None),
    )
    for index in range(len(points)):
        study.enqueue_trial({"index": index})

    def objective(trial: optuna.Trial) -> float:
        point = points[trial.suggest_int("index", 0, len(points) - 1)]
        value = math.nan
        for step, metrics in enumerate(STEPS[workload.name](point), start=1):
            value = metrics[workload.metric]
            trial.report(value, step)
            if trial.should_prune():
                raise optuna.TrialPruned
        return value

    began = time.perf_counter()
    study.optimize(objective, n_trials=len(points), n_jobs=WORKERS)
    wall_s = time.perf_counter() - began
    values = [v for trial in study.trials for v in trial.intermediate_values.values()]
    return Outcome(wall_s, len(values), workload.better(values))


def optuna_pruner(name: str | None):
    """Optuna's counterpart of ASHA(max_t=27, grace_period=1, reduction_factor=3)."""
    import optuna

    if name == "optuna-sha":
        return optuna.pruners.SuccessiveHalvingPruner(
            min_resource=GRACE_PERIOD, reduction_factor=REDUCTION_FACTOR
        )
    if name == "optuna-hyperband":
        return optuna.pruners.HyperbandPruner(
            min_resource=GRACE_PERIOD, max_resource=MAX_T, reduction_factor=REDUCTION_FACTOR
        )
    return optuna.pruners.NopPruner()


def run(framework: str, workload: Workload, points: list[Point], seed: int) -> Outcome:
    """Run one workload with one framework, in a temporary storage directory."""
    with tempfile.TemporaryDirectory(prefix="nbtune-peers-") as storage:
        if framework == "nbtune":
            return run_nbtune(workload, points, seed, storage)
        if framework == "nbtune-hyperband":
            return run_nbtune(workload, points, seed, storage, brackets=BRACKETS)
        if framework == "nbtune-threads":
            return run_nbtune(workload, points, seed, storage, executor=nt.ThreadExecutor())
        if framework == "ray":
            return run_ray(workload, points, seed, storage)
        return run_optuna(workload, points, seed, storage, framework)


# ----- figures ------------------------------------------------------------------------------------


def headline(workload: Workload, outcome: Outcome, points: list[Point]) -> tuple[float, str]:
    """The figure a workload is judged by: trials/s, wall/ideal, or wall time."""
    if workload.name == "dispatch":
        return len(points) / outcome.wall_s, "trials/s"
    if workload.name == "parallel":
        point = points[0]
        ideal_s = len(points) * point["reports"] * point["cpu_s"] / WORKERS
        return outcome.wall_s / ideal_s, "wall/ideal"
    return outcome.wall_s, "s"


def summary(workload: Workload, outcomes: dict[str, list[Outcome]]) -> dict[str, Any]:
    """Means over the seeds per framework, and nbtune's targets against the peers that ran."""
    means = {
        framework: {
            "wall_s": statistics.mean(o.wall_s for o in runs),
            "iterations": statistics.mean(o.iterations for o in runs),
            "best": statistics.mean(o.best for o in runs),
        }
        for framework, runs in outcomes.items()
        if runs
    }
    checks = {}
    for peer, theirs in means.items():
        mine = COUNTERPART.get(peer)
        ours = means.get(mine) if mine else None
        if not workload.early_stopping or ours is None:
            continue
        share = 0.5 if peer == "ray" else 1.0
        better = min if workload.mode == "min" else max
        checks[f"{mine} wall <= {share:g} x {peer}"] = ours["wall_s"] <= share * theirs["wall_s"]
        checks[f"{mine} best no worse than {peer}"] = (
            better(ours["best"], theirs["best"]) == ours["best"]
        )
    return {"workload": workload.name, "summary": True, "means": rounded(means), "targets": checks}


def rounded(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: rounded(item) for key, item in value.items()}
    return float(f"{value:.4g}") if isinstance(value, float) else value


# ----- entry point --------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """Run the chosen workloads with the chosen frameworks; print JSON lines."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--framework", choices=["all", "nbtune", "ray", "optuna"], default="all")
    parser.add_argument("--workload", choices=["all", *WORKLOADS], default="all")
    parser.add_argument("--seeds", type=int, default=3, help="seeds per workload (default 3)")
    parser.add_argument(
        "--repeats", type=int, default=3, help="runs of each seed per framework (default 3)"
    )
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke test")
    args = parser.parse_args(argv)
    frameworks = [f for f in FRAMEWORKS if args.framework in ("all", f.partition("-")[0])]
    workloads = list(WORKLOADS.values()) if args.workload == "all" else [WORKLOADS[args.workload]]
    sizes = QUICK if args.quick else FULL
    if "nbtune" in frameworks:
        print(json.dumps({"nbtune_start_s": rounded(start_nbtune())}), flush=True)
    if "ray" in frameworks:
        print(json.dumps({"ray_init_s": rounded(start_ray())}), flush=True)
    failed = 0
    for workload in workloads:
        names = frameworks_for(workload, frameworks)
        outcomes: dict[str, list[Outcome]] = {framework: [] for framework in names}
        for seed in range(args.seeds):
            points = workload.points(seed, sizes)
            for repeat in range(args.repeats):
                for framework in names:
                    run_ok = measure(framework, workload, points, seed, repeat, outcomes[framework])
                    failed += not run_ok
        print(json.dumps(summary(workload, outcomes)), flush=True)
    return 1 if failed else 0


def frameworks_for(workload: Workload, frameworks: list[str]) -> list[str]:
    """The frameworks to run: Optuna's pruner variants are one "optuna" without early stopping."""
    if workload.early_stopping:
        return frameworks
    return list(dict.fromkeys(f.partition("-")[0] for f in frameworks))


def measure(
    framework: str,
    workload: Workload,
    points: list[Point],
    seed: int,
    repeat: int,
    into: list[Outcome],
) -> bool:
    """Run once and print its line (an `error` line if it failed); whether it succeeded."""
    others = OtherCpu()
    try:
        outcome = run(framework, workload, points, seed)
    except Exception as exc:
        line = {"workload": workload.name, "framework": framework, "seed": seed, "repeat": repeat}
        print(json.dumps({**line, "error": f"{type(exc).__name__}: {exc}"}), flush=True)
        return False
    into.append(outcome)
    value, unit = headline(workload, outcome, points)
    row = figure_row(
        workload.name,
        value,
        unit,
        None,
        framework=framework,
        seed=seed,
        repeat=repeat,
        wall_s=outcome.wall_s,
        iterations=outcome.iterations,
        best=outcome.best,
        trials=len(points),
        other_cpu_pct=others.percent(),
    )
    print(json.dumps(row), flush=True)
    return True


if __name__ == "__main__":
    sys.exit(main())
