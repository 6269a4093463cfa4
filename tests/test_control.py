"""Steering a live run: pause, resume, stop, add, fork, concurrency, from outside the runner."""

from __future__ import annotations

import json
import threading

import pytest
import trainables

import nbtune as nt
from nbtune.events import (
    CommandApplied,
    TrialCompleted,
    TrialPaused,
    TrialResult,
    TrialResumed,
    TrialStarted,
)

N = 20
LONG = 3000
"""Steps of a trial that runs until the test stops it (0.01 s each)."""
KINDS = {
    "checkpointing function": (trainables.steps, {"steps": N, "checkpoint": True}, "checkpoint"),
    "function without checkpoints": (trainables.steps, {"steps": N}, "suspend"),
    "class trainable": (trainables.OnDemand, {"scale": 1.0}, "checkpoint"),
}


@pytest.fixture(params=sorted(KINDS))
def kind(request):
    return KINDS[request.param]


def result_of(trial_id, iteration):
    def match(event):
        return (
            isinstance(event, TrialResult)
            and event.trial_id == trial_id
            and event.result["training_iteration"] >= iteration
        )

    return match


def event_of(kind, trial_id):
    return lambda event: isinstance(event, kind) and event.trial_id == trial_id


def iterations(tuner, trial_id):
    history = tuner.history()
    return history.loc[history["trial_id"] == trial_id, "training_iteration"].tolist()


def test_pause_then_resume_continues_without_gap_or_repeat(make_tuner, log, kind):
    trainable, space, paused_by = kind
    tuner = make_tuner(
        trainable,
        {**space, "x": nt.grid([0, 1])},
        metric="loss",
        max_concurrent=1,
        stop={"training_iteration": N},
        callbacks=[log],
    )
    tuner.start()
    log.wait_for(result_of(0, 3))
    tuner.pause(0)
    log.wait_for(event_of(TrialPaused, 0))
    trial = tuner.get_trial(0)
    assert trial.status is nt.TrialStatus.PAUSED
    assert trial.paused_by == paused_by
    assert tuner.dataframe().loc[0, "paused_by"] == paused_by
    if paused_by == "checkpoint":
        started = log.wait_for(event_of(TrialStarted, 1))
        assert tuner.get_trial(0).status is nt.TrialStatus.PAUSED, "its worker went to trial 1"
        assert started.trial_id == 1
    tuner.resume(0)
    assert tuner.wait(60)
    assert iterations(tuner, 0) == list(range(1, N + 1))
    assert iterations(tuner, 1) == list(range(1, N + 1))
    assert (tuner.dataframe()["status"] == "TERMINATED").all()
    started_1 = log.index(TrialStarted, 1)
    if paused_by == "suspend":
        assert started_1 > log.index(TrialCompleted, 0), "a suspended trial keeps its worker"
    else:
        assert log.index(TrialPaused, 0) < started_1 < log.index(TrialResumed, 0)


def test_stop_ends_a_running_or_paused_trial_and_keeps_its_results(make_tuner, log, kind):
    trainable, space, _ = kind
    steps = {"steps": LONG} if "steps" in space else {}
    tuner = make_tuner(
        trainable,
        {**space, **steps, "x": nt.grid([0, 1])},
        metric="loss",
        stop={"training_iteration": LONG},
        callbacks=[log],
    )
    tuner.start()
    log.wait_for(result_of(0, 2))
    log.wait_for(result_of(1, 2))
    tuner.stop(0)
    tuner.pause(1)
    log.wait_for(event_of(TrialPaused, 1))
    tuner.stop(1)
    assert tuner.wait(30), "the run ends: no trial is left to run"
    frame = tuner.dataframe()
    assert frame["status"].tolist() == ["TERMINATED", "TERMINATED"]
    assert frame["stopped_by"].tolist() == ["user", "user"], "told apart from a completed trial"
    for trial_id in (0, 1):
        done = frame.loc[trial_id, "training_iteration"]
        assert 2 <= done < LONG, "both were cut short"
        assert iterations(tuner, trial_id) == list(range(1, done + 1))


def test_force_stop_says_when_the_executor_cannot_kill(make_tuner, log):
    tuner = make_tuner(
        trainables.forever, {"interval": 0.01}, callbacks=[log], executor=nt.ThreadExecutor()
    )
    tuner.start()
    log.wait_for(result_of(0, 1))
    with pytest.warns(UserWarning, match="ThreadExecutor cannot kill a single trial"):
        tuner.stop(0, force=True)
    log.wait_for(event_of(TrialCompleted, 0))
    assert tuner.wait(30)
    tuner.stop()
    assert tuner.state == "finished", "stopping an ended run changes nothing"


def test_a_waiting_trial_pauses_at_once_and_holds_the_run_open(make_tuner, log):
    space = {"steps": 5, "interval": 0.01, "x": nt.grid([0, 1, 2])}
    tuner = make_tuner(trainables.steps, space, max_concurrent=1, callbacks=[log])
    tuner.start()
    log.wait_for(result_of(0, 1))
    added = tuner.add_trial({"steps": 3, "interval": 0.0, "x": 9})
    tuner.pause(added)
    assert tuner.get_trial(added).paused_by == "queue"
    log.wait_for(lambda event: len(log.of(TrialCompleted)) == 3)
    assert not tuner.wait(timeout=0.2), "a paused trial keeps the run open"
    assert tuner.status.paused == 1
    assert tuner.status.live
    tuner.resume(added)
    assert tuner.wait(30)
    assert iterations(tuner, added) == [1, 2, 3]


def test_pause_all_holds_everything_until_resume_all(make_tuner, log):
    space = {"steps": 10, "checkpoint": True, "x": nt.grid(range(4))}
    tuner = make_tuner(trainables.steps, space, callbacks=[log])
    tuner.start()
    log.wait_for(result_of(1, 1))
    tuner.pause_all()
    log.wait_for(event_of(TrialPaused, 0))
    log.wait_for(event_of(TrialPaused, 1))
    status = tuner.status
    assert status.running == 0
    assert status.paused == 2 + status.pending
    assert not log.of(TrialStarted, 2), "no trial starts while the experiment is held"
    tuner.resume_all()
    assert tuner.wait(30)
    assert tuner.status.terminated == 4
    assert tuner.history().groupby("trial_id").size().tolist() == [10] * 4


def test_the_run_is_paused_while_pause_all_holds_it(make_tuner, log):
    space = {"steps": LONG, "checkpoint": True, "x": nt.grid(range(4))}
    tuner = make_tuner(trainables.steps, space, callbacks=[log], executor=nt.ThreadExecutor())
    tuner.start()
    log.wait_for(result_of(1, 1))
    assert tuner.state == "running"
    tuner.pause_all()
    log.wait_for(event_of(TrialPaused, 0))
    log.wait_for(event_of(TrialPaused, 1))
    assert tuner.state == "paused", "every trial is paused and none starts"
    assert repr(tuner.status).startswith("<paused (live): ")
    added = tuner.add_trial({"steps": 2, "checkpoint": True, "x": 9})
    assert tuner.get_trial(added).status is nt.TrialStatus.PENDING
    assert tuner.state == "paused", "a trial added meanwhile waits for resume_all"
    tuner.resume_all()
    assert tuner.state == "running"
    tuner.stop()
    assert tuner.wait(30)
    assert tuner.state == "stopped"


HELD = {
    "checkpointed, nothing left to suggest": (True, 2, None),
    "suspended, holding every worker": (False, 4, None),
    "checkpointed, the searcher at its cap": (True, 4, 2),
}
"""Trials checkpoint?, grid points, a ConcurrencyLimiter's cap: each leaves no new trial to
start once trials 0 and 1 are paused."""


@pytest.mark.parametrize("held", HELD)
def test_the_run_is_paused_once_each_trial_is_paused_by_hand(make_tuner, log, held):
    checkpoint, points, cap = HELD[held]
    space = {"steps": LONG, "checkpoint": checkpoint, "x": nt.grid(range(points))}
    searcher = nt.RandomSearch() if cap is None else nt.ConcurrencyLimiter(nt.RandomSearch(), cap)
    tuner = make_tuner(
        trainables.steps,
        space,
        searcher=searcher,
        callbacks=[log],
        executor=nt.ThreadExecutor(),
    )
    tuner.start()
    log.wait_for(result_of(1, 1))
    tuner.pause(0)
    log.wait_for(event_of(TrialPaused, 0))
    assert tuner.state == "running", "trial 1 still runs"
    tuner.pause(1)
    log.wait_for(event_of(TrialPaused, 1))
    assert tuner.state == "paused"
    assert len(tuner.trials) == 2, "no trial started in their place"
    tuner.resume(0)
    assert tuner.state == "running"
    tuner.stop()
    assert tuner.wait(30)
    assert tuner.state == "stopped"


def test_add_trial_queues_a_hand_picked_config(make_tuner, log):
    space = {"steps": 3, "lr": nt.uniform(0.1, 1.0)}
    tuner = make_tuner(trainables.steps, space, metric="loss", callbacks=[log])
    tuner.start()
    log.wait_for(event_of(TrialStarted, 0))
    new_id = tuner.add_trial({"steps": 2, "lr": 0.5})
    assert new_id == 1
    assert tuner.wait(30)
    assert tuner.get_trial(1).config == {"steps": 2, "lr": 0.5}
    assert iterations(tuner, 1) == [1, 2]


def test_fork_starts_from_the_parent_s_checkpoint_with_new_values(make_tuner, log):
    space = {"steps": N, "checkpoint": True, "lr": 1.0}
    tuner = make_tuner(trainables.steps, space, metric="loss", callbacks=[log])
    tuner.start()
    log.wait_for(result_of(0, 5))
    child = tuner.fork(0, {"lr": 0.5})
    tuner.stop(0)
    assert tuner.wait(30)
    forked = tuner.get_trial(child)
    assert forked.parent == 0
    assert forked.config == {"steps": N, "checkpoint": True, "lr": 0.5}
    history = tuner.history().set_index(["trial_id", "training_iteration"])
    first = iterations(tuner, child)[0]
    assert first >= 6, "the child starts after the parent's checkpoint"
    assert iterations(tuner, child) == list(range(first, N + 1))
    assert history.loc[(child, first), "step"] == first
    assert history.loc[(child, first), "loss"] == pytest.approx(0.5 / first)
    assert tuner.dataframe().loc[child, "parent"] == 0


def test_set_max_concurrent_takes_effect_at_once(make_tuner, log):
    space = {"steps": 30, "interval": 0.01, "x": nt.grid(range(3))}
    tuner = make_tuner(trainables.steps, space, max_concurrent=1, callbacks=[log])
    tuner.start()
    log.wait_for(result_of(0, 1))
    assert not log.of(TrialStarted, 1)
    tuner.set_max_concurrent(3)
    log.wait_for(event_of(TrialStarted, 2))
    assert not log.of(TrialCompleted), "three trials ran side by side"
    assert tuner.wait(30)


def test_lowering_max_concurrent_sends_the_newest_trials_back_to_the_queue(make_tuner, log):
    finish = threading.Event()
    space = {"steps": LONG, "checkpoint": True, "x": nt.grid(range(3))}
    tuner = make_tuner(
        trainables.steps,
        space,
        metric="loss",
        max_concurrent=3,
        stop=lambda trial_id, result: finish.is_set(),
        callbacks=[log],
    )
    tuner.start()
    for trial_id in range(3):
        log.wait_for(result_of(trial_id, 1))
    tuner.set_max_concurrent(1)
    log.wait_for(lambda event: len(log.of(TrialPaused)) == 2)
    assert tuner.status.running == 1
    assert tuner.status.pending == 2, "sent back to the queue, not paused for the user"
    finish.set()  # each trial ends at its next report, the queued ones once they run again
    assert tuner.wait(30)
    history = tuner.history()
    assert (history["step"] == history["training_iteration"]).all(), "no work repeated"
    assert tuner.status.terminated == 3


def test_extend_samples_more_configurations(make_tuner):
    tuner = make_tuner(trainables.steps, {"steps": 20, "lr": nt.uniform(0, 1)}, num_samples=2)
    tuner.start()
    tuner.extend(3)
    assert tuner.wait(30)
    assert tuner.status.terminated == 5


@pytest.mark.parametrize(
    ("command", "error", "message"),
    [
        (lambda t: t.resume(1), nt.IllegalTransitionError, "trial 1 is TERMINATED; only a paused"),
        (lambda t: t.pause(9), nt.TrialNotFoundError, "there is no trial 9; its trials are 0 to 1"),
        (lambda t: t.stop(1), nt.IllegalTransitionError, "trial 1 has already ended"),
        (lambda t: t.fork(0), nt.IllegalTransitionError, "trial 0 has no checkpoint to fork"),
        (lambda t: t.fork(0, {"lrr": 1}), ValueError, "'lrr' is not a parameter"),
        (lambda t: t.add_trial({"lr": 1}), ValueError, "config does not fit the search space"),
        (lambda t: t.pause(), ValueError, "pause.. needs trial ids"),
    ],
)
def test_impossible_commands_say_why(make_tuner, log, command, error, message):
    space = {"steps": 50, "interval": 0.01, "x": nt.grid([0, 1])}
    tuner = make_tuner(trainables.steps, space, callbacks=[log])
    tuner.start()
    log.wait_for(event_of(TrialStarted, 1))
    tuner.stop(1)
    log.wait_for(event_of(TrialCompleted, 1))
    with pytest.raises(error, match=message):
        command(tuner)
    tuner.stop()
    assert tuner.wait(30)


def test_commands_on_an_ended_run(make_tuner):
    tuner = make_tuner(trainables.steps, {"steps": 1})
    tuner.start()
    assert tuner.wait(30)
    with pytest.raises(nt.RunEndedError, match="has ended .finished.; start a new Tuner"):
        tuner.pause(0)
    tuner.stop()
    assert not tuner.status.live
    assert tuner.state == "finished", "stopping an ended run does nothing"


def test_stopping_a_run_that_ends_meanwhile_does_nothing(make_tuner, log):
    tuner = make_tuner(trainables.steps, {"steps": 2}, callbacks=[log])
    tuner.start()
    log.wait_for(event_of(TrialCompleted, 0))
    tuner.stop()  # the run ends on its own at about this moment
    assert tuner.wait(30)
    assert tuner.state in ("finished", "stopped")


def test_every_command_is_logged_on_disk_and_on_the_bus(make_tuner, log):
    space = {"steps": 30, "checkpoint": True, "x": nt.grid([0, 1])}
    tuner = make_tuner(trainables.steps, space, callbacks=[log])
    tuner.start()
    log.wait_for(result_of(0, 1))
    tuner.pause(0)
    with pytest.raises(nt.TrialNotFoundError):
        tuner.stop(42)
    tuner.resume(0)
    tuner.set_max_concurrent(1)
    assert tuner.wait(30)
    lines = [json.loads(line) for line in (tuner.path / "commands.jsonl").read_text().splitlines()]
    assert [(line["command"], line["error"] is None) for line in lines] == [
        ("pause", True),
        ("stop", False),
        ("resume", True),
        ("set_max_concurrent", True),
    ]
    assert lines[1]["arguments"] == {"trial_ids": [42], "force": False}
    assert [event.command for event in log.of(CommandApplied)] == [
        line["command"] for line in lines
    ]


def test_fork_and_add_work_with_a_class_trainable(make_tuner, log):
    tuner = make_tuner(
        trainables.OnDemand,
        {"scale": 1.0, "interval": 0.01},
        metric="loss",
        stop={"training_iteration": N},
        callbacks=[log],
    )
    tuner.start()
    log.wait_for(result_of(0, 3))
    tuner.pause(0)
    log.wait_for(event_of(TrialPaused, 0))
    child = tuner.fork(0, {"scale": 2.0})
    added = tuner.add_trial({"scale": 3.0, "interval": 0.0})
    tuner.resume(0)
    assert tuner.wait(30)
    history = tuner.history()
    parent_at = tuner.get_trial(child).iteration - len(iterations(tuner, child))
    rows = history[history["trial_id"] == child]
    assert (rows["count"] == rows["training_iteration"]).all(), "the child counts on from 0's"
    assert rows["loss"].tolist() == [2.0 / count for count in rows["count"]]
    assert parent_at >= 3
    assert iterations(tuner, added) == list(range(1, N + 1))
    assert iterations(tuner, 0) == list(range(1, N + 1))
