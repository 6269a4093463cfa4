"""What the runner loop itself costs per result, with no worker process and no socket.

An executor played in-process hands the runner a result from each running trial, waits for
its reply, and ends each trial after `--reports` results; every result is persisted as in a
real run. The figure is the runner's own CPU time per result (and per trial), the part of
`overhead.py`'s `dispatch` figures that nbtune's code decides, without the noise of process
scheduling on a busy machine. Prints one JSON line per figure.

Usage:
    python benchmarks/runner_cost.py                   # 2,000 trials x 10 results, 3 rounds
    python benchmarks/runner_cost.py --trials 200      # smaller
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import nbtune as nt
from nbtune.events import EventBus
from nbtune.executors import Executor
from nbtune.protocol import Decision, TrialLaunch, WorkerDone, WorkerResult
from nbtune.runner import TrialRunner
from nbtune.space import SearchSpace
from nbtune.stopping import StopCriteria
from nbtune.storage import ExperimentStorage


class PlayedWorkers(Executor):
    """Workers played in the runner's own thread: each running trial reports once per poll."""

    pickles_trainable = False

    def __init__(self, reports: int) -> None:
        self.reports = reports
        self.iterations: dict[int, int] = {}
        self.stopping: set[int] = set()

    def open(self, trainable, max_workers):
        pass

    def start(self, launch: TrialLaunch) -> None:
        self.iterations[launch.trial_id] = launch.iteration

    def reply(self, trial_id: int, decision: Decision, free_steps: int = 0) -> None:
        if decision is not Decision.CONTINUE:
            self.stopping.add(trial_id)

    def poll(self, timeout):
        events = []
        for trial_id in list(self.iterations):
            if trial_id in self.stopping or self.iterations[trial_id] >= self.reports:
                del self.iterations[trial_id]
                self.stopping.discard(trial_id)
                events.append(WorkerDone(trial_id))
                continue
            self.iterations[trial_id] += 1
            loss = 1.0 / self.iterations[trial_id]
            events.append(WorkerResult(trial_id, {"loss": loss}, None, "", time.time(), True))
        return events

    def wakeup(self) -> None:
        pass

    def close(self) -> None:
        pass


def one_round(folder: Path, trials: int, reports: int) -> float:
    """CPU seconds of one run of `trials` trials, each reporting `reports` times."""
    storage = ExperimentStorage(folder)
    storage.create({"name": folder.name, "metric": "loss", "mode": "min"})
    space = SearchSpace({"x": nt.uniform(0, 1)})
    searcher = nt.RandomSearch()
    searcher.setup(space, "loss", "min", trials, 0)
    scheduler = nt.FIFOScheduler()
    scheduler.setup("loss", "min")
    runner = TrialRunner(
        trainable=lambda config: None,
        searcher=searcher,
        scheduler=scheduler,
        executor=PlayedWorkers(reports),
        storage=storage,
        bus=EventBus(),
        metric="loss",
        mode="min",
        max_concurrent=2,
        should_stop=StopCriteria(None, "loss", "min"),
        space=space,
    )
    started = time.process_time()
    runner.run()
    return time.process_time() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--reports", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        seconds = [
            one_round(Path(folder) / f"run-{i}", options.trials, options.reports)
            for i in range(options.rounds)
        ]
    best = min(seconds)
    results = options.trials * options.reports
    common = {"trials": options.trials, "reports": options.reports, "rounds": seconds}
    for figure, value, unit in (
        ("runner_cpu_per_result", best / results * 1e6, "us"),
        ("runner_cpu_per_trial", best / options.trials * 1e3, "ms"),
        ("runner_trials_per_cpu_s", options.trials / best, "trials/s"),
    ):
        row = {"figure": figure, "value": round(value, 3), "unit": unit, **common}
        print(json.dumps(row))


if __name__ == "__main__":
    main()
