"""The Tuner's commands and its recovery behave the same on every executor.

`test_conformance.py` drives executors directly; these go through the Tuner, the way users
steer a run: pause and resume (by checkpoint, or suspended in place), fork, a failing
trial retried from its checkpoint, and a trainable changed mid-run. Each test runs on loky,
threads and a real Dask cluster.
"""

from __future__ import annotations

import pytest
import trainables
from test_control import event_of, iterations, result_of

import nbtune as nt
from nbtune.code_hash import code_hash
from nbtune.events import TrialPaused, TrialRetried, TrialStarted

N = 12


@pytest.fixture
def tuner_on_executor(make_tuner, log, executor_class):
    """A Tuner of `trainable` over `space` on the executor under test, its events in `log`."""

    def make(trainable, space, **options):
        return make_tuner(
            trainable, space, metric="loss", executor=executor_class(), callbacks=[log], **options
        )

    return make


@pytest.mark.parametrize(("checkpoint", "paused_by"), [(True, "checkpoint"), (False, "suspend")])
def test_pause_and_resume_lose_and_repeat_nothing(tuner_on_executor, log, checkpoint, paused_by):
    space = {"steps": N, "checkpoint": checkpoint, "x": nt.grid([0, 1])}
    tuner = tuner_on_executor(trainables.steps, space, max_concurrent=1)
    tuner.start()
    log.wait_for(result_of(0, 3))
    tuner.pause(0)
    log.wait_for(event_of(TrialPaused, 0))
    assert tuner.get_trial(0).paused_by == paused_by
    if checkpoint:
        log.wait_for(event_of(TrialStarted, 1))
    tuner.resume(0)
    assert tuner.wait(60)
    assert iterations(tuner, 0) == iterations(tuner, 1) == list(range(1, N + 1))
    history = tuner.history()
    assert (history["step"] == history["training_iteration"]).all(), "no step run twice"


def test_a_fork_carries_on_from_its_parents_checkpoint(tuner_on_executor, log):
    space = {"steps": N, "checkpoint": True, "lr": 1.0}
    tuner = tuner_on_executor(trainables.steps, space)
    tuner.start()
    log.wait_for(result_of(0, 4))
    child = tuner.fork(0, {"lr": 0.5})
    assert tuner.wait(60)
    first = iterations(tuner, child)[0]
    assert first >= 5, "the child starts after the parent's checkpoint"
    assert iterations(tuner, child) == list(range(first, N + 1))
    child_history = tuner.history().query(f"trial_id == {child}")
    assert child_history["loss"].tolist() == pytest.approx([0.5 / t for t in range(first, N + 1)])


def test_a_failing_trial_is_retried_from_its_checkpoint(tuner_on_executor, tmp_path, log):
    space = {"steps": N, "marker": str(tmp_path / "failed-once")}
    tuner = tuner_on_executor(trainables.fails_once, space, max_failures=1)
    tuner.run()
    assert tuner.get_trial(0).status is nt.TrialStatus.TERMINATED
    assert [(e.trial_id, e.attempt) for e in log.of(TrialRetried)] == [(0, 2)]
    history = tuner.history()
    assert history["training_iteration"].tolist() == list(range(1, N + 1)), "no gap, no repeat"
    assert (history["step"] == history["training_iteration"]).all()


def test_a_new_trainable_runs_the_trials_launched_after_it(tuner_on_executor, log):
    space = {"steps": 30, "checkpoint": nt.grid([False, True, True])}
    tuner = tuner_on_executor(trainables.first_version, space, max_concurrent=2)
    tuner.start()
    log.wait_for(result_of(0, 2))
    log.wait_for(result_of(1, 2))
    tuner.pause_all()
    log.wait_for(event_of(TrialPaused, 0))
    log.wait_for(event_of(TrialPaused, 1))
    paused_at = tuner.get_trial(1).iteration
    tuner.update_trainable(trainables.second_version)
    tuner.resume_all()
    assert tuner.wait(60)

    history = tuner.history()
    versions = history.groupby("trial_id")["version"].apply(list).to_dict()
    assert versions[0] == [1] * 30, "a trial suspended in its worker keeps its code"
    assert versions[1] == [1] * paused_at + [2] * (30 - paused_at), "resumed from a checkpoint"
    assert versions[2] == [2] * 30, "a new trial"
    codes = tuner.dataframe().set_index("trial_id")["code"].to_dict()
    assert codes == {
        0: code_hash(trainables.first_version),
        1: code_hash(trainables.second_version),
        2: code_hash(trainables.second_version),
    }
