"""Repeater: each configuration in `repeat` trials in a row, and the wrapped searcher told the
mean of each group once, in a live run and after a restore."""

from __future__ import annotations

import cloudpickle
import pytest
import trainables
from optuna.trial import TrialState

import nbtune as nt
from nbtune.space import SearchSpace
from nbtune.trial import Trial, TrialStatus


class Told(nt.RandomSearch):
    """Random search that keeps what it was told at each end: (trial id, result, error)."""

    def __init__(self):
        super().__init__()
        self.told = []

    def on_complete(self, trial_id, result, error):
        self.told.append((trial_id, result, error))


def repeater(repeat=3, num_samples=2, set_index=True):
    searcher = nt.Repeater(Told(), repeat, set_index=set_index)
    searcher.setup(SearchSpace({"x": nt.uniform(0, 1)}), "loss", "min", num_samples, 0)
    return searcher


def test_each_configuration_goes_to_repeat_trials_in_a_row_with_their_index():
    searcher = repeater(repeat=3, num_samples=2)
    configs = [searcher.suggest(trial_id) for trial_id in range(6)]
    assert searcher.is_finished
    assert searcher.suggest(6) is None, "the budget counts configurations: 2 x 3 trials"
    assert [c["__trial_index__"] for c in configs] == [0, 1, 2, 0, 1, 2]
    assert len({c["x"] for c in configs[:3]}) == 1
    assert len({c["x"] for c in configs[3:]}) == 1
    assert configs[0]["x"] != configs[3]["x"]


def test_without_set_index_the_repeats_get_the_same_config():
    searcher = repeater(repeat=2, num_samples=1, set_index=False)
    first, second = searcher.suggest(0), searcher.suggest(1)
    assert first == second
    assert list(first) == ["x"]


def test_the_searcher_hears_of_a_group_once_all_its_trials_ended_with_their_mean():
    searcher = repeater(repeat=3)
    for trial_id in range(6):
        searcher.suggest(trial_id)
    searcher.on_complete(1, {"loss": 2.0, "training_iteration": 5}, error=False)
    searcher.on_complete(0, {"loss": 1.0, "training_iteration": 5}, error=False)
    assert searcher.searcher.told == [], "one trial of the group still runs"
    searcher.on_complete(2, {"loss": 6.0, "training_iteration": 5}, error=False)
    assert searcher.searcher.told == [(0, {"loss": 3.0, "training_iteration": 5}, False)]


def test_failed_trials_and_missing_values_are_left_out_of_the_mean():
    searcher = repeater(repeat=3)
    for trial_id in range(6):
        searcher.suggest(trial_id)
    searcher.on_complete(0, {"loss": 4.0}, error=False)
    searcher.on_complete(1, {"loss": 1.0}, error=True)
    searcher.on_complete(2, {"loss": float("nan")}, error=False)
    for trial_id in range(3, 6):
        searcher.on_complete(trial_id, None, error=trial_id != 4)
    assert searcher.searcher.told == [(0, {"loss": 4.0}, False), (3, None, True)]


def test_it_plans_repeat_trials_per_configuration_of_the_searcher():
    searcher = repeater(repeat=3, num_samples=2)
    assert searcher.planned_trials == 6
    searcher.extend(1)
    assert searcher.planned_trials == 9
    assert nt.Repeater(OpenEnded(), 3).planned_trials is None


class OpenEnded(nt.Searcher):
    """A searcher that cannot say how many trials it will suggest (the base's answer)."""


@pytest.mark.parametrize("bad", [0, -2, 1.5, True, "3"])
def test_repeat_must_be_a_positive_int(bad):
    with pytest.raises(ValueError, match=r"^Repeater\(repeat=.*\): pass a positive integer$"):
        nt.Repeater(nt.RandomSearch(), bad)


def test_restore_rebuilds_the_groups_from_the_journal():
    searcher = repeater(repeat=3, num_samples=2)
    configs = [searcher.suggest(trial_id) for trial_id in range(2)]
    saved = cloudpickle.dumps(searcher)
    # After the save: group 0 fills up and group 1 begins; then the driver dies.
    configs += [searcher.suggest(trial_id) for trial_id in range(2, 4)]
    ended = TrialStatus.TERMINATED
    journal = [
        Trial(0, configs[0], ended, last_result={"loss": 1.0}),
        Trial(1, configs[1], TrialStatus.ERROR, last_result={"loss": 9.0}),
        Trial(2, configs[2], ended, last_result={"loss": 3.0}),
        Trial(3, configs[3], ended, last_result={"loss": 5.0}),
        Trial(4, {"x": 0.5}, ended, last_result={"loss": 0.0}, origin="user"),
    ]
    restored = cloudpickle.loads(saved)
    restored.restore(journal)

    assert [c["x"] for c in (restored.suggest(5), restored.suggest(6))] == [configs[3]["x"]] * 2
    assert restored.is_finished, "2 configurations, 3 trials each: the user's trial is not one"
    restored.on_complete(5, {"loss": 6.0}, error=False)
    restored.on_complete(6, {"loss": 7.0}, error=False)
    assert restored.searcher.told == [(3, {"loss": 6.0}, False)]


def test_a_real_run_tells_optuna_each_mean_and_carries_on_after_a_restore(make_tuner, stop_midway):
    space = {"x": nt.uniform(0, 1), "steps": 20, "interval": 0.02}
    tuner = make_tuner(
        trainables.repeated,
        space,
        metric="loss",
        num_samples=2,
        searcher=nt.Repeater(nt.OptunaSearch(), repeat=2),
        seed=3,
    )
    stop_midway(tuner)

    again = nt.Tuner.restore(tuner.path, trainables.repeated, progress=False)
    again.run()
    frame = again.dataframe().set_index("trial_id")
    assert frame.index.tolist() == [0, 1, 2, 3], "2 configurations x 2 repeats"
    assert (frame["status"] == "TERMINATED").all()
    assert frame["config/__trial_index__"].tolist() == [0, 1, 0, 1]
    told = {t.user_attrs["nbtune_trial_id"]: t for t in again.searcher.searcher.study.trials}
    assert sorted(told) == [0, 2], "Optuna knows one trial per configuration"
    for first in (0, 2):
        pair = frame.loc[[first, first + 1]]
        assert pair["config/x"].nunique() == 1
        assert told[first].state is TrialState.COMPLETE
        assert told[first].params["x"] == pair["config/x"].iloc[0]
        assert told[first].value == pytest.approx(pair["loss"].mean())
