"""OptunaSearch: our domains as Optuna distributions, what it tells Optuna, restore, and that
TPE beats random search on a smooth function."""

from __future__ import annotations

import math
import statistics
import subprocess
import sys
import textwrap
import threading

import cloudpickle
import pytest
import trainables
from test_control import result_of

import nbtune as nt
from nbtune import registry
from nbtune.search.optuna import OptunaSearch, distributions
from nbtune.space import SearchSpace
from nbtune.trial import Trial, TrialStatus

optuna = pytest.importorskip("optuna")
from optuna.distributions import (  # noqa: E402
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)
from optuna.trial import TrialState  # noqa: E402

BRANIN_MINIMUM = 0.397887


def branin(config):
    """A smooth 2-D test function with three global minima of 0.397887 in [-5, 10] x [0, 15]."""
    x, y = config["x"], config["y"]
    b, c = 5.1 / (4 * math.pi**2), 5 / math.pi
    return (y - b * x**2 + c * x - 6) ** 2 + 10 * (1 - 1 / (8 * math.pi)) * math.cos(x) + 10


def searcher_for(space, num_samples=10, seed=0, mode="min", sampler=None, searcher=None):
    searcher = searcher or OptunaSearch(sampler)
    searcher.setup(SearchSpace(space), "loss", mode, num_samples, seed)
    return searcher


def drive(searcher, objective, first_id=0):
    """Suggest, evaluate and complete one trial at a time until the searcher has no more."""
    configs = []
    while not searcher.is_finished:
        trial_id = first_id + len(configs)
        config = searcher.suggest(trial_id)
        configs.append(config)
        searcher.on_complete(trial_id, {"loss": objective(config)}, error=False)
    return configs


def best_of(searcher, seed, trials=60):
    space = {"x": nt.uniform(-5, 10), "y": nt.uniform(0, 15)}
    configs = drive(searcher_for(space, trials, seed, searcher=searcher), branin)
    return min(branin(config) for config in configs)


def test_tpe_finds_lower_branin_values_than_random_search_with_the_same_budget():
    tpe, rand = [], []
    for seed in range(10):
        tpe.append(best_of(OptunaSearch(), seed) - BRANIN_MINIMUM)
        rand.append(best_of(nt.RandomSearch(), seed) - BRANIN_MINIMUM)
    # Over 20 sets of 10 seeds the ratio of mean regrets was at most 0.33, wins at least 7.
    assert statistics.mean(tpe) < 0.6 * statistics.mean(rand), (tpe, rand)
    assert sum(t < r for t, r in zip(tpe, rand, strict=True)) >= 6, (tpe, rand)


def test_each_domain_becomes_the_matching_distribution():
    space = SearchSpace(
        {
            "lr": nt.loguniform(1e-4, 1e-1),
            "x": nt.uniform(-1, 1),
            "layers": nt.randint(1, 4),
            "act": nt.choice(["relu", "tanh"]),
            "fixed": 3,
            "double": nt.sample_from(lambda config: 2 * config["layers"]),
        }
    )
    found = distributions(space)
    assert set(found) == {"lr", "x", "layers", "act"}, "constants and sample_from are not sampled"
    assert found["lr"] == FloatDistribution(1e-4, math.nextafter(1e-1, 0), log=True)
    assert found["x"] == FloatDistribution(-1.0, math.nextafter(1.0, -1), log=False)
    assert found["layers"] == IntDistribution(1, 3), "randint excludes high"
    assert found["act"] == CategoricalDistribution([0, 1]), "categories go to Optuna as indices"


def test_configs_keep_the_space_nested_with_its_constants_and_sample_from_values():
    space = {
        "model": {"layers": nt.randint(1, 4), "act": "relu"},
        "shape": nt.choice([(1, 2), None, {"deep": [1]}]),
        "lr": nt.loguniform(1e-4, 1e-1),
        "double": nt.sample_from(lambda config: 2 * config["model"]["layers"]),
    }
    configs = drive(searcher_for(space, num_samples=40), lambda config: config["lr"])
    assert {c["model"]["layers"] for c in configs} == {1, 2, 3}
    assert all(c["model"]["act"] == "relu" for c in configs)
    assert all(c["double"] == 2 * c["model"]["layers"] for c in configs)
    assert all(1e-4 <= c["lr"] < 1e-1 for c in configs)
    shapes = [c["shape"] for c in configs]
    assert {repr(s) for s in shapes} == {"(1, 2)", "None", "{'deep': [1]}"}
    assert len({id(s) for s in shapes if isinstance(s, dict)}) > 1, "each config its own copy"


def test_a_grid_is_refused_with_a_pointer_to_choice():
    with pytest.raises(ValueError, match=r"'opt'.*use choice\(\.\.\.\) instead"):
        searcher_for({"opt": nt.grid(["sgd", "adam"])})


def test_a_metric_is_required():
    with pytest.raises(ValueError, match="pass metric="):
        OptunaSearch().setup(SearchSpace({"x": nt.uniform(0, 1)}), None, "min", 5, 0)


def test_optuna_hears_every_result_and_the_last_value_or_a_failure():
    searcher = searcher_for({"x": nt.uniform(0, 1)}, num_samples=4, mode="max")
    for trial_id in range(4):
        searcher.suggest(trial_id)
    for step, loss in enumerate([3.0, 1.0, 2.0], start=1):
        searcher.on_result(0, {"loss": loss, "training_iteration": step})
    searcher.on_complete(0, {"loss": 2.0, "training_iteration": 3}, error=False)
    searcher.on_complete(1, {"loss": 5.0, "training_iteration": 1}, error=True)
    searcher.on_complete(2, {"loss": math.nan, "training_iteration": 1}, error=False)
    searcher.on_complete(3, None, error=False)
    first, *failed = searcher.study.trials
    assert searcher.study.direction == optuna.study.StudyDirection.MAXIMIZE
    assert first.intermediate_values == {1: 3.0, 2: 1.0, 3: 2.0}
    assert (first.state, first.value) == (TrialState.COMPLETE, 2.0), "the last value, not the best"
    assert [t.state for t in failed] == [TrialState.FAIL] * 3


@pytest.mark.parametrize("searcher", [nt.OptunaSearch, nt.RandomSearch])
def test_a_trial_added_before_start_and_the_points_to_evaluate_each_run_once(make_tuner, searcher):
    tuner = make_tuner(
        trainables.returns_dict,
        {"x": nt.uniform(0, 1)},
        metric="loss",
        num_samples=3,
        searcher=searcher(),
        points_to_evaluate=[{"x": 0.5}],
        executor=nt.ThreadExecutor(),
    )
    tuner.add_trial({"x": 0.123})
    tuner.run()
    configs = [(trial.origin, trial.config["x"]) for trial in tuner.trials]
    assert configs[:2] == [("user", 0.123), ("searcher", 0.5)]
    assert {trial.status for trial in tuner.trials} == {TrialStatus.TERMINATED}
    assert len(configs) == 4 and {x for _, x in configs[2:]}.isdisjoint({0.123, 0.5})
    if searcher is nt.OptunaSearch:
        told = {t.user_attrs["nbtune_trial_id"]: t.params for t in tuner.searcher.study.trials}
        assert [told[trial_id]["x"] for trial_id in (0, 1)] == [0.123, 0.5], "as they ran"


def test_the_seed_decides_the_configurations():
    def run(seed):
        return drive(searcher_for({"x": nt.uniform(0, 1)}, 15, seed), lambda c: c["x"])

    assert run(3) == run(3)
    assert run(3) != run(4)


@pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")
@pytest.mark.parametrize("sampler", ["CmaEsSampler", "QMCSampler", "GPSampler"])
def test_other_samplers_suggest_inside_the_space(sampler):
    if sampler == "GPSampler":
        pytest.importorskip("torch")
    searcher = searcher_for(
        {"x": nt.uniform(-1, 1), "n": nt.randint(0, 3)},
        num_samples=15,
        sampler=getattr(optuna.samplers, sampler)(seed=0),
    )
    configs = drive(searcher, lambda c: c["x"] ** 2 + c["n"])
    assert len(configs) == 15
    assert all(-1 <= c["x"] < 1 and c["n"] in (0, 1, 2) for c in configs)
    assert all(t.state is TrialState.COMPLETE for t in searcher.study.trials)


def test_the_budget_bounds_the_suggestions_and_extend_adds_to_it():
    searcher = searcher_for({"x": nt.uniform(0, 1)}, num_samples=3)
    assert len(drive(searcher, lambda c: c["x"])) == 3
    assert searcher.suggest(3) is None
    searcher.extend(2)
    assert len(drive(searcher, lambda c: c["x"], first_id=3)) == 2
    assert len(searcher.study.trials) == 5


def test_it_plans_its_budget_and_what_extend_adds():
    searcher = searcher_for({"x": nt.uniform(0, 1)}, num_samples=3)
    assert searcher.planned_trials == 3
    searcher.extend(2)
    assert searcher.planned_trials == 5 == len(drive(searcher, lambda c: c["x"]))


def test_a_pickled_searcher_goes_on_exactly_as_the_original():
    original = searcher_for({"x": nt.uniform(0, 1), "c": nt.choice(["a", "b"])}, num_samples=30)
    objective = lambda c: (c["x"] - 0.5) ** 2 + (c["c"] == "b")  # noqa: E731
    for trial_id in range(12):
        config = original.suggest(trial_id)
        original.on_complete(trial_id, {"loss": objective(config)}, error=False)
    copy = cloudpickle.loads(cloudpickle.dumps(original))
    assert drive(copy, objective, first_id=12) == drive(original, objective, first_id=12)


def test_restore_catches_up_with_trials_newer_than_the_saved_state():
    searcher = searcher_for({"x": nt.uniform(0, 1), "c": nt.choice([(1,), (2,)])}, num_samples=6)
    configs = {trial_id: searcher.suggest(trial_id) for trial_id in range(3)}
    searcher.on_complete(0, {"loss": 0.5}, error=False)
    saved = cloudpickle.dumps(searcher)
    # After the save: one more suggestion, and trials 1 and 3 end; then the driver dies.
    configs[3] = searcher.suggest(3)
    journal = [
        Trial(0, configs[0], TrialStatus.TERMINATED, last_result={"loss": 0.5}),
        Trial(1, configs[1], TrialStatus.TERMINATED, last_result={"loss": 0.1}),
        Trial(2, configs[2], TrialStatus.PENDING),
        Trial(3, configs[3], TrialStatus.ERROR, last_result={"loss": 0.2}),
        Trial(4, {"x": 0.5, "c": (1,)}, TrialStatus.TERMINATED, origin="user"),
    ]
    restored = cloudpickle.loads(saved)
    restored.restore(journal)

    by_id = {t.user_attrs["nbtune_trial_id"]: t for t in restored.study.trials}
    assert sorted(by_id) == [0, 1, 2, 3], "the user's trial is not the searcher's"
    assert (by_id[1].state, by_id[1].value) == (TrialState.COMPLETE, 0.1)
    assert by_id[3].state is TrialState.FAIL
    assert by_id[3].params == {"x": configs[3]["x"], "c": configs[3]["c"][0] - 1}
    assert by_id[2].state is TrialState.RUNNING, "trial 2 runs again after the restore"
    restored.on_complete(2, {"loss": 0.3}, error=False)
    assert restored.study.trials[by_id[2].number].value == 0.3
    assert len(drive(restored, lambda c: c["x"], first_id=5)) == 2, "6 suggested in all"


def test_the_magic_name_optuna_makes_an_optuna_search():
    assert isinstance(registry.create("searcher", "optuna"), OptunaSearch)


def test_without_optuna_installed_constructing_it_says_how_to_install_it():
    code = textwrap.dedent("""
        import sys

        class NoOptuna:
            def find_spec(self, name, path=None, target=None):
                if name.partition(".")[0] == "optuna":
                    raise ModuleNotFoundError(f"No module named {name!r}")

        sys.meta_path.insert(0, NoOptuna())
        import nbtune
        try:
            nbtune.OptunaSearch()
        except ImportError as exc:
            print(exc)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout == "OptunaSearch needs Optuna: pip install 'nbtune[optuna]'\n"


def test_a_real_run_is_stopped_with_a_paused_trial_and_restored(make_tuner, stop_midway):
    space = {"steps": 30, "interval": 0.02, "checkpoint": True, "lr": nt.loguniform(0.1, 1)}
    tuner = make_tuner(
        trainables.steps,
        space,
        metric="loss",
        num_samples=4,
        searcher=OptunaSearch(),
        seed=1,
    )
    stop_midway(tuner)
    assert tuner.get_trial(0).status is nt.TrialStatus.PAUSED

    again = nt.Tuner.restore(tuner.path, trainables.steps, progress=False)
    again.run()
    frame = again.dataframe().set_index("trial_id")
    assert frame.index.tolist() == [0, 1, 2, 3], "the budget is not exceeded"
    assert (frame["status"] == "TERMINATED").all()
    told = {t.user_attrs["nbtune_trial_id"]: t for t in again.searcher.study.trials}
    cut_short = frame["stopped_by"].notna()  # those running when the run was stopped
    for trial_id, row in frame.iterrows():
        assert told[trial_id].params["lr"] == row["config/lr"]
        if cut_short[trial_id]:
            assert told[trial_id].state is TrialState.PRUNED
            assert told[trial_id].intermediate_values[row["training_iteration"]] == row["loss"]
            continue
        assert told[trial_id].state is TrialState.COMPLETE
        assert told[trial_id].value == row["loss"], "the last result's metric is told"


def test_ray_tune_s_quantised_and_log_integer_domains_map_to_optuna_s_steps_and_logs():
    space = {
        "dropout": nt.quniform(0.0, 0.5, 0.1),
        "depth": nt.qrandint(2, 10, 2),
        "trees": nt.lograndint(10, 1000),
    }
    found = distributions(SearchSpace(space))
    assert found["dropout"] == FloatDistribution(0.0, 0.5, step=0.1)
    assert found["depth"] == IntDistribution(2, 10, step=2)
    assert found["trees"] == IntDistribution(10, 999, log=True), "lograndint excludes high"
    configs = drive(searcher_for(space, num_samples=30), lambda config: config["dropout"])
    assert all(c["depth"] in {2, 4, 6, 8, 10} and 10 <= c["trees"] < 1000 for c in configs)
    assert all(round(c["dropout"], 10) in {0.0, 0.1, 0.2, 0.3, 0.4, 0.5} for c in configs)


@pytest.mark.parametrize(
    ("domain", "reason"),
    [
        (nt.qloguniform(1, 100, 1), "a step or a log scale, not both"),
        (nt.qlograndint(1, 100, 3), "log-scale ints take no step"),
        (nt.randn(), "no normal distribution"),
    ],
)
def test_a_domain_optuna_cannot_model_is_refused_in_one_line(domain, reason):
    with pytest.raises(ValueError, match=f"OptunaSearch cannot model 'x': .*{reason}") as refused:
        searcher_for({"x": domain})
    assert "\n" not in str(refused.value)


def test_trials_the_scheduler_stopped_early_are_pruned_in_the_study(make_tuner):
    searcher = OptunaSearch()
    tuner = make_tuner(
        trainables.learning_curve,
        {"q": nt.uniform(0.1, 1), "max_t": 9},
        metric="loss",
        num_samples=12,
        max_concurrent=1,
        searcher=searcher,
        scheduler=nt.ASHA(max_t=9, grace_period=1, reduction_factor=3),
        executor=nt.ThreadExecutor(),
    )
    tuner.run()
    by_id = {t.user_attrs["nbtune_trial_id"]: t for t in searcher.study.trials}
    iterations = {trial.trial_id: trial.iteration for trial in tuner.trials}
    assert {i for i, t in by_id.items() if t.state.name == "PRUNED"} == {
        i for i, n in iterations.items() if n < 9
    }
    assert any(n < 9 for n in iterations.values()), "ASHA stopped some trials early"
    assert all(t.intermediate_values for t in by_id.values())


def test_a_trial_the_user_stops_is_pruned_and_one_that_meets_the_stop_criteria_completes(
    make_tuner, log
):
    gate = threading.Event()

    def train(config):
        step = 0
        while True:
            step += 1
            nt.report(loss=config["x"] / step)
            if step == 2:
                gate.wait()  # both trials wait here while the test stops trial 0

    searcher = OptunaSearch()
    tuner = make_tuner(
        train,
        {"x": nt.uniform(1, 2)},
        metric="loss",
        num_samples=2,
        searcher=searcher,
        stop={"training_iteration": 4},
        callbacks=[log],
        executor=nt.ThreadExecutor(),
    )
    tuner.start()
    for trial_id in (0, 1):
        log.wait_for(result_of(trial_id, 2))
    tuner.stop(0)
    gate.set()
    assert tuner.wait(30)
    assert [trial.stopped_by for trial in tuner.trials] == ["user", "stop criteria"]
    told = {t.user_attrs["nbtune_trial_id"]: t for t in searcher.study.trials}
    assert told[0].state is TrialState.PRUNED
    x = tuner.get_trial(0).config["x"]
    assert told[0].intermediate_values == pytest.approx({1: x, 2: x / 2, 3: x / 3}), (
        "stopped at its first report after the gate opened"
    )
    assert told[1].state is TrialState.COMPLETE
    assert told[1].value == pytest.approx(tuner.get_trial(1).config["x"] / 4)


@pytest.mark.parametrize("sampler", ["tpe", "TPESampler", 1, dict])
def test_a_sampler_that_is_no_optuna_sampler_is_refused_when_built(sampler):
    with pytest.raises(TypeError) as refused:
        OptunaSearch(sampler=sampler)
    assert str(refused.value) == (
        f"OptunaSearch(sampler={sampler!r}): pass an Optuna sampler object, e.g. "
        "optuna.samplers.TPESampler(seed=0), or none for TPE seeded with the Tuner's seed"
    )
