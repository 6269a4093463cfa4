"""Drive an executor directly, the way the runner does."""

from __future__ import annotations

import time

import pytest

from nbtune.protocol import TrialLaunch, WorkerDone, WorkerFailed, WorkerLost, WorkerResult
from nbtune.schedulers import Decision

ENDINGS = (WorkerDone, WorkerFailed, WorkerLost)


class Driver:
    """Starts trials on an executor and collects their events, replying as told."""

    def __init__(self, executor, trainable, tmp_path, max_workers=2):
        self.executor = executor
        self.tmp_path = tmp_path
        executor.open(trainable, max_workers)
        self.events = []
        self._unread = []

    def launch(self, trial_id, config, *, iteration=0, checkpoint_path=None):
        self.executor.start(
            TrialLaunch(
                trial_id=trial_id,
                config=config,
                iteration=iteration,
                checkpoint_path=checkpoint_path,
                checkpoint_dir=str(self.tmp_path / f"trial{trial_id}"),
                capture_output=self.executor.captures_output,
            )
        )

    def run_until_ended(self, trial_ids, decide=lambda event: Decision.CONTINUE, timeout=30):
        """Poll, answering each result that waits with `decide(event)`, until every trial has
        ended."""
        pending = set(trial_ids)
        deadline = time.monotonic() + timeout
        while pending:
            assert time.monotonic() < deadline, f"trials {pending} did not end in {timeout} s"
            for event in self.executor.poll(1.0):
                self.events.append(event)
                if isinstance(event, WorkerResult) and event.waits:
                    self.executor.reply(event.trial_id, decide(event))
                elif isinstance(event, ENDINGS):
                    pending.discard(event.trial_id)
        return self.events

    def next_result(self, timeout=30):
        """The oldest result not yet returned, polling for it if need be (every event is kept)."""
        deadline = time.monotonic() + timeout
        while not self._unread:
            assert time.monotonic() < deadline, f"no result in {timeout} s"
            for event in self.executor.poll(1.0):
                self.events.append(event)
                if isinstance(event, WorkerResult):
                    self._unread.append(event)
        return self._unread.pop(0)

    def results(self, trial_id):
        return [e for e in self.events if isinstance(e, WorkerResult) and e.trial_id == trial_id]

    def ending(self, trial_id):
        return next(e for e in self.events if isinstance(e, ENDINGS) and e.trial_id == trial_id)


@pytest.fixture
def drive(executor_class, tmp_path):
    """`drive(trainable)` opens a fresh executor of each kind for it; closed afterwards."""
    drivers = []

    def make(trainable, **options):
        driver = Driver(executor_class(), trainable, tmp_path, **options)
        drivers.append(driver)
        return driver

    yield make
    for driver in drivers:
        driver.executor.close()
