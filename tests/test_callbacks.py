"""A callback with a `setup(tuner)` method hears of the run before its first event."""

from __future__ import annotations

import trainables

import nbtune as nt
from nbtune.events import TrialAdded


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
