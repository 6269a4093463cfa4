"""What checkpoints cost on disk, and what keeping them in check costs per report.

8 trials report 20 times each with a 1 MB checkpoint every time, on 2 workers, once for each
`keep_checkpoints` setting. A thread samples the experiment directory every 50 ms for the
peak. Prints one JSON line per setting:

    {"figure": "checkpoint_disk", "keep_checkpoints": 2, "files_end": 16, "mb_end": 16.0,
     "files_peak": 19, "mb_peak": 17.0, "wall_s": 0.25, "retention_ms": 0.06, ...}

`retention_ms` and `retention_p95_ms` are the runner's own time in `CheckpointRetention.stored`
(ranking a trial's checkpoints and deleting those that fall out), per report with a checkpoint:
what keeping the disk in check costs the runner thread.

Usage:
    python benchmarks/checkpoints.py            # 8 trials x 20 reports x 1 MB
    python benchmarks/checkpoints.py --quick    # 4 trials x 5 reports x 0.1 MB
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import nbtune as nt
from nbtune.retention import CheckpointRetention

WORKERS = 2


def train(config: dict[str, Any]) -> None:
    """Reports a falling loss, each result with a checkpoint of `config["mb"]` megabytes."""
    payload = bytes(int(config["mb"] * 1e6))
    for step in range(1, config["reports"] + 1):
        nt.report(loss=1 / step + config["x"], checkpoint={"weights": payload, "step": step})


def checkpoint_files(path: Path) -> list[Path]:
    """The checkpoint files under an experiment directory."""
    return [p for p in path.glob("trials/*/checkpoints/**/*") if p.is_file()]


class DiskWatch:
    """Samples the checkpoint files and bytes on disk every 50 ms; keeps the peak."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.files_peak = 0
        self.bytes_peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> DiskWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()

    def _watch(self) -> None:
        while not self._stop.wait(0.05):
            self.sample()

    def sample(self) -> None:
        files = checkpoint_files(self.path)
        size = 0
        for file in files:
            try:
                size += file.stat().st_size
            except FileNotFoundError:
                continue
        self.files_peak = max(self.files_peak, len(files))
        self.bytes_peak = max(self.bytes_peak, size)


class RetentionClock:
    """Times every call of `CheckpointRetention.stored` while it is entered (the runner
    thread runs in this process)."""

    def __enter__(self) -> RetentionClock:
        self.seconds: list[float] = []
        self._original = stored = CheckpointRetention.stored

        def timed(*args: Any, **kwargs: Any) -> None:
            began = time.perf_counter()
            stored(*args, **kwargs)
            self.seconds.append(time.perf_counter() - began)

        CheckpointRetention.stored = timed
        return self

    def __exit__(self, *exc_info: object) -> None:
        CheckpointRetention.stored = self._original


def measure(keep: int | None, trials: int, reports: int, mb: float, folder: str) -> dict:
    tuner = nt.Tuner(
        train,
        {"x": nt.uniform(0, 1), "mb": mb, "reports": reports},
        metric="loss",
        num_samples=trials,
        max_concurrent=WORKERS,
        keep_checkpoints=keep,
        storage_path=folder,
        name=f"keep-{keep}-{trials}x{reports}",
        progress=False,
        seed=0,
    )
    began = time.perf_counter()
    with DiskWatch(tuner.path) as watch, RetentionClock() as clock:
        tuner.run()
    wall = time.perf_counter() - began
    end = checkpoint_files(tuner.path)
    spent = sorted(clock.seconds)
    return {
        "figure": "checkpoint_disk",
        "keep_checkpoints": keep,
        "trials": trials,
        "reports_per_trial": reports,
        "checkpoint_mb": mb,
        "files_end": len(end),
        "mb_end": round(sum(f.stat().st_size for f in end) / 1e6, 2),
        "files_peak": watch.files_peak,
        "mb_peak": round(watch.bytes_peak / 1e6, 2),
        "wall_s": round(wall, 3),
        "retention_ms": round(1000 * statistics.mean(spent), 4),
        "retention_p95_ms": round(1000 * spent[int(0.95 * (len(spent) - 1))], 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke test")
    args = parser.parse_args()
    trials, reports, mb = (4, 5, 0.1) if args.quick else (8, 20, 1.0)
    with tempfile.TemporaryDirectory() as folder:
        measure(None, 2, 2, mb, folder)
        for keep in (None, 2, 1):
            print(json.dumps(measure(keep, trials, reports, mb, folder)))


if __name__ == "__main__":
    main()
