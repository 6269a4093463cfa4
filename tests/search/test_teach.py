"""Everything teaches the searcher: points to evaluate, hand-added and forked trials, and the
trials of an earlier run (warm starts) reach Optuna's study; random search repeats none of an
earlier run's configurations."""

from __future__ import annotations

import re

import pytest
import trainables
from optuna.trial import TrialState
from test_control import result_of

import nbtune as nt
from nbtune.events import TrialResult

SPACE = {"lr": nt.loguniform(1e-4, 1e-1), "layers": nt.randint(1, 4)}


def quadratic_tuner(make_tuner, searcher, **options):
    return make_tuner(
        trainables.quadratic,
        SPACE,
        metric="loss",
        searcher=searcher,
        executor=nt.ThreadExecutor(),
        **options,
    )


def study_configs(searcher):
    return [trial.params for trial in searcher.study.trials]


def test_hand_added_and_forked_trials_are_in_optuna_s_study(make_tuner, log):
    searcher = nt.OptunaSearch()
    tuner = quadratic_tuner(make_tuner, searcher, num_samples=4, callbacks=[log], max_concurrent=1)
    best = {"lr": 0.01, "layers": 1}
    added = tuner.add_trial(best)
    assert added == 0, "added before start: it runs first"
    tuner.start()
    log.wait_for(result_of(1, 2))
    forked = tuner.fork(1, {"lr": 0.02})
    assert tuner.wait(60)
    assert len(searcher.study.trials) == len(tuner.trials) == 6
    assert {"lr": 0.01, "layers": 1} in study_configs(searcher)
    told = {t.user_attrs.get("nbtune_trial_id"): t for t in searcher.study.trials}
    assert told[added].value == pytest.approx(tuner.get_trial(added).last_result["loss"])
    assert told[forked].state.is_finished()
    assert searcher.study.best_trial.params == best, "the best one was the hand-added one"


def test_points_to_evaluate_run_first_and_count_toward_the_budget(make_tuner):
    searcher = nt.OptunaSearch()
    points = [{"lr": 0.01, "layers": 2}, {"lr": 0.001}]
    tuner = quadratic_tuner(
        make_tuner, searcher, num_samples=5, points_to_evaluate=points, max_concurrent=1
    )
    tuner.run()
    configs = [trial.config for trial in tuner.trials]
    assert len(configs) == 5
    assert configs[0] == {"lr": 0.01, "layers": 2}
    assert configs[1]["lr"] == 0.001 and configs[1]["layers"] in {1, 2, 3}, "layers drawn"
    assert study_configs(searcher)[0] == {"lr": 0.01, "layers": 2}
    assert all(trial.state.is_finished() for trial in searcher.study.trials)


def test_random_search_takes_points_first_too(make_tuner):
    points = [{"lr": 0.05, "layers": 3}]
    tuner = quadratic_tuner(make_tuner, nt.RandomSearch(), num_samples=3, points_to_evaluate=points)
    tuner.run()
    assert tuner.get_trial(0).config == {"lr": 0.05, "layers": 3}
    assert len(tuner.trials) == 3


def test_a_point_with_an_unknown_parameter_is_a_one_line_error(make_tuner):
    with pytest.raises(ValueError, match=r"points_to_evaluate: 'depth' is not a parameter"):
        quadratic_tuner(make_tuner, nt.RandomSearch(), points_to_evaluate=[{"depth": 3}])


@pytest.mark.parametrize(
    ("point", "message"),
    [
        ({"lr": 0.5}, "'lr' = 0.5 is outside loguniform(0.0001, 0.1)"),
        ({"layers": 4}, "'layers' = 4 is outside randint(1, 4)"),
        ({"lr": 0.01, "layers": 2.0}, "'layers' = 2.0 is outside randint(1, 4)"),
    ],
)
@pytest.mark.parametrize("searcher", [nt.RandomSearch, nt.OptunaSearch])
def test_a_point_outside_its_domain_is_a_one_line_error_when_the_tuner_is_built(
    make_tuner, searcher, point, message
):
    with pytest.raises(ValueError, match=re.escape(f"points_to_evaluate: {message}")) as refused:
        quadratic_tuner(make_tuner, searcher(), points_to_evaluate=[{"lr": 0.01}, point])
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize("through", ["path", "analysis"])
def test_a_warm_start_tells_optuna_the_earlier_trials_before_its_first_suggestion(
    make_tuner, runs, through
):
    earlier = quadratic_tuner(make_tuner, nt.RandomSearch(), num_samples=5, name="earlier")
    earlier.run()
    source = runs / "earlier" if through == "path" else nt.load(runs / "earlier")
    searcher = nt.OptunaSearch()
    tuner = quadratic_tuner(
        make_tuner, searcher, num_samples=2, warm_start=source, name="later", seed=1
    )
    tuner.start()
    assert len(searcher.study.trials) >= 5
    assert tuner.wait(60)
    earlier_configs = [trial.config for trial in earlier.trials]
    assert study_configs(searcher)[:5] == earlier_configs
    assert len(searcher.study.trials) == 7


def test_random_search_never_repeats_a_configuration_of_the_earlier_run(make_tuner):
    space = {"x": nt.choice([1, 2, 3, 4, 5, 6])}

    def tuner_of(name, **options):
        return make_tuner(
            trainables.count_up,
            {**space, "steps": 1},
            metric="loss",
            name=name,
            executor=nt.ThreadExecutor(),
            **options,
        )

    earlier = tuner_of("first", num_samples=3, seed=0)
    earlier.run()
    before = {trial.config["x"] for trial in earlier.trials}
    later = tuner_of("second", num_samples=3, seed=0, warm_start=earlier.path)
    later.run()
    after = {trial.config["x"] for trial in later.trials}
    assert not before & after, (before, after)


def test_a_limited_and_a_repeated_optuna_search_share_the_study_of_the_inner_one(make_tuner):
    inner = nt.OptunaSearch()
    limited = nt.ConcurrencyLimiter(inner, 2)
    tuner = quadratic_tuner(make_tuner, limited, num_samples=3)
    tuner.run()
    assert limited.study is inner.study and len(inner.study.trials) == 3
    repeated_inner = nt.OptunaSearch()
    repeated = nt.Repeater(repeated_inner, 2)
    tuner = quadratic_tuner(make_tuner, repeated, num_samples=2, name="repeated")
    tuner.run()
    assert repeated.study is repeated_inner.study and len(repeated.study.trials) == 2
    with pytest.raises(AttributeError, match="RandomSearch has no study"):
        _ = nt.ConcurrencyLimiter(nt.RandomSearch(), 2).study


def test_a_retried_trial_is_told_to_optuna_once(make_tuner, tmp_path):
    searcher = nt.OptunaSearch()
    space = {"steps": 8, "marker": str(tmp_path / "failed-once"), "x": nt.uniform(0, 1)}
    tuner = make_tuner(
        trainables.fails_once,
        space,
        metric="loss",
        searcher=searcher,
        num_samples=2,
        max_failures=1,
        max_concurrent=1,
        executor=nt.ThreadExecutor(),
    )
    tuner.run()
    assert tuner.get_trial(0).attempts == 2, "the first trial failed once and was retried"
    assert len(searcher.study.trials) == 2
    assert all(trial.state.name == "COMPLETE" for trial in searcher.study.trials)


DIGITS = {"x": nt.choice(list(range(10))), "steps": 2}


def restored_after_its_first_result(make_tuner, searcher):
    """A run of DIGITS warm-started from one that tried x = 0..6, with the points x = 8 and
    x = 9, stopped at its first result and restored: the point x = 9 is still to come."""
    earlier = make_tuner(
        trainables.count_up,
        {**DIGITS, "x": nt.grid(list(range(7)))},
        metric="loss",
        name="earlier",
        executor=nt.ThreadExecutor(),
    )
    earlier.run()
    tuner = make_tuner(
        trainables.count_up,
        DIGITS,
        metric="loss",
        name="later",
        searcher=searcher,
        num_samples=6,
        max_concurrent=1,
        warm_start=earlier.path,
        points_to_evaluate=[{"x": 8}, {"x": 9}],
        executor=nt.ThreadExecutor(),
    )

    def stop_at_the_first_result(event):
        if isinstance(event, TrialResult):
            tuner.stop()

    tuner.subscribe(stop_at_the_first_result)
    tuner.run()
    assert [trial.config["x"] for trial in tuner.trials] == [8]
    again = nt.Tuner.restore(
        tuner.path, trainables.count_up, executor=nt.ThreadExecutor(), progress=False
    )
    again.run()
    return [trial.config["x"] for trial in again.trials], again.searcher


def test_a_restored_random_search_keeps_its_points_and_what_the_earlier_run_tried(make_tuner):
    tried, _ = restored_after_its_first_result(make_tuner, nt.RandomSearch())
    assert tried[:2] == [8, 9], "the point left over runs first after the restore"
    assert len(tried) == 6
    assert set(tried) <= {7, 8, 9}, "none of the earlier run's x = 0..6 is drawn again"


def test_a_restored_optuna_search_keeps_its_points_and_the_earlier_trials(make_tuner):
    tried, searcher = restored_after_its_first_result(make_tuner, nt.OptunaSearch())
    assert tried[:2] == [8, 9], "the point left over runs first after the restore"
    assert len(tried) == 6
    study = [trial.params["x"] for trial in searcher.study.trials]
    assert study == list(range(7)) + tried, "the earlier trials stay in the study, first"


def test_a_warm_start_tells_the_earlier_trials_asha_cut_short_as_pruned(make_tuner):
    space = {"q": nt.uniform(1, 6), "max_t": 20}

    def tuner_of(name, searcher, **options):
        return make_tuner(
            trainables.learning_curve,
            space,
            metric="loss",
            name=name,
            searcher=searcher,
            max_concurrent=1,
            executor=nt.ThreadExecutor(),
            **options,
        )

    earlier = tuner_of("cut", nt.RandomSearch(), num_samples=12, scheduler=nt.ASHA(max_t=9))
    earlier.run()
    searcher = nt.OptunaSearch()
    tuner_of("taught", searcher, num_samples=1, warm_start=earlier.path).run()
    told = searcher.study.trials[:12]
    assert [t.params["q"] for t in told] == [trial.config["q"] for trial in earlier.trials]
    assert any(trial.cut_short for trial in earlier.trials), "ASHA cut some"
    for trial, study_trial in zip(earlier.trials, told, strict=True):
        if trial.cut_short:
            assert study_trial.state is TrialState.PRUNED
            loss = trial.last_result["loss"]
            assert study_trial.intermediate_values == {trial.iteration: loss}
        else:
            assert study_trial.state is TrialState.COMPLETE
            assert study_trial.value == trial.last_result["loss"]
