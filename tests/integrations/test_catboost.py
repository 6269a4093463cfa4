"""CatBoost reports through nbtune's callback, checkpoints its snapshots, stops when a scheduler
says so, and pauses and resumes at any iteration with nothing repeated or missed."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import pytest

pytest.importorskip("catboost")

from test_control import event_of, result_of

import nbtune as nt
from nbtune.events import TrialErrored, TrialPaused

LOSS = {"loss": "validation-Logloss"}


def boosts(config):
    """Trains CatBoost on breast cancer data for `rounds` iterations in all, reporting through
    nbtune's callback (`metrics`, `every`) and resuming through `resume_kwargs` unless
    `resumable` is False; `nap` s per iteration leave time to pause it. It writes the trees it
    ended with to `trees_file`, if given; with `summary`, it returns them as a dict."""
    from catboost import CatBoostClassifier
    from sklearn.datasets import load_breast_cancer

    from nbtune.integrations.catboost import ReportCallback, resume_kwargs

    features, labels = load_breast_cancer(return_X_y=True)
    report = ReportCallback(config.get("metrics"), checkpoint_every=config.get("every"))
    kwargs = resume_kwargs() if config.get("resumable", True) else {}
    with tempfile.TemporaryDirectory() as train_dir:
        model = CatBoostClassifier(
            iterations=config["rounds"],
            learning_rate=0.1,
            thread_count=1,
            random_seed=0,
            verbose=False,
            train_dir=train_dir,
        )
        model.fit(
            features[:400],
            labels[:400],
            eval_set=(features[400:], labels[400:]),
            callbacks=[_Nap(config.get("nap", 0.0)), report],
            **kwargs,
        )
    if config.get("trees_file"):
        Path(config["trees_file"]).write_text(str(model.tree_count_))
    return {"rounds_run": model.tree_count_} if config.get("summary") else None


class _Nap:
    def __init__(self, seconds):
        self.seconds = seconds

    def after_iteration(self, info):
        time.sleep(self.seconds)
        return True


def tuner_of(make_tuner, space, metric="loss", **options):
    return make_tuner(boosts, {"metrics": LOSS, **space}, metric=metric, mode="min", **options)


def losses(tuner, trial_id):
    return list(tuner.history().query(f"trial_id == {trial_id}")["loss"])


def test_every_iteration_is_reported_under_the_name_picked(make_tuner):
    tuner = tuner_of(make_tuner, {"rounds": 12, "every": 5})
    tuner.run()
    history = tuner.history()
    assert list(history["training_iteration"]) == list(range(1, 13))
    assert history["loss"].is_monotonic_decreasing, "the validation loss of each iteration"
    checkpoint = tuner.get_checkpoint(0, which="latest")
    assert isinstance(checkpoint, nt.Checkpoint)
    assert tuner.get_trial(0).checkpoint_iteration == 10, "every 5 iterations"
    assert sorted(p.name for p in checkpoint.path.iterdir()) == [
        "iteration.json",
        "snapshot.cbsnapshot",
    ], "CatBoost's own snapshot"


def test_a_summary_returned_after_the_training_ends_it_with_the_last_loss(make_tuner):
    tuner = tuner_of(make_tuner, {"rounds": 6, "summary": True})
    tuner.run()
    trial = tuner.get_trial(0)
    assert trial.status is nt.TrialStatus.TERMINATED, trial.error
    history = tuner.history()
    last, summary = history.iloc[-2], history.iloc[-1]
    assert summary["rounds_run"] == 6
    assert summary["loss"] == last["loss"], "the summary carries the last reported loss"


def test_by_default_every_result_is_reported_under_catboost_s_names(make_tuner):
    tuner = tuner_of(make_tuner, {"rounds": 3, "metrics": None}, metric="validation-Logloss")
    tuner.run()
    assert {"learn-Logloss", "validation-Logloss"} <= set(tuner.history().columns)
    assert tuner.get_checkpoint(0, which="latest") is None, "no checkpoint was asked for"


def test_a_paused_trial_resumes_at_the_next_iteration_of_the_same_training(make_tuner, log):
    space = {"rounds": 20, "nap": nt.grid([0.05, 0.0])}
    tuner = tuner_of(make_tuner, space, callbacks=[log], max_concurrent=1)
    tuner.start()
    log.wait_for(result_of(0, 4), timeout=60)
    tuner.pause(0)
    log.wait_for(event_of(TrialPaused, 0), timeout=60)
    assert tuner.get_trial(0).paused_by == "checkpoint", "the callback checkpointed the pause"
    tuner.resume(0)
    assert tuner.wait(120)
    history = tuner.history().query("trial_id == 0")
    assert list(history["training_iteration"]) == list(range(1, 21)), "none repeated or missed"
    assert losses(tuner, 0) == pytest.approx(losses(tuner, 1)), "the same training as unpaused"


def test_without_resume_kwargs_a_pause_waits_in_the_worker(make_tuner, log):
    space = {"rounds": 8, "nap": 0.05, "resumable": False}
    tuner = tuner_of(make_tuner, space, callbacks=[log])
    tuner.start()
    log.wait_for(result_of(0, 2), timeout=60)
    tuner.pause(0)
    log.wait_for(event_of(TrialPaused, 0), timeout=60)
    assert tuner.get_trial(0).paused_by != "checkpoint", "nothing to checkpoint with"
    tuner.resume(0)
    assert tuner.wait(120)
    assert list(tuner.history()["training_iteration"]) == list(range(1, 9))


def test_a_scheduler_s_stop_ends_fit_at_that_iteration(make_tuner, tmp_path):
    trees = tmp_path / "trees"
    tuner = tuner_of(
        make_tuner,
        {"rounds": 50, "trees_file": str(trees)},
        stop={"training_iteration": 5},
    )
    tuner.run()
    trial = tuner.get_trial(0)
    assert trial.status is nt.TrialStatus.TERMINATED, trial.error
    assert trial.error is None
    assert list(tuner.history()["training_iteration"]) == [1, 2, 3, 4, 5]
    assert trees.read_text() == "5", "fit returned the model of 5 iterations"


def test_a_metric_catboost_does_not_compute_fails_the_trial_naming_the_ones_it_does(
    make_tuner, log
):
    tuner = tuner_of(
        make_tuner, {"rounds": 3, "metrics": {"loss": "validation-AUC"}}, callbacks=[log]
    )
    tuner.run()
    assert tuner.get_trial(0).status is nt.TrialStatus.ERROR
    failure = log.of(TrialErrored, 0)[0]
    assert failure.error.startswith("CatBoostError: "), "CatBoost wraps a callback's error"
    assert (
        "ValueError: catboost.ReportCallback(metrics=...): 'validation-AUC' is not among the "
        "evaluation results (learn-Logloss, validation-Logloss); name one of those"
    ) in failure.traceback


def test_checkpoints_without_resume_kwargs_fail_the_trial_saying_what_to_pass(make_tuner, log):
    space = {"rounds": 3, "every": 1, "resumable": False}
    tuner = tuner_of(make_tuner, space, callbacks=[log])
    tuner.run()
    failure = log.of(TrialErrored, 0)[0]
    assert "pass **resume_kwargs() to fit so that it writes them" in failure.traceback


def resumes_from_a_checkpoint_of_its_own(config):
    """Checkpoints a folder of its own making and fails; started again from that checkpoint
    (`max_failures=1`), it asks `resume_kwargs` to continue from it."""
    from nbtune.integrations.catboost import resume_kwargs

    if nt.get_checkpoint() is None:
        nt.report(step=1, checkpoint=nt.Checkpoint.from_directory(tempfile.mkdtemp()))
        raise RuntimeError("fails, to be started again from its checkpoint")
    resume_kwargs()


def test_resume_kwargs_refuses_a_checkpoint_the_callback_did_not_write(make_tuner):
    tuner = make_tuner(resumes_from_a_checkpoint_of_its_own, max_failures=1)
    tuner.run()
    error = tuner.get_trial(0).error
    assert error == (
        "ValueError: catboost.resume_kwargs(): the trial's checkpoint holds no "
        "snapshot.cbsnapshot (it was not written by catboost.ReportCallback); resume from "
        "your own checkpoint by hand"
    )


@pytest.mark.parametrize("every", [0, -1, 1.5, True, "5"])
def test_checkpoint_every_is_a_whole_number_of_iterations(every):
    from nbtune.integrations.catboost import ReportCallback

    with pytest.raises(ValueError, match=r"checkpoint_every=.*: pass a whole number of steps"):
        ReportCallback(checkpoint_every=every)
