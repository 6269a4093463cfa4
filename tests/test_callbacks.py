"""A callback with a `setup(tuner)` method hears of the run before its first event."""

from __future__ import annotations

import logging
import sys

import pytest
import trainables

import nbtune as nt
from nbtune.events import EventBus, TrialAdded, TrialResult


class Recorder:
    """A callback that notes what `setup` saw, and every event after it."""

    def __init__(self):
        self.seen = []

    def setup(self, tuner):
        self.seen.append(("setup", tuner.name, [t.trial_id for t in tuner.trials]))

    def __call__(self, event):
        self.seen.append(type(event).__name__)


def test_setup_comes_once_before_the_first_event(make_tuner):
    recorder = Recorder()
    tuner = make_tuner(trainables.count_up, {"steps": 2}, metric="loss", callbacks=[recorder])
    tuner.add_trial({"steps": 1})
    tuner.run()
    assert recorder.seen[0] == ("setup", tuner.name, [])
    assert recorder.seen.count(recorder.seen[0]) == 1
    assert recorder.seen[1] == TrialAdded.__name__, "even a trial added before start()"


def test_setup_of_a_restored_run_sees_the_trials_it_carries_on(make_tuner):
    tuner = make_tuner(trainables.count_up, {"x": nt.grid([1, 2])}, metric="loss")
    tuner.run()
    recorder = Recorder()
    again = nt.Tuner.restore(tuner.path, trainables.count_up, progress=False, callbacks=[recorder])
    again.run()
    assert recorder.seen[0] == ("setup", tuner.name, [0, 1])


def test_a_plain_function_is_still_a_callback(make_tuner):
    seen = []
    tuner = make_tuner(trainables.count_up, {"steps": 1}, metric="loss", callbacks=[seen.append])
    tuner.run()
    assert any(isinstance(event, TrialAdded) for event in seen)


class ExitsOnResult:
    """A callback that calls `sys.exit()` on the first result it hears, as a script's
    callback might."""

    def __init__(self):
        self.calls = 0

    def __call__(self, event):
        if isinstance(event, TrialResult):
            self.calls += 1
            sys.exit("bye")


def test_a_callback_that_calls_sys_exit_is_dropped_with_one_warning_and_the_run_goes_on(
    make_tuner, caplog
):
    exits, seen = ExitsOnResult(), []
    tuner = make_tuner(
        trainables.count_up,
        {"steps": 3, "x": nt.grid([1, 2])},
        metric="loss",
        executor=nt.ThreadExecutor(),
        callbacks=[exits, seen.append],
    )
    with caplog.at_level(logging.WARNING, logger="nbtune"):
        tuner.run()
    assert tuner.state == "finished"
    assert {t.status for t in tuner.trials} == {nt.TrialStatus.TERMINATED}
    assert exits.calls == 1, "dropped after the first raise"
    assert sum(isinstance(e, TrialResult) for e in seen) == 6, "the other callback heard all"
    warned = [r.getMessage() for r in caplog.records if "ExitsOnResult" in r.getMessage()]
    assert len(warned) == 1 and "SystemExit: bye" in warned[0], warned


def test_a_keyboard_interrupt_in_a_callback_is_not_swallowed():
    bus = EventBus()

    def interrupted(event):
        raise KeyboardInterrupt

    bus.subscribe(interrupted)
    with pytest.raises(KeyboardInterrupt):
        bus.publish(TrialAdded(0, {}))


class FailsSetup:
    def setup(self, tuner):
        raise ConnectionError("tracking server unreachable")

    def __call__(self, event):
        pass


@pytest.mark.parametrize("overwrite", [False, True])
def test_a_callback_whose_setup_raises_fails_start_and_frees_the_folder(make_tuner, overwrite):
    options = {"name": "again", "metric": "loss", "overwrite": overwrite}
    tuner = make_tuner(trainables.count_up, {"steps": 2}, callbacks=[FailsSetup()], **options)
    with pytest.raises(ConnectionError, match="tracking server unreachable"):
        tuner.start()
    with pytest.raises(RuntimeError, match="has not started"):
        tuner.wait(timeout=5)

    again = make_tuner(trainables.count_up, {"steps": 2}, **options)
    again.run()
    assert again.state == "finished" and len(again.history()) == 2
