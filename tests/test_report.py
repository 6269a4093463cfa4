"""The reporting call in the forms Ray Tune and Optuna users write: a mapping, keywords, both,
and a trainable that returns its score."""

from __future__ import annotations

import pytest
import trainables

import nbtune as nt


@pytest.fixture(params=["loky", "thread"])
def executor(request):
    return {"loky": nt.LokyExecutor, "thread": nt.ThreadExecutor}[request.param]()


def test_a_mapping_keywords_or_both_are_the_metrics_and_the_checkpoint_goes_by_keyword(
    make_tuner, executor
):
    tuner = make_tuner(trainables.reports_in_forms, metric="loss", executor=executor)
    tuner.run()
    history = tuner.history()
    assert history["loss"].tolist() == [0.4, 0.3, 0.2, 0.1]
    assert history["accuracy"].isna().tolist() == [True, True, False, True]
    assert "checkpoint" not in history.columns
    trial = tuner.get_trial(0)
    assert trial.status is nt.TrialStatus.TERMINATED
    assert trial.checkpoint_iteration == 4
    assert tuner.best_result["loss"] == 0.1


def test_a_returned_number_is_the_final_value_of_the_metric(make_tuner, executor):
    tuner = make_tuner(
        trainables.returns_number,
        {"score": nt.grid([0.25, 0.5])},
        metric="loss",
        executor=executor,
    )
    tuner.run()
    history = tuner.history()
    assert history.groupby("trial_id")["loss"].apply(list).to_dict() == {
        0: [0.9, 0.8, 0.25],
        1: [0.9, 0.8, 0.5],
    }
    assert tuner.dataframe()["training_iteration"].tolist() == [3, 3]
    assert tuner.best_config == {"score": 0.25}
    assert type(tuner.best_result["loss"]) is float


def test_a_returned_mapping_is_the_final_result(make_tuner):
    tuner = make_tuner(trainables.returns_dict, {"x": 2}, metric="loss")
    tuner.run()
    assert tuner.history()["loss"].tolist() == [4]
    assert tuner.best_result["loss"] == 4
