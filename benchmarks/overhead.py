"""How much nbtune itself costs: dispatch rate, latency, start-up, idle CPU and memory.

Prints one JSON line per figure on stdout, for example:

    {"figure": "report_latency_p95", "value": 0.24, "unit": "ms", "target": "< 2",
     "passed": true, "median_ms": 0.1, ...}

Every figure runs in a fresh Python process of its own (`--figure all`, the default, starts
one subprocess per figure), so each starts on a cold loky pool and its memory and CPU
readings see nothing of the other figures. Figures that need a warm pool ("warm" in their
name) make a second run in that same process, after the cold one.

With `--executor dask`, every figure is measured twice, side by side: on loky, then on a
Dask `LocalCluster` of `WORKERS` single-threaded worker processes, started before the timing
begins (the cluster is the user's, not nbtune's). Each row says which `executor` it measured;
the Dask rows have targets of their own (`DASK_TARGETS`), the others are information only.

Usage:
    python benchmarks/overhead.py                      # every figure (under a minute)
    python benchmarks/overhead.py --figure latency     # one figure, in this process
    python benchmarks/overhead.py --quick              # small sizes: a smoke test
    python benchmarks/overhead.py --executor dask      # loky and Dask, side by side
    python benchmarks/overhead.py --figure parallel --executor dask   # Dask only
"""

from __future__ import annotations

import argparse
import gc
import json
import operator
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import nbtune as nt
from nbtune.events import Event, TrialResult, TrialStarted

WORKERS = 2
"""Worker processes (and `max_concurrent`) of every run."""
EXECUTORS = ("loky", "dask")
_executor_name = "loky"
_dask_client = None
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")

# ----- trainables: at module level, so that cloudpickle can ship them to loky workers --------


def noop_train(config: dict[str, Any]) -> None:
    """Reports `config["reports"]` times and does nothing else."""
    for step in range(config["reports"]):
        nt.report(loss=float(step))


def hello_train(config: dict[str, Any]) -> None:
    """Reports once, at once, which worker process it runs in."""
    nt.report(loss=0.0, worker_pid=os.getpid())


def burn_train(config: dict[str, Any]) -> None:
    """Burns `config["cpu_s"]` seconds of CPU before each of its `config["reports"]` reports."""
    for step in range(config["reports"]):
        began = time.process_time()
        while time.process_time() - began < config["cpu_s"]:
            pass
        nt.report(loss=float(step))


def silent_train(config: dict[str, Any]) -> None:
    """Reports once after a short nap, then keeps silent for `config["silent_s"]` seconds."""
    time.sleep(0.5)
    nt.report(loss=1.0)
    time.sleep(config["silent_s"])
    nt.report(loss=0.0)


# ----- sizes and targets ----------------------------------------------------------------------


@dataclass(frozen=True)
class Sizes:
    """How big each figure's runs are; `QUICK` shrinks them for a smoke test."""

    dispatch_trials: int = 200
    dispatch_reports: int = 10
    dispatch_warm_runs: int = 3
    fresh_trials: int = 20
    burn_trials: int = 8
    burn_reports: int = 10
    burn_cpu_s: float = 0.1
    latency_trials: int = 2
    latency_reports: int = 2000
    startup_later_runs: int = 3
    silent_s: float = 5.0
    many_trials: int = 100
    many_reports: int = 1000


FULL = Sizes()
QUICK = replace(
    FULL,
    dispatch_trials=40,
    dispatch_warm_runs=1,
    fresh_trials=4,
    burn_cpu_s=0.02,
    latency_reports=250,
    silent_s=1.0,
    many_trials=10,
    many_reports=200,
)

_COMPARISONS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    "<": operator.lt,
}


@dataclass(frozen=True)
class Target:
    """A bound that a figure must meet, e.g. `Target(">=", 500)`."""

    comparison: str
    bound: float

    def met_by(self, value: float) -> bool:
        """Whether `value` meets the bound."""
        return _COMPARISONS[self.comparison](value, self.bound)

    def __str__(self) -> str:
        return f"{self.comparison} {self.bound:g}"


DASK_TARGETS: dict[str, Target] = {
    "parallel_efficiency": Target("<=", 1.25),
    "report_latency_p95": Target("<", 50),
}
"""The targets of the Dask rows; a Dask figure not named here is information only."""


def figure_row(
    figure: str, value: float, unit: str, target: Target | None, **extra: Any
) -> dict[str, Any]:
    """One output line: the figure, its value and unit, its target and whether it was met.

    Args:
        figure: the figure's name.
        value: the measured value.
        unit: the value's unit.
        target: the bound it must meet, or None for a figure printed for information only
            (its `passed` is then null).
        **extra: further fields that explain the value (sizes, raw timings).
    """
    return {
        "figure": figure,
        "value": _rounded(value),
        "unit": unit,
        "target": None if target is None else str(target),
        "passed": None if target is None else target.met_by(value),
        **{key: _rounded(item) for key, item in extra.items()},
    }


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return float(f"{value:.4g}")
    if isinstance(value, list):
        return [_rounded(item) for item in value]
    return value


# ----- running experiments ----------------------------------------------------------------------


def make_tuner(
    trainable: Callable[[dict[str, Any]], None],
    storage: str,
    name: str,
    *,
    num_samples: int,
    config: Mapping[str, Any],
    callbacks: Iterable[Callable[[Event], None]] = (),
    executor: nt.Executor | None = None,
) -> nt.Tuner:
    """A tuner with `WORKERS` workers whose every trial gets the constant `config`."""
    return nt.Tuner(
        trainable,
        space=dict(config),
        metric="loss",
        mode="min",
        num_samples=num_samples,
        max_concurrent=WORKERS,
        name=name,
        storage_path=storage,
        seed=0,
        executor=executor or make_executor(),
        callbacks=list(callbacks),
        progress=False,
        overwrite=True,
    )


def make_executor() -> nt.Executor:
    """An executor of the kind this process measures; Dask's runs on this process's cluster."""
    if _executor_name == "loky":
        return nt.LokyExecutor()
    return nt.DaskExecutor(dask_client())


def dask_client() -> Any:
    """A client of a `LocalCluster` of `WORKERS` worker processes, started on first use."""
    global _dask_client
    if _dask_client is None:
        import logging

        from distributed import Client, LocalCluster

        cluster = LocalCluster(
            n_workers=WORKERS,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            silence_logs=logging.ERROR,
        )
        _dask_client = Client(cluster)
    return _dask_client


def timed_run(tuner: nt.Tuner) -> float:
    """Run `tuner` to its end; return the seconds from `start()` until `wait()` returned."""
    began = time.perf_counter()
    tuner.start()
    tuner.wait()
    elapsed = time.perf_counter() - began
    check_finished(tuner)
    return elapsed


def check_finished(tuner: nt.Tuner) -> None:
    """Raise unless every trial of `tuner` ran to its end: a failed run measures nothing."""
    unfinished = [t for t in tuner.trials if t.status is not nt.TrialStatus.TERMINATED]
    if tuner.state != "finished" or unfinished:
        raise RuntimeError(
            f"run {tuner.name!r} ended {tuner.state!r} with {len(unfinished)} unfinished "
            f"trials: {[(t.trial_id, t.status.value, t.error) for t in unfinished[:3]]}"
        )


def persisted_results(tuner: nt.Tuner) -> int:
    """How many results the run's result log holds."""
    with open(tuner.path / "results.jsonl", encoding="utf-8") as log:
        return sum(1 for _ in log)


# ----- reading the machine -------------------------------------------------------------------


def rss_mb() -> float:
    """This process's resident set size (VmRSS), in MB."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS line in /proc/self/status")


def percentile(values: list[float], fraction: float) -> float:
    """The `fraction` quantile of `values` (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


class OtherCpu:
    """Measures the CPU that other processes use from now on: the benchmark's noise.

    "Other" is every process but this one and its children (the loky workers, which live as
    long as this process), read from /proc/stat and /proc/<pid>/stat.
    """

    def __init__(self) -> None:
        self._began = time.perf_counter()
        self._machine = machine_cpu_s()
        self._own = own_cpu_s()

    def percent(self) -> float:
        """Other processes' CPU since this object was made, in % of one core."""
        wall = time.perf_counter() - self._began
        other = (machine_cpu_s() - self._machine) - (own_cpu_s() - self._own)
        return max(0.0, 100 * other / wall)


def machine_cpu_s() -> float:
    """CPU seconds that all processes have used since boot (user, nice and system time)."""
    with open("/proc/stat", encoding="ascii") as stat:
        user, nice, system = (int(field) for field in stat.readline().split()[1:4])
    return (user + nice + system) / _CLOCK_TICKS


def own_cpu_s() -> float:
    """CPU seconds used by this process and its living children."""
    total = time.process_time()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            total += _child_cpu_s(entry / "stat")
    return total


def _child_cpu_s(stat_path: Path) -> float:
    """The CPU seconds of the process `stat_path` describes, if it is a child of this one."""
    try:
        fields = stat_path.read_text(encoding="ascii", errors="replace").rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    if int(fields[1]) != os.getpid():
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS


# ----- subscribers --------------------------------------------------------------------------------


class FirstEvents:
    """Notes when the first `TrialStarted` and the first `TrialResult` were published."""

    def __init__(self) -> None:
        self.started_at: float | None = None
        self.result_at: float | None = None
        self.result: Mapping[str, Any] = {}

    def __call__(self, event: Event) -> None:
        now = time.perf_counter()
        if isinstance(event, TrialStarted) and self.started_at is None:
            self.started_at = now
        elif isinstance(event, TrialResult) and self.result_at is None:
            self.result_at = now
            self.result = event.result


class ReportLatency:
    """Collects, per `TrialResult`, the seconds from the worker's `report()` to the bus."""

    def __init__(self) -> None:
        self.latencies_s: list[float] = []

    def __call__(self, event: Event) -> None:
        if isinstance(event, TrialResult):
            self.latencies_s.append(time.time() - event.result["timestamp"])


class SilentWindow:
    """Reads the driver's CPU time over the window in which every trial is silent.

    The window opens when the last of `trials` trials has reported its first result and
    closes when any trial reports its second.
    """

    def __init__(self, trials: int) -> None:
        self.trials = trials
        self.first_reports = 0
        self.opened: tuple[float, float] | None = None
        self.closed: tuple[float, float] | None = None

    def __call__(self, event: Event) -> None:
        if not isinstance(event, TrialResult):
            return
        iteration = event.result["training_iteration"]
        if iteration == 1:
            self.first_reports += 1
            if self.first_reports == self.trials:
                self.opened = (time.perf_counter(), time.process_time())
        elif iteration == 2 and self.opened is not None and self.closed is None:
            self.closed = (time.perf_counter(), time.process_time())

    def cpu_percent(self) -> tuple[float, float]:
        """The window's wall time in seconds, and the driver's CPU over it in % of a core."""
        if self.opened is None or self.closed is None:
            raise RuntimeError("the silent window never opened and closed")
        wall = self.closed[0] - self.opened[0]
        return wall, 100 * (self.closed[1] - self.opened[1]) / wall


class ResultCount:
    """Counts `TrialResult` events; `reached` is set once `threshold` have arrived."""

    def __init__(self, threshold: int) -> None:
        self.threshold = threshold
        self.count = 0
        self.reached = threading.Event()

    def __call__(self, event: Event) -> None:
        if isinstance(event, TrialResult):
            self.count += 1
            if self.count >= self.threshold:
                self.reached.set()


# ----- the figures --------------------------------------------------------------------------------


def figure_dispatch(sizes: Sizes, storage: str) -> list[dict[str, Any]]:
    """Trials per second of a no-op trainable, every result persisted; cold, then warm."""
    trials, reports = sizes.dispatch_trials, sizes.dispatch_reports

    def one_run(name: str) -> tuple[float, int]:
        tuner = make_tuner(
            noop_train, storage, name, num_samples=trials, config={"reports": reports}
        )
        return trials / timed_run(tuner), persisted_results(tuner)

    cold_rate, cold_persisted = one_run("dispatch-cold")
    warm = [one_run(f"dispatch-warm-{i}") for i in range(sizes.dispatch_warm_runs)]
    common = {"trials": trials, "reports_per_trial": reports, "workers": WORKERS}
    return [
        figure_row(
            "dispatch_cold",
            cold_rate,
            "trials/s",
            None,
            results_persisted=cold_persisted,
            **common,
            note="first run of a fresh process: includes starting the worker pool",
        ),
        figure_row(
            "dispatch_warm",
            statistics.median(rate for rate, _ in warm),
            "trials/s",
            Target(">=", 1000),
            runs=[rate for rate, _ in warm],
            results_persisted=min(persisted for _, persisted in warm),
            **common,
            note="median of the warm runs",
        ),
    ]


def figure_fresh_processes(sizes: Sizes, storage: str) -> list[dict[str, Any]]:
    """What a process per trial costs (`LokyExecutor(reuse_workers=False)`): seconds per trial
    of a no-op trainable, `WORKERS` at once, against warm workers."""
    trials, reports = sizes.fresh_trials, sizes.dispatch_reports
    config = {"reports": reports}

    def seconds_per_trial(name: str, reuse_workers: bool) -> float:
        executor = nt.LokyExecutor(reuse_workers=reuse_workers)
        tuner = make_tuner(
            noop_train, storage, name, num_samples=trials, config=config, executor=executor
        )
        return timed_run(tuner) / trials

    seconds_per_trial("fresh-warm-up", True)
    fresh_s = seconds_per_trial("fresh", False)
    warm_s = seconds_per_trial("warm", True)
    return [
        figure_row(
            "fresh_process_per_trial",
            fresh_s * 1000,
            "ms/trial",
            None,
            warm_workers_ms_per_trial=warm_s * 1000,
            trials=trials,
            workers=WORKERS,
            note=f"wall time per trial, {WORKERS} at once: a process started for each trial",
        )
    ]


def figure_parallel(sizes: Sizes, storage: str) -> list[dict[str, Any]]:
    """Wall time of CPU-bound trials over the ideal, executor start included (cold pool)."""
    trials, reports, cpu_s = sizes.burn_trials, sizes.burn_reports, sizes.burn_cpu_s
    ideal_s = trials * reports * cpu_s / WORKERS
    config = {"reports": reports, "cpu_s": cpu_s}
    cold_s = timed_run(
        make_tuner(burn_train, storage, "burn-cold", num_samples=trials, config=config)
    )
    warm_s = timed_run(
        make_tuner(burn_train, storage, "burn-warm", num_samples=trials, config=config)
    )
    return [
        figure_row(
            "parallel_efficiency",
            cold_s / ideal_s,
            "wall/ideal",
            Target("<=", 1.10),
            wall_s=cold_s,
            ideal_s=ideal_s,
            warm_wall_s=warm_s,
            warm_ratio=warm_s / ideal_s,
            trials=trials,
            cpu_s_per_trial=reports * cpu_s,
            workers=WORKERS,
            note="value: cold pool (first run of a fresh process); warm_ratio: the next run",
        )
    ]


def figure_latency(sizes: Sizes, storage: str) -> list[dict[str, Any]]:
    """Milliseconds from `report()` in the worker to the `TrialResult` on the runner's bus."""
    latency = ReportLatency()
    tuner = make_tuner(
        noop_train,
        storage,
        "latency",
        num_samples=sizes.latency_trials,
        config={"reports": sizes.latency_reports},
        callbacks=[latency],
    )
    timed_run(tuner)
    latencies_ms = [1000 * seconds for seconds in latency.latencies_s]
    p95_ms = percentile(latencies_ms, 0.95)
    return [
        figure_row(
            "report_latency_p95",
            p95_ms,
            "ms",
            Target("<", 2),
            median_ms=statistics.median(latencies_ms),
            p99_ms=percentile(latencies_ms, 0.99),
            max_ms=max(latencies_ms),
            reports=len(latencies_ms),
            concurrent_trials=min(WORKERS, sizes.latency_trials),
        )
    ]


@dataclass(frozen=True)
class Startup:
    """How fast one run got going.

    Attributes:
        trial_started_s: seconds from `start()` to the first `TrialStarted` (the runner has
            submitted the trial).
        first_result_s: seconds from `start()` to the first `TrialResult` (a worker has run
            the trainable).
        worker_pid: the worker process that ran the trial.
    """

    trial_started_s: float
    first_result_s: float
    worker_pid: int


def figure_startup(sizes: Sizes, storage: str) -> list[dict[str, Any]]:
    """Seconds from `start()` to the first `TrialStarted` and `TrialResult`, cold and warm.

    "cold" is the first run of this process (a new worker pool), "warm" the second run; the
    warm rows also give the same figure for a few more runs (`later_runs_s`) and which worker
    process ran each run's trial (`worker_pids`, from the cold run on).
    """
    count = 2 + sizes.startup_later_runs
    cold, warm, *later = [startup(storage, f"startup-{i}") for i in range(count)]
    pids = [run.worker_pid for run in (cold, warm, *later)]
    return [
        figure_row("startup_cold_trial_started", cold.trial_started_s, "s", Target("<", 1)),
        figure_row("startup_cold_first_result", cold.first_result_s, "s", Target("<", 1)),
        figure_row(
            "startup_warm_trial_started",
            warm.trial_started_s,
            "s",
            Target("<", 0.05),
            later_runs_s=[run.trial_started_s for run in later],
            worker_pids=pids,
        ),
        figure_row(
            "startup_warm_first_result",
            warm.first_result_s,
            "s",
            Target("<", 0.05),
            later_runs_s=[run.first_result_s for run in later],
            worker_pids=pids,
        ),
    ]


def startup(storage: str, name: str) -> Startup:
    """Time one run of a single trial that reports at once."""
    first = FirstEvents()
    tuner = make_tuner(hello_train, storage, name, num_samples=1, config={})
    tuner.subscribe(first)
    began = time.perf_counter()
    timed_run(tuner)
    return Startup(
        trial_started_s=first.started_at - began,
        first_result_s=first.result_at - began,
        worker_pid=first.result["worker_pid"],
    )


NEXT_CELL_S = 3.0
"""How long after building its Tuner the user starts the run, in the next cell."""
MANY_TRIALS = 64
"""The trials of the run whose `start()` call is timed."""


def figure_startup_one_cell(sizes: Sizes, storage: str) -> list[dict[str, Any]]:
    """Seconds from building a Tuner to its first result, `start()` called at once after it
    (one cell does both), in a fresh process: the workers start as the Tuner is built."""
    first = FirstEvents()
    began = time.perf_counter()
    tuner = make_tuner(hello_train, storage, "one-cell", num_samples=1, config={})
    tuner.subscribe(first)
    tuner.start()
    tuner.wait()
    check_finished(tuner)
    return [
        figure_row(
            "startup_cold_first_result_from_tuner",
            first.result_at - began,
            "s",
            Target("<", 1),
            note="Tuner() then start() at once, first run of a fresh process",
        )
    ]


def figure_startup_next_cell(sizes: Sizes, storage: str) -> list[dict[str, Any]]:
    """A Tuner of `MANY_TRIALS` trials built, then started `NEXT_CELL_S` later (the next
    cell), in a fresh process: how long the `start()` call takes, and the seconds from it to
    the first result (the workers were started when the Tuner was built)."""
    first = FirstEvents()
    tuner = make_tuner(hello_train, storage, "next-cell", num_samples=MANY_TRIALS, config={})
    tuner.subscribe(first)
    time.sleep(NEXT_CELL_S)
    began = time.perf_counter()
    tuner.start()
    start_call_s = time.perf_counter() - began
    tuner.wait()
    check_finished(tuner)
    return [
        figure_row(
            f"start_call_s_{MANY_TRIALS}_trials",
            start_call_s,
            "s",
            Target("<", 0.3),
            note="the start() call alone, no dashboard (benchmarks/dashboard.py times it in a "
            "kernel, with one)",
        ),
        figure_row(
            "startup_cold_first_result_next_cell",
            first.result_at - began,
            "s",
            Target("<", 0.5),
            trial_started_s=first.started_at - began,
            tuner_built_s_before=NEXT_CELL_S,
            note="first run of a fresh process, start() in the cell after the Tuner's",
        ),
    ]


def figure_idle_cpu(sizes: Sizes, storage: str) -> list[dict[str, Any]]:
    """The driver's CPU, in % of one core, while every running trial is silent."""
    window = SilentWindow(trials=WORKERS)
    tuner = make_tuner(
        silent_train,
        storage,
        "silent",
        num_samples=WORKERS,
        config={"silent_s": sizes.silent_s},
        callbacks=[window],
    )
    timed_run(tuner)
    wall_s, percent = window.cpu_percent()
    return [
        figure_row(
            "runner_cpu_silent",
            percent,
            "% of one core",
            Target("<", 1),
            window_s=wall_s,
            cpu_s=wall_s * percent / 100,
            silent_trials=WORKERS,
        )
    ]


def figure_many_results(sizes: Sizes, storage: str) -> list[dict[str, Any]]:
    """Driver memory growth over a run with many results, and the cost of the result frames."""
    trials, reports = sizes.many_trials, sizes.many_reports
    total = trials * reports
    halfway = ResultCount(threshold=total // 2)
    tuner = make_tuner(noop_train, storage, "many", num_samples=trials, config={"reports": reports})
    tuner.subscribe(halfway)
    gc.collect()
    rss_before = rss_mb()
    began = time.perf_counter()
    tuner.start()
    halfway.reached.wait()
    mid_run_s = time_frames(tuner)
    tuner.wait()
    run_s = time.perf_counter() - began
    check_finished(tuner)
    gc.collect()
    rss_after = rss_mb()
    frames_s = time_frames(tuner)
    return [
        figure_row(
            "many_results_memory",
            rss_after - rss_before,
            "MB",
            Target("<", 300),
            rss_before_mb=rss_before,
            rss_after_mb=rss_after,
            results=total,
            results_persisted=persisted_results(tuner),
            results_per_s=total / run_s,
            trials=trials,
        ),
        figure_row(
            "many_results_frames",
            frames_s,
            "s",
            Target("<", 1),
            mid_run_s=mid_run_s,
            results=total,
            note="tuner.dataframe() + tuner.history() after the run; mid_run_s: at half-way",
        ),
    ]


def time_frames(tuner: nt.Tuner) -> float:
    """Seconds that `tuner.dataframe()` and `tuner.history()` take together."""
    began = time.perf_counter()
    tuner.dataframe()
    tuner.history()
    return time.perf_counter() - began


FIGURES: dict[str, Callable[[Sizes, str], list[dict[str, Any]]]] = {
    "dispatch": figure_dispatch,
    "parallel": figure_parallel,
    "fresh_processes": figure_fresh_processes,
    "latency": figure_latency,
    "startup": figure_startup,
    "startup_one_cell": figure_startup_one_cell,
    "startup_next_cell": figure_startup_next_cell,
    "idle_cpu": figure_idle_cpu,
    "many_results": figure_many_results,
}


# ----- entry point --------------------------------------------------------------------------------


def run_figure(name: str, quick: bool, executor: str = "loky") -> None:
    """Measure one figure in this process and print its JSON lines.

    Each line also gets `other_cpu_pct`: the CPU that processes other than this one and its
    workers used while the figure ran, in % of one core. On a shared machine a high value
    (tens of %) means that something competed for the cores and the timings are suspect.
    """
    global _executor_name
    _executor_name = executor
    sizes = QUICK if quick else FULL
    if executor == "dask":
        dask_client()
    others = OtherCpu()
    with tempfile.TemporaryDirectory(prefix="nbtune-bench-") as storage:
        rows = FIGURES[name](sizes, storage)
    other_cpu_pct = others.percent()
    for row in rows:
        if executor == "dask":
            _retarget(row, DASK_TARGETS.get(row["figure"]))
        row["executor"] = executor
        row["other_cpu_pct"] = _rounded(other_cpu_pct)
        if quick:
            row["quick"] = True
        print(json.dumps(row), flush=True)


def _retarget(row: dict[str, Any], target: Target | None) -> None:
    row["target"] = None if target is None else str(target)
    row["passed"] = None if target is None else target.met_by(row["value"])


def run_all(quick: bool, executors: tuple[str, ...]) -> int:
    """Measure every figure on each of `executors`, each in a fresh process; return how many
    of them crashed."""
    crashed = 0
    for name in FIGURES:
        for executor in executors:
            command = [sys.executable, str(Path(__file__).resolve()), "--figure", name]
            command += ["--executor", executor, *(["--quick"] if quick else [])]
            completed = subprocess.run(command, check=False)
            if completed.returncode != 0:
                print(
                    f"overhead.py: figure {name!r} on {executor} failed ({completed.returncode})",
                    file=sys.stderr,
                )
                crashed += 1
    return crashed


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and run the figures it asks for."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--figure",
        choices=["all", *FIGURES],
        default="all",
        help="the figure to measure, in this process (default: all, each in a fresh process)",
    )
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke test")
    parser.add_argument(
        "--executor",
        choices=EXECUTORS,
        default="loky",
        help="dask: with --figure all, every figure on loky and then on a Dask LocalCluster; "
        "with one --figure, on Dask only (default: loky)",
    )
    args = parser.parse_args(argv)
    if args.figure == "all":
        executors = EXECUTORS if args.executor == "dask" else ("loky",)
        return 1 if run_all(args.quick, executors) else 0
    run_figure(args.figure, args.quick, args.executor)
    return 0


if __name__ == "__main__":
    sys.exit(main())
