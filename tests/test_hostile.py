"""Hostile use: trainables and inputs that try to lose data, hang the run or kill it."""

from __future__ import annotations

import pytest
import trainables

import nbtune as nt


@pytest.mark.parametrize("trainable", [trainables.reports_in_finally, trainables.swallows_the_stop])
def test_a_trial_that_reports_after_its_stop_neither_hangs_the_run_nor_records_it(
    make_tuner, executor_class, trainable
):
    tuner = make_tuner(
        trainable,
        {"x": nt.grid([0, 1, 2])},
        metric="loss",
        max_concurrent=1,
        stop={"training_iteration": 2},
        executor=executor_class(),
    )
    tuner.start()
    assert tuner.wait(timeout=30), "the run hangs"
    assert [trial.status for trial in tuner.trials] == [nt.TrialStatus.TERMINATED] * 3
    history = tuner.history()
    assert history["training_iteration"].tolist() == [1, 2] * 3
    assert "last" not in history and "caught" not in history
