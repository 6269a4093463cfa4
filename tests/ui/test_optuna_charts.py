"""Optuna's charts and importances of nbtune runs: `plot_contour`, `plot_rank`, `plot_edf`,
`plot_hypervolume_history` and `plot_param_importance(method="ped-anova" | "fanova")`, drawn
through each run's Optuna study, with a one-line error where a run cannot have the chart."""

from __future__ import annotations

import math
import warnings

import pytest

import nbtune as nt
from nbtune.ui.data import importance_data
from nbtune.ui.figures import importance_figure

optuna = pytest.importorskip("optuna")


def lr_decides(config):
    """The loss depends on lr alone (least at 1e-2); width and opt are noise."""
    for step in range(1, 3):
        nt.report(loss=(math.log10(config["lr"]) + 2) ** 2 + 0.1 / step)


def two_metrics(config):
    nt.report(loss=config["x"] ** 2, latency_ms=(config["x"] - 2) ** 2)


def run(runs, name, trainable, space, num_samples, **options):
    tuner = nt.Tuner(
        trainable, space, num_samples=num_samples, seed=0, storage_path=runs, name=name,
        executor=nt.ThreadExecutor(), progress=False, max_concurrent=2, **options,
    )  # fmt: skip
    tuner.run()
    return tuner


SPACE = {
    "lr": nt.loguniform(1e-4, 1),
    "width": nt.randint(8, 65),
    "opt": nt.choice(["adam", "sgd"]),
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return tmp_path_factory.mktemp("runs")


@pytest.fixture(scope="module")
def random_run(runs):
    return run(runs, "random", lr_decides, SPACE, 40, metric="loss")


@pytest.fixture(scope="module")
def pareto_run(runs):
    space = {"x": nt.uniform(0, 2), "y": nt.uniform(0, 1)}
    return run(runs, "pareto", two_metrics, space, 12, metric=["loss", "latency_ms"])


def test_the_default_importance_is_today_s_rank_method_unchanged(random_run):
    trials = random_run.trials
    today = importance_figure(importance_data(trials, "loss", "min"))
    assert nt.plot_param_importance(random_run).to_json() == today.to_json()
    assert nt.plot_param_importance(random_run, method="rank").to_json() == today.to_json()


@pytest.mark.parametrize(
    ("method", "evaluator", "title"),
    [
        ("ped-anova", lambda: optuna.importance.PedAnovaImportanceEvaluator(), "PED-ANOVA"),
        ("fanova", lambda: optuna.importance.FanovaImportanceEvaluator(seed=0), "fANOVA"),
    ],
)
def test_optuna_s_evaluators_rank_the_parameter_that_decides_the_metric_first(
    random_run, method, evaluator, title
):
    figure = nt.plot_param_importance(random_run.path, method=method)
    bars = figure.data[0]
    shown = dict(zip(bars.y, bars.x, strict=True))
    assert max(shown, key=shown.get) == "lr"
    assert shown["lr"] > 0.6, shown
    assert list(bars.y) == sorted(shown, key=shown.get), "the greatest at the top"
    study = nt.load(random_run.path).to_optuna_study()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        expected = optuna.importance.get_param_importances(study, evaluator=evaluator())
    assert shown == pytest.approx(expected)
    assert figure.layout.title.text == f"what loss depends on ({title}, 40 trials)"


def test_an_optuna_importance_of_too_few_trials_says_what_it_waits_for(runs):
    few = run(runs, "few", lr_decides, SPACE, 3, metric="loss")
    figure = nt.plot_param_importance(few, method="fanova")
    assert not figure.data[0].x
    assert "needs more trials" in figure.layout.annotations[0].text


def test_an_unknown_importance_method_is_refused_in_one_line(random_run):
    with pytest.raises(ValueError, match=r"^method='shap': use one of 'rank', 'ped-anova'"):
        nt.plot_param_importance(random_run, method="shap")


def test_the_contour_of_two_parameters_is_optuna_s_on_their_scales(random_run):
    figure = nt.plot_contour(random_run, params=["lr", "width"], dark=True)
    contours = [trace for trace in figure.data if trace.type == "contour"]
    assert len(contours) == 1 and len(contours[0].z) > 10
    assert figure.layout.xaxis.title.text == "lr" and figure.layout.xaxis.type == "log"
    assert figure.layout.yaxis.title.text == "width"
    assert contours[0].colorbar.title.text == "loss"
    assert figure.layout.template.layout.paper_bgcolor == "rgb(17,17,17)", "the dark theme"
    every = nt.plot_contour(str(random_run.path))
    assert sum(trace.type == "contour" for trace in every.data) == 3 * 2, "each pair, both ways"


def test_rank_and_edf_draw_every_complete_trial(random_run, runs):
    rank = nt.plot_rank(random_run, params=["lr", "opt"])
    assert sum(len(trace.x) for trace in rank.data if trace.x is not None) >= 40
    other = run(runs, "other", lr_decides, SPACE, 10, metric="loss")
    edf = nt.plot_edf([random_run, nt.load(other.path)])
    assert [trace.name for trace in edf.data] == ["random", "other"]
    assert edf.layout.xaxis.title.text == "loss"


def one_parameter(config):
    nt.report(loss=config["x"])


def test_a_run_that_cannot_have_the_chart_is_told_so_in_one_line(random_run, pareto_run, runs):
    single = run(runs, "single", one_parameter, {"x": nt.uniform(0, 1)}, 4, metric="loss")
    cases = [
        (lambda: nt.plot_contour(single), "plot_contour needs 2 parameters that vary; this run "
         "has only x: use nbtune.plot_param_scatter"),
        (lambda: nt.plot_contour(random_run, params=["lr", "depth"]),
         "plot_contour: the run has no parameter 'depth'; it has lr, width, opt"),
        (lambda: nt.plot_contour(random_run, params=["lr"]),
         "plot_contour(params=['lr']): name 2 or more parameters"),
        (lambda: nt.plot_hypervolume_history(random_run, [1.0]),
         "plot_hypervolume_history needs several metrics; this run tunes 'loss' alone: use "
         "nbtune.plot_best_so_far"),
        (lambda: nt.plot_hypervolume_history(pareto_run, [10.0]),
         "reference_point=[10.0]: give 2 values, one for each of loss, latency_ms"),
        (lambda: nt.plot_hypervolume_history(pareto_run, {"loss": 10.0, "acc": 1.0}),
         "reference_point={'loss': 10.0, 'acc': 1.0}: give one value for each of loss, "
         "latency_ms"),
        (lambda: nt.plot_contour(pareto_run),
         "plot_contour: this run tunes loss, latency_ms; pass metric='loss' (or another)"),
        (lambda: nt.plot_edf([random_run, pareto_run], metric="latency_ms"),
         "plot_edf(metric='latency_ms'): the run tunes loss"),
    ]  # fmt: skip
    for draw, message in cases:
        with pytest.raises(ValueError) as info:
            draw()
        assert str(info.value) == message


def test_the_hypervolume_grows_with_the_trials_of_a_run_of_several_metrics(pareto_run):
    figure = nt.plot_hypervolume_history(pareto_run, {"latency_ms": 5.0, "loss": 10.0})
    volumes = list(figure.data[0].y)
    assert len(volumes) == 12
    assert volumes == sorted(volumes) and volumes[-1] > 0
    same = nt.plot_hypervolume_history(pareto_run, reference_point=[10.0, 5.0])
    assert list(same.data[0].y) == volumes


def test_one_metric_of_several_is_charted_when_named(pareto_run):
    figure = nt.plot_contour(pareto_run, metric="latency_ms")
    assert figure.data[0].colorbar.title.text == "latency_ms"
    assert nt.plot_edf(pareto_run, metric="loss").layout.xaxis.title.text == "loss"
