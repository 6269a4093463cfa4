"""Writes the stopped runs under tests/data/old_runs/<commit>/ with the nbtune on PYTHONPATH.

Run it with an older nbtune checked out (git worktree add /tmp/old-<sha> <sha>), from this
repository's root:

    PYTHONPATH=/tmp/old-<sha> python tests/data/old_runs/make_runs.py tests/data/old_runs/<sha>

Each run has three trials of four steps (a checkpoint every step), one at a time in threads;
trial 0 is paused after its second result, then the run is stopped: a run to carry on, with
a paused trial, the searcher's and scheduler's state pickled by that nbtune. It uses only
what every nbtune since restore has: Tuner, subscribe, pause, stop, wait, report,
get_checkpoint and get_trial_id. test_old_runs.py restores each with today's nbtune.
"""

from __future__ import annotations

import shutil
import sys
import threading
from pathlib import Path

import nbtune
from nbtune.events import TrialPaused, TrialResult

STEPS = 4
_released = threading.Event()


def train(config):
    """Four steps of a falling loss; trial 0 waits before its second report until released."""
    start = nbtune.get_checkpoint() or 0
    for step in range(start, STEPS):
        if nbtune.get_trial_id() == 0 and step == 1:
            _released.wait(30)
        nbtune.report(loss=config["lr"] / (step + 1), checkpoint=step + 1)


def schedulers():
    """The scheduler of each run, by name, as far as this nbtune has them."""
    made = {"fifo": lambda: None}
    if hasattr(nbtune, "ASHA"):
        made["asha"] = lambda: nbtune.ASHA(max_t=STEPS, grace_period=1, reduction_factor=2)
        made["hyperband"] = lambda: nbtune.HyperBand(max_t=STEPS, reduction_factor=2)
        made["pbt"] = lambda: nbtune.PBT(
            perturbation_interval=2, hyperparam_mutations={"lr": nbtune.uniform(0.1, 1.0)}
        )
    return made


def run(folder: Path, name: str, scheduler, searcher) -> None:
    _released.clear()
    tuner = nbtune.Tuner(
        train,
        {"lr": nbtune.uniform(0.1, 1.0), "depth": nbtune.choice([2, 3])},
        metric="loss",
        mode="min",
        num_samples=3,
        max_concurrent=1,
        name=name,
        seed=7,
        storage_path=folder,
        searcher=searcher,
        scheduler=scheduler,
        executor=nbtune.ThreadExecutor(),
        progress=False,
    )
    first_result, paused = threading.Event(), threading.Event()

    def watch(event) -> None:
        if isinstance(event, TrialResult) and event.trial_id == 0:
            first_result.set()
        if isinstance(event, TrialPaused) and event.trial_id == 0:
            paused.set()

    tuner.subscribe(watch)
    tuner.start(display=False)
    assert first_result.wait(30), name
    tuner.pause(0)
    _released.set()
    assert paused.wait(30), name
    tuner.stop()
    assert tuner.wait(60), name
    for lock in folder.glob("*/.lock"):
        lock.unlink()


def main(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for scheduler_name, make in schedulers().items():
        run(folder, f"random-{scheduler_name}", make(), None)
    if hasattr(nbtune, "OptunaSearch"):
        run(folder, "optuna-asha", schedulers()["asha"](), nbtune.OptunaSearch())


if __name__ == "__main__":
    main(Path(sys.argv[1]))
