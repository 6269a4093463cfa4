"""`nbtune.compare(*runs)`: one best-so-far line per run, against trials or time."""

from __future__ import annotations

import pytest
import trainables

import nbtune as nt
from nbtune.ui.compare import X_AXES, best_so_far_curve, compare_data


def finished_run(make_tuner, name, num_samples=6, executor=None, **options):
    space = {"lr": nt.uniform(0.1, 1), "steps": nt.randint(1, 5), "interval": 0}
    tuner = make_tuner(
        trainables.steps,
        space,
        metric="loss",
        num_samples=num_samples,
        name=name,
        executor=executor or nt.ThreadExecutor(),
        **options,
    )
    tuner.run()
    return tuner


def test_one_named_line_per_run_ending_at_its_best(make_tuner):
    first = finished_run(make_tuner, "first", seed=1)
    second = finished_run(make_tuner, "second", seed=2, num_samples=4)
    figure = nt.compare(first, nt.load(second.path), str(first.path))

    assert [trace.name for trace in figure.data] == ["first", "second", "first (2)"]
    for trace, run in zip(figure.data, (first, second, first), strict=True):
        values = list(trace.y)
        assert values == sorted(values, reverse=True), "the best so far never gets worse (min)"
        assert values[-1] == run.best_result["loss"]
        assert list(trace.x) == sorted(trace.x), "trials reported only grow"
        assert trace.x[-1] == len(run.trials), "the line goes on to the run's last trial"
    assert figure.data[0].y == figure.data[2].y, "a Tuner and its folder read alike"
    assert figure.layout.xaxis.title.text == X_AXES["trials"]


def test_buttons_switch_the_x_axis_to_time(make_tuner):
    runs = [finished_run(make_tuner, name) for name in ("a", "b")]
    figure = nt.compare(*runs, x="time")
    assert figure.layout.xaxis.title.text == X_AXES["time"]
    by_trials, by_time = figure.layout.updatemenus[0].buttons
    assert by_trials.args[1] == {"xaxis.title.text": X_AXES["trials"]}
    for xs, trace, run in zip(by_time.args[0]["x"], figure.data, runs, strict=True):
        assert tuple(xs) == tuple(trace.x)
        assert xs[0] == 0 and list(xs) == sorted(xs)
        history = run.history()
        span = (history["timestamp"].max() - history["timestamp"].min()).total_seconds()
        assert xs[-1] == pytest.approx(span, abs=1e-3)
    trials_x = by_trials.args[0]["x"]
    assert [tuple(xs) for xs in trials_x] == [tuple(nt.compare(run).data[0].x) for run in runs]


def test_a_run_on_loky_compares_by_another_metric(make_tuner):
    run = finished_run(make_tuner, "loky", num_samples=3, executor=nt.LokyExecutor())
    data = compare_data([nt.load(run.path)], metric="step", mode="max")
    (curve,) = data.curves
    assert data.metric == "step" and curve.values[-1] == run.history()["step"].max()
    assert curve.values == tuple(sorted(curve.values)), "max: the best so far only grows"


def test_a_trial_that_returned_its_score_counts_by_that_score():
    rows = [
        {"trial_id": 0, "training_iteration": 1, "timestamp": 10.0, "loss": 0.1},
        {"trial_id": 0, "training_iteration": 2, "timestamp": 11.0, "loss": 0.5},
        {"trial_id": 1, "training_iteration": 1, "timestamp": 12.0, "loss": 0.3},
    ]
    trials = [
        nt.Trial(0, {}, nt.TrialStatus.TERMINATED, iteration=2, returned=True),
        nt.Trial(1, {}, nt.TrialStatus.TERMINATED, iteration=1),
    ]
    curve = best_so_far_curve("run", trials, rows, "loss", "min")
    assert curve.values == (0.5, 0.3) and curve.trial_ids == (0, 1)
    assert curve.trials == (1, 2) and curve.seconds == (1.0, 2.0)


def test_bad_input_is_refused_in_one_line(make_tuner, tmp_path):
    run = finished_run(make_tuner, "run", num_samples=2)
    other = make_tuner(
        trainables.count_up, {"x": 1}, metric="pid", mode="max", executor=nt.ThreadExecutor()
    )
    other.run()
    (tmp_path / "file.txt").write_text("")
    cases = [
        ((42,), {}, TypeError, "cannot plot int"),
        ((tmp_path / "file.txt",), {}, FileNotFoundError, "holds no nbtune experiment"),
        ((), {}, ValueError, "at least one run"),
        ((run, other), {}, ValueError, "tune different metrics"),
        ((run,), {"metric": "nope", "mode": "min"}, ValueError, "never reported 'nope'"),
        ((run,), {"metric": "step"}, ValueError, "pass mode="),
        ((run,), {"x": "epochs"}, ValueError, "x='epochs'"),
    ]
    for args, kwargs, error, text in cases:
        with pytest.raises(error, match=text) as caught:
            nt.compare(*args, **kwargs)
        assert "\n" not in str(caught.value)


def test_runs_of_a_listing_compare_as_a_column(make_tuner, runs):
    for name in ("a", "b"):
        finished_run(make_tuner, name, num_samples=2)
    figure = nt.compare(nt.runs(runs)["path"])
    assert [trace.name for trace in figure.data] == ["a", "b"]
