"""The numbers behind each chart, checked without drawing anything."""

from __future__ import annotations

import math
import random

import nbtune as nt
from nbtune.define_by_run import DefineByRunSpace
from nbtune.space import SearchSpace
from nbtune.trial import Trial, TrialStatus
from nbtune.ui.data import (
    FEATURED_CURVES,
    MIN_IMPORTANCE_TRIALS,
    TRIAL_COLORS,
    CurvePoints,
    best_so_far_data,
    history_data,
    importance_data,
    log_scale_names,
    parameter_data,
    trial_values,
)


def run_of(losses_by_trial, statuses=None):
    """Trials and result rows as a runner would hold them, from lists of losses."""
    trials, rows, clock = [], [], 100.0
    for trial_id, losses in enumerate(losses_by_trial):
        trial = Trial(trial_id, {"lr": 0.1 * (trial_id + 1), "opt": "sgd" if trial_id else "adam"})
        for iteration, loss in enumerate(losses, start=1):
            clock += 1.0
            row = {
                "trial_id": trial_id,
                "training_iteration": iteration,
                "timestamp": clock,
                "loss": loss,
            }
            rows.append(row)
            trial = trial.with_result(row, "loss", "min")
        status = (statuses or {}).get(trial_id, TrialStatus.TERMINATED)
        trials.append(trial.evolve(status=status))
    return trials, rows


def test_history_has_one_curve_per_trial_that_reported():
    trials, rows = run_of([[3.0, 2.0], [], [5.0, math.nan, 1.0]], {1: TrialStatus.PENDING})
    data = history_data(trials, rows, "loss", "min")
    assert [curve.trial_id for curve in data.curves] == [0, 2]
    assert data.curves[1].x == (1, 3), "NaN results are left out of the curve"
    assert data.curves[1].y == (5.0, 1.0)
    assert data.best == (2, 0)
    assert data.curves[1].label == "trial 2 · completed<br>lr=0.3, opt=sgd"
    assert data.curves[1].seconds == (2.0, 4.0), "seconds since the run's first result"


def test_each_trial_keeps_its_colour_as_trials_come_and_its_state_names_its_line():
    trials, rows = run_of([[1.0], [2.0]], {1: TrialStatus.PAUSED})
    before = {
        curve.trial_id: curve.color for curve in history_data(trials, rows, "loss", "min").curves
    }
    trials, rows = run_of(
        [[1.0, 0.5], [2.0], [3.0], [0.1]], {1: TrialStatus.PAUSED, 3: TrialStatus.ERROR}
    )
    after = history_data(trials, rows, "loss", "min").curves
    assert {curve.trial_id: curve.color for curve in after[:2]} == before
    assert len({curve.color for curve in after}) == 4, "each trial its own colour"
    assert [curve.state for curve in after] == ["completed", "paused", "completed", "error"]


def test_past_ten_curves_only_the_best_ten_are_featured():
    losses = [[float(trial_id)] for trial_id in range(25, 0, -1)]
    trials, rows = run_of(losses, {0: TrialStatus.RUNNING})
    curves = history_data(trials, rows, "loss", "min").curves
    featured = [curve.trial_id for curve in curves if curve.featured]
    assert featured == list(range(15, 25)), "the ten lowest losses"
    assert len(featured) == FEATURED_CURVES
    assert curves[20].color == TRIAL_COLORS[0], "colours go round the palette"
    few = history_data(*run_of(losses[:FEATURED_CURVES]), "loss", "min").curves
    assert all(curve.featured for curve in few)


def test_hover_text_shortens_the_config_and_escapes_html():
    trial = Trial(0, {"name": "<script>alert(1)</script>", "text": "x" * 500})
    trial = trial.with_result({"trial_id": 0, "training_iteration": 1, "loss": 1.0}, "loss", "min")
    rows = [{"trial_id": 0, "training_iteration": 1, "timestamp": 5.0, "loss": 1.0}]
    (curve,) = history_data([trial], rows, "loss", "min").curves
    assert "<script>" not in curve.label
    assert "&lt;script&gt;" in curve.label
    assert len(curve.label) < 200 and curve.label.endswith("…")


def test_long_curves_are_thinned_but_keep_their_last_point():
    trials, rows = run_of([[1 / i for i in range(1, 1001)]])
    curve = history_data(trials, rows, "loss", "min", max_points=100).curves[0]
    assert len(curve.x) == 100
    assert curve.x[0] == 1
    assert curve.x[-1] == 1000
    assert list(curve.x) == sorted(curve.x)


def test_points_gathered_over_redraws_draw_what_all_the_rows_draw():
    draw = random.Random(3)
    losses = [[draw.uniform(0.1, 5) for _ in range(draw.randint(0, 400))] for _ in range(15)]
    losses[2] = [0.01, 3.0, 9.0]  # its best so far leads, its returned score comes last
    trials, rows = run_of(losses, {4: TrialStatus.RUNNING, 7: TrialStatus.PAUSED})
    trials[2] = trials[2].evolve(returned=True, iteration=len(losses[2]))
    for mode in ("min", "max", None):
        points = CurvePoints("loss", mode)
        for taken in (0, 1, 700, 701, 2500, len(rows)):
            live = history_data(trials, rows[:taken], "loss", mode, points=points)
            assert live == history_data(trials, rows[:taken], "loss", mode), (mode, taken)
            values = trial_values(trials, rows[:taken], "loss", mode)
            assert points.values(trials) == values, "ranked as every other chart ranks them"
    points = CurvePoints("loss", "min").update(rows)
    again = history_data(trials, rows[:10], "loss", "min", points=points)
    assert again == history_data(trials, rows[:10], "loss", "min"), "fewer rows: read anew"


def test_best_so_far_steps_only_when_the_best_improves():
    _, rows = run_of([[3.0, 4.0, 2.0], [2.5, 1.0]])
    data = best_so_far_data(rows, "loss", "min")
    assert data.values == (3.0, 2.0, 1.0)
    assert data.trial_ids == (0, 0, 1)
    assert data.seconds == (0.0, 2.0, 4.0)


def test_parameters_code_categories_and_drop_constant_axes():
    trials, _ = run_of([[1.0], [2.0], [0.5]])
    trials.append(Trial(3, {"lr": 0.9, "opt": "sgd"}))
    data = parameter_data(trials, "loss")
    assert data.trial_ids == (0, 1, 2), "a trial without results has no point"
    assert data.metric_values == (1.0, 2.0, 0.5)
    lr, opt = data.axes
    assert lr.values == (0.1, 0.2, 0.30000000000000004)
    assert opt.labels == ("adam", "sgd")
    assert opt.values == (0.0, 1.0, 1.0)


def test_integer_and_log_scale_parameters_are_told_apart():
    configs = [{"lr": 10.0**-k, "units": 4**k, "dropout": 0.1 * k} for k in range(1, 6)]
    trials = scored_trials(configs, lambda config: config["dropout"])
    lr, units, dropout = parameter_data(trials, "score", log_scale={"lr"}).axes
    assert (lr.log, units.log, dropout.log) == (True, False, False), "as the space says"
    assert (lr.integer, units.integer, dropout.integer) == (False, True, False)
    inferred = parameter_data(trials, "score").axes
    assert [axis.log for axis in inferred] == [True, True, False], (
        "without a space: values spread evenly over decades look logarithmic"
    )


def test_evenly_spread_values_do_not_look_logarithmic():
    draw = random.Random(2)
    configs = [{"x": draw.uniform(0, 1), "y": 10 ** draw.uniform(-5, 0)} for _ in range(64)]
    x, y = parameter_data(scored_trials(configs, lambda config: config["x"]), "score").axes
    assert not x.log, "a uniform(0, 1) spans decades near 0, but not evenly"
    assert y.log


def test_a_conditional_parameter_is_missing_where_a_trial_lacks_it():
    configs = [{"model": "svc", "c": 10.0**-k} for k in range(1, 5)]
    configs += [{"model": "forest", "depth": 2 + k} for k in range(4)]
    trials = scored_trials(configs, lambda config: config.get("c", 1.0))
    model, c, depth = parameter_data(trials, "score").axes
    assert model.labels == ("svc", "forest")
    assert c.values == (0.1, 0.01, 0.001, 0.0001, None, None, None, None)
    assert c.present == [0.1, 0.01, 0.001, 0.0001] and c.log, "inferred from what is there"
    assert depth.integer and depth.values[:4] == (None,) * 4
    importance = importance_data(trials, "score", "max")
    assert importance.names[0] in ("model", "c"), "the missing ones group together"


def test_log_scale_names_read_the_domains_of_a_space():
    space = SearchSpace(
        {
            "lr": nt.loguniform(1e-4, 1e-1),
            "decay": nt.qloguniform(1e-4, 1e-1, 1e-4),
            "width": nt.lograndint(8, 512),
            "depth": nt.randint(1, 8),
            "model": {"size": nt.qlograndint(10, 1000, 10), "drop": nt.uniform(0, 1)},
            "opt": nt.choice(["sgd", "adam"]),
            "seed": 0,
        }
    )
    assert log_scale_names(space) == {"lr", "decay", "width", "model/size"}
    assert log_scale_names(DefineByRunSpace(lambda trial: None)) is None, "cannot say: infer"
    assert log_scale_names(None) is None


def scored_trials(configs, value_of):
    """Finished trials with the given configs, each with one result `value_of(config)`."""
    trials = []
    for trial_id, config in enumerate(configs):
        row = {"trial_id": trial_id, "training_iteration": 1, "score": value_of(config)}
        trials.append(Trial(trial_id, config).with_result(row, "score", "max"))
    return trials


def test_importance_ranks_the_parameter_that_decides_the_metric_first():
    draw = random.Random(0)
    configs = [
        {"lr": 10 ** draw.uniform(-4, -1), "seed": draw.choice(["a", "b", "c"]), "unit": 1}
        for _ in range(40)
    ]
    trials = scored_trials(configs, lambda config: -abs(math.log10(config["lr"]) + 2.5))
    data = importance_data(trials, "score", "max")
    assert data.names == ("lr", "seed"), "a constant has no importance to speak of"
    lr, seed = data.importances
    assert lr > 0.7, "the metric is a function of lr alone (not a monotone one)"
    assert seed < 0.1, "seed is noise"
    assert data.trials == 40


def test_importance_is_the_same_whichever_way_the_metric_points():
    draw = random.Random(1)
    configs = [{"x": draw.uniform(0, 1), "y": draw.uniform(0, 1)} for _ in range(30)]
    trials = scored_trials(configs, lambda config: config["x"] + 0.1 * config["y"])
    as_max = importance_data(trials, "score", "max")
    as_min = importance_data(trials, "score", "min")
    assert as_max == as_min
    assert as_max.names[0] == "x"


def test_too_few_trials_tell_nothing():
    trials = scored_trials([{"x": 1.0}, {"x": 2.0}], lambda config: config["x"])
    data = importance_data(trials, "score", "max")
    assert data.importances == (0.0,)
    assert not data.enough
    configs = [{"x": float(i)} for i in range(MIN_IMPORTANCE_TRIALS)]
    assert importance_data(scored_trials(configs, lambda c: c["x"]), "score", "max").enough
    assert not importance_data([], "score", "max").enough
