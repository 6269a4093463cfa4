"""Median stopping: exactly the trials below the median of their peers stop."""

from __future__ import annotations

import pytest
import trainables

import nbtune as nt
from nbtune.schedulers import Decision

# Run one at a time in grid order; loss at step t is q * (1 + 1/t), so a trial's running
# average ranks like q at every step. q=2, 4, 1 have fewer than 3 peers and run all 4 steps;
# q=3 meets the median q of {2, 4, 1} = 2 at step 1 and stops; q=5 meets the median of
# {2, 4, 1, 3} = 2.5 and stops; q=0.5 beats the median at every step.
QUALITIES = [2, 4, 1, 3, 5, 0.5]


def test_the_trials_below_the_median_stop_at_the_first_step_past_the_grace_period(make_tuner):
    tuner = make_tuner(
        trainables.learning_curve,
        {"q": nt.grid(QUALITIES), "max_t": 4},
        metric="loss",
        scheduler=nt.MedianStopping(grace_period=1, min_samples_required=3),
        max_concurrent=1,
    )
    tuner.run()
    frame = tuner.dataframe().set_index("trial_id")
    assert frame["training_iteration"].to_dict() == {0: 4, 1: 4, 2: 4, 3: 1, 4: 1, 5: 4}


def decide(scheduler, trial_id, step, loss):
    return scheduler.on_result(nt.Trial(trial_id, {}), {"loss": loss, "training_iteration": step})


def test_running_averages_are_compared_at_the_same_step_among_trials_that_got_there():
    scheduler = nt.MedianStopping(grace_period=2, min_samples_required=2)
    scheduler.setup("loss", "min")
    for trial_id, losses in enumerate([[1, 1, 9], [3, 3, 9], [5, 5]]):
        for step, loss in enumerate(losses, start=1):
            decide(scheduler, trial_id, step, loss)
    assert decide(scheduler, 3, 1, 100) is Decision.CONTINUE, "within the grace period"
    assert decide(scheduler, 3, 2, 0) is Decision.STOP, "average 50 against a median of 3"
    assert decide(scheduler, 4, 1, 2) is Decision.CONTINUE
    assert decide(scheduler, 4, 2, 2) is Decision.CONTINUE, "average 2 against a median of 3"
    assert decide(scheduler, 4, 3, 100) is Decision.STOP, "34.7 against 4.33: trial 2 left"
    scheduler_without_enough = nt.MedianStopping(grace_period=1, min_samples_required=5)
    scheduler_without_enough.setup("loss", "min")
    for trial_id in range(4):
        assert decide(scheduler_without_enough, trial_id, 1, 10 - trial_id) is Decision.CONTINUE


def test_bad_arguments_get_one_line_errors():
    with pytest.raises(ValueError, match=r"MedianStopping\(grace_period=-1\): pass a positive"):
        nt.MedianStopping(grace_period=-1)
    with pytest.raises(ValueError, match=r"min_samples_required=0\): pass a positive integer"):
        nt.MedianStopping(grace_period=1, min_samples_required=0)
