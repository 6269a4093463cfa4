"""What remote storage costs: the runner's cost per result with S3 against a local folder, and
the time to upload and to restore a run of 100 trials x 100 results with 1 MB checkpoints.

The S3 API is moto's server on localhost, in a process of its own (s3fs is the client). The
runner is fed by workers played in its own thread (as in `runner_cost.py`): no worker process,
no socket, every result persisted. Prints one JSON line per figure:

- `remote_dispatch_ratio`: the runner thread's CPU time per result with S3 storage over the
  same with a local folder (best of `--rounds` each; 200 trials x 10 results, syncing every
  0.5 s so that syncs overlap the run). The syncer works on its own thread, so this is what
  the runner thread itself pays: its write lock and flush requests. Target < 1.10.
- `remote_wall_ratio`: the same for the wall time of the run (the syncer's CPU competes with
  the runner for the interpreter and the 2 cores); for information.
- `remote_upload_s`: one sync of the whole folder of a run of 100 trials x 100 results (a 1 MB
  checkpoint every 10 results, the latest and best two kept per trial) to an empty store:
  its logs and 200 checkpoints; `mb` says how much and `mb_per_s` how fast.
- `remote_final_sync_s`: how long the end of that run took to sync while the run itself went
  on (syncing every 5 s): the blocking sync at its end, from the last result on.
- `remote_restore_s`: `Tuner.restore(url)` with an empty cache, of that run stopped half-way
  with its 100 trials paused: pulls the spec, the logs and the 100 checkpoints the trials
  resume from (not the other 100).

Usage:
    python benchmarks/storage_remote.py            # the sizes above
    python benchmarks/storage_remote.py --quick    # 20 trials x 20 results, 0.1 MB
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import nbtune as nt
from nbtune import remote
from nbtune.events import EventBus
from nbtune.executors import Executor
from nbtune.protocol import Decision, TrialLaunch, WorkerDone, WorkerPaused, WorkerResult
from nbtune.runner import TrialRunner
from nbtune.space import SearchSpace
from nbtune.stopping import StopCriteria
from nbtune.storage import ExperimentStorage

OPTIONS: dict[str, Any] = {"key": "testing", "secret": "testing"}


class PlayedWorkers(Executor):
    """Workers played in the runner's thread: each running trial reports once per poll, with
    a checkpoint of `mb` megabytes every `checkpoint_every` results; after `pause_after`
    results in all, the run is stopped with its trials paused."""

    pickles_trainable = False

    def __init__(self, reports: int, mb: float = 0, checkpoint_every: int = 0) -> None:
        self.reports = reports
        self.payload = bytes(int(mb * 1e6))
        self.checkpoint_every = checkpoint_every
        self.iterations: dict[int, int] = {}
        self.folders: dict[int, str] = {}
        self.stopping: dict[int, Decision] = {}
        self.pause_after: int | None = None
        self.on_pause = lambda: None
        self.results = 0
        self.last_result_at = 0.0

    def open(self, trainable, max_workers):
        pass

    def start(self, launch: TrialLaunch) -> None:
        self.iterations[launch.trial_id] = launch.iteration
        self.folders[launch.trial_id] = launch.checkpoint_dir

    def reply(self, trial_id: int, decision: Decision, free_steps: int = 0) -> None:
        if decision is not Decision.CONTINUE:
            self.stopping[trial_id] = decision

    def poll(self, timeout):
        events = []
        for trial_id in list(self.iterations):
            if trial_id in self.stopping or self.iterations[trial_id] >= self.reports:
                iteration = self.iterations.pop(trial_id)
                if self.stopping.pop(trial_id, None) is Decision.PAUSE:
                    events.append(WorkerPaused(trial_id, self._save(trial_id, iteration)))
                else:
                    events.append(WorkerDone(trial_id))
                continue
            iteration = self.iterations[trial_id] = self.iterations[trial_id] + 1
            events.append(
                WorkerResult(
                    trial_id, {"loss": 1.0 / iteration}, self._checkpoint(trial_id, iteration),
                    "", time.time(), True,
                )
            )  # fmt: skip
        self.results += sum(isinstance(event, WorkerResult) for event in events)
        if events:
            self.last_result_at = time.monotonic()
        if self.pause_after is not None and self.results >= self.pause_after:
            self.pause_after = None
            self.on_pause()
        return events

    def _checkpoint(self, trial_id: int, iteration: int) -> str | None:
        if not self.checkpoint_every or iteration % self.checkpoint_every:
            return None
        return self._save(trial_id, iteration)

    def _save(self, trial_id: int, iteration: int) -> str:
        path = Path(self.folders[trial_id]) / f"checkpoint_{iteration:06d}.pkl"
        path.write_bytes(self.payload)
        return str(path)

    def wakeup(self) -> None:
        pass

    def close(self) -> None:
        pass


def make_runner(storage: ExperimentStorage, workers: PlayedWorkers, trials: int, concurrent: int):
    space = SearchSpace({"x": nt.uniform(0, 1)})
    searcher = nt.RandomSearch()
    searcher.setup(space, "loss", "min", trials, 0)
    scheduler = nt.FIFOScheduler()
    scheduler.setup("loss", "min")
    spec = {"name": storage.path.name, "metric": "loss", "mode": "min", "num_samples": trials}
    storage.create({**spec, "seed": 0, "max_concurrent": concurrent, "parameter_names": ["x"]})
    runner = TrialRunner(
        trainable=lambda config: None,
        searcher=searcher,
        scheduler=scheduler,
        executor=workers,
        storage=storage,
        bus=EventBus(),
        metric="loss",
        mode="min",
        max_concurrent=concurrent,
        should_stop=StopCriteria(None, "loss", "min"),
        space=space,
    )
    return runner, space


def runner_seconds(storage: ExperimentStorage, trials: int, reports: int) -> tuple[float, float]:
    """The runner thread's CPU seconds and the wall seconds of one run, until its last
    result (the blocking sync at the end of a remote run is `remote_final_sync_s`)."""
    workers = PlayedWorkers(reports)
    runner, _ = make_runner(storage, workers, trials, 2)
    wall, cpu = time.monotonic(), time.thread_time()
    runner.run()
    return time.thread_time() - cpu, workers.last_result_at - wall


def remote_storage(url: str, name: str, period: float) -> ExperimentStorage:
    run = remote.open_run(url, OPTIONS, name, period, resume=False, overwrite=True)
    return run.storage()


def dispatch(url: str, scratch: Path, trials: int, reports: int, rounds: int) -> list[dict]:
    local, s3 = [], []
    for index in range(rounds):
        local.append(runner_seconds(ExperimentStorage(scratch / f"local-{index}"), trials, reports))
        s3.append(runner_seconds(remote_storage(url, f"dispatch-{index}", 0.5), trials, reports))
    results = trials * reports
    common = {"trials": trials, "reports": reports, "sync_period_s": 0.5}
    rows = []
    figures = (("remote_dispatch_ratio", 0, "< 1.10"), ("remote_wall_ratio", 1, None))
    for figure, part, target in figures:
        best_local = min(row[part] for row in local)
        best_s3 = min(row[part] for row in s3)
        ratio = best_s3 / best_local
        rows.append(
            {
                "figure": figure,
                "value": round(ratio, 3),
                "unit": "x",
                "target": target,
                "passed": None if target is None else ratio < 1.10,
                "local_us_per_result": round(best_local / results * 1e6, 1),
                "s3_us_per_result": round(best_s3 / results * 1e6, 1),
                **common,
            }
        )  # fmt: skip
    return rows


def big_run(url: str, trials: int, reports: int, mb: float) -> list[dict]:
    """Run, upload and restore a run of `trials` x `reports` with `mb` MB checkpoints."""
    common = {"trials": trials, "reports": reports, "checkpoint_mb": mb}
    rows = []
    workers = PlayedWorkers(reports, mb, checkpoint_every=10)
    storage = remote_storage(url, "big", 5.0)
    runner, _ = make_runner(storage, workers, trials, trials)
    workers.pause_after = trials * reports // 2
    workers.on_pause = lambda: runner.request_stop(hold=True)
    runner.run()
    final = time.monotonic() - workers.last_result_at
    rows.append({"figure": "remote_final_sync_s", "value": round(final, 3), "unit": "s", **common})

    store = remote.RemoteStore(url, OPTIONS)
    fresh = remote.RemoteRun(store, "big-copy", 5.0)
    fresh.folder = storage.path
    syncer = remote.Syncer(fresh, threading.Lock())
    started = time.perf_counter()
    syncer.sync()
    upload = time.perf_counter() - started
    megabytes = sum(store.listing("big-copy").values()) / 1e6
    rows.append(
        {
            "figure": "remote_upload_s", "value": round(upload, 3), "unit": "s",
            "mb": round(megabytes, 1), "mb_per_s": round(megabytes / upload, 1), **common,
        }
    )  # fmt: skip

    os.environ[remote.CACHE_ENV] = tempfile.mkdtemp(prefix="nbtune-bench-cache-")
    started = time.perf_counter()
    tuner = nt.Tuner.restore(
        f"{url}/big", lambda config: None, storage_options=OPTIONS, progress=False
    )
    restore = time.perf_counter() - started
    pulled = [p for p in tuner.path.glob("trials/*/checkpoints/*") if p.is_file()]
    rows.append(
        {
            "figure": "remote_restore_s", "value": round(restore, 3), "unit": "s",
            "checkpoints_pulled": len(pulled),
            "checkpoints_in_store": sum("/checkpoints/" in rel for rel in store.listing("big")),
            **common,
        }
    )  # fmt: skip
    return rows


def moto_server() -> tuple[subprocess.Popen, str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    return server, endpoint


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke test")
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    server, endpoint = moto_server()
    OPTIONS["client_kwargs"] = {"endpoint_url": endpoint}
    try:
        import s3fs

        s3fs.S3FileSystem(**OPTIONS).mkdir("bench")
        with tempfile.TemporaryDirectory() as scratch:
            os.environ[remote.CACHE_ENV] = str(Path(scratch) / "cache")
            trials, reports = (40, 10) if options.quick else (200, 10)
            rows = dispatch("s3://bench/runs", Path(scratch), trials, reports, options.rounds)
            sizes = (20, 20, 0.1) if options.quick else (100, 100, 1.0)
            rows += big_run("s3://bench/runs", *sizes)
        for row in rows:
            row.setdefault("target", None)
            row.setdefault("passed", None)
            print(json.dumps(row), flush=True)
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
