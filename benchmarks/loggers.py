"""What the MLflow, TensorBoard and W&B loggers cost the run, and how far behind they fall.

Two trials report `RESULTS / 2` times each as fast as they can (on threads, so that the
runner, not the workers, is the bottleneck), once without a logger and once with each. Each
logger is timed where the runner calls it: the cost per result on the runner thread (the
enqueue), and how long the end of the run waits for the logging thread to write what is
still queued: how far behind it fell. Prints JSON lines:

    {"figure": "logger_enqueue_us", "logger": "mlflow", "value": 2.1, "unit": "us/result", ...}
    {"figure": "logger_lag_s", "logger": "mlflow", "value": 1.7, "unit": "s", ...}
    {"figure": "logger_run_s", "logger": "mlflow", "value": 0.9, "unit": "s", ...}

`logger_run_s` is `tuner.run()` from start to return, the end's wait included;
`last_result_s` is when the last result reached the runner (the trials' own pace).
`logger_lag_s` is from the run's last result to the moment everything is written;
`max_queued` is the deepest the queue got; `written_per_s` is the logger's own pace (results
over the time from the first result to the end of the writing). W&B runs offline (its runs are
files, no server); a logger whose library is not installed is left out.

Usage:
    python benchmarks/loggers.py [--quick] [--results N]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import nbtune as nt
from nbtune.events import Event, ExperimentDone, TrialResult

RESULTS = 2000


def burst(config: dict[str, Any]) -> None:
    """Reports `config["reports"]` results at once, with a few metrics each."""
    for step in range(1, config["reports"] + 1):
        nt.report(loss=1.0 / step, accuracy=1.0 - 1.0 / step, lr=config["lr"])


class Timed:
    """Calls `logger` as the runner would, timing each call on the runner thread."""

    def __init__(self, logger: Any) -> None:
        self.logger = logger
        self.enqueue_ns: list[int] = []
        self.max_queued = 0
        self.first_result: float | None = None
        self.last_result = 0.0
        self.end_wait_s = 0.0

    def setup(self, tuner: Any) -> None:
        if hasattr(self.logger, "setup"):
            self.logger.setup(tuner)

    def __call__(self, event: Event) -> None:
        began = time.perf_counter_ns()
        if self.logger is not None:
            self.logger(event)
        spent = time.perf_counter_ns() - began
        if isinstance(event, TrialResult):
            self.enqueue_ns.append(spent)
            self.last_result = time.perf_counter()
            if self.first_result is None:
                self.first_result = self.last_result
            queue = getattr(self.logger, "_queue", None)
            self.max_queued = max(self.max_queued, queue.qsize() if queue else 0)
        elif isinstance(event, ExperimentDone):
            self.end_wait_s = spent / 1e9


def make_logger(name: str, folder: Path) -> Any:
    if name == "mlflow":
        from nbtune.integrations.mlflow import MLflowLogger

        return MLflowLogger(f"sqlite:///{folder / 'mlflow.db'}", flush_timeout_s=600)
    if name == "tensorboard":
        from nbtune.integrations.tensorboard import TensorBoardLogger

        return TensorBoardLogger(folder / "tensorboard", flush_timeout_s=600)
    if name == "wandb":
        from nbtune.integrations.wandb import WandbLogger

        os.environ.update(WANDB_MODE="offline", WANDB_SILENT="true", WANDB_DIR=str(folder))
        return WandbLogger(project="bench", flush_timeout_s=600)
    return None


def measure(name: str, results: int, folder: Path) -> list[dict[str, Any]]:
    timed = Timed(make_logger(name, folder))
    if name == "mlflow":
        from mlflow import MlflowClient

        client = MlflowClient(f"sqlite:///{folder / 'mlflow.db'}")
        client.create_experiment(f"bench-{name}", artifact_location=str(folder / "artifacts"))
    tuner = nt.Tuner(
        burst,
        {"reports": results // 2, "lr": nt.grid([0.1, 0.2])},
        metric="loss",
        max_concurrent=2,
        executor=nt.ThreadExecutor(),
        storage_path=folder / "runs",
        name=f"bench-{name}",
        callbacks=[timed],
        progress=False,
    )
    began = time.perf_counter()
    tuner.run()
    run_s = time.perf_counter() - began
    enqueue_us = sorted(ns / 1000 for ns in timed.enqueue_ns)
    common = {"logger": name, "results": len(enqueue_us)}
    lines = [
        {
            "figure": "logger_enqueue_us",
            **common,
            "value": round(statistics.mean(enqueue_us), 2),
            "unit": "us/result",
            "median_us": round(statistics.median(enqueue_us), 2),
            "p99_us": round(enqueue_us[int(0.99 * (len(enqueue_us) - 1))], 2),
        },
        {
            "figure": "logger_run_s",
            **common,
            "value": round(run_s, 3),
            "unit": "s",
            "last_result_s": round(timed.last_result - began, 3),
        },
    ]
    if timed.logger is not None:
        written_s = timed.last_result + timed.end_wait_s - timed.first_result
        lines.append(
            {
                "figure": "logger_lag_s",
                **common,
                "value": round(timed.end_wait_s, 3),
                "unit": "s",
                "max_queued": timed.max_queued,
                "written_per_s": round(len(enqueue_us) / written_s),
                "failure": None if timed.logger.failure is None else repr(timed.logger.failure),
            }
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200 results: a smoke test")
    parser.add_argument("--results", type=int, default=RESULTS)
    options = parser.parse_args()
    results = 200 if options.quick else options.results
    for name in ("none", "mlflow", "tensorboard", "wandb"):
        if name != "none" and importlib.util.find_spec(name) is None:
            continue
        with tempfile.TemporaryDirectory() as folder:
            for line in measure(name, results, Path(folder)):
                print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
