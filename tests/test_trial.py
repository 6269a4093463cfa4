import math

import numpy as np
import pytest

from nbtune.trial import IllegalTransitionError, Trial, TrialStatus, better_of


def test_a_trial_walks_through_its_life():
    trial = Trial(trial_id=0, config={"lr": 0.1})
    running = trial.evolve(status=TrialStatus.RUNNING)
    paused = running.evolve(status=TrialStatus.PAUSED)
    done = paused.evolve(status=TrialStatus.RUNNING).evolve(status=TrialStatus.TERMINATED)
    assert trial.status is TrialStatus.PENDING
    assert done.status.is_finished
    assert trial.status is TrialStatus.PENDING, "evolve must not change the original"


@pytest.mark.parametrize(
    ("final", "target"),
    [
        (TrialStatus.TERMINATED, TrialStatus.RUNNING),
        (TrialStatus.TERMINATED, TrialStatus.PENDING),
        (TrialStatus.TERMINATED, TrialStatus.PAUSED),
        (TrialStatus.ERROR, TrialStatus.RUNNING),
        (TrialStatus.ERROR, TrialStatus.PAUSED),
    ],
)
def test_a_finished_trial_cannot_come_back(final, target):
    trial = Trial(trial_id=3, config={}).evolve(status=final)
    with pytest.raises(IllegalTransitionError, match=f"trial 3 cannot go from {final} to {target}"):
        trial.evolve(status=target)


def test_a_failed_trial_goes_back_to_the_queue_only_to_be_retried():
    failed = Trial(trial_id=3, config={}).evolve(status=TrialStatus.ERROR)
    assert failed.evolve(status=TrialStatus.PENDING).status is TrialStatus.PENDING


def test_with_result_keeps_the_best_value_by_mode():
    trial = Trial(trial_id=0, config={})
    for iteration, loss in enumerate([3.0, 1.0, 2.0, math.nan, math.inf], start=1):
        trial = trial.with_result({"training_iteration": iteration, "loss": loss}, "loss", "min")
    assert trial.iteration == 5
    assert trial.best_value == 1.0
    assert math.isinf(trial.last_result["loss"])


@pytest.mark.parametrize(
    ("current", "candidate", "mode", "expected"),
    [
        (None, 2.0, "min", 2.0),
        (1.0, 2.0, "min", 1.0),
        (1.0, 2.0, "max", 2.0),
        (1.0, math.nan, "max", 1.0),
        (1.0, -math.inf, "min", 1.0),
        (1.0, "2.0", "max", 1.0),
        (1.0, np.float32(0.5), "min", 0.5),
        (None, np.int64(3), "max", 3.0),
        (None, True, "max", None),
        (None, None, "min", None),
    ],
)
def test_better_of_never_picks_nan_inf_or_non_numbers(current, candidate, mode, expected):
    assert better_of(current, candidate, mode) == expected


@pytest.mark.parametrize(
    ("status", "paused_by", "suspended", "holds_worker"),
    [
        (TrialStatus.PENDING, None, False, False),
        (TrialStatus.RUNNING, None, False, True),
        (TrialStatus.PAUSED, "suspend", True, True),
        (TrialStatus.PAUSED, "checkpoint", False, False),
        (TrialStatus.PAUSED, "queue", False, False),
        (TrialStatus.TERMINATED, None, False, False),
    ],
)
def test_a_trial_suspended_in_place_keeps_its_worker(status, paused_by, suspended, holds_worker):
    trial = Trial(trial_id=0, config={}, status=status, paused_by=paused_by)
    assert trial.suspended is suspended
    assert trial.holds_worker is holds_worker
