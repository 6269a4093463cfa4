"""Behaviour every executor must share; a new back end proves itself by passing these."""

from __future__ import annotations

import cloudpickle
import pytest
import trainables

from nbtune.protocol import WorkerDone, WorkerFailed, WorkerResult, WorkerStarted
from nbtune.schedulers import Decision


def test_results_arrive_in_order_and_the_trial_ends_when_it_returns(drive):
    driver = drive(trainables.count_up)
    driver.launch(0, {"steps": 4})
    driver.run_until_ended([0])
    assert [r.metrics["loss"] for r in driver.results(0)] == [1.0, 1 / 2, 1 / 3, 1 / 4]
    assert isinstance(driver.ending(0), WorkerDone)


def test_a_trial_is_said_to_start_once_before_its_first_result_where_the_executor_says_it(drive):
    driver = drive(trainables.count_up)
    driver.launch(0, {"steps": 2})
    driver.launch(1, {"steps": 2})
    events = driver.run_until_ended([0, 1])
    announced = [WorkerStarted] if driver.executor.announces_start else []
    for trial_id in (0, 1):
        kinds = [type(event) for event in events if event.trial_id == trial_id]
        assert [kind for kind in kinds if kind is WorkerStarted] == announced, kinds
        assert kinds[: len(announced)] == announced, "it starts before it reports"


def test_a_report_waits_for_the_reply(drive):
    driver = drive(trainables.count_up)
    driver.launch(0, {"steps": 3})
    first = []
    while not first:
        first = [e for e in driver.executor.poll(5.0) if isinstance(e, WorkerResult)]
    assert driver.executor.poll(0.3) == [], "the trial went on without a decision"
    driver.executor.reply(0, Decision.CONTINUE)
    driver.run_until_ended([0])
    assert len(driver.results(0)) == 2


def test_results_told_they_need_not_wait_go_on_until_a_nudge(drive):
    driver = drive(trainables.forever)
    driver.launch(0, {"interval": 0.001})
    assert driver.next_result().waits, "a trial's first result always waits"
    driver.executor.reply(0, Decision.CONTINUE, 3)
    assert [driver.next_result().waits for _ in range(4)] == [False, False, False, True]
    assert driver.executor.poll(0.3) == [], "the trial went on past its free steps"

    driver.executor.reply(0, Decision.CONTINUE, 10**9)
    assert not driver.next_result().waits
    driver.executor.nudge(0)
    while not driver.next_result().waits:
        pass
    assert driver.executor.poll(0.3) == [], "a nudged trial went on without a decision"
    driver.executor.reply(0, Decision.STOP)
    driver.run_until_ended([0])
    assert isinstance(driver.ending(0), WorkerDone)


def test_stop_ends_the_trial_at_its_report(drive):
    driver = drive(trainables.forever)
    driver.launch(0, {"interval": 0.001})
    driver.run_until_ended([0], decide=lambda event: Decision.STOP)
    assert len(driver.results(0)) == 1
    assert isinstance(driver.ending(0), WorkerDone)


def test_two_trials_run_side_by_side(drive):
    driver = drive(trainables.count_up)
    driver.launch(0, {"steps": 3})
    driver.launch(1, {"steps": 5})
    driver.run_until_ended([0, 1])
    assert len(driver.results(0)) == 3
    assert len(driver.results(1)) == 5


def test_an_exception_in_the_trainable_comes_back_with_its_traceback(drive):
    driver = drive(trainables.fail_at)
    driver.launch(0, {"fail_at": 3})
    driver.run_until_ended([0])
    ending = driver.ending(0)
    assert isinstance(ending, WorkerFailed)
    assert ending.error == "ValueError: boom at step 3"
    assert "in fail_at" in ending.traceback
    assert len(driver.results(0)) == 2


def test_checkpoints_are_written_by_the_worker_and_resumed_from(drive, tmp_path):
    driver = drive(trainables.quadratic)
    driver.launch(0, {"lr": 0.01, "layers": 0})

    def stop_at_six(event):
        return Decision.STOP if len(driver.results(0)) == 6 else Decision.CONTINUE

    driver.run_until_ended([0], decide=stop_at_six)
    last = driver.results(0)[-1]
    with open(last.checkpoint, "rb") as file:
        assert cloudpickle.load(file) == {"epoch": 5}
    driver.launch(1, {"lr": 0.01, "layers": 0}, iteration=6, checkpoint_path=last.checkpoint)
    driver.run_until_ended([1])
    resumed = driver.results(1)
    assert resumed[0].metrics["loss"] == pytest.approx(1 / 7), "epoch 6 comes right after 5"
    assert len(resumed) == 14
    assert resumed[0].checkpoint.endswith("checkpoint_000007.pkl")


def test_a_class_trainable_steps_and_checkpoints(drive):
    driver = drive(trainables.FinishesAtThree)
    driver.launch(0, {"scale": 6.0})
    driver.run_until_ended([0])
    results = driver.results(0)
    assert [r.metrics["loss"] for r in results] == [6.0, 3.0, 2.0]
    assert "done" not in results[-1].metrics
    with open(results[-1].checkpoint, "rb") as file:
        assert cloudpickle.load(file) == {"count": 3}


def test_a_new_trainable_runs_the_launches_after_it_and_running_trials_keep_theirs(drive):
    driver = drive(trainables.first_version)
    driver.launch(0, {"steps": 3})
    assert driver.next_result().metrics["version"] == 1
    driver.executor.update_trainable(trainables.second_version)
    driver.launch(1, {"steps": 3})
    driver.executor.reply(0, Decision.CONTINUE)
    driver.run_until_ended([0, 1])
    driver.launch(2, {"steps": 2})
    driver.launch(3, {"steps": 2})
    driver.run_until_ended([2, 3])
    versions = {
        trial_id: [result.metrics["version"] for result in driver.results(trial_id)]
        for trial_id in range(4)
    }
    assert versions == {0: [1, 1, 1], 1: [2, 2, 2], 2: [2, 2], 3: [2, 2]}, (
        "every worker, the one that ran the first version included, runs the second next"
    )
