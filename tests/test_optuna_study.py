"""`to_optuna_study()`: any run (random search included, live or read back from disk) as an
Optuna study whose trials, parameters, distributions, values, intermediate values, states,
times and user attributes are the run's, and on which Optuna's charts and importances work;
and OptunaSearch's sampler: a class with options, the constant liar by default."""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap
import warnings

import pytest
import trainables
from test_control import result_of

import nbtune as nt
from nbtune.events import TrialPaused
from nbtune.optuna_study import inferred_distribution

optuna = pytest.importorskip("optuna")
from optuna.distributions import (  # noqa: E402
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)
from optuna.trial import TrialState  # noqa: E402

SPACE = {
    "lr": nt.loguniform(1e-4, 1e-1),
    "momentum": nt.quniform(0, 1, 0.25),
    "width": nt.randint(8, 65),
    "layers": nt.qrandint(2, 8, 2),
    "units": nt.lograndint(16, 513),
    "opt": nt.choice(["adam", "sgd", None]),
    "shape": nt.choice([(1, 2), (3, 4)]),
    "model": {"dropout": nt.uniform(0, 0.5)},
    "noise": nt.randn(0, 1),
    "epochs": 4,
    "double_lr": nt.sample_from(lambda config: 2 * config["lr"]),
}
"""Every kind of domain: log, step, int, log int, categorical (with None, with tuples), nested,
one Optuna has no distribution for (a normal), a constant and a computed value."""


def bowl(config):
    """A loss that falls with each epoch, least at lr = 0.01 and small widths."""
    for epoch in range(1, config["epochs"] + 1):
        distance = (math.log10(config["lr"]) + 2) ** 2 + config["width"] / 64
        nt.report(loss=distance + 1 / epoch, accuracy=1 / (1 + distance))


def random_run(make_tuner, num_samples=12, **options):
    tuner = make_tuner(
        bowl, SPACE, metric="loss", num_samples=num_samples, seed=3,
        executor=nt.ThreadExecutor(), **options,
    )  # fmt: skip
    tuner.run()
    return tuner


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """One finished random-search run of 12 trials, shared by the tests that only read it."""
    runs = tmp_path_factory.mktemp("runs")
    tuner = nt.Tuner(
        bowl, SPACE, metric="loss", num_samples=12, seed=3, storage_path=runs, name="bowl",
        executor=nt.ThreadExecutor(), progress=False, max_concurrent=2,
    )  # fmt: skip
    tuner.run()
    return tuner


def test_each_trial_becomes_a_complete_trial_with_its_params_values_and_steps(finished):
    study = finished.to_optuna_study()
    history = finished.history()
    assert study.direction == optuna.study.StudyDirection.MINIMIZE
    assert [t.number for t in study.trials] == [t.trial_id for t in finished.trials]
    for frozen, trial in zip(study.trials, finished.trials, strict=True):
        assert frozen.state == TrialState.COMPLETE
        assert frozen.value == trial.last_result["loss"]
        own = history[history["trial_id"] == trial.trial_id]
        assert frozen.intermediate_values == dict(
            zip(own["training_iteration"], own["loss"], strict=True)
        )
        config = trial.config
        assert frozen.params == {
            "lr": config["lr"],
            "momentum": config["momentum"],
            "width": config["width"],
            "layers": config["layers"],
            "units": config["units"],
            "opt": config["opt"],
            "shape": repr(config["shape"]),
            "model/dropout": config["model"]["dropout"],
            "noise": config["noise"],
        }, "constants and computed values are not parameters"
        assert frozen.user_attrs == {
            "trial_id": trial.trial_id,
            "status": "TERMINATED",
            "training_iteration": 4,
            "stopped_by": None,
            "origin": "searcher",
            "parent": None,
            "attempts": 1,
            "runtime_s": trial.runtime_s,
            "paused_by": None,
            "error": None,
        }


def test_the_distributions_are_the_space_s_domains(finished):
    distributions = finished.to_optuna_study().trials[0].distributions
    assert distributions["lr"] == FloatDistribution(1e-4, math.nextafter(0.1, 0), log=True)
    assert distributions["momentum"] == FloatDistribution(0, 1, step=0.25)
    assert distributions["width"] == IntDistribution(8, 64)
    assert distributions["layers"] == IntDistribution(2, 8, step=2)
    assert distributions["units"] == IntDistribution(16, 512, log=True)
    assert distributions["opt"] == CategoricalDistribution(["adam", "sgd", None])
    assert distributions["shape"] == CategoricalDistribution(["(1, 2)", "(3, 4)"])
    assert distributions["model/dropout"] == FloatDistribution(0, math.nextafter(0.5, 0))
    noise = [trial.config["noise"] for trial in finished.trials]
    assert distributions["noise"] == FloatDistribution(min(noise), max(noise)), (
        "Optuna has no normal distribution: the values' range stands for it"
    )


def test_times_are_when_each_trial_ran(finished):
    study = finished.to_optuna_study()
    history = finished.history()
    for frozen in study.trials:
        own = history[history["trial_id"] == frozen.number]
        first = own["timestamp"].min().timestamp() - own["time_total_s"].iloc[0]
        assert frozen.datetime_start.timestamp() == pytest.approx(first, abs=1e-3)
        assert frozen.datetime_complete.timestamp() >= own["timestamp"].max().timestamp()
        assert frozen.duration.total_seconds() <= 5


def test_a_run_read_from_disk_has_the_same_trials_with_distributions_from_its_values(finished):
    live = finished.to_optuna_study()
    loaded = nt.load(finished.path).to_optuna_study()
    assert loaded.study_name == "bowl"
    for one, other in zip(live.trials, loaded.trials, strict=True):
        assert (one.state, one.values, one.intermediate_values, one.user_attrs) == (
            other.state,
            other.values,
            other.intermediate_values,
            other.user_attrs,
        )
        computed = other.params.pop("double_lr")
        assert computed == 2 * one.params["lr"], "read from disk, nothing tells it is computed"
        shape = other.params.pop("shape")
        assert shape in ("[1, 2]", "[3, 4]"), "a tuple comes back from JSON as a list"
        assert {**other.params, "shape": one.params["shape"]} == one.params
    distributions = loaded.trials[0].distributions
    configs = [trial.config for trial in finished.trials]
    lrs = [config["lr"] for config in configs]
    assert distributions["lr"] == FloatDistribution(min(lrs), max(lrs), log=True)
    widths = [config["width"] for config in configs]
    assert distributions["width"] == IntDistribution(min(widths), max(widths))
    assert set(distributions["opt"].choices) == {config["opt"] for config in configs}
    assert "epochs" not in distributions, "a value the same in every trial is a constant"


def test_optuna_s_every_chart_and_importance_work_on_a_random_search_run(finished):
    study = finished.to_optuna_study()
    vis = optuna.visualization
    charts = [
        vis.plot_contour(study),
        vis.plot_contour(study, params=["lr", "width"]),
        vis.plot_edf(study),
        vis.plot_intermediate_values(study),
        vis.plot_optimization_history(study),
        vis.plot_parallel_coordinate(study),
        vis.plot_param_importances(study),
        vis.plot_rank(study),
        vis.plot_slice(study),
        vis.plot_timeline(study),
    ]
    assert all(chart.data for chart in charts)
    lr_by_width = charts[1].data[0]
    assert lr_by_width.type == "contour" and len(lr_by_width.z) > 1
    evaluators = [
        None,
        optuna.importance.FanovaImportanceEvaluator(seed=0),
        optuna.importance.MeanDecreaseImpurityImportanceEvaluator(seed=0),
        optuna.importance.PedAnovaImportanceEvaluator(),
    ]
    for evaluator in evaluators:
        importances = optuna.importance.get_param_importances(study, evaluator=evaluator)
        assert set(importances) == {
            "lr", "momentum", "width", "layers", "units", "opt", "shape", "model/dropout", "noise"
        }  # fmt: skip
        assert sum(importances.values()) == pytest.approx(1.0)


def test_the_terminator_chart_works_where_its_gaussian_process_can_run(finished):
    pytest.importorskip("torch")
    figure = optuna.visualization.plot_terminator_improvement(finished.to_optuna_study())
    assert figure.data


def test_cut_short_trials_are_pruned_at_their_last_value_and_those_at_max_t_complete(make_tuner):
    tuner = make_tuner(
        trainables.learning_curve,
        {"q": nt.grid([5, 3, 6, 1, 4, 2, 2.5]), "max_t": 20},
        metric="loss",
        scheduler=nt.ASHA(max_t=9, grace_period=1, reduction_factor=3),
        max_concurrent=1,
        executor=nt.ThreadExecutor(),
    )
    tuner.run()
    study = tuner.to_optuna_study()
    states = {t.number: t.state for t in study.trials}
    assert states == {
        **dict.fromkeys([0, 1, 3], TrialState.COMPLETE),
        **dict.fromkeys([2, 4, 5, 6], TrialState.PRUNED),
    }  # test_stopped_by.py: ASHA cuts 2, 4, 5 and 6
    for frozen in study.trials:
        last = max(frozen.intermediate_values)
        assert frozen.value == frozen.intermediate_values[last], "as Optuna's tell leaves one"
    assert study.best_trial.number == 3
    assert optuna.visualization.plot_intermediate_values(study).data


def test_an_error_fails_and_a_trial_that_met_the_stop_criteria_is_complete(make_tuner):
    tuner = make_tuner(
        trainables.fail_at,
        {"fail_at": nt.grid([3, 50])},
        metric="loss",
        stop={"training_iteration": 4},
        executor=nt.ThreadExecutor(),
    )
    tuner.run()
    failed, met = tuner.to_optuna_study().trials
    assert failed.state == TrialState.FAIL and failed.values is None
    assert failed.intermediate_values == {1: 1.0, 2: 2.0}
    assert failed.user_attrs["error"].startswith("ValueError: boom at step 3")
    assert failed.datetime_complete >= failed.datetime_start
    assert (met.state, met.value, met.user_attrs["stopped_by"]) == (
        TrialState.COMPLETE,
        4.0,
        "stop criteria",
    )


def test_live_trials_run_one_not_started_waits_and_the_user_s_stop_prunes_them(make_tuner, log):
    tuner = make_tuner(
        trainables.steps,
        {"steps": 3000, "x": nt.grid([0, 1])},
        metric="loss",
        callbacks=[log],
        executor=nt.ThreadExecutor(),
    )
    tuner.start()
    log.wait_for(result_of(0, 2))
    log.wait_for(result_of(1, 1))
    tuner.pause(1)
    log.wait_for(lambda e: isinstance(e, TrialPaused) and e.trial_id == 1)
    assert tuner.add_trial({"steps": 3000, "x": 2}) == 2, "no worker is free for it"
    study = tuner.to_optuna_study()
    running, paused, waiting = study.trials
    assert (running.state, paused.state, waiting.state) == (TrialState.RUNNING,) * 2 + (
        TrialState.WAITING,
    )
    assert running.datetime_complete is None and len(running.intermediate_values) >= 2
    assert paused.user_attrs["paused_by"] == "suspend"
    assert waiting.datetime_start is None and waiting.params == {"x": 2}
    assert waiting.user_attrs["origin"] == "user"
    assert optuna.visualization.plot_timeline(study).data
    tuner.stop()
    assert tuner.wait(60)
    stopped = tuner.to_optuna_study().trials
    assert [t.state for t in stopped] == [TrialState.PRUNED] * 2 + [TrialState.WAITING]
    assert [t.user_attrs["stopped_by"] for t in stopped] == ["user", "user", None]
    assert stopped[2].user_attrs["status"] == "PENDING", "a restore would run it"
    for cut in stopped[:2]:
        assert cut.value == cut.intermediate_values[max(cut.intermediate_values)]


def two_objectives(config):
    for step in range(1, 4):
        nt.report(loss=config["x"] ** 2 + 1 / step, latency_ms=(config["x"] - 2) ** 2)


def test_several_metrics_make_a_study_of_several_directions_and_values(make_tuner):
    tuner = make_tuner(
        two_objectives,
        {"x": nt.uniform(0, 2), "y": nt.choice(["a", "b"])},
        metric=["loss", "latency_ms"],
        mode=["min", "max"],
        num_samples=10,
        seed=0,
        executor=nt.ThreadExecutor(),
    )
    tuner.run()
    study = tuner.to_optuna_study()
    assert study.directions == [
        optuna.study.StudyDirection.MINIMIZE,
        optuna.study.StudyDirection.MAXIMIZE,
    ]
    for frozen, trial in zip(study.trials, tuner.trials, strict=True):
        assert frozen.values == [trial.last_result["loss"], trial.last_result["latency_ms"]]
        assert frozen.intermediate_values == {}, "Optuna keeps none for several objectives"
    assert {t.number for t in study.best_trials} == {t.trial_id for t in tuner.best_trials}
    vis = optuna.visualization
    assert vis.plot_pareto_front(study).data
    assert vis.plot_hypervolume_history(study, reference_point=[10.0, -1.0]).data
    assert vis.plot_contour(study, target=lambda t: t.values[0], target_name="loss").data


def conditional(trial):
    model = trial.suggest_categorical("model", ["linear", "tree"])
    if model == "linear":
        trial.suggest_float("alpha", 1e-5, 1.0, log=True)
    else:
        trial.suggest_int("depth", 2, 32, log=True)
        trial.suggest_float("subsample", 0.5, 1.0, step=0.1)
    return {"seed": 0}


def score(config):
    nt.report(loss=config.get("alpha", 0.5) + config.get("depth", 1) / 32)


def test_a_define_by_run_space_gives_what_each_trial_suggested(make_tuner):
    tuner = make_tuner(
        score, conditional, metric="loss", num_samples=10, seed=1, executor=nt.ThreadExecutor()
    )
    tuner.run()
    study = tuner.to_optuna_study()
    kinds = set()
    for frozen, trial in zip(study.trials, tuner.trials, strict=True):
        expected = {k: v for k, v in trial.config.items() if k != "seed"}
        assert frozen.params == expected
        kinds.add(trial.config["model"])
        if trial.config["model"] == "tree":
            assert frozen.distributions["depth"] == IntDistribution(2, 32, log=True)
            assert frozen.distributions["subsample"] == FloatDistribution(0.5, 1.0, step=0.1)
        else:
            assert frozen.distributions["alpha"] == FloatDistribution(1e-5, 1.0, log=True)
    assert kinds == {"linear", "tree"}
    assert optuna.visualization.plot_slice(study).data
    importances = optuna.importance.get_param_importances(study)
    assert "model" in importances and set(importances) <= {"model", "alpha", "depth", "subsample"}


def test_a_trial_added_by_hand_outside_the_space_widens_that_parameter(make_tuner):
    tuner = make_tuner(score, {"alpha": nt.uniform(0, 1)}, metric="loss", num_samples=3, seed=0,
                       executor=nt.ThreadExecutor())  # fmt: skip
    tuner.add_trial({"alpha": 7.5})
    tuner.run()
    study = tuner.to_optuna_study()
    alphas = [trial.config["alpha"] for trial in tuner.trials]
    assert max(alphas) == 7.5
    assert {str(t.distributions["alpha"]) for t in study.trials} == {
        str(FloatDistribution(min(alphas), 7.5))
    }
    assert [t.params["alpha"] for t in study.trials] == alphas


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([1e-4, 3e-3, 1e-2, 2e-2, 0.09], FloatDistribution(1e-4, 0.09, log=True)),
        ([0.0, 0.3, 0.5, 0.7, 1.0], FloatDistribution(0.0, 1.0)),
        ([10, 200, 400, 600, 1000], IntDistribution(10, 1000)),
        ([16, 64, 256, 1024, 4096], IntDistribution(16, 4096, log=True)),
        ([16, 40, 64, 256, 512], IntDistribution(16, 512)),
        ([1, 2.5, 4], FloatDistribution(1.0, 4.0)),
        ([True, False, True], CategoricalDistribution([True, False])),
        (["a", None, "a"], CategoricalDistribution(["a", None])),
        ([[1, 2], [3]], CategoricalDistribution(["[1, 2]", "[3]"])),
        ([1, True], CategoricalDistribution(["1", "True"])),
        ([3, 3, 3], None),
        ([float("nan"), 2.0, 2.0], None),
        ([], None),
    ],
)
def test_a_distribution_is_inferred_from_the_values_alone(values, expected):
    assert inferred_distribution(values) == expected


def test_a_run_without_a_metric_is_refused_in_one_line(make_tuner):
    tuner = make_tuner(score, {"alpha": 0.5}, executor=nt.ThreadExecutor())
    with pytest.raises(ValueError, match=r"^this experiment has no metric; pass metric=") as info:
        tuner.to_optuna_study()
    assert "\n" not in str(info.value)


def test_without_optuna_installed_it_says_how_to_install_it(tmp_path):
    code = textwrap.dedent(f"""
        import sys

        class NoOptuna:
            def find_spec(self, name, path=None, target=None):
                if name.partition(".")[0] == "optuna":
                    raise ModuleNotFoundError(f"No module named {{name!r}}")

        sys.meta_path.insert(0, NoOptuna())
        import nbtune as nt

        def train(config):
            nt.report(loss=config["x"])

        tuner = nt.Tuner(train, {{"x": nt.uniform(0, 1)}}, metric="loss", num_samples=2,
                         executor=nt.ThreadExecutor(), storage_path={str(tmp_path)!r},
                         progress=False)
        tuner.run()
        for source in (tuner, nt.load(tuner.path)):
            try:
                source.to_optuna_study()
            except ImportError as exc:
                print(exc)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout == "to_optuna_study needs Optuna: pip install 'nbtune[optuna]'\n" * 2


# ----- OptunaSearch's sampler (issue 35, part 4) ------------------------------------------------


def sampler_of(searcher, seed=0):
    searcher.setup(nt.space.SearchSpace({"x": nt.uniform(0, 1)}), "loss", "min", 20, seed)
    return searcher.study.sampler


def test_the_default_tpe_uses_the_constant_liar_on_every_optuna_without_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sampler = sampler_of(nt.OptunaSearch())
    assert isinstance(sampler, optuna.samplers.TPESampler)
    assert sampler._constant_liar is True


def suggestions(searcher, seed):
    searcher.setup(nt.space.SearchSpace({"x": nt.uniform(0, 1)}), "loss", "min", 4, seed)
    return [searcher.suggest(trial_id)["x"] for trial_id in range(4)]


def test_a_sampler_s_class_is_made_with_its_options_and_the_tuner_s_seed():
    tpe = sampler_of(nt.OptunaSearch(n_startup_trials=3, constant_liar=False))
    assert (tpe._n_startup_trials, tpe._constant_liar) == (3, False), "options win"
    kind = optuna.samplers.RandomSampler
    assert isinstance(sampler_of(nt.OptunaSearch(kind)), kind)
    first = suggestions(nt.OptunaSearch(kind), seed=7)
    assert suggestions(nt.OptunaSearch(kind), seed=7) == first
    assert suggestions(nt.OptunaSearch(kind), seed=8) != first
    assert suggestions(nt.OptunaSearch(kind, seed=1), seed=7) != first, "its own seed wins"


def test_options_a_sampler_does_not_take_or_cannot_be_given_are_refused_in_one_line():
    with pytest.raises(TypeError, match=r"^TPESampler takes no option 'startup'; it takes "):
        nt.OptunaSearch(startup=3)
    with pytest.raises(TypeError, match=r"^RandomSampler takes no option 'n_startup_trials'"):
        nt.OptunaSearch(optuna.samplers.RandomSampler, n_startup_trials=3)
    with pytest.raises(TypeError) as info:
        nt.OptunaSearch(optuna.samplers.TPESampler(), n_startup_trials=3)
    assert str(info.value) == (
        "OptunaSearch(TPESampler(...), n_startup_trials=...): give options to the class, "
        "OptunaSearch(TPESampler, ...), or to the sampler you make"
    )
