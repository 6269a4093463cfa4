"""What capping each trial's thread pools buys: 2 matrix-multiplying trials on 2 workers.

Each trial multiplies `SIZE` x `SIZE` float64 matrices `REPEATS` times per report. With the
caps (nbtune's default, `os.cpu_count() // max_concurrent` threads a trial) the two trials' BLAS
pools fit the machine; without them (nbtune before the caps, emulated by giving every trial
all the machine's threads) 2 x `os.cpu_count()` BLAS threads fight over the cores. Prints one
JSON line per setting, then the ratio:

    {"figure": "matmul_wall", "threads_per_trial": 1, "wall_s": 3.1, ...}
    {"figure": "thread_cap_speedup", "value": 1.4, "unit": "x", ...}

Usage:
    python benchmarks/threads.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from typing import Any

import nbtune as nt
from nbtune.resources import TrialResources

WORKERS = 2


def matmul(config: dict[str, Any]) -> None:
    """Reports `config["reports"]` times, each after `config["repeats"]` matrix products."""
    import numpy as np

    rng = np.random.default_rng(config["seed"])
    a = rng.random((config["size"], config["size"]))
    for step in range(config["reports"]):
        for _ in range(config["repeats"]):
            a = a @ a
            a /= np.abs(a).max()
        nt.report(loss=float(a.sum()), step=step)


def timed(name: str, folder: str, config: dict[str, Any]) -> float:
    tuner = nt.Tuner(
        matmul,
        {**config, "seed": nt.grid([0, 1, 2, 3])},
        metric="loss",
        max_concurrent=WORKERS,
        storage_path=folder,
        name=name,
        progress=False,
    )
    began = time.perf_counter()
    tuner.run()
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke test")
    args = parser.parse_args()
    config = (
        {"size": 300, "repeats": 5, "reports": 2}
        if args.quick
        else {
            "size": 800,
            "repeats": 10,
            "reports": 5,
        }
    )
    cpus = os.cpu_count() or 1
    capped_threads = TrialResources().threads(cpus, WORKERS)
    with tempfile.TemporaryDirectory() as folder:
        timed("warm-up", folder, {**config, "reports": 1, "repeats": 1})
        capped = timed("capped", folder, config)
        original = TrialResources.threads
        TrialResources.threads = lambda self, cpus, max_concurrent: cpus
        try:
            uncapped = timed("uncapped", folder, config)
        finally:
            TrialResources.threads = original
    for threads, wall in ((capped_threads, capped), (cpus, uncapped)):
        row = {"figure": "matmul_wall", "threads_per_trial": threads, "wall_s": round(wall, 3)}
        print(json.dumps({**row, "trials": 4, "workers": WORKERS, "cpus": cpus, **config}))
    print(
        json.dumps(
            {
                "figure": "thread_cap_speedup",
                "value": round(uncapped / capped, 3),
                "unit": "x",
                "note": "wall time without caps / with caps",
            }
        )
    )


if __name__ == "__main__":
    main()
