"""A run's deadline: `Tuner.finish_by` and `Tuner.set_time_budget` on a live run, and
`Tuner(finish_by=...)`: the trials running at the deadline stop, no trial starts that would
not finish in time, the run ends `finished`, and every result is kept."""

from __future__ import annotations

import datetime
import time

import pytest
from test_control import result_of

import nbtune as nt
from nbtune.events import ExperimentDone, TrialStarted

STEPS = 20


def paced(config):
    """`STEPS` results, `interval` seconds apart."""
    for step in range(1, STEPS + 1):
        time.sleep(config["interval"])
        nt.report(loss=config["x"] / step)


def paced_run(make_tuner, log, **options):
    return make_tuner(
        paced,
        {"x": nt.uniform(0, 1), "interval": 0.05},
        metric="loss",
        num_samples=6,
        stop={"training_iteration": STEPS},
        executor=nt.ThreadExecutor(),
        callbacks=[log],
        **options,
    )


def assert_every_result_kept(tuner):
    for trial_id, steps in tuner.history().groupby("trial_id")["training_iteration"]:
        assert steps.tolist() == list(range(1, len(steps) + 1)), trial_id
    for trial in tuner.trials:
        assert trial.status in (nt.TrialStatus.TERMINATED, nt.TrialStatus.PENDING), trial


def test_the_trials_running_at_the_deadline_stop_and_the_run_finishes(make_tuner, log):
    tuner = paced_run(make_tuner, log)
    tuner.start()
    log.wait_for(result_of(1, 2))
    tuner.finish_by(0.3)
    deadline = time.time() + 0.3
    assert tuner.wait(30)
    assert tuner.state == "finished"
    assert log.of(ExperimentDone)[0].state == "finished"
    stopped = [trial for trial in tuner.trials if trial.stopped_by == "deadline"]
    assert [trial.trial_id for trial in stopped] == [0, 1]
    assert all(trial.iteration < STEPS for trial in stopped)
    assert not log.of(TrialStarted, 2), "no trial started that could not finish in time"
    assert time.time() - deadline < 5, "the run ended at its deadline, not after its trials"
    assert_every_result_kept(tuner)


def test_no_trial_starts_that_would_not_finish_before_the_deadline(make_tuner, log):
    tuner = paced_run(make_tuner, log)
    tuner.start()
    log.wait_for(result_of(0, 2))
    tuner.finish_by(STEPS * 0.05 * 1.5)
    assert tuner.wait(30)
    assert tuner.state == "finished"
    frame = tuner.dataframe()
    finished = frame[frame["status"] == "TERMINATED"]
    assert (finished["training_iteration"] == STEPS).all(), "the first two finished in time"
    assert (finished["stopped_by"] == "stop criteria").all()
    assert len(log.of(TrialStarted)) == 2, "a third would have run past the deadline"
    assert_every_result_kept(tuner)


def test_set_time_budget_on_a_live_run_counts_from_its_start(make_tuner, log):
    tuner = paced_run(make_tuner, log)
    tuner.start()
    log.wait_for(result_of(1, 2))
    tuner.set_time_budget(0.01)
    assert tuner.wait(30)
    assert tuner.state == "finished"
    assert {trial.stopped_by for trial in tuner.trials if trial.iteration < STEPS} == {
        "time budget"
    }
    assert tuner.time_budget_s == 0.01
    assert_every_result_kept(tuner)


def test_a_deadline_given_before_the_start_counts_from_it(make_tuner, log):
    moment = datetime.datetime.now() + datetime.timedelta(seconds=60)
    early = paced_run(make_tuner, log, finish_by=moment)
    assert early.run() is None and early.state == "finished", "a far deadline changes nothing"
    tuner = paced_run(make_tuner, log)
    tuner.finish_by(0.2)
    tuner.run()
    assert tuner.state == "finished"
    assert {trial.stopped_by for trial in tuner.trials if trial.status.is_finished} == {"deadline"}


@pytest.mark.parametrize(
    ("deadline", "message"),
    [
        (-1, r"finish_by=-1: pass a positive number of seconds from now, or a datetime"),
        (float("inf"), r"finish_by=inf: pass a finite number of seconds"),
        (datetime.datetime(2020, 1, 1), r"finish_by=datetime.datetime\(2020, 1, 1, 0, 0\): that "),
        ("soon", r"finish_by='soon': pass a positive number of seconds from now"),
    ],
)
def test_a_deadline_that_cannot_be_is_refused_in_one_line(make_tuner, log, deadline, message):
    with pytest.raises(ValueError, match=message):
        paced_run(make_tuner, log, finish_by=deadline)
    tuner = paced_run(make_tuner, log)
    with pytest.raises(ValueError, match=message):
        tuner.finish_by(deadline)
    with pytest.raises(ValueError, match=r"time_budget_s=0: pass a positive number of seconds"):
        tuner.set_time_budget(0)
