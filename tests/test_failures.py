"""Failing trials: retried from their checkpoints up to `max_failures`, every traceback kept."""

from __future__ import annotations

import json
import os
import signal
import threading

import pytest
import trainables
from kernels import WAIT_UNTIL_HELD, Kernel

import nbtune as nt
from nbtune.events import TrialErrored, TrialResult, TrialRetried, TrialStarted


def test_a_trial_that_fails_once_is_retried_from_its_checkpoint(make_tuner, tmp_path, log):
    space = {"steps": 12, "marker": str(tmp_path / "failed-once")}
    tuner = make_tuner(trainables.fails_once, space, metric="loss", max_failures=2, callbacks=[log])
    tuner.run()
    trial = tuner.get_trial(0)
    assert trial.status is nt.TrialStatus.TERMINATED
    assert trial.attempts == 2
    assert tuner.dataframe().loc[0, "attempts"] == 2
    history = tuner.history()
    assert history["training_iteration"].tolist() == list(range(1, 13)), "no gap, no repeat"
    assert (history["step"] == history["training_iteration"]).all()
    assert [(e.trial_id, e.attempt) for e in log.of(TrialRetried)] == [(0, 2)]
    traceback = (tuner.path / "trials" / "0" / "error.txt").read_text()
    assert traceback.startswith("attempt 1 (retried): Traceback")
    assert "RuntimeError: flaky at step 5" in traceback


def test_a_trial_that_keeps_failing_ends_as_error_with_every_attempt_s_traceback(make_tuner):
    tuner = make_tuner(trainables.fail_at, {"fail_at": 3}, metric="loss", max_failures=2)
    tuner.run()
    trial = tuner.get_trial(0)
    assert trial.status is nt.TrialStatus.ERROR
    assert trial.attempts == 3
    assert trial.error == "ValueError: boom at step 3"
    traceback = (tuner.path / "trials" / "0" / "error.txt").read_text()
    assert traceback.count("ValueError: boom at step 3") == 3
    assert "attempt 3: Traceback" in traceback
    assert tuner.history()["training_iteration"].tolist() == [1, 2], "replays not recorded again"


def test_without_max_failures_a_failure_is_final(make_tuner):
    tuner = make_tuner(trainables.fail_at, {"fail_at": 2}, metric="loss")
    tuner.run()
    assert tuner.get_trial(0).attempts == 1
    assert tuner.get_trial(0).status is nt.TrialStatus.ERROR


def test_a_worker_killed_mid_trial_loses_nothing(make_tuner, log):
    space = {"steps": 30, "interval": 0.02, "checkpoint": True, "x": nt.grid([0, 1])}
    tuner = make_tuner(trainables.steps, space, metric="loss", max_failures=1, callbacks=[log])
    tuner.start()
    seen = log.wait_for(
        lambda e: (
            isinstance(e, TrialResult) and e.trial_id == 0 and e.result["training_iteration"] >= 5
        )
    )
    os.kill(seen.result["pid"], signal.SIGKILL)
    assert tuner.wait(60)
    frame = tuner.dataframe()
    assert (frame["status"] == "TERMINATED").all(), frame[["trial_id", "status", "error"]]
    assert frame.loc[0, "attempts"] == 2, "the killed trial was retried from its checkpoint"
    history = tuner.history()
    for _, iterations in history.groupby("trial_id")["training_iteration"]:
        assert iterations.tolist() == list(range(1, 31)), "no result lost or recorded twice"
    assert (history["step"] == history["training_iteration"]).all()


def keys_on_disk(run):
    lines = (run / "results.jsonl").read_text().splitlines()
    return [(row["trial_id"], row["training_iteration"]) for row in map(json.loads, lines)]


@pytest.mark.parametrize("max_failures", [0, 1])
def test_a_killed_worker_loses_its_own_trial_only(make_tuner, log, max_failures):
    space = {"steps": 40, "interval": 0.02, "checkpoint": True, "x": nt.grid([0, 1])}
    tuner = make_tuner(
        trainables.steps, space, metric="loss", max_failures=max_failures, callbacks=[log]
    )
    tuner.start()
    log.wait_for(lambda e: isinstance(e, TrialResult) and e.trial_id == 1)
    seen = log.wait_for(
        lambda e: (
            isinstance(e, TrialResult) and e.trial_id == 0 and e.result["training_iteration"] >= 5
        )
    )
    os.kill(seen.result["pid"], signal.SIGKILL)
    assert tuner.wait(60)
    killed, other = tuner.get_trial(0), tuner.get_trial(1)
    assert len(log.of(TrialStarted, 1)) == 1, "the other trial kept its worker"
    assert other.status is nt.TrialStatus.TERMINATED, other.error
    assert other.attempts == 1
    assert tuner.history().query("trial_id == 1")["pid"].nunique() == 1
    assert not log.of(TrialRetried, 1)
    assert killed.attempts == 1 + max_failures
    assert killed.status is (nt.TrialStatus.TERMINATED if max_failures else nt.TrialStatus.ERROR)
    history = tuner.history()
    assert history[history["trial_id"] == 1]["training_iteration"].tolist() == list(range(1, 41))
    assert (history["step"] == history["training_iteration"]).all(), "restarted from checkpoints"
    keys = keys_on_disk(tuner.path)
    assert len(keys) == len(set(keys)) == len(history), "no result lost or recorded twice"


def test_a_trial_that_stops_reporting_times_out_and_is_retried(make_tuner, log, executor_class):
    space = {"steps": 100, "interval": 0.03, "hang_s": 60, "hang_at": nt.grid([3, None])}
    tuner = make_tuner(
        trainables.hangs_at,
        space,
        metric="loss",
        max_failures=1,
        trial_timeout_s=2,
        executor=executor_class(),
        callbacks=[log],
    )
    tuner.run()
    hung, healthy = tuner.get_trial(0), tuner.get_trial(1)
    assert hung.status is nt.TrialStatus.ERROR
    assert hung.attempts == 2, "timed out, retried from its checkpoint, timed out again"
    assert hung.error.startswith("TrialTimeout: no report for 2 s (trial_timeout_s); the trial was")
    assert [e.attempt for e in log.of(TrialRetried)] == [2]
    assert healthy.status is nt.TrialStatus.TERMINATED, healthy.error
    assert healthy.attempts == 1
    history = tuner.history()
    iterations = history.groupby("trial_id")["training_iteration"].apply(list)
    assert iterations[0] == [1, 2]
    assert iterations[1] == list(range(1, 101))
    assert (history["step"] == history["training_iteration"]).all()
    keys = keys_on_disk(tuner.path)
    assert len(keys) == len(set(keys)) == 102


def fails_with(config):
    """Fails at once with the exception named in its config."""
    raise {"value": ValueError, "key": KeyError}[config["error"]]("broken")


def test_trials_that_keep_failing_alike_end_a_script_s_run_saying_why(make_tuner):
    tuner = make_tuner(
        fails_with,
        {"error": "value"},
        metric="loss",
        num_samples=6,
        max_concurrent=1,
        executor=nt.ThreadExecutor(),
    )
    tuner.run()
    status = tuner.status
    assert status.state == "failed"
    assert (
        status.reason == "3 trials in a row failed with ValueError (trials 0, 1, 2); the run ended"
    )
    assert (status.error, status.total) == (3, 3), "no trial started after the third failure"


def test_failures_of_different_kinds_or_a_limit_of_none_never_end_the_run(make_tuner):
    mixed = make_tuner(
        fails_with,
        {"error": nt.grid(["value", "key"])},
        metric="loss",
        num_samples=3,
        max_concurrent=1,
        executor=nt.ThreadExecutor(),
    )
    mixed.run()
    assert (mixed.state, mixed.status.error) == ("finished", 6)
    unlimited = make_tuner(
        fails_with,
        {"error": "value"},
        metric="loss",
        num_samples=5,
        max_concurrent=1,
        max_consecutive_failures=None,
        executor=nt.ThreadExecutor(),
    )
    unlimited.run()
    assert (unlimited.state, unlimited.status.error) == ("finished", 5)


def test_in_a_notebook_the_run_holds_until_the_user_resumes_it(tmp_path):
    kernel = Kernel(tmp_path)
    try:
        kernel.check(WAIT_UNTIL_HELD)
        kernel.check("""
            import nbtune as nt, threading
            fixed = threading.Event()

            def train(config):
                if not fixed.is_set():
                    raise ValueError("a bug")
                nt.report(loss=config["x"])

            tuner = nt.Tuner(train, {"x": nt.uniform(0, 1)}, metric="loss", num_samples=5,
                             max_concurrent=1, executor=nt.ThreadExecutor(),
                             max_consecutive_failures=2)
            tuner.start(display=False)
            wait_until_held(tuner)
        """)
        assert kernel.check("print(tuner.status)") == (
            "<paused (live): 2 error; 2 trials in a row failed with ValueError (trials 0, 1): "
            "no trial starts; fix the trainable (see their errors), then resume the run "
            "(Resume all, tuner.resume_all())>\n"
        )
        assert "2 trials in a row failed with ValueError (trials 0, 1): no trial starts" in (
            kernel.check("""
                shown = tuner.dashboard()
                shown.ready.wait(30)
                shown.redraw()
                print(shown.message.value)
            """)
        ), "the dashboard says why"
        assert (
            kernel.check("""
            fixed.set()
            tuner.resume_all()
            print(tuner.wait(30), tuner.state, tuner.status.terminated, tuner.status.reason)
        """)
            == "True finished 3 None\n"
        )
    finally:
        kernel.shutdown()


FIXED = threading.Event()
RELEASE = threading.Event()


def buggy_until_fixed(config):
    """Checkpoints every step; fails at step 3 until the bug is `FIXED`; the trial with
    `hold` keeps the run live until `RELEASE`."""
    if config.get("hold"):
        RELEASE.wait(30)
    checkpoint = nt.get_checkpoint()
    start = checkpoint["step"] if checkpoint else 0
    for step in range(start + 1, 6):
        if step == 3 and not FIXED.is_set():
            raise ValueError("a bug at step 3")
        nt.report(loss=1 / step, checkpoint={"step": step})


@pytest.fixture
def bug():
    FIXED.clear()
    RELEASE.clear()
    yield
    FIXED.set()
    RELEASE.set()


@pytest.mark.parametrize("from_scratch", [False, True])
def test_failed_trials_run_again_under_their_ids_once_fixed(make_tuner, log, bug, from_scratch):
    tuner = make_tuner(
        buggy_until_fixed,
        {"hold": nt.grid([False, False, True])},
        metric="loss",
        max_concurrent=3,
        max_consecutive_failures=None,
        executor=nt.ThreadExecutor(),
        callbacks=[log],
    )
    tuner.start()
    log.wait_for(lambda _: len(log.of(TrialErrored)) == 2)
    with pytest.raises(nt.IllegalTransitionError, match="trial 2 did not fail"):
        tuner.retry([2])
    FIXED.set()
    assert tuner.retry("errored", from_scratch=from_scratch) == [0, 1]
    RELEASE.set()
    assert tuner.wait(30) and tuner.state == "finished"
    assert {trial.status for trial in tuner.trials} == {nt.TrialStatus.TERMINATED}
    assert [trial.attempts for trial in tuner.trials] == [2, 2, 1]
    for trial_id, steps in tuner.history().groupby("trial_id")["training_iteration"]:
        assert steps.tolist() == [1, 2, 3, 4, 5], f"trial {trial_id}: no gap, no repeat"
    errors = (tuner.path / "trials" / "0" / "error.txt").read_text()
    assert errors.startswith("attempt 1: ") and "a bug at step 3" in errors
    started = [event.restored_from for event in log.of(TrialStarted, 0)]
    assert started == [None, None if from_scratch else 2]


def test_restore_with_retry_errored_runs_the_failed_trials_again(make_tuner, bug):
    tuner = make_tuner(
        buggy_until_fixed,
        {"hold": nt.grid([False, False])},
        metric="loss",
        max_consecutive_failures=None,
        executor=nt.ThreadExecutor(),
    )
    tuner.run()
    assert tuner.status.error == 2
    FIXED.set()
    restored = nt.Tuner.restore(
        tuner.path, buggy_until_fixed, retry_errored=True, executor=nt.ThreadExecutor()
    )
    restored.run()
    assert [(t.status.value, t.attempts, t.iteration) for t in restored.trials] == [
        ("TERMINATED", 2, 5),
        ("TERMINATED", 2, 5),
    ]


def test_a_trial_queued_on_a_busy_cluster_does_not_time_out_before_it_starts(
    make_tuner, dask_client
):
    space = {"steps": 20, "interval": 0.1, "x": nt.grid([0, 1, 2])}
    tuner = make_tuner(
        trainables.steps,
        space,
        metric="loss",
        max_concurrent=3,
        trial_timeout_s=1,
        max_failures=0,
        executor=nt.DaskExecutor(dask_client),
    )
    tuner.run()
    assert [trial.status for trial in tuner.trials] == [nt.TrialStatus.TERMINATED] * 3, [
        trial.error for trial in tuner.trials
    ]
    assert tuner.history().groupby("trial_id")["step"].max().tolist() == [20, 20, 20]
