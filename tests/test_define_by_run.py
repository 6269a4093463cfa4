"""Define-by-run spaces: a function that suggests values with any control flow, sampled by
RandomSearch and run natively by OptunaSearch, whose sampler then models the conditionals."""

from __future__ import annotations

import pytest
import trainables

import nbtune as nt
from nbtune.define_by_run import DefineByRunSpace

BRANCHES = ({"classifier", "svc_c"}, {"classifier", "rf_depth"})


def conditional_tuner(make_tuner, **options):
    return make_tuner(
        trainables.conditional_score,
        trainables.conditional_space,
        metric="loss",
        executor=nt.ThreadExecutor(),
        **options,
    )


def suggested(config):
    return set(config) - {"n_jobs"}


def test_random_search_runs_the_function_and_each_config_has_only_its_branch(make_tuner):
    tuner = conditional_tuner(make_tuner, num_samples=16, seed=3)
    tuner.run()
    configs = [trial.config for trial in tuner.trials]
    assert {frozenset(suggested(c)) for c in configs} == {frozenset(b) for b in BRANCHES}
    assert all(c["n_jobs"] == 1 for c in configs), "what the function returns joins the config"
    assert all(1e-3 <= c["svc_c"] < 1e3 for c in configs if "svc_c" in c)
    assert all(2 <= c["rf_depth"] <= 32 for c in configs if "rf_depth" in c)
    frame = tuner.dataframe()
    assert str(frame["config/rf_depth"].dtype) == "Int64", "ints beside missing values"
    svc = frame["config/classifier"] == "SVC"
    assert frame.loc[svc, "config/rf_depth"].isna().all()
    assert frame.loc[~svc, "config/svc_c"].isna().all()


def test_the_same_seed_gives_the_same_configs():
    space = DefineByRunSpace(trainables.conditional_space)
    assert [space.config(i, 7) for i in range(10)] == [space.config(i, 7) for i in range(10)]
    assert space.config(0, 7) != space.config(0, 8) or space.config(1, 7) != space.config(1, 8)


def test_optuna_runs_the_function_against_its_study_so_trials_carry_only_their_branch(
    make_tuner,
):
    searcher = nt.OptunaSearch()
    tuner = conditional_tuner(make_tuner, num_samples=30, seed=0, searcher=searcher)
    tuner.run()
    study_params = [set(trial.params) for trial in searcher.study.trials]
    assert len(study_params) == 30
    assert all(params in BRANCHES for params in study_params), "conditionals, not a flat space"
    assert {frozenset(p) for p in study_params} == {frozenset(b) for b in BRANCHES}
    best = tuner.best_config
    assert best["classifier"] == "SVC" and 0.1 < best["svc_c"] < 10, best


def test_a_define_by_run_run_is_restored_and_goes_on(make_tuner, runs):
    tuner = conditional_tuner(make_tuner, num_samples=4, seed=1, name="dbr")
    tuner.run()
    first = [trial.config for trial in tuner.trials]
    restored = nt.Tuner.restore(
        runs / "dbr", trainables.conditional_score, num_samples=8, progress=False
    )
    restored.run()
    configs = [trial.config for trial in restored.trials]
    assert len(configs) == 8 and configs[:4] == first
    assert all(suggested(c) in BRANCHES for c in configs)


@pytest.mark.parametrize(
    ("space", "message"),
    [
        (
            lambda trial: [trial.suggest_int("x", 0, 5), trial.suggest_int("x", 0, 9)],
            r"the space suggests 'x' twice, as qrandint\(0, 5, 1\) and as qrandint\(0, 9, 1\); "
            "give each range its own name",
        ),
        (
            lambda trial: 1 / 0,
            r"the space function .*<lambda> raised ZeroDivisionError: division by zero",
        ),
        (lambda trial: ["x"], r"returned \['x'\]; return a dict of constants, or None"),
        (
            lambda trial: trial.suggest_float("x", 1, 10, log=True, step=1),
            r"a log scale takes no step; drop one of them",
        ),
    ],
)
def test_a_space_function_used_wrongly_is_a_one_line_error_when_the_tuner_is_built(
    make_tuner, space, message
):
    with pytest.raises((ValueError, TypeError), match=message) as refused:
        make_tuner(trainables.count_up, space, metric="loss")
    assert "\n" not in str(refused.value)


def test_the_union_of_parameters_is_known_to_the_run(make_tuner):
    tuner = conditional_tuner(make_tuner, num_samples=12, seed=3)
    tuner.run()
    assert set(tuner.space.parameter_names) == {"classifier", "svc_c", "rf_depth", "n_jobs"}
    columns = {c for c in tuner.dataframe().columns if c.startswith("config/")}
    assert columns == {f"config/{name}" for name in tuner.space.parameter_names}


def stepped_space(trial):
    trial.suggest_float("dropout", 0.05, 1.0, step=0.1)
    trial.suggest_int("units", 1, 10, step=3)


def stepped_score(config):
    nt.report(loss=config["dropout"] * config["units"])


@pytest.mark.filterwarnings("ignore:The distribution is specified by:UserWarning")
@pytest.mark.parametrize("searcher", [nt.RandomSearch, nt.OptunaSearch])
def test_steps_count_from_low_and_high_comes_down_to_the_last_step_as_in_optuna(
    make_tuner, searcher
):
    tuner = make_tuner(
        stepped_score,
        stepped_space,
        metric="loss",
        num_samples=40,
        searcher=searcher(),
        executor=nt.ThreadExecutor(),
    )
    tuner.run()
    frame = tuner.dataframe()
    steps = (frame["config/dropout"] - 0.05) / 0.1  # Optuna's own values carry float noise
    assert ((steps - steps.round()).abs() < 1e-9).all() and steps.between(0, 9 + 1e-9).all()
    assert steps.round().nunique() > 3, "several steps drawn, not one"
    assert set(frame["config/units"]) <= {1, 4, 7, 10}
