"""How long `nbtune.runs()` takes to list a campaign: 200 runs of 100 trials each.

One real run (thread executor, `TRIALS` trials of `REPORTS` results each) is made, then copied
to `RUNS` experiment folders (each renamed in its spec), so every folder holds what a real run
writes. Prints one JSON line per figure, the least of `ROUNDS` timings (the folders are in the
page cache: a first listing after a reboot reads the disk too):

    {"figure": "runs_listing", "value": 0.2, "unit": "s", "target": "< 1", ...}
    {"figure": "runs_listing_from_logs", "value": 3.1, "unit": "s", "target": null, ...}

`runs_listing` reads the runs as they end (each with its `summary.json`); `runs_listing_from_logs`
the same folders without it, as `runs()` reads a live or interrupted run, or one made by an
nbtune before summaries: the whole journal and result log of each.

Usage:
    python benchmarks/campaign.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import nbtune as nt

ROUNDS = 3


def report_steps(config: dict[str, Any]) -> None:
    for step in range(1, config["reports"] + 1):
        nt.report(loss=config["x"] / step, acc=1 - 1 / step)


def make_campaign(folder: Path, runs: int, trials: int, reports: int) -> None:
    space = {"x": nt.uniform(0, 1), "reports": reports}
    tuner = nt.Tuner(
        report_steps,
        space,
        metric="loss",
        num_samples=trials,
        name="run-000",
        storage_path=folder,
        executor=nt.ThreadExecutor(),
        max_concurrent=2,
        progress=False,
        seed=0,
    )
    tuner.run()
    for index in range(1, runs):
        copy = folder / f"run-{index:03d}"
        shutil.copytree(tuner.path, copy)
        spec_path = copy / "experiment.json"
        spec = json.loads(spec_path.read_text())
        spec.update(name=copy.name, created_at=spec["created_at"] + index)
        spec_path.write_text(json.dumps(spec))


def timed(folder: Path, runs: int) -> tuple[float, list[float]]:
    times = []
    for _ in range(ROUNDS):
        began = time.perf_counter()
        frame = nt.runs(folder)
        times.append(time.perf_counter() - began)
        assert len(frame) == runs and (frame["state"] == "finished").all()
    return min(times), times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20 runs: a smoke test")
    args = parser.parse_args()
    runs, trials, reports = (20, 20, 5) if args.quick else (200, 100, 10)
    sizes = {"runs": runs, "trials_per_run": trials, "results_per_trial": reports}
    with tempfile.TemporaryDirectory() as temporary:
        folder = Path(temporary)
        make_campaign(folder, runs, trials, reports)
        best, times = timed(folder, runs)
        line = {"figure": "runs_listing", "value": round(best, 4), "unit": "s", "target": "< 1"}
        print(json.dumps({**line, "passed": best < 1, "rounds_s": times, **sizes}), flush=True)
        for summary in folder.glob("*/summary.json"):
            summary.unlink()
        best, times = timed(folder, runs)
        line = {"figure": "runs_listing_from_logs", "value": round(best, 4), "unit": "s"}
        print(json.dumps({**line, "target": None, "passed": None, "rounds_s": times, **sizes}))


if __name__ == "__main__":
    main()
