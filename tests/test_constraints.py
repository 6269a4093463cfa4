"""Outcome constraints: `Tuner(constraints={"latency_ms": (None, 10)})` bounds reported keys;
the `feasible` column, and the best of a run (`best_*`, `get_best_trial`, the Pareto front)
taken among feasible trials only, live, loaded from disk and restored."""

from __future__ import annotations

import json

import pytest

import nbtune as nt
from nbtune.constraints import Constraints

MODELS = [
    {"loss": 0.1, "latency_ms": 30.0},  # the best loss, far too slow
    {"loss": 0.3, "latency_ms": 8.0},  # the best of those fast enough
    {"loss": 0.5, "latency_ms": 2.0},
    {"loss": 0.2, "latency_ms": 12.0},  # just too slow
]
FAST = {"latency_ms": (None, 10)}


def model(config):
    """Reports one of `MODELS` twice: its loss and latency are the configuration's."""
    for _ in range(2):
        nt.report(**MODELS[config["i"]])


def test_best_and_feasible_column_ignore_trials_that_miss_a_bound(make_tuner, runs):
    tuner = make_tuner(model, {"i": nt.grid(range(4))}, metric="loss", constraints=FAST)
    tuner.run()

    frame = tuner.dataframe().set_index("trial_id")
    assert frame["feasible"].tolist() == [False, True, True, False]
    assert str(frame["feasible"].dtype) == "boolean"
    assert tuner.best_config == {"i": 1}
    assert tuner.best_result["loss"] == 0.3
    assert tuner.best_trial.trial_id == 1
    assert tuner.get_best_trial(scope="all").trial_id == 1
    assert [trial.trial_id for trial in tuner.best_trials] == [1]
    assert nt.runs(runs)["best"].tolist() == [0.3]


def test_a_run_without_constraints_has_no_feasible_column(make_tuner):
    tuner = make_tuner(model, {"i": nt.grid(range(4))}, metric="loss")
    tuner.run()
    assert "feasible" not in tuner.dataframe().columns
    assert tuner.best_config == {"i": 0}


def test_load_and_restore_keep_the_constraints(make_tuner):
    tuner = make_tuner(
        model, {"i": nt.grid(range(4))}, metric="loss", constraints=FAST, num_samples=1
    )
    tuner.run()
    spec = json.loads((tuner.path / "experiment.json").read_text())
    assert spec["constraints"] == {"latency_ms": [None, 10.0]}

    loaded = nt.load(tuner.path)
    assert loaded.constraints == tuner.constraints
    assert loaded.dataframe()["feasible"].tolist() == [False, True, True, False]
    assert loaded.best_config == {"i": 1}
    assert loaded.get_best_trial().trial_id == 1

    restored = nt.Tuner.restore(tuner.path, model, num_samples=2, progress=False)
    assert restored.constraints == tuner.constraints
    restored.run()
    frame = restored.dataframe()
    assert frame["feasible"].tolist() == [False, True, True, False] * 2
    assert restored.best_result["loss"] == 0.3

    looser = nt.Tuner.restore(tuner.path, model, constraints={"latency_ms": (None, 40)})
    looser.run(display=False)
    assert looser.best_result["loss"] == 0.1
    assert nt.load(tuner.path).best_result["loss"] == 0.1, "the spec has the new bounds"


def drifting(config):
    """Fast at first, then too slow: its last result, which judges it, misses the bound."""
    nt.report(loss=0.1, latency_ms=5.0)
    nt.report(loss=0.05, latency_ms=50.0 if config["drifts"] else 5.0)


def test_a_trial_whose_last_result_misses_a_bound_gives_up_the_best(make_tuner):
    tuner = make_tuner(
        drifting,
        {"drifts": nt.grid([True, False])},
        metric="loss",
        constraints=FAST,
        executor=nt.ThreadExecutor(),
        max_concurrent=1,
    )
    tuner.run()
    assert tuner.dataframe()["feasible"].tolist() == [False, True]
    assert tuner.best_trial.trial_id == 1
    assert nt.load(tuner.path).best_trial.trial_id == 1


def accuracy_curve(config):
    """Accuracy that climbs over the bound only at the end, latency never reported."""
    nt.report(loss=1.0, acc=0.5)
    nt.report(loss=config["loss"], acc=config["acc"])


def test_an_unreported_key_makes_a_trial_infeasible_and_the_metric_may_be_bounded(make_tuner):
    tuner = make_tuner(
        accuracy_curve,
        {"loss": nt.grid([0.2, 0.4]), "acc": nt.grid([0.95, 0.8])},
        metric="loss",
        constraints={"acc": (0.9, None), "loss": (None, 0.3)},
        executor=nt.ThreadExecutor(),
    )
    tuner.run()
    frame = tuner.dataframe().set_index(["config/loss", "config/acc"])
    assert frame["feasible"].to_dict() == {
        (0.2, 0.95): True,
        (0.2, 0.8): False,
        (0.4, 0.95): False,
        (0.4, 0.8): False,
    }
    assert tuner.best_config == {"loss": 0.2, "acc": 0.95}

    missing = make_tuner(
        accuracy_curve,
        {"loss": 0.2, "acc": 0.95},
        metric="loss",
        constraints={"latency_ms": (None, 10)},
        executor=nt.ThreadExecutor(),
    )
    missing.run()
    assert missing.dataframe()["feasible"].tolist() == [False]
    assert missing.best_result is None and missing.get_best_trial() is None


def two_objectives(config):
    nt.report(**MODELS[config["i"]], size_mb=(3 - config["i"]) * 10.0)


def test_the_pareto_front_leaves_infeasible_trials_out(make_tuner):
    tuner = make_tuner(
        two_objectives,
        {"i": nt.grid(range(4))},
        metric=["loss", "size_mb"],
        mode=["min", "min"],
        constraints=FAST,
        executor=nt.ThreadExecutor(),
    )
    tuner.run()
    frame = tuner.dataframe()
    # Unconstrained, trials 0 and 3 would be the front, and would dominate 1 and 2.
    assert frame["pareto"].tolist() == [False, True, True, False]
    assert [trial.trial_id for trial in tuner.best_trials] == [1, 2]
    assert [trial.trial_id for trial in nt.load(tuner.path).best_trials] == [1, 2]


def test_the_optuna_study_carries_the_violations(make_tuner):
    optuna = pytest.importorskip("optuna")
    tuner = make_tuner(
        model,
        {"i": nt.grid(range(4))},
        metric="loss",
        constraints=FAST,
        executor=nt.ThreadExecutor(),
    )
    tuner.run()
    study = tuner.to_optuna_study()
    from optuna.study._constrained_optimization import _get_feasible_trials

    assert [trial.number for trial in _get_feasible_trials(study.trials)] == [1, 2]
    assert study.best_trial.number == 1
    assert optuna.visualization.plot_optimization_history(study) is not None


@pytest.mark.parametrize(
    ("constraints", "error", "says"),
    [
        ([("latency_ms", 10)], TypeError, "pass a dict of reported key to (low, high)"),
        ({"latency_ms": 10}, ValueError, "give a pair (low, high)"),
        ({"latency_ms": (1, 2, 3)}, ValueError, "give a pair (low, high)"),
        ({"latency_ms": (10, 1)}, ValueError, "low is above high; swap them"),
        ({"latency_ms": (None, None)}, ValueError, "bounds nothing"),
        ({"latency_ms": (None, "10")}, ValueError, "not a finite number"),
        ({"latency_ms": (float("nan"), 1)}, ValueError, "not a finite number"),
        ({3: (None, 1)}, TypeError, "is not text"),
    ],
)
def test_bad_constraints_get_one_line_before_anything_is_written(
    make_tuner, runs, constraints, error, says
):
    with pytest.raises(error) as raised:
        make_tuner(model, {"i": nt.grid(range(4))}, metric="loss", constraints=constraints)
    message = str(raised.value)
    assert says in message and "\n" not in message
    assert not runs.exists() or not any(runs.iterdir())


def test_violations_follow_optunas_convention():
    constraints = Constraints.parse({"latency_ms": (None, 10), "acc": (0.9, 1.0)})
    assert constraints.violations({"latency_ms": 12, "acc": 0.95}) == {
        "latency_ms": 2.0,
        "acc": pytest.approx(-0.05),
    }
    assert constraints.feasible({"latency_ms": 10, "acc": 0.9})
    assert constraints.violations({"acc": float("nan")})["acc"] == float("inf")
    assert not constraints.feasible({"latency_ms": 1})
