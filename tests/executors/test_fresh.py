"""`LokyExecutor(reuse_workers=False)`: a process of its own for every trial.

The behaviour every executor shares runs on it too (it is "fresh" in `EXECUTORS`); these are
what only it does: a process per trial that is gone with its memory when the trial ends, and a
killed trial process that no other trial notices.
"""

from __future__ import annotations

import os

import pytest
import trainables

import nbtune as nt
from nbtune.events import TrialCompleted, TrialResult, TrialRetried, TrialStarted


def fresh_tuner(make_tuner, trainable, space, **options):
    executor = nt.LokyExecutor(reuse_workers=False, gpus=options.pop("gpus", None))
    return make_tuner(trainable, space, metric="loss", executor=executor, **options)


def test_each_trial_runs_in_a_process_of_its_own_that_is_gone_when_the_run_ends(make_tuner):
    space = {"mb": 300, "steps": 2, "x": nt.grid([0, 1, 2, 3])}
    tuner = fresh_tuner(make_tuner, trainables.holds_memory, space, max_concurrent=2)
    tuner.run()
    history = tuner.history()
    pids = history.groupby("trial_id")["pid"].unique()
    assert all(len(trial_pids) == 1 for trial_pids in pids), "one process per trial"
    assert len({trial_pids[0] for trial_pids in pids}) == 4, "no process runs two trials"
    assert os.getpid() not in set(history["pid"])
    assert (history["held"] == 300 * 2**20).all(), "each trial held its 300 MB"
    alive = [pid for pid in set(history["pid"]) if os.path.exists(f"/proc/{pid}")]
    assert alive == [], "no trial process (nor its memory) outlives the run"


def test_a_killed_trial_process_takes_no_other_trial_with_it(make_tuner, log):
    space = {"steps": 30, "interval": 0.02, "die_at": nt.grid([3, None])}
    tuner = fresh_tuner(make_tuner, trainables.dies_at, space, callbacks=[log], max_concurrent=2)
    tuner.run()
    frame = tuner.dataframe().set_index("trial_id")
    assert frame.loc[0, "status"] == "ERROR"
    assert "process died" in tuner.get_trial(0).error
    assert frame.loc[1, "status"] == "TERMINATED"
    survivor = tuner.history().query("trial_id == 1")
    assert list(survivor["step"]) == list(range(1, 31)), "the other trial ran to its end"
    assert survivor["pid"].nunique() == 1, "in the process it started in"
    assert not [e for e in log.events if isinstance(e, TrialRetried)], "nothing was retried"


@pytest.mark.parametrize("reuse_workers", [True, False])
def test_a_forced_stop_kills_that_trial_at_once_and_no_other(make_tuner, log, reuse_workers):
    space = {"interval": nt.grid([600.0, 0.01])}
    executor = nt.LokyExecutor(reuse_workers=reuse_workers)
    tuner = make_tuner(trainables.forever, space, executor=executor, callbacks=[log])
    tuner.start()
    log.wait_for(lambda e: isinstance(e, TrialResult) and e.trial_id == 0)
    tuner.stop(0, force=True)
    log.wait_for(lambda e: isinstance(e, TrialCompleted) and e.trial_id == 0)
    after = len(log.events)
    log.wait_for(
        lambda e: isinstance(e, TrialResult) and e.trial_id == 1 and e in log.events[after:]
    )
    tuner.stop()
    assert tuner.wait(30)
    assert tuner.get_trial(0).status is nt.TrialStatus.TERMINATED
    assert tuner.history().query("trial_id == 1")["pid"].nunique() == 1, "trial 1 ran on"


def test_each_trial_gets_its_gpus_in_a_process_started_for_it(make_tuner, log):
    space = {"mb": 1, "steps": 2, "x": nt.grid(list(range(4)))}
    tuner = fresh_tuner(
        make_tuner,
        trainables.holds_memory,
        space,
        gpus=["0", "1"],
        resources_per_trial={"gpu": 1},
        callbacks=[log],
        max_concurrent=2,
    )
    tuner.run()
    history = tuner.history()
    assert set(history["gpus"]) == {"0", "1"}
    assert history.groupby("trial_id")["gpus"].nunique().eq(1).all()
    assert len([e for e in log.events if isinstance(e, TrialStarted)]) == 4


@pytest.mark.parametrize("value", ["no", 0, None])
def test_reuse_workers_takes_only_true_or_false(value):
    with pytest.raises(ValueError, match=r"reuse_workers=.*: pass True .* or False"):
        nt.LokyExecutor(reuse_workers=value)


def test_both_kinds_are_loky_executors():
    assert isinstance(nt.LokyExecutor(reuse_workers=False), nt.LokyExecutor)
    assert nt.LokyExecutor(reuse_workers=False).reuse_workers is False
