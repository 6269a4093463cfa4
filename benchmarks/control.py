"""Latency of steering a live run: pause, resume, and the work a pause/resume cycle loses.

Prints one JSON line per figure:

    python benchmarks/control.py [--cycles 40]

1. pause latency: from `tuner.pause(0)` to the trial being PAUSED (the TrialPaused event), for a
   trial that reports every 10 ms and checkpoints each report. Target: p95 under 50 ms.
2. resume latency: from `tuner.resume(0)` to the trial RUNNING again (TrialStarted) on warm
   workers, and to its next result. Target: p95 under 100 ms (to RUNNING).
3. lost work: iterations repeated over all the cycles (the trainable's own step counter against
   nbtune's training_iteration). Target: 0.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time

import nbtune as nt
from nbtune.events import TrialPaused, TrialResult, TrialStarted


def steady(config):
    """Reports every 10 ms forever, with a checkpoint each time."""
    checkpoint = nt.get_checkpoint()
    step = checkpoint["step"] if checkpoint else 0
    while True:
        time.sleep(0.01)
        step += 1
        nt.report(loss=1.0 / step, step=step, checkpoint={"step": step})


class Stopwatch:
    """Records when each kind of event last arrived, and lets the caller wait for the next."""

    def __init__(self):
        self.condition = threading.Condition()
        self.seen: dict[type, list[float]] = {TrialPaused: [], TrialStarted: [], TrialResult: []}

    def __call__(self, event):
        if type(event) in self.seen:
            with self.condition:
                self.seen[type(event)].append(time.perf_counter())
                self.condition.notify_all()

    def next(self, kind, after: int, timeout: float = 10) -> float:
        with self.condition:
            arrived = self.condition.wait_for(lambda: len(self.seen[kind]) > after, timeout)
            if not arrived:
                raise TimeoutError(f"no {kind.__name__} within {timeout} s")
            return self.seen[kind][after]

    def count(self, kind) -> int:
        with self.condition:
            return len(self.seen[kind])


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def emit(figure: str, values_ms: list[float], target_ms: float | None = None) -> None:
    line = {
        "figure": figure,
        "median_ms": round(statistics.median(values_ms), 2),
        "p95_ms": round(percentile(values_ms, 0.95), 2),
        "samples": len(values_ms),
    }
    if target_ms is not None:
        line.update(target_p95_ms=target_ms, passed=line["p95_ms"] < target_ms)
    print(json.dumps(line), flush=True)


def measure(cycles: int) -> None:
    watch = Stopwatch()
    with tempfile.TemporaryDirectory() as folder:
        tuner = nt.Tuner(
            steady,
            metric="loss",
            max_concurrent=1,
            name="control",
            storage_path=folder,
            progress=False,
            callbacks=[watch],
        )
        tuner.start()
        pause_ms, resume_ms, first_result_ms = [], [], []
        for _ in range(cycles):
            watch.next(TrialResult, watch.count(TrialResult) + 2)
            paused_before = watch.count(TrialPaused)
            asked = time.perf_counter()
            tuner.pause(0)
            pause_ms.append((watch.next(TrialPaused, paused_before) - asked) * 1e3)
            started_before = watch.count(TrialStarted)
            results_before = watch.count(TrialResult)
            asked = time.perf_counter()
            tuner.resume(0)
            resume_ms.append((watch.next(TrialStarted, started_before) - asked) * 1e3)
            first_result_ms.append((watch.next(TrialResult, results_before) - asked) * 1e3)
        tuner.stop()
        tuner.wait()
        history = tuner.history()
    emit("pause_latency", pause_ms, target_ms=50)
    emit("resume_latency_to_running", resume_ms, target_ms=100)
    emit("resume_latency_to_next_result", first_result_ms)
    repeated = int((history["step"] != history["training_iteration"]).sum())
    print(
        json.dumps(
            {
                "figure": "lost_work",
                "repeated_iterations": repeated,
                "cycles": cycles,
                "results": len(history),
                "passed": repeated == 0,
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=40)
    measure(parser.parse_args().cycles)
