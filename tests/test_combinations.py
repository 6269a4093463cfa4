"""Features that work alone must work together: every scheduler, with every checkpoint cadence,
on every local executor, left alone or with a running trial paused and resumed by the user.

Each run must end `finished` with every trial TERMINATED, no trial's iterations may have a
gap or a repeat (a fork's count on from its parent's checkpoint), none may run past the
budget, and `best_result` must be the best row of the history. `make test` runs a sample that
covers every scheduler with every cadence and every executor and command several times;
`make test-matrix` (`pytest --matrix`) runs all of them.
"""

from __future__ import annotations

import itertools
import time

import pytest

import nbtune as nt
from nbtune.events import TrialPaused, TrialResult, TrialStarted

MAX_T = 9
TRIALS = 6
SCHEDULERS = {
    "fifo": nt.FIFOScheduler,
    "asha": lambda: nt.ASHA(max_t=MAX_T, grace_period=1, reduction_factor=3),
    "hyperband": lambda: nt.HyperBand(max_t=MAX_T, reduction_factor=3),
    "median": lambda: nt.MedianStopping(grace_period=2, min_samples_required=2),
    "pbt": lambda: nt.PBT(perturbation_interval=3, hyperparam_mutations={"x": nt.uniform(0, 1)}),
}
CHECKPOINT_EVERY = {"every step": 1, "every 3rd": 3, "never": 0}
EXECUTORS = ("thread", "loky", "fresh")
COMMANDS = ("none", "pause and resume")


def climbs(config):
    """A loss that falls with each step, lower for x near 0.3; resumes from its checkpoint,
    taken every `every` steps (never for 0)."""
    checkpoint = nt.get_checkpoint()
    start = checkpoint["step"] if checkpoint else 0
    for step in range(start + 1, 10 * MAX_T):
        time.sleep(0.002)
        saved = {"step": step} if config["every"] and step % config["every"] == 0 else None
        nt.report(loss=(config["x"] - 0.3) ** 2 + 1 / step, checkpoint=saved)


class PausesOneRunningTrial:
    """The user, as a callback: pauses the first trial that reports its 2nd result, and
    resumes it as soon as it is paused (commands from a callback run at once)."""

    def __init__(self) -> None:
        self.tuner: nt.Tuner | None = None
        self.paused: int | None = None
        self.resumed = False

    def setup(self, tuner: nt.Tuner) -> None:
        self.tuner = tuner

    def __call__(self, event) -> None:
        if isinstance(event, TrialResult) and self.paused is None:
            if event.result["training_iteration"] == 2:
                self.paused = event.trial_id
                self.tuner.pause(event.trial_id)
        elif isinstance(event, TrialPaused) and event.trial_id == self.paused and not self.resumed:
            self.resumed = True
            self.tuner.resume(event.trial_id)


def every_combination():
    return list(itertools.product(SCHEDULERS, CHECKPOINT_EVERY, EXECUTORS, COMMANDS))


def sampled_combinations():
    """Every scheduler with every cadence, the executors and commands taken in turn so that
    each meets every scheduler and cadence."""
    pairs = list(itertools.product(SCHEDULERS, CHECKPOINT_EVERY))
    turns = itertools.cycle(itertools.product(EXECUTORS, COMMANDS))
    return [(scheduler, every, *next(turns)) for scheduler, every in pairs]


def matrix_params():
    sampled = set(sampled_combinations())
    return [
        pytest.param(*combo, marks=() if combo in sampled else pytest.mark.matrix)
        for combo in every_combination()
    ]


def executor(name: str):
    if name == "thread":
        return nt.ThreadExecutor()
    return nt.LokyExecutor(reuse_workers=name == "loky")


@pytest.mark.parametrize(("scheduler", "cadence", "executor_name", "command"), matrix_params())
def test_every_run_ends_with_a_whole_history(
    make_tuner, log, scheduler, cadence, executor_name, command
):
    user = PausesOneRunningTrial() if command != "none" else None
    tuner = make_tuner(
        climbs,
        {"x": nt.uniform(0, 1), "every": CHECKPOINT_EVERY[cadence]},
        metric="loss",
        num_samples=TRIALS,
        seed=7,
        scheduler=SCHEDULERS[scheduler](),
        executor=executor(executor_name),
        stop={"training_iteration": MAX_T},
        callbacks=[log, user] if user else [log],
    )
    tuner.run()

    trials, rows = tuner.snapshot()
    assert tuner.state == "finished", tuner.status
    assert {trial.status for trial in trials} == {nt.TrialStatus.TERMINATED}, tuner.status
    by_trial = {trial.trial_id: trial for trial in trials}
    for trial_id, trial in by_trial.items():
        iterations = [row["training_iteration"] for row in rows if row["trial_id"] == trial_id]
        first = (log.of(TrialStarted, trial_id)[0].restored_from or 0) + 1
        assert iterations == list(range(first, first + len(iterations))), (trial_id, iterations)
        assert trial.iteration <= MAX_T and all(i <= MAX_T for i in iterations), trial
        assert trial.iteration == (iterations[-1] if iterations else trial.iteration)
    assert tuner.best_result["loss"] == min(row["loss"] for row in rows)
    if user is not None:
        assert user.paused is not None, "no trial ran to its 2nd result to be paused"


def test_the_sample_covers_every_value_of_every_dimension():
    sampled = sampled_combinations()
    assert {(s, c) for s, c, _, _ in sampled} == set(
        itertools.product(SCHEDULERS, CHECKPOINT_EVERY)
    )
    assert {e for _, _, e, _ in sampled} == set(EXECUTORS)
    assert {c for _, _, _, c in sampled} == set(COMMANDS)
    assert len(every_combination()) == 90
