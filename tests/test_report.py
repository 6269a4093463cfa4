"""The reporting call in the forms Ray Tune and Optuna users write: a mapping, keywords, both,
and a trainable that returns its score."""

from __future__ import annotations

import threading

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


# ----- reports from the trial's helper threads (issue 30, item 3) ----------------------------


def reports_from_helpers(config):
    """The trial reports step 1, then `helpers` threads it starts report `each` steps at once,
    then the trial reports the last step."""
    nt.report(loss=0.0, source="trial", seq=0)

    def helper(name):
        for seq in range(config["each"]):
            nt.report(loss=1.0, source=name, seq=seq)

    threads = [
        threading.Thread(target=helper, args=(f"helper{n}",)) for n in range(config["helpers"])
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    nt.report(loss=2.0, source="trial", seq=1)


@pytest.mark.parametrize("helpers", [1, 2])
def test_reports_from_threads_the_trial_started_are_recorded_in_order(
    make_tuner, executor, helpers
):
    each = 25
    tuner = make_tuner(
        reports_from_helpers, {"helpers": helpers, "each": each}, metric="loss", executor=executor
    )
    tuner.run()
    trial = tuner.get_trial(0)
    assert trial.status is nt.TrialStatus.TERMINATED, trial.error
    history = tuner.history()
    total = 2 + helpers * each
    assert history["training_iteration"].tolist() == list(range(1, total + 1)), "no gap, no repeat"
    assert history["source"].iloc[[0, -1]].tolist() == ["trial", "trial"]
    by_source = history.groupby("source")["seq"].apply(list).to_dict()
    for n in range(helpers):
        assert by_source[f"helper{n}"] == list(range(each)), "each thread's reports in its order"


_parked: dict = {}
"""What trial 0 of `leaves_a_helper` leaves behind in its worker for trial 1 to look at."""


def _report_refused():
    try:
        nt.report(loss=0.0)
    except RuntimeError as exc:
        return str(exc)
    return "reported"


def leaves_a_helper(config):
    """Trial 0 leaves a helper thread waiting; trial 1 (in the same process, after trial 0
    has ended) lets it try to report, and reports what it was told."""
    if config["x"] == 0:
        go, done, said = threading.Event(), threading.Event(), []

        def helper():
            go.wait()
            said.append(_report_refused())
            done.set()

        threading.Thread(target=helper, daemon=True).start()
        _parked.update(go=go, done=done, said=said)
        nt.report(loss=0.0)
        return
    _parked["go"].set()
    assert _parked["done"].wait(30)
    nt.report(loss=1.0, said=_parked["said"][0])


def test_a_thread_left_by_an_ended_trial_cannot_report_into_the_next(make_tuner, executor):
    tuner = make_tuner(
        leaves_a_helper, {"x": nt.grid([0, 1])}, metric="loss", executor=executor, max_concurrent=1
    )
    tuner.run()
    history = tuner.history()
    assert history["trial_id"].tolist() == [0, 1], "one result each, none from the helper"
    said = history["said"].iloc[1]
    assert said.startswith("nbtune.report() was called from a thread that no running trial"), said
