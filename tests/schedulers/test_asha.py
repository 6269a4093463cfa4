"""ASHA: its cuts at each rung match a computation by hand."""

from __future__ import annotations

import pickle

import pytest
import trainables

import nbtune as nt
from nbtune.events import TrialResult
from nbtune.schedulers.asha import bracket_shares, milestones

# Trials run one at a time in grid order, so each meets exactly the peers that came before.
# Loss at step t is q * (1 + 1/t): the lower q, the better at every step. Rungs at t = 1 and 3
# (rf = 3), stop at 9. Of the n trials at a rung so far (the newcomer included), the best
# max(1, n // 3) go on:
#   rung 1: q=5 n=1 first; q=3 n=2 best; q=6 n=3 not best: cut; q=1 n=4 best;
#           q=4 n=5 third (1, 3 better): cut; q=2 n=6 keep 2, second; q=2.5 n=7 keep 2, third: cut
#   rung 3: q=5 first; q=3 n=2 best; q=1 n=3 best; q=2 n=4 keep 1, second (q=1 better): cut
QUALITIES = [5, 3, 6, 1, 4, 2, 2.5]
LAST_STEP = {0: 9, 1: 9, 2: 1, 3: 9, 4: 1, 5: 3, 6: 1}


def run_qualities(make_tuner, asha):
    """Run the trials of QUALITIES one at a time, in order, under `asha`."""
    tuner = make_tuner(
        trainables.learning_curve,
        {"q": nt.grid(QUALITIES), "max_t": 20},
        metric="loss",
        scheduler=asha,
        max_concurrent=1,
    )
    tuner.run()
    return tuner


def test_asha_cuts_exactly_the_trials_a_hand_computation_cuts(make_tuner):
    asha = nt.ASHA(max_t=9, grace_period=1, reduction_factor=3)
    tuner = run_qualities(make_tuner, asha)

    frame = tuner.dataframe().set_index("trial_id")
    assert frame["training_iteration"].to_dict() == LAST_STEP
    assert (frame["status"] == "TERMINATED").all()
    assert asha.promoted() == [[0, 1, 2, 3, 4, 5, 6], [0, 1, 3, 5]]
    assert len(tuner.history()) == sum(LAST_STEP.values()) == 33


# With bootstrap_count=2 no trial goes on from a rung unless 2 others reached it before:
#   rung 1: q=5 n=1 and q=3 n=2: cut; q=6 n=3 not best: cut; q=1 n=4 best; q=4 n=5: cut;
#           q=2 n=6 second of keep 2; q=2.5 n=7: cut
#   rung 3: q=1 n=1 and q=2 n=2: cut. In a run this small, no trial runs in full.
BOOTSTRAPPED_LAST_STEP = {0: 1, 1: 1, 2: 1, 3: 3, 4: 1, 5: 3, 6: 1}


def test_with_a_bootstrap_count_no_trial_goes_on_unjudged(make_tuner):
    asha = nt.ASHA(max_t=9, grace_period=1, reduction_factor=3, bootstrap_count=2)
    tuner = run_qualities(make_tuner, asha)

    frame = tuner.dataframe().set_index("trial_id")
    assert frame["training_iteration"].to_dict() == BOOTSTRAPPED_LAST_STEP
    assert asha.promoted() == [[0, 1, 2, 3, 4, 5, 6], [3, 5]]


# By default, when a model-based searcher learns from the trials, ASHA bootstraps a rung that
# the run's planned trials will crowd. The seven qualities run first (points to evaluate) of
# 28 planned trials: all are expected at rung 1 (28 >= 27: the first two are cut there, then as
# with bootstrap_count=2), a third of them at rung 3 (9: the first arrival goes on).
#   rung 1: q=5, q=3 cut; q=6 n=3 cut; q=1 n=4 best; q=4 cut; q=2 second of 2; q=2.5 cut
#   rung 3: q=1 first, goes on; q=2 n=2 not best: cut
CROWDED_LAST_STEP = {0: 1, 1: 1, 2: 1, 3: 9, 4: 1, 5: 3, 6: 1}


@pytest.mark.parametrize(
    ("searcher", "bootstrapped", "last_steps"),
    [(nt.OptunaSearch, [2, 0], CROWDED_LAST_STEP), (nt.RandomSearch, [0, 0], LAST_STEP)],
    ids=["tpe learns: crowded rung bootstrapped", "random search: never"],
)
def test_the_rungs_a_big_run_crowds_judge_every_arrival_when_the_searcher_learns(
    make_tuner, searcher, bootstrapped, last_steps
):
    asha = nt.ASHA(max_t=9, grace_period=1, reduction_factor=3)
    tuner = make_tuner(
        trainables.learning_curve,
        {"q": nt.uniform(1, 7), "max_t": 20},
        metric="loss",
        num_samples=28,
        points_to_evaluate=[{"q": q} for q in QUALITIES],
        searcher=searcher(),
        scheduler=asha,
        max_concurrent=1,
        executor=nt.ThreadExecutor(),
    )
    tuner.run()
    assert [asha.bootstrap_at(0, rung) for rung in range(2)] == bootstrapped
    last_step = tuner.dataframe().set_index("trial_id")["training_iteration"].to_dict()
    assert {trial_id: last_step[trial_id] for trial_id in range(7)} == last_steps


def test_a_time_budget_or_an_explicit_count_turns_the_automatic_bootstrap_off():
    automatic, never = nt.ASHA(max_t=27), nt.ASHA(max_t=27, bootstrap_count=0)
    for asha in (automatic, never):
        asha.setup("loss", "min")
        asha.plan(1000, model_based=True)
    assert [automatic.bootstrap_at(0, rung) for rung in range(3)] == [2, 2, 2]
    assert [never.bootstrap_at(0, rung) for rung in range(3)] == [0, 0, 0]
    automatic.plan(None, model_based=True)  # the runner's word when a time budget is set
    assert [automatic.bootstrap_at(0, rung) for rung in range(3)] == [0, 0, 0]
    four = nt.ASHA(max_t=64, reduction_factor=4, brackets=2)
    four.plan(200, model_based=True)  # brackets of 2/3 and 1/3: 133 and 67 at the first rungs
    assert [four.bootstrap_at(0, rung) for rung in range(3)] == [3, 3, 0]
    assert [four.bootstrap_at(1, rung) for rung in range(2)] == [3, 0]


def test_the_runner_tells_asha_its_plan_as_the_run_starts_and_after_extend(make_tuner, log):
    asha = nt.ASHA(max_t=1000)
    tuner = make_tuner(
        trainables.forever,
        {"lr": nt.uniform(0, 1)},
        metric="loss",
        num_samples=1,
        searcher=nt.ConcurrencyLimiter(nt.OptunaSearch(), 1),
        scheduler=asha,
        max_concurrent=1,
        executor=nt.ThreadExecutor(),
    )
    tuner.subscribe(log)
    tuner.start()
    log.wait_for(lambda event: isinstance(event, TrialResult))
    assert asha.bootstrap_at(0, 0) == 0, "1 trial planned"
    tuner.extend(40)
    assert asha.bootstrap_at(0, 0) == 2, "41 planned: rung 1 is crowded"
    tuner.stop()
    assert tuner.wait(30)


def test_an_asha_saved_before_bootstrap_count_existed_lets_the_first_arrival_on():
    asha = nt.ASHA(max_t=9)
    asha.setup("loss", "min")
    del asha.__dict__["bootstrap_count"]
    restored = pickle.loads(pickle.dumps(asha))
    first = {"loss": 1.0, "training_iteration": 1}
    assert restored.on_result(nt.Trial(0, {}), first).name == "CONTINUE"


def test_brackets_start_their_rungs_later_and_share_trials_as_hyperbands_brackets_do():
    asha = nt.ASHA(max_t=100, grace_period=1, reduction_factor=3, brackets=3)
    assert [[rung.milestone for rung in bracket] for bracket in asha.rungs] == [
        [1, 3, 9, 27, 81],
        [3, 9, 27, 81],
        [9, 27, 81],
    ]
    asha.setup("loss", "min")
    for trial_id in range(17):
        asha.on_trial_add(nt.Trial(trial_id, {}))
        asha.on_result(nt.Trial(trial_id, {}), {"loss": 1.0, "training_iteration": 9})
    # Hyperband's brackets for s_max = 2, eta = 3 hold ceil(3/(s+1) * 3**s) = 9, 5 and 3 trials.
    assert asha.promoted(0) == [[], [], [0, 2, 4, 6, 8, 10, 12, 14, 16], [], []], (
        "only the highest rung reached counts"
    )
    assert asha.promoted(1) == [[], [1, 5, 9, 11, 15], [], []]
    assert asha.promoted(2) == [[3, 7, 13], [], []]
    assert [round(share * 49) for share in bracket_shares(4, 3)] == [27, 12, 6, 4]


def test_a_diverged_trial_is_cut_and_never_sets_the_bar():
    asha = nt.ASHA(max_t=9)
    asha.setup("loss", "min")
    first = nt.Trial(0, {})
    assert asha.on_result(first, {"loss": float("nan"), "training_iteration": 1}).name == "CONTINUE"
    assert (
        asha.on_result(nt.Trial(1, {}), {"loss": 5.0, "training_iteration": 1}).name == "CONTINUE"
    )
    assert asha.on_result(nt.Trial(2, {}), {"loss": 1e9, "training_iteration": 1}).name == "STOP"


def test_ties_go_the_newcomers_way_and_rungs_follow_the_reduction_factor():
    asha = nt.ASHA(max_t=27, grace_period=1, reduction_factor=3)
    asha.setup("loss", "min")
    decisions = [
        asha.on_result(nt.Trial(trial_id, {}), {"loss": 1.0, "training_iteration": 1}).name
        for trial_id in range(3)
    ]
    assert decisions == ["CONTINUE"] * 3
    assert milestones(1, 3, 27) == [1, 3, 9]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"max_t": 0}, r"ASHA\(max_t=0\): pass a positive number"),
        ({"max_t": float("inf")}, r"ASHA\(max_t=inf\): pass a finite number"),
        ({"max_t": 9, "grace_period": float("inf")}, r"grace_period=inf\): pass a finite number"),
        ({"max_t": 9, "grace_period": 10}, r"grace_period=10\): must not exceed max_t=9"),
        ({"max_t": 9, "reduction_factor": 1}, r"reduction_factor=1\): pass a number above 1"),
        ({"max_t": 9, "brackets": 1.5}, r"brackets=1.5\): pass a positive integer"),
        ({"max_t": 9, "bootstrap_count": -1}, r"bootstrap_count=-1\): pass an integer >= 0, or"),
        ({"max_t": 9, "bootstrap_count": 2.0}, r"bootstrap_count=2.0\): pass an integer >= 0, or"),
    ],
)
def test_bad_arguments_get_one_line_errors(arguments, message):
    with pytest.raises(ValueError, match=message):
        nt.ASHA(**arguments)


def test_a_scheduler_that_compares_trials_needs_a_metric(make_tuner):
    with pytest.raises(ValueError, match=r"ASHA compares trials by their metric: pass metric="):
        make_tuner(trainables.learning_curve, {"q": 1}, scheduler=nt.ASHA(max_t=9))


def test_a_missing_time_attr_fails_the_run_with_a_clear_error(make_tuner):
    tuner = make_tuner(
        trainables.learning_curve, {"q": 1}, metric="loss", scheduler=nt.ASHA(9, time_attr="epoch")
    )
    with pytest.raises(RuntimeError, match=r"but not ASHA's time_attr 'epoch'; call nbtune.report"):
        tuner.run()
    assert tuner.status.state == "failed"


def test_results_between_rungs_need_no_answer():
    asha = nt.ASHA(max_t=27, grace_period=1, reduction_factor=3)
    asha.setup("loss", "min")
    trial = nt.Trial(0, {})
    asha.on_trial_add(trial)
    free = {}
    for iteration in (1, 2, 3, 9, 20):
        trial = trial.evolve(iteration=iteration)
        asha.on_result(trial, {"loss": 1.0, "training_iteration": iteration})
        free[iteration] = asha.free_steps(trial)
    assert free == {1: 1, 2: 0, 3: 5, 9: 17, 20: 6}, "rungs at 3, 9, then the stop at 27"
    assert nt.ASHA(max_t=27, time_attr="time_total_s").free_steps(trial) == 0
