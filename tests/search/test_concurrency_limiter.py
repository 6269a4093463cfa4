"""ConcurrencyLimiter: at most `max_concurrent` unfinished suggestions, and a runner that waits
for them without spinning or ending early."""

from __future__ import annotations

import pytest
import trainables

import nbtune as nt
from nbtune.events import TrialCompleted, TrialErrored, TrialStarted
from nbtune.space import SearchSpace
from nbtune.trial import Trial, TrialStatus


def limited(max_concurrent, num_samples=5):
    limiter = nt.ConcurrencyLimiter(nt.RandomSearch(), max_concurrent)
    limiter.setup(SearchSpace({"x": nt.uniform(0, 1)}), "loss", "min", num_samples, 0)
    return limiter


def test_suggestions_wait_until_one_of_the_unfinished_ends():
    limiter = limited(2)
    assert limiter.suggest(0) is not None
    assert limiter.suggest(1) is not None
    assert limiter.suggest(2) is None
    limiter.on_complete(1, {"loss": 1.0}, error=True)
    assert limiter.suggest(2) is not None
    assert limiter.suggest(3) is None


def test_it_passes_on_the_budget_and_the_results():
    limiter = limited(1, num_samples=2)
    for trial_id in range(2):
        assert not limiter.is_finished
        limiter.suggest(trial_id)
        limiter.on_complete(trial_id, {"loss": 0.0}, error=False)
    assert limiter.is_finished
    limiter.extend(1)
    assert not limiter.is_finished


def test_it_plans_what_the_searcher_it_limits_plans():
    assert limited(2, num_samples=5).planned_trials == 5
    limiter = nt.ConcurrencyLimiter(OpenEnded(), 2)
    assert limiter.planned_trials is None


class OpenEnded(nt.Searcher):
    """A searcher that cannot say how many trials it will suggest (the base's answer)."""


def test_restore_counts_the_unfinished_trials_of_the_journal():
    limiter = limited(2)
    limiter.suggest(0)
    journal = [
        Trial(0, {"x": 0.1}, TrialStatus.TERMINATED),
        Trial(1, {"x": 0.2}, TrialStatus.PAUSED),
        Trial(2, {"x": 0.3}, TrialStatus.PENDING, origin="user"),
    ]
    limiter.restore(journal)
    assert limiter.suggest(3) is not None, "trial 0 has ended, the user's trial does not count"
    assert limiter.suggest(4) is None


@pytest.mark.parametrize("bad, error", [(0, ValueError), (1.5, TypeError), (True, TypeError)])
def test_the_limit_must_be_a_positive_int(bad, error):
    with pytest.raises(error, match="max_concurrent"):
        nt.ConcurrencyLimiter(nt.RandomSearch(), bad)


class CountingLimiter(nt.ConcurrencyLimiter):
    """Counts how often the runner asked while the limit held, to catch a busy loop."""

    refused = 0

    def suggest(self, trial_id):
        config = super().suggest(trial_id)
        self.refused += config is None
        return config


def test_a_real_run_never_has_more_unfinished_trials_than_the_limit(make_tuner, log):
    limiter = CountingLimiter(nt.RandomSearch(), 2)
    tuner = make_tuner(
        trainables.count_up,
        {"steps": 3, "interval": 0.02},
        metric="loss",
        num_samples=8,
        max_concurrent=4,
        searcher=limiter,
        callbacks=[log],
    )
    tuner.run()
    running, most = 0, 0
    for event in log.events:
        running += isinstance(event, TrialStarted)
        running -= isinstance(event, TrialCompleted | TrialErrored)
        most = max(most, running)
    assert most == 2, "two at a time, though four workers are free"
    assert (tuner.dataframe()["status"] == "TERMINATED").sum() == 8, "the run did not end early"
    assert limiter.refused < 100, f"the runner asked {limiter.refused} times: it waits, not spins"
