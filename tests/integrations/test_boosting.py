"""XGBoost and LightGBM report through nbtune's callbacks, checkpoint their boosters, stop when
a scheduler says so, and pause and resume at any round with nothing repeated or missed."""

from __future__ import annotations

import pytest
import trainables
from test_control import event_of, result_of

import nbtune as nt
from nbtune.events import TrialPaused

LIBRARIES = ["xgboost", "lightgbm"]
VALIDATION_LOSS = {"xgboost": "validation-logloss", "lightgbm": "validation-binary_logloss"}


@pytest.fixture(params=LIBRARIES)
def library(request):
    pytest.importorskip(request.param)
    return request.param


def boosting_tuner(make_tuner, library, **space):
    space = {"library": library, "rounds": 12, **space}
    return make_tuner(trainables.boosts, space, metric="loss", mode="min")


def losses(tuner, trial_id):
    return list(tuner.history().query(f"trial_id == {trial_id}")["loss"])


def test_every_round_is_reported_under_the_name_picked(make_tuner, library):
    metrics = {"loss": VALIDATION_LOSS[library]}
    tuner = boosting_tuner(make_tuner, library, metrics=metrics, every=5)
    tuner.run()
    history = tuner.history()
    assert list(history["training_iteration"]) == list(range(1, 13))
    assert history["loss"].is_monotonic_decreasing, "the validation loss of each round"
    checkpoint = tuner.get_checkpoint(0, which="latest")
    assert isinstance(checkpoint, nt.Checkpoint)
    assert tuner.get_trial(0).checkpoint_iteration == 10, "every 5 rounds"
    assert len(list(checkpoint.path.iterdir())) == 1, "the booster's own file"


def test_a_summary_returned_after_the_training_ends_it_with_the_last_loss(make_tuner, library):
    metrics = {"loss": VALIDATION_LOSS[library]}
    tuner = boosting_tuner(make_tuner, library, metrics=metrics, summary=True)
    tuner.run()
    trial = tuner.get_trial(0)
    assert trial.status is nt.TrialStatus.TERMINATED, trial.error
    history = tuner.history()
    last, summary = history.iloc[-2], history.iloc[-1]
    assert summary["rounds_run"] == 12
    assert summary["loss"] == last["loss"], "the summary carries the last reported loss"


def test_by_default_every_result_is_reported_as_data_set_dash_metric(make_tuner, library):
    tuner = make_tuner(
        trainables.boosts,
        {"library": library, "rounds": 3},
        metric=VALIDATION_LOSS[library],
        mode="min",
    )
    tuner.run()
    columns = set(tuner.history().columns)
    assert {VALIDATION_LOSS[library], VALIDATION_LOSS[library].replace("validation", "train")} <= (
        columns
    )


def test_a_paused_trial_resumes_at_the_next_round_of_the_same_training(make_tuner, log, library):
    metrics = {"loss": VALIDATION_LOSS[library]}
    space = {"library": library, "rounds": 20, "metrics": metrics, "nap": nt.grid([0.05, 0.0])}
    tuner = make_tuner(trainables.boosts, space, metric="loss", callbacks=[log], max_concurrent=1)
    tuner.start()
    log.wait_for(result_of(0, 4))
    tuner.pause(0)
    log.wait_for(event_of(TrialPaused, 0))
    assert tuner.get_trial(0).paused_by == "checkpoint", "the callback checkpointed the pause"
    tuner.resume(0)
    assert tuner.wait(120)
    history = tuner.history().query("trial_id == 0")
    assert list(history["training_iteration"]) == list(range(1, 21)), "none repeated or missed"
    assert losses(tuner, 0) == pytest.approx(losses(tuner, 1)), "the same training as unpaused"


def test_a_scheduler_s_stop_ends_the_training_cleanly(make_tuner, library):
    metrics = {"loss": VALIDATION_LOSS[library]}
    tuner = make_tuner(
        trainables.boosts,
        {"library": library, "rounds": 50, "metrics": metrics},
        metric="loss",
        stop={"training_iteration": 5},
    )
    tuner.run()
    trial = tuner.get_trial(0)
    assert trial.status is nt.TrialStatus.TERMINATED, trial.error
    assert list(tuner.history()["training_iteration"]) == [1, 2, 3, 4, 5]


def test_a_metric_the_library_does_not_compute_is_a_one_line_error(make_tuner, library):
    tuner = make_tuner(
        trainables.boosts,
        {"library": library, "rounds": 3, "metrics": {"loss": "validation-auc"}},
        metric="loss",
    )
    tuner.run()
    error = tuner.get_trial(0).error
    assert error.startswith(
        f"ValueError: {library}.ReportCallback(metrics=...): 'validation-auc' is not among the "
        "evaluation results ("
    )
    assert error.endswith("); name one of those")


@pytest.mark.parametrize("every", [0, -1, 1.5, True, "5"])
def test_checkpoint_every_is_a_whole_number_of_rounds(library, every):
    module = pytest.importorskip(f"nbtune.integrations.{library}")
    with pytest.raises(ValueError, match=r"checkpoint_every=.*: pass a whole number of steps"):
        module.ReportCallback(checkpoint_every=every)
