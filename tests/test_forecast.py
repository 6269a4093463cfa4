"""Forecasts of unfinished curves (`forecast()`) and of the run's end (`eta_s`): accuracy on
curves whose end is known, the edge cases, and real runs."""

from __future__ import annotations

import math
import threading

import numpy as np
import pytest

import nbtune as nt
from nbtune.events import TrialCompleted, TrialResult
from nbtune.forecast import (
    Forecaster,
    expected_length,
    forecast_curve,
    run_eta_s,
)
from nbtune.horizon import horizon_of
from nbtune.trial import Trial, TrialStatus

HORIZON = 60


def power_law(rng, horizon=HORIZON):
    t = np.arange(1, horizon + 1)
    clean = rng.uniform(0.05, 0.5) + rng.uniform(0.5, 2.0) * t ** -rng.uniform(0.3, 1.5)
    return clean, clean * (1 + 0.02 * rng.standard_normal(horizon))


def exponential(rng, horizon=HORIZON):
    t = np.arange(1, horizon + 1)
    rate = 3.0 / (horizon * rng.uniform(0.125, 0.5))
    clean = rng.uniform(0.05, 0.5) + rng.uniform(0.5, 2.0) * np.exp(-rate * t)
    return clean, clean * (1 + 0.02 * rng.standard_normal(horizon))


def accuracy(rng, horizon=HORIZON):
    """A rising curve (mode "max"): accuracy that saturates below 1."""
    clean, observed = power_law(rng, horizon)
    return 1 - clean / 3, 1 - observed / 3


@pytest.mark.parametrize("make", [power_law, exponential, accuracy])
@pytest.mark.parametrize("finished", [0, 8])
def test_a_third_of_the_way_in_the_forecast_is_within_10_percent_and_its_interval_holds(
    make, finished
):
    rng = np.random.default_rng(11)
    curves = [make(rng) for _ in range(20)]
    references = [make(rng)[1] for _ in range(finished)]
    errors, inside = [], []
    for clean, observed in curves:
        result = forecast_curve(observed[: HORIZON // 3], HORIZON, references)
        errors.append(abs(result.predicted - clean[-1]) / abs(clean[-1]))
        inside.append(result.low <= clean[-1] <= result.high)
        assert result.horizon == HORIZON
    assert np.median(errors) <= 0.10
    assert np.mean(inside) >= 0.70


def test_a_curve_of_one_or_two_points_takes_the_finished_trials_ratio():
    t = np.arange(1, 31)
    references = [k * (0.2 + t**-0.7) for k in (1.0, 1.2, 0.8, 1.1)]
    for n in (1, 2):
        trial = 2.0 * (0.2 + t[:n] ** -0.7)
        result = forecast_curve(trial, 30, references)
        truth = 2.0 * (0.2 + 30**-0.7)
        assert result.predicted == pytest.approx(truth, rel=0.02)
        assert result.low <= truth <= result.high


def test_a_single_point_and_no_finished_trial_is_held_with_no_interval():
    result = forecast_curve([0.7], 20)
    assert result.predicted == 0.7
    assert math.isnan(result.low) and math.isnan(result.high)


def test_a_flat_curve_stays_flat():
    result = forecast_curve([0.25] * 12, 40)
    assert result.predicted == pytest.approx(0.25)
    assert result.low < 0.25 < result.high, "no curve is certain: a floor of its level"
    assert result.high - result.low <= 0.1 * 0.25


def test_nan_and_inf_are_left_out_of_the_fit():
    t = np.arange(1, 21, dtype=float)
    curve = 0.1 + t**-0.5
    broken = curve.copy()
    broken[[3, 7]] = math.nan
    broken[11] = math.inf
    result = forecast_curve(broken, 60)
    assert result.predicted == pytest.approx(0.1 + 60**-0.5, rel=0.05)
    assert math.isnan(forecast_curve([math.nan, math.inf], 10).predicted)


def test_a_curve_past_the_horizon_is_forecast_where_it_is():
    result = Forecaster(5)([1.0, 0.8, 0.7, 0.65, 0.62, 0.6, 0.59])
    assert result.horizon == 7
    assert result.predicted == pytest.approx(0.59, abs=0.02)


def test_horizon_is_max_t_then_the_stop_iteration_then_the_longest_full_trial():
    full = Trial(0, {}, TrialStatus.TERMINATED, iteration=12)
    cut = Trial(1, {}, TrialStatus.TERMINATED, iteration=30, stopped_by="scheduler")
    assert horizon_of([full, cut], 27, 10) == 27
    assert horizon_of([full, cut], None, 10) == 10
    assert horizon_of([full, cut]) == 12
    assert horizon_of([cut]) is None


def test_asha_trials_are_expected_to_stop_at_its_rungs():
    asha = nt.ASHA(max_t=9, grace_period=1, reduction_factor=3)
    # Rungs at 1 and 3: all run 1 iteration, a third run to 3, a ninth to 9.
    assert expected_length(asha, 9) == pytest.approx(1 + 2 / 3 + 6 / 9)
    # One past the rung at 3 is expected to go on to max_t.
    assert expected_length(asha, 9, reached=4) == pytest.approx(9)
    assert expected_length(None, 9) == 9


def finished_at(trial_id, iteration, seconds, status=TrialStatus.TERMINATED):
    result = {"training_iteration": iteration, "time_total_s": seconds, "timestamp": 0.0}
    return Trial(trial_id, {}, status, iteration=iteration, last_result=result)


def test_eta_deals_the_work_left_to_the_workers():
    # 1 s per iteration; 10 iterations each; 2 workers; 2 done, 2 running at 4 and 6, 2 to come.
    trials = [
        finished_at(0, 10, 10.0),
        finished_at(1, 10, 10.0),
        finished_at(2, 4, 4.0, TrialStatus.RUNNING),
        finished_at(3, 6, 6.0, TrialStatus.RUNNING),
    ]
    rows = [{"trial_id": 0}]
    # Workers free at 6 and 4 s; the two new trials take 10 s each: done at 16 and 14 s.
    assert run_eta_s(trials, rows, 6, 2, 10) == pytest.approx(16.0)
    assert run_eta_s(trials, rows, 4, 4, 10) == pytest.approx(6.0)
    assert run_eta_s(trials, [], 6, 2, 10) is None


def release_after(count):
    """A callback that sets an event once `count` results and two completions arrived."""
    seen = {"results": 0, "done": 0}
    ready = threading.Event()

    def callback(event):
        if isinstance(event, TrialResult):
            seen["results"] += 1
        elif isinstance(event, TrialCompleted):
            seen["done"] += 1
        if seen["results"] >= count and seen["done"] >= 2:
            ready.set()

    return callback, ready


GO_ON = threading.Event()


def held_curve(config):
    """loss = k (0.2 + t**-0.7) for 12 iterations; trials with k >= 3 wait after the 4th."""
    for step in range(1, 13):
        nt.report(loss=config["k"] * (0.2 + step**-0.7))
        if step == 4 and config["k"] >= 3:
            GO_ON.wait(60)


def test_a_live_run_and_a_loaded_one_forecast_the_running_trials(tmp_path):
    GO_ON.clear()
    callback, ready = release_after(2 * 12 + 2 * 4)
    tuner = nt.Tuner(
        held_curve,
        {"k": nt.grid([1.0, 2.0, 3.0, 4.0])},
        metric="loss",
        mode="min",
        max_concurrent=4,
        executor=nt.ThreadExecutor(),
        stop={"training_iteration": 12},
        storage_path=tmp_path,
        callbacks=[callback],
        progress=False,
    )
    assert tuner.eta_s is None
    tuner.start(display=False)
    try:
        assert ready.wait(60)
        frame = tuner.forecast()
        assert list(frame.columns) == ["predicted", "low", "high", "horizon"]
        by_k = {trial.config["k"]: trial.trial_id for trial in tuner.trials}
        assert sorted(frame.index) == sorted([by_k[3.0], by_k[4.0]])
        for k in (3.0, 4.0):
            row = frame.loc[by_k[k]]
            truth = k * (0.2 + 12**-0.7)
            assert row["horizon"] == 12
            assert row["predicted"] == pytest.approx(truth, rel=0.05)
            assert row["low"] <= truth <= row["high"]
        assert tuner.eta_s > 0
        loaded = nt.load(tuner.path).forecast()
        assert list(loaded.index) == list(frame.index)
        assert (loaded["horizon"] == 12).all()
    finally:
        GO_ON.set()
    tuner.wait()
    assert tuner.forecast().empty
    assert tuner.eta_s == 0.0


def test_a_run_without_a_metric_is_refused_in_one_line(tmp_path):
    tuner = nt.Tuner(held_curve, {"k": 1.0}, storage_path=tmp_path, progress=False)
    with pytest.raises(ValueError, match="no metric") as error:
        tuner.forecast()
    assert "\n" not in str(error.value)
    several = nt.Tuner(
        held_curve,
        {"k": 1.0},
        metric=["loss", "time"],
        mode=["min", "min"],
        storage_path=tmp_path,
        name="several",
        progress=False,
    )
    with pytest.raises(ValueError, match=r"forecast\(metric=\.\.\.\)"):
        several.forecast()
    with pytest.raises(ValueError, match="horizon=0"):
        several.forecast("loss", horizon=0)
