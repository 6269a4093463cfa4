"""Population based training: bottom trials give way to mutated forks of top ones."""

from __future__ import annotations

import pytest
import trainables

import nbtune as nt
from nbtune.events import TrialAdded, TrialCompleted, TrialErrored, TrialPaused

MAX_T = 10


def test_bottom_trials_give_way_to_forks_that_continue_from_a_top_checkpoint(make_tuner, log):
    pbt = nt.PBT(perturbation_interval=3, hyperparam_mutations={"lr": nt.uniform(0.1, 2000)})
    tuner = make_tuner(
        trainables.accumulate,
        {"lr": nt.grid([1, 10, 100, 1000]), "max_t": MAX_T, "interval": 0.05},
        metric="loss",
        scheduler=pbt,
        max_concurrent=4,
        seed=0,
        callbacks=[log],
    )
    tuner.run()

    trials = {trial.trial_id: trial for trial in tuner.trials}
    forks = [trial for trial in trials.values() if trial.origin == "scheduler"]
    assert forks, "lr=1 stays at the bottom, so it is replaced at its first perturbation"
    assert len(trials) == 4 + len(forks), "the grid's four trials, and the forks PBT made"
    assert all(trial.status is nt.TrialStatus.TERMINATED for trial in trials.values())

    history = tuner.history().set_index(["trial_id", "t"])
    firsts = tuner.history().groupby("trial_id")["t"].min()
    # A fork of a parent already at MAX_T has nothing left to run, and reports nothing.
    ran = [fork for fork in forks if fork.trial_id in firsts.index]
    assert ran, "the fork that replaced lr=1 early had steps left"
    for fork in ran:
        parent = trials[fork.parent]
        first = firsts[fork.trial_id]
        assert history.loc[(fork.trial_id, first), "started_from"] == pytest.approx(
            history.loc[(parent.trial_id, first - 1), "value"]
        ), "the fork's first result continues from its parent's checkpoint"
    for fork in forks:
        assert fork.config["lr"] != trials[fork.parent].config["lr"]
        assert fork.config["max_t"] == MAX_T, "keys without a mutation are inherited"

    assert max_population(log.events) == 4, "each fork takes the place of a trial that ended"


def max_population(events):
    """The most trials alive at once, from the order of additions and endings."""
    alive = peak = 0
    for event in events:
        if isinstance(event, TrialAdded):
            alive += 1
        elif isinstance(event, (TrialCompleted, TrialErrored)):
            alive -= 1
        peak = max(peak, alive)
    return peak


def test_explore_perturbs_numbers_moves_list_values_to_a_neighbour_and_keeps_bounds():
    pbt = nt.PBT(
        perturbation_interval=1,
        hyperparam_mutations={
            "lr": nt.loguniform(1e-4, 1.0),
            "layers": [1, 2, 3, 4],
            "units": nt.randint(8, 64),
            "optim": {"momentum": nt.uniform(0.0, 0.95)},
        },
        resample_probability=0.0,
        seed=1,
    )
    config = {"lr": 0.01, "layers": 2, "units": 60, "optim": {"momentum": 0.9}, "name": "x"}
    for _ in range(20):
        mutated = pbt.explore(config)
        assert mutated["lr"] in (pytest.approx(0.012), pytest.approx(0.008))
        assert mutated["layers"] in (1, 3)
        assert mutated["units"] in (48, 63), "an int stays an int, and below randint's high"
        assert mutated["optim"]["momentum"] in (pytest.approx(0.72), 0.95)
        assert mutated["name"] == "x"
    assert config["optim"] == {"momentum": 0.9}, "the donor's config is left alone"


def test_resampling_draws_from_the_domain_list_or_function():
    pbt = nt.PBT(1, {"a": nt.choice(["x", "y"]), "b": lambda: 7, "c": nt.uniform(2, 3)}, 0.25, 1.0)
    pbt.setup("loss", "min", seed=0)
    for _ in range(10):
        mutated = pbt.explore({"a": "x", "b": 1, "c": 0.0})
        assert mutated["a"] in ("x", "y") and mutated["b"] == 7 and 2 <= mutated["c"] < 3


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"perturbation_interval": 0, "hyperparam_mutations": {"lr": [1]}}, "positive number"),
        ({"perturbation_interval": 1, "hyperparam_mutations": {}}, "pass a dict from config"),
        (
            {
                "perturbation_interval": 1,
                "hyperparam_mutations": {"a": [1]},
                "quantile_fraction": 0.7,
            },
            r"quantile_fraction=0.7\): pass a number in \(0, 0.5\]",
        ),
    ],
)
def test_bad_arguments_get_one_line_errors(arguments, message):
    with pytest.raises(ValueError, match=message):
        nt.PBT(**arguments)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_population_larger_than_the_workers_shares_them_and_forks(make_tuner, seed, log):
    pbt = nt.PBT(perturbation_interval=2, hyperparam_mutations={"lr": nt.uniform(0.1, 2000)})
    tuner = make_tuner(
        trainables.accumulate,
        {"lr": nt.loguniform(0.1, 1000), "max_t": 8},
        metric="loss",
        num_samples=8,
        scheduler=pbt,
        max_concurrent=2,
        seed=seed,
        callbacks=[log],
    )
    tuner.run()
    trials = tuner.trials
    forks = [trial for trial in trials if trial.origin == "scheduler"]
    assert forks, "the whole population is compared, so its bottom gives way to forks"
    assert all(trial.status is nt.TrialStatus.TERMINATED for trial in trials)
    history = tuner.history()
    first_eight = history[history["trial_id"] < 8]
    assert first_eight["trial_id"].nunique() == 8, "every member of the population ran"
    assert first_eight.groupby("trial_id")["t"].min().eq(1).all()
    for trial_id, steps in history.groupby("trial_id")["t"]:
        assert steps.is_monotonic_increasing and steps.is_unique, f"trial {trial_id} repeated"
    paused = len(log.of(TrialPaused))
    assert paused > 0, "members that got ahead gave way to those behind"


@pytest.mark.parametrize(
    ("mutations", "error", "message"),
    [
        ({"lr": []}, ValueError, "{'lr': []}: give at least one value to draw from"),
        ({"opt": {"lr": ()}}, ValueError, "{'opt/lr': ()}: give at least one value to draw from"),
        ({"opt": {}}, ValueError, "{'opt': {}}: give at least one value to draw from"),
        (
            {"lr": "0.1"},
            TypeError,
            "{'lr': '0.1'}: use an nbtune domain, a list of values or a function of no arguments",
        ),
        (
            {"lr": 0.1},
            TypeError,
            "{'lr': 0.1}: use an nbtune domain, a list of values or a function of no arguments",
        ),
    ],
)
def test_a_mutation_that_cannot_be_drawn_from_is_refused_when_built(mutations, error, message):
    with pytest.raises(error) as refused:
        nt.PBT(perturbation_interval=1, hyperparam_mutations=mutations)
    assert str(refused.value) == f"PBT(hyperparam_mutations=...): {message}"
