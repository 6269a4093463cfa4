"""What a large array costs a run: a 500 MB float64 array that every trial reads.

Prints one JSON line per case on stdout, for example:

    {"figure": "data", "executor": "loky", "how": "captured", "first_result_s": 0.9, ...}

A case is an executor (`loky`, or `dask` on a `LocalCluster` of 2 single-threaded worker
processes) and a way to hand the array over (`captured`: a closure over it, the notebook's
natural code; `with_parameters`: `nbtune.with_parameters(train, data=array)`). Each case runs
in a fresh Python process: a warm-up run starts the workers, then the array is made and two
runs of `TRIALS` trials read it, each trial summing the whole array once and reporting 3
times. Fields (targets from the issue; `passed` checks them, the Dask rows are information):

- `first_result_s`: `start()` to the first result of the first run on the warm pool (< 1.5 s)
- `driver_peak_growth_x`: the driver's peak RSS over the runs minus its RSS before the array
  was made, in arrays (< 1.2; the array itself is 1.0)
- `worker_anon_growth_mb`: per worker, its largest anonymous (non-file) RSS in a trial minus
  the same in the warm-up run (< 100 MB each)
- `second_trial_started_s`, `second_first_result_s`: the same for the second run (< 0.5 s)

Usage:
    python benchmarks/data.py                    # every case (a few minutes)
    python benchmarks/data.py --size-mb 50       # smaller array: a smoke test
    python benchmarks/data.py --case loky:captured
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

import numpy as np

import nbtune as nt
from nbtune.events import Event, TrialResult, TrialStarted

WORKERS = 2
TRIALS = 20
_runs: list[Clock] = []
CASES = ("loky:captured", "loky:with_parameters", "dask:captured", "dask:with_parameters")


def _status(field: str, pid: str = "self") -> int:
    """A `/proc/<pid>/status` field in bytes (VmRSS, VmHWM, RssAnon)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(field)


def warm_up(config: dict[str, Any]) -> None:
    """Takes a moment, so that every worker gets a trial of it."""
    time.sleep(0.2)
    nt.report(loss=0.0, pid=os.getpid(), anon=_status("RssAnon"))


def read(config: dict[str, Any], data: np.ndarray) -> None:
    """Sums the array once, then reports 3 times with the worker's anonymous RSS."""
    total = float(data.sum())
    for step in range(3):
        nt.report(loss=total + step, pid=os.getpid(), anon=_status("RssAnon"))


def captured(array: np.ndarray):
    """The notebook's way: a function that closes over the array."""

    def train(config: dict[str, Any]) -> None:
        read(config, array)

    return train


class Clock:
    """Seconds from `start()` to a run's first `TrialStarted` and first `TrialResult`."""

    def __init__(self) -> None:
        self.began = time.perf_counter()
        self.started: float | None = None
        self.result: float | None = None
        self.done = threading.Event()

    def __call__(self, event: Event) -> None:
        now = time.perf_counter() - self.began
        if isinstance(event, TrialStarted) and self.started is None:
            self.started = now
        if isinstance(event, TrialResult) and self.result is None:
            self.result = now


def run(trainable, executor, storage: str, trials: int) -> tuple[Clock, nt.Tuner]:
    clock = Clock()
    _runs.append(clock)
    tuner = nt.Tuner(
        trainable,
        {"x": nt.grid(list(range(trials)))},
        metric="loss",
        executor=executor,
        max_concurrent=WORKERS,
        storage_path=storage,
        progress=False,
        callbacks=[clock],
        name=f"run{len(_runs)}",
    )
    clock.began = time.perf_counter()
    tuner.start(display=False)
    tuner.wait()
    errors = [trial.error for trial in tuner.trials if trial.error]
    if errors:
        raise RuntimeError(errors[0])
    return clock, tuner


def anon_by_pid(tuner: nt.Tuner) -> dict[int, int]:
    """Each worker's largest anonymous RSS over the run's results."""
    largest: dict[int, int] = {}
    for row in tuner.history().itertuples():
        largest[row.pid] = max(largest.get(row.pid, 0), int(row.anon))
    return largest


def measure(case: str, size_mb: int, trials: int) -> dict[str, Any]:
    executor_name, how = case.split(":")
    client = None
    if executor_name == "dask":
        import distributed

        cluster = distributed.LocalCluster(
            n_workers=WORKERS, threads_per_worker=1, dashboard_address=None, silence_logs=50
        )
        client = distributed.Client(cluster)
        executor = nt.DaskExecutor(client)
    else:
        executor = nt.LokyExecutor()
    with tempfile.TemporaryDirectory() as storage:
        _, warm = run(warm_up, executor, storage, 4 * WORKERS)
        before = anon_by_pid(warm)
        rss_before = _status("VmRSS")
        array = np.random.default_rng(0).random(size_mb * (1 << 20) // 8)
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")  # the peak RSS starts again from here
        trainable = captured(array) if how == "captured" else nt.with_parameters(read, data=array)
        first, tuner = run(trainable, executor, storage, trials)
        second, tuner2 = run(trainable, executor, storage, trials)
        peak_growth = _status("VmHWM") - rss_before
        during = anon_by_pid(tuner)
        for pid, anon in anon_by_pid(tuner2).items():
            during[pid] = max(during.get(pid, 0), anon)
    growth = {pid: (anon - before.get(pid, anon)) / (1 << 20) for pid, anon in during.items()}
    if client is not None:
        client.close()
        cluster.close()
    row = {
        "figure": "data",
        "executor": executor_name,
        "how": how,
        "array_mb": size_mb,
        "trials": trials,
        "first_result_s": round(first.result, 3),
        "first_trial_started_s": round(first.started, 3),
        "driver_peak_growth_x": round(peak_growth / array.nbytes, 2),
        "worker_anon_growth_mb": sorted(round(mb, 1) for mb in growth.values()),
        "new_workers": sorted(set(during) - set(before)),
        "second_trial_started_s": round(second.started, 3),
        "second_first_result_s": round(second.result, 3),
    }
    row["passed"] = (
        None
        if executor_name == "dask"
        else bool(
            first.result < 1.5
            and row["driver_peak_growth_x"] < 1.2
            and all(mb < 100 for mb in growth.values())
            and second.started < 0.5
        )
    )
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=CASES, help="one case, in this process")
    parser.add_argument("--size-mb", type=int, default=500)
    parser.add_argument("--trials", type=int, default=TRIALS)
    options = parser.parse_args()
    if options.case:
        print(json.dumps(measure(options.case, options.size_mb, options.trials)), flush=True)
        return
    for case in CASES:
        command = [sys.executable, __file__, "--case", case, "--size-mb", str(options.size_mb)]
        subprocess.run([*command, "--trials", str(options.trials)], check=False)


if __name__ == "__main__":
    main()
