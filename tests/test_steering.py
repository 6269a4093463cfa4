"""Steering a live search: `Tuner.update_space` while trials run, pause or have finished."""

from __future__ import annotations

import time

import pytest
from test_control import result_of

import nbtune as nt
from nbtune.space import SearchSpace
from nbtune.space_hints import widened

STEPS = 3


def slow_quadratic(config):
    """A few results, then done; the loss is lowest for lr near 0.5."""
    for step in range(1, STEPS + 1):
        time.sleep(0.01)
        nt.report(loss=(config["lr"] - 0.5) ** 2 + 1 / step)


def live_run(make_tuner, log, searcher, **options):
    options.setdefault("num_samples", 10)
    tuner = make_tuner(
        slow_quadratic,
        {"lr": nt.uniform(0, 0.1)},
        metric="loss",
        searcher=searcher,
        executor=nt.ThreadExecutor(),
        callbacks=[log],
        **options,
    )
    tuner.start()
    log.wait_for(result_of(1, 1))
    return tuner


@pytest.mark.parametrize("searcher", [nt.RandomSearch, nt.OptunaSearch])
def test_trials_suggested_after_an_update_sample_the_new_space(make_tuner, log, searcher):
    tuner = live_run(make_tuner, log, searcher())
    before = {trial.trial_id: dict(trial.config) for trial in tuner.trials}
    tuner.update_space({"lr": nt.uniform(0.4, 0.6)})
    assert tuner.wait(60) and tuner.state == "finished"

    frame = tuner.dataframe().set_index("trial_id")
    old, new = frame[frame["space_version"] == 0], frame[frame["space_version"] == 1]
    assert set(old.index) == set(before), "every trial made before keeps the first space"
    assert {t.trial_id: t.config for t in tuner.trials if t.trial_id in before} == before
    assert (old["config/lr"] < 0.1).all()
    assert len(new) == 10 - len(before) and new["config/lr"].between(0.4, 0.6).all()
    commands = [line for line in (tuner.path / "commands.jsonl").read_text().splitlines()]
    assert any('"update_space"' in line and "uniform(0.4, 0.6)" in line for line in commands)


def test_optuna_keeps_learning_from_the_trials_of_the_earlier_space(make_tuner, log):
    tuner = live_run(make_tuner, log, nt.OptunaSearch(), num_samples=6)
    tuner.update_space({"lr": nt.uniform(0.0, 1.0)})
    assert tuner.wait(60)
    study = tuner.searcher.study
    assert len(study.trials) == 6, "one study holds the trials of both spaces"
    assert {t.params["lr"] < 0.1 for t in study.trials} == {True, False}


@pytest.mark.parametrize(
    ("searcher", "first", "second", "message"),
    [
        (
            nt.RandomSearch,
            {"lr": nt.grid([0.01, 0.05])},
            {"lr": nt.uniform(0, 1)},
            "RandomSearch walks a grid point by point over the run",
        ),
        (
            nt.OptunaSearch,
            {"lr": nt.uniform(0, 0.1)},
            {"lr": nt.choice([0.1, 0.2])},
            "OptunaSearch cannot change what kind of parameter 'lr' is",
        ),
    ],
)
def test_a_change_the_searcher_cannot_take_is_refused_and_changes_nothing(
    make_tuner, log, searcher, first, second, message
):
    tuner = make_tuner(
        slow_quadratic,
        first,
        metric="loss",
        num_samples=4,
        searcher=searcher(),
        executor=nt.ThreadExecutor(),
        callbacks=[log],
    )
    tuner.start()
    log.wait_for(result_of(0, 1))
    with pytest.raises(ValueError, match=message):
        tuner.update_space(second)
    assert tuner.wait(60) and tuner.state == "finished"
    assert (tuner.dataframe()["space_version"] == 0).all()


def test_a_restored_run_keeps_the_new_space(make_tuner, log):
    tuner = live_run(make_tuner, log, nt.RandomSearch(), num_samples=4)
    tuner.pause_all()
    tuner.update_space({"lr": nt.uniform(0.4, 0.6)})
    tuner.stop()
    assert tuner.wait(30)
    restored = nt.Tuner.restore(
        tuner.path, slow_quadratic, num_samples=8, executor=nt.ThreadExecutor(), progress=False
    )
    assert restored.space.domains() == {"lr": nt.uniform(0.4, 0.6)}
    restored.run()
    frame = restored.dataframe()
    added = frame[frame["trial_id"] >= len(tuner.trials)]
    assert len(added) and (added["space_version"] == 1).all()
    assert added["config/lr"].between(0.4, 0.6).all()


def test_an_update_before_the_start_is_the_space_of_the_run(make_tuner):
    tuner = make_tuner(
        slow_quadratic,
        {"lr": nt.uniform(0, 0.1)},
        metric="loss",
        num_samples=3,
        executor=nt.ThreadExecutor(),
    )
    tuner.update_space({"lr": nt.uniform(0.4, 0.6)})
    tuner.run()
    frame = tuner.dataframe()
    assert frame["config/lr"].between(0.4, 0.6).all() and (frame["space_version"] == 0).all()


def test_a_define_by_run_space_can_follow_a_dict_space(make_tuner, log):
    tuner = live_run(make_tuner, log, nt.RandomSearch(), num_samples=6)

    def narrow(trial):
        return {"lr": trial.suggest_float("lr", 0.45, 0.55)}

    tuner.update_space(narrow)
    assert tuner.wait(60)
    frame = tuner.dataframe()
    assert frame[frame["space_version"] == 1]["config/lr"].between(0.45, 0.55).all()


def test_with_changes_sets_one_parameter_and_keeps_the_others():
    space = SearchSpace({"lr": nt.uniform(0, 1), "model": {"layers": 2, "act": "relu"}})
    changed = space.with_changes({"model/layers": nt.choice([2, 3]), "wd": 0.1})
    assert changed.parameter_names == ("lr", "model/layers", "model/act", "wd")
    assert changed.domains()["model/layers"] == nt.choice([2, 3])


def rewards_a_high_lr(config):
    nt.report(loss=-config["lr"] + abs(config["wd"] - 0.5))


def test_space_hints_name_the_edge_the_best_trials_crowd(make_tuner):
    high_lrs = [0.009, 0.008, 0.007, 0.0065]
    points = [{"lr": lr, "wd": 0.5} for lr in [*high_lrs, 0.005, 0.001, 0.0002]]
    tuner = make_tuner(
        rewards_a_high_lr,
        {"lr": nt.loguniform(1e-4, 1e-2), "wd": nt.uniform(0, 1)},
        metric="loss",
        num_samples=len(points),
        points_to_evaluate=points,
        executor=nt.ThreadExecutor(),
    )
    assert tuner.run() is None and tuner.space_hints() == [
        {
            "param": "lr",
            "edge": "high",
            "share": 0.8,
            "message": "4 of the 5 best trials have lr in the highest 10% of "
            "loguniform(0.0001, 0.01): widen it, e.g. to loguniform(0.0001, 0.1)",
            "widened": nt.loguniform(1e-4, 0.1),
        }
    ], "none for wd, whose best values sit in the middle"
    wider = tuner.space.with_changes({"lr": tuner.space_hints()[0]["widened"]})
    assert wider.domains()["lr"] == nt.loguniform(1e-4, 0.1)


@pytest.mark.parametrize(
    ("domain", "edge", "wider"),
    [
        (nt.uniform(0, 1), "low", nt.uniform(-1, 1)),
        (nt.uniform(0, 1), "high", nt.uniform(0, 2)),
        (nt.loguniform(1e-3, 1e-1), "low", nt.loguniform(1e-4, 1e-1)),
        (nt.randint(2, 6), "high", nt.randint(2, 10)),
        (nt.lograndint(2, 64), "low", nt.lograndint(1, 64)),
        (nt.qrandint(10, 50, 10), "high", nt.qrandint(10, 90, 10)),
    ],
)
def test_a_bound_moves_out_by_the_width_or_tenfold_on_a_log_scale(domain, edge, wider):
    assert widened(domain, edge) == wider
