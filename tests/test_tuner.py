"""The Tuner end to end, with real worker processes: what a user does and sees."""

from __future__ import annotations

import json
import threading

import pandas as pd
import pytest
import trainables

import nbtune as nt
from nbtune.events import (
    ExperimentDone,
    TrialAdded,
    TrialCompleted,
    TrialOutput,
    TrialResult,
    TrialStarted,
)

SPACE = {
    "lr": nt.loguniform(1e-4, 1e-1),
    "layers": nt.choice([1, 2, 3]),
    "seed": nt.grid([0, 1]),
}


def run(tuner, timeout=60):
    tuner.start()
    assert tuner.wait(timeout), f"the run did not end within {timeout} s"
    return tuner


def test_the_readme_example(make_tuner):
    tuner = run(make_tuner(trainables.quadratic, SPACE, metric="loss", num_samples=10, seed=0))
    trials = tuner.dataframe()
    history = tuner.history()

    assert tuner.state == "finished"
    assert list(trials.columns) == [
        "trial_id",
        "status",
        "config/lr",
        "config/layers",
        "config/seed",
        "loss",
        "best_loss",
        "training_iteration",
        "runtime_s",
        "error",
        "paused_by",
        "stopped_by",
        "parent",
        "attempts",
        "space_version",
        "code",
        "checkpoint_mb",
    ]
    assert trials["trial_id"].tolist() == list(range(20)), "grid of 2 x 10 samples"
    assert (trials["status"] == "TERMINATED").all()
    assert (trials["training_iteration"] == 20).all()
    assert trials["config/seed"].tolist() == [0, 1] * 10
    assert trials.dtypes["config/lr"] == "float64"
    assert trials.dtypes["config/layers"] == "int64"
    assert isinstance(trials.dtypes["status"], pd.CategoricalDtype)

    assert len(history) == 400
    assert (
        history.groupby("trial_id")["training_iteration"]
        .apply(list)
        .map(lambda its: its == list(range(1, 21)))
        .all()
    )
    assert str(history.dtypes["timestamp"]) == "datetime64[ns, UTC]"
    best_row = history.loc[history["loss"].idxmin()]
    assert tuner.best_result["loss"] == best_row["loss"]
    assert tuner.best_trial.trial_id == best_row["trial_id"]
    assert tuner.best_config == tuner.best_trial.config
    assert trials.loc[best_row["trial_id"], "best_loss"] == best_row["loss"]


def test_a_loaded_experiment_matches_the_live_one(make_tuner):
    tuner = run(make_tuner(trainables.quadratic, SPACE, metric="loss", num_samples=3, seed=1))
    loaded = nt.load(tuner.path)
    pd.testing.assert_frame_equal(loaded.dataframe(), tuner.dataframe())
    pd.testing.assert_frame_equal(loaded.history(), tuner.history())
    assert loaded.best_result == tuner.best_result
    assert loaded.best_config == tuner.best_config
    assert loaded.state == tuner.state == "finished"


def test_the_same_seed_gives_the_same_configs(make_tuner):
    def configs(seed):
        tuner = run(make_tuner(trainables.count_up, SPACE, metric="loss", num_samples=4, seed=seed))
        return tuner.dataframe().filter(like="config/")

    first, again, other = configs(7), configs(7), configs(8)
    pd.testing.assert_frame_equal(first, again)
    assert not first.equals(other)


def test_every_result_is_on_disk_before_it_is_published(make_tuner, runs):
    missing = []

    def check_disk(event):
        if isinstance(event, TrialResult):
            lines = (runs / "ondisk" / "results.jsonl").read_text().splitlines()
            on_disk = {
                (row["trial_id"], row["training_iteration"]) for row in map(json.loads, lines)
            }
            key = (event.trial_id, event.result["training_iteration"])
            if key not in on_disk:
                missing.append(key)

    tuner = make_tuner(trainables.count_up, {"x": nt.grid(range(4))}, metric="loss", name="ondisk")
    tuner.subscribe(check_disk)
    run(tuner)
    assert len(tuner.history()) == 20
    assert missing == []


def test_dataframe_mid_run_is_a_consistent_snapshot(make_tuner):
    new_result = threading.Event()
    space = {"steps": 50, "interval": 0.002, "x": nt.grid(range(6))}
    tuner = make_tuner(trainables.count_up, space, metric="loss")
    tuner.subscribe(lambda event: isinstance(event, TrialResult) and new_result.set())
    tuner.start()
    seen: dict[int, int] = {}
    snapshots = 0
    while not tuner.wait(timeout=0):
        if not new_result.wait(timeout=1):
            continue
        new_result.clear()
        frame = tuner.dataframe()
        snapshots += 1
        assert set(frame["status"]) <= {"PENDING", "RUNNING", "TERMINATED"}
        for trial_id, iteration in zip(frame["trial_id"], frame["training_iteration"], strict=True):
            assert iteration >= seen.get(trial_id, 0), "a snapshot went back in time"
            seen[trial_id] = iteration
    assert snapshots > 1
    assert tuner.dataframe()["training_iteration"].tolist() == [50] * 6


def test_events_tell_each_trial_s_story_in_order(make_tuner):
    events = []
    tuner = make_tuner(
        trainables.count_up, {"steps": 2}, metric="loss", num_samples=2, callbacks=[events.append]
    )
    run(tuner)
    for trial_id in (0, 1):
        story = [type(e).__name__ for e in events if getattr(e, "trial_id", None) == trial_id]
        assert story == [
            "TrialAdded",
            "TrialStarted",
            "TrialResult",
            "TrialResult",
            "TrialCompleted",
        ]
    assert isinstance(events[-1], ExperimentDone)
    assert events[-1].state == "finished"
    assert {TrialAdded, TrialStarted, TrialResult, TrialCompleted} <= {type(e) for e in events}


@pytest.mark.parametrize(
    ("stop", "iterations"),
    [
        ({"training_iteration": 3}, [3, 3]),
        ({"loss": 0.3}, [4, 4]),
        (lambda trial_id, result: trial_id == 0 and result["training_iteration"] == 2, [2, 20]),
    ],
)
def test_stop_criteria_end_trials(make_tuner, stop, iterations):
    tuner = run(
        make_tuner(
            trainables.quadratic, {"lr": 0.01, "layers": nt.grid([0, 1])}, metric="loss", stop=stop
        )
    )
    frame = tuner.dataframe()
    assert frame["training_iteration"].tolist() == iterations
    assert (frame["status"] == "TERMINATED").all()


def test_time_budget_ends_the_whole_run(make_tuner):
    tuner = make_tuner(trainables.forever, {"interval": 0.01}, num_samples=5, time_budget_s=1.0)
    run(tuner, timeout=20)
    frame = tuner.dataframe()
    assert tuner.state == "finished"
    assert len(frame) == 2, "no trial starts once the budget is spent"
    assert (frame["status"] == "TERMINATED").all()
    assert frame["runtime_s"].between(0.5, 5).all()


def test_a_failing_trial_is_recorded_and_the_run_goes_on(make_tuner):
    tuner = run(make_tuner(trainables.fail_at, {"fail_at": nt.grid([3, 100])}, metric="loss"))
    frame = tuner.dataframe().set_index("trial_id")
    assert frame.loc[0, "status"] == "ERROR"
    assert frame.loc[0, "error"] == "ValueError: boom at step 3"
    assert frame.loc[0, "training_iteration"] == 2
    assert frame.loc[1, "status"] == "TERMINATED"
    assert frame.loc[1, "training_iteration"] == 9
    traceback = (tuner.path / "trials" / "0" / "error.txt").read_text()
    assert "in fail_at" in traceback
    assert "ValueError: boom at step 3" in traceback


def test_fail_fast_ends_the_run_at_the_first_error(make_tuner):
    tuner = run(make_tuner(trainables.fail_at, {"fail_at": 2}, num_samples=8, fail_fast=True))
    frame = tuner.dataframe()
    assert tuner.state == nt.load(tuner.path).state == "failed"
    assert len(frame) < 8
    assert (frame["status"] == "ERROR").any()


def test_stop_ends_the_run_gracefully(make_tuner):
    first_result = threading.Event()
    tuner = make_tuner(trainables.forever, {"interval": 0.01}, num_samples=4)
    tuner.subscribe(lambda event: isinstance(event, TrialResult) and first_result.set())
    tuner.start()
    assert first_result.wait(30)
    tuner.stop()
    assert tuner.wait(30)
    frame = tuner.dataframe()
    assert tuner.state == nt.load(tuner.path).state == "stopped"
    assert (frame["status"] == "TERMINATED").all()
    assert len(tuner.history()) == frame["training_iteration"].sum()


def test_a_class_trainable_checkpoints_every_step(make_tuner):
    tuner = run(make_tuner(trainables.Counter, {"scale": 2.0}, metric="loss", stop={"count": 5}))
    trial = tuner.get_trial(0)
    assert trial.iteration == 5
    assert trial.checkpoint == "trials/0/checkpoints/checkpoint_000005.pkl"
    assert (tuner.path / trial.checkpoint).exists()
    assert tuner.history()["loss"].tolist() == [2.0, 1.0, 2 / 3, 0.5, 0.4]


def test_a_returned_dict_is_the_final_result(make_tuner):
    tuner = run(make_tuner(trainables.returns_dict, {"x": nt.grid([1, 2])}, metric="loss"))
    assert tuner.history().sort_values("trial_id")["loss"].tolist() == [2, 4]


def test_what_trials_print_goes_to_their_log_not_the_notebook(make_tuner, capfd):
    outputs = []
    tuner = make_tuner(trainables.chatty, callbacks=[outputs.append])
    run(tuner)
    assert [e.text for e in outputs if isinstance(e, TrialOutput)] == ["hello from the trial\n"]
    assert (tuner.path / "trials" / "0" / "output.log").read_text() == "hello from the trial\n"
    assert "hello from the trial" not in capfd.readouterr().out


def test_the_progress_line_outside_a_notebook(make_tuner, capsys):
    run(make_tuner(trainables.count_up, {"x": nt.grid([1, 2, 3])}, metric="loss", progress=True))
    last_line = capsys.readouterr().err.strip().splitlines()[-1]
    assert last_line.startswith("nbtune run0: 3 trials (3 terminated) | 15 results | best loss=0.2")
    assert last_line.endswith("[finished]")


def test_two_runs_side_by_side_do_not_wait_for_each_other(make_tuner, log):
    first = make_tuner(trainables.forever, {"interval": 0.01}, num_samples=2, callbacks=[log])
    first.start()
    log.wait_for(lambda event: isinstance(event, TrialResult))
    second_results = threading.Event()
    second = make_tuner(trainables.count_up, {"steps": 3}, num_samples=2)
    second.subscribe(lambda event: isinstance(event, TrialResult) and second_results.set())
    second.start()
    assert second_results.wait(30), "the second run got workers of its own"
    assert second.wait(30)
    assert first.status.running == 2, "while the first run went on"
    first.stop()
    assert first.wait(30)


SERIES = {
    0: [0.9, 0.0, 0.0, 0.0, 0.0, 0.0],
    1: [0.0, 0.2, 0.2, 0.2, 0.2, 0.2],
    2: [0.5, 0.5, 0.0, 0.0, 0.0, 0.3],
}


def reports_series(config):
    """Reports `acc` along its series, a falling `loss`, text and a key named like a column."""
    for step, acc in enumerate(SERIES[config["which"]], start=1):
        extra = {"warmup_lr": 0.1} if step == 1 else {}
        nt.report(loss=1 / step, acc=acc, phase=f"epoch {step}", status="ok", **extra)


def test_the_trials_frame_has_the_last_value_of_every_reported_key(make_tuner):
    tuner = make_tuner(
        reports_series, {"which": nt.grid([0, 1, 2])}, metric="loss", executor=nt.ThreadExecutor()
    )
    frame = run(tuner).dataframe()
    reported = ["acc", "phase", "result/status", "warmup_lr"]
    columns = list(frame.columns)
    assert columns[columns.index("best_loss") + 1 : columns.index("training_iteration")] == reported
    assert frame["acc"].tolist() == [0.0, 0.2, 0.3]
    assert frame["phase"].tolist() == ["epoch 6"] * 3
    assert frame["result/status"].tolist() == ["ok"] * 3, "nbtune's status keeps its name"
    assert frame["status"].tolist() == ["TERMINATED"] * 3
    assert frame["warmup_lr"].tolist() == [0.1] * 3, "the last value it was reported with"
    assert (frame.dtypes["acc"], frame.dtypes["phase"]) == ("float64", "string")


@pytest.mark.parametrize(
    ("scope", "best"), [("last", 2), ("all", 0), ("avg", 2), ("last-5-avg", 1), ("last-10-avg", 2)]
)
def test_get_best_trial_sums_up_each_trial_by_its_scope(make_tuner, scope, best):
    tuner = make_tuner(
        reports_series, {"which": nt.grid([0, 1, 2])}, metric="loss", executor=nt.ThreadExecutor()
    )
    run(tuner)
    assert tuner.get_best_trial("acc", "max", scope).trial_id == best
    assert nt.load(tuner.path).get_best_trial("acc", "max", scope).trial_id == best


def test_get_best_trial_defaults_to_the_tuned_metric_and_refuses_what_it_cannot_rank(make_tuner):
    tuner = make_tuner(
        reports_series, {"which": nt.grid([0, 1, 2])}, metric="loss", executor=nt.ThreadExecutor()
    )
    run(tuner)
    assert tuner.get_best_trial().trial_id == 0, "every loss ends at 1/6: ties go to the lowest id"
    with pytest.raises(ValueError, match="'acc' is not a tuned metric: pass mode='min' or"):
        tuner.get_best_trial("acc")
    with pytest.raises(ValueError, match="no trial reported 'accuracy'; the reported keys are"):
        tuner.get_best_trial("accuracy", "max")
    with pytest.raises(ValueError, match="scope='best': use one of 'last', 'all', 'avg'"):
        tuner.get_best_trial(scope="best")


def peaks_then_returns(config):
    """A Keras port's trial: its accuracy peaks during training, then it returns its final
    score, lower than the peak (Optuna's style of objective)."""
    for acc in config["curve"]:
        nt.report(acc=acc)
    return config["score"]


def test_a_trial_that_returns_its_score_is_ranked_by_it_not_by_its_peak(make_tuner):
    tuner = make_tuner(
        peaks_then_returns,
        {
            "curve": nt.grid([[0.90, 0.934], [0.91, 0.915]]),
            "score": nt.sample_from(lambda config: 0.906 if config["curve"][1] > 0.92 else 0.912),
        },
        metric="acc",
        mode="max",
        executor=nt.ThreadExecutor(),
    )
    run(tuner)
    for view in (tuner, nt.load(tuner.path)):
        assert view.best_trial.trial_id == 1, "0.912 returned beats 0.906 returned"
        assert view.best_result["acc"] == 0.912
        assert view.dataframe()["best_acc"].tolist() == [0.906, 0.912]
