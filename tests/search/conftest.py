"""Fixtures of the searcher tests."""

from __future__ import annotations

import pytest

from nbtune.events import TrialPaused, TrialResult


@pytest.fixture
def stop_midway(log):
    """Runs a tuner until trial 0 has reported, pauses that trial, then stops the run: a run
    to restore, with a trial paused at its checkpoint."""

    def stop(tuner):
        tuner.subscribe(log)
        tuner.start()
        log.wait_for(lambda e: isinstance(e, TrialResult) and e.trial_id == 0)
        tuner.pause(0)
        log.wait_for(lambda e: isinstance(e, TrialPaused) and e.trial_id == 0)
        tuner.stop()
        assert tuner.wait(30)

    return stop
