"""Soak: a long run of tiny trials with the dashboard attached, once calm, once with kills.

Prints one JSON line per figure on stdout, for example:

    {"figure": "soak", "trials": 10000, "results": 100000, "unique_results": 100000,
     "wall_s": 95.1, "rss_start_mb": 120.3, "rss_end_mb": 210.9, "rss_delta_mb": 90.6, ...}

`soak` runs `--trials` trials (default 10,000) of a no-op trainable that reports 10 times, on
2 workers, with the live `Dashboard` built on the run but never displayed (no kernel: its
widgets talk to no front end, but it subscribes, snapshots and redraws as in a notebook).
It passes when the result log holds exactly trials x 10 results, each (trial, iteration) once,
and the driver's VmRSS after the run (the tuner and its results still held) is within 200 MB
of its VmRSS before the run. `soak_kills` is the same run with a worker process SIGKILLed
after every 1,000 completed trials: the killed trial is retried (`max_failures`), the trial on
the other worker restarts as a bystander, and still no result may be lost or written twice.

Each figure runs in a fresh Python process of its own, so that its memory reading sees
nothing of the other. Storage goes to a temporary directory that is removed afterwards.

Usage:
    python benchmarks/soak.py                      # both figures, 10,000 trials each
    python benchmarks/soak.py --trials 500         # a quick run
    python benchmarks/soak.py --figure soak_kills  # one figure, in this process
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import nbtune as nt
from nbtune.events import Event, TrialCompleted, TrialResult

REPORTS = 10
WORKERS = 2
KILL_EVERY = 1000
RSS_LIMIT_MB = 200
FIGURES = ("soak", "soak_kills")


def noop_train(config: dict[str, Any]) -> None:
    """Reports `REPORTS` times, with the worker's pid, and does nothing else."""
    pid = os.getpid()
    for step in range(REPORTS):
        nt.report(loss=float(step), pid=pid)


def rss_mb() -> float:
    """This process's resident memory (VmRSS) in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


class WorkerKiller:
    """A subscriber that, after every `every` completed trials, SIGKILLs the worker of the next
    result: a worker in the middle of a trial.

    It runs on the runner thread, as every subscriber, and does no more than a kill.
    """

    def __init__(self, every: int) -> None:
        self.every = every
        self.completed = 0
        self.kills = 0
        self._armed = False

    def __call__(self, event: Event) -> None:
        if isinstance(event, TrialCompleted):
            self.completed += 1
            self._armed = self._armed or self.completed % self.every == 0
        elif isinstance(event, TrialResult) and self._armed:
            self._armed = False
            os.kill(event.result["pid"], signal.SIGKILL)
            self.kills += 1


def count_results(run: Path) -> tuple[int, int]:
    """Rows in the result log, and distinct (trial_id, training_iteration) among them."""
    keys = []
    with open(run / "results.jsonl", encoding="utf-8") as log:
        for line in log:
            row = json.loads(line)
            keys.append((row["trial_id"], row["training_iteration"]))
    return len(keys), len(set(keys))


def soak(trials: int, kill: bool) -> dict[str, Any]:
    """One run of `trials` trials with a headless dashboard; `kill` adds the worker kills."""
    from nbtune.ui.dashboard import Dashboard  # imported before the first RSS reading

    killer = WorkerKiller(KILL_EVERY) if kill else None
    with tempfile.TemporaryDirectory() as storage:
        gc.collect()
        rss_start = rss_mb()
        tuner = nt.Tuner(
            noop_train,
            {},
            metric="loss",
            num_samples=trials,
            max_concurrent=WORKERS,
            storage_path=storage,
            max_failures=100 if kill else 0,
            callbacks=[killer] if killer else [],
            progress=False,
        )
        started = time.perf_counter()
        tuner.start(display=False)
        dashboard = Dashboard(tuner)
        tuner.wait()
        wall = time.perf_counter() - started
        dashboard.close()
        gc.collect()
        rss_end = rss_mb()
        rows, unique = count_results(tuner.path)
        frame = tuner.dataframe()
        expected = trials * REPORTS
        delta = rss_end - rss_start
        return {
            "figure": "soak_kills" if kill else "soak",
            "trials": trials,
            "reports_per_trial": REPORTS,
            "state": tuner.state,
            "terminated": int((frame["status"] == "TERMINATED").sum()),
            "results": rows,
            "unique_results": unique,
            "expected_results": expected,
            "wall_s": round(wall, 1),
            "trials_per_s": round(trials / wall, 1),
            "rss_start_mb": round(rss_start, 1),
            "rss_end_mb": round(rss_end, 1),
            "rss_delta_mb": round(delta, 1),
            "dashboard_redraws": dashboard.redraws,
            "workers_killed": killer.kills if killer else 0,
            "retried_trials": int((frame["attempts"] > 1).sum()),
            "passed": rows == unique == expected and delta <= RSS_LIMIT_MB,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10_000)
    parser.add_argument("--figure", choices=(*FIGURES, "all"), default="all")
    options = parser.parse_args()
    if options.figure != "all":
        print(json.dumps(soak(options.trials, kill=options.figure == "soak_kills")), flush=True)
        return
    for figure in FIGURES:
        command = [sys.executable, __file__, "--figure", figure, "--trials", str(options.trials)]
        subprocess.run(command, check=True)


if __name__ == "__main__":
    main()
