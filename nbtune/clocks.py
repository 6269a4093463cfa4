"""The clocks of a run: its deadline, each trial's silence, and the loop's own rounds.

The run's deadline comes from its time budget (`time_budget_s`, `Tuner.set_time_budget`:
seconds from the run's start) or from `Tuner.finish_by` (a moment): by then the run ends, the
trials still running stop, and no trial starts that would not finish before it, by the
seconds per iteration measured so far. The runner asks the clocks when to wake up
(`poll_timeout`) and what has run out; they change nothing but themselves.
"""

from __future__ import annotations

import math
import time

from nbtune.book import LiveTrial, TrialBook
from nbtune.trial import Trial

IDLE_POLL_S = 1.0
"""The longest the loop sleeps when nothing is due."""
STOP_GRACE_S = 10.0
"""How long trials have to obey the run's end before they are given up on."""
CHECK_DIRECTORY_EVERY_S = 0.5
"""How often the loop makes sure that the experiment directory is still there."""


class Clocks:
    """What is due when, in monotonic seconds."""

    def __init__(
        self, book: TrialBook, time_budget_s: float | None, trial_timeout_s: float | None
    ) -> None:
        self.book = book
        self.time_budget_s = time_budget_s
        self.trial_timeout_s = trial_timeout_s
        self.deadline: float | None = None
        """When the run must end (monotonic seconds), if ever."""
        self.deadline_by = "time budget"
        """What set the deadline, as `Trial.stopped_by` says it: "time budget" or "deadline"."""
        self._started: float | None = None
        self._finish_in: float | None = None
        self._directory_checked_at = -math.inf

    def start(self) -> None:
        """The run starts now: its time budget, or a deadline set before, runs from here."""
        self._started = time.monotonic()
        if self.time_budget_s is not None:
            self.set_time_budget(self.time_budget_s)
        if self._finish_in is not None:
            self.finish_in(self._finish_in)

    def set_time_budget(self, seconds: float) -> None:
        """The run ends `seconds` after it started."""
        self.time_budget_s = seconds
        self.deadline = (self._started or time.monotonic()) + seconds
        self.deadline_by = "time budget"

    def finish_in(self, seconds: float) -> None:
        """The run ends `seconds` from now (from its start, if it has not started)."""
        if self._started is None:
            self._finish_in = seconds
            return
        self.deadline = time.monotonic() + seconds
        self.deadline_by = "deadline"

    def budget_spent(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline

    def can_finish(self, trial: Trial, horizon: float | None) -> bool:
        """Whether `trial` would reach `horizon` iterations before the deadline, at the seconds
        per iteration that the run's trials took so far (yes where either is not known)."""
        if self.deadline is None or horizon is None:
            return True
        per_iteration = self._seconds_per_iteration()
        if per_iteration is None:
            return True
        needed = max(0.0, horizon - trial.iteration) * per_iteration
        return time.monotonic() + needed <= self.deadline

    def _seconds_per_iteration(self) -> float | None:
        seconds = iterations = 0.0
        now = time.time()
        for trial in self.book:
            if trial.iteration > 0:
                running = now - trial.started_at if trial.started_at is not None else 0.0
                seconds += trial.runtime_s + max(0.0, running)
                iterations += trial.iteration
        return seconds / iterations if iterations else None

    def poll_timeout(self) -> float:
        """How long the loop may wait for workers: until the run's deadline or the first
        trial that may time out, and no longer than `IDLE_POLL_S`."""
        deadlines = [d for d in (self.deadline, self._first_trial_deadline()) if d is not None]
        if not deadlines:
            return IDLE_POLL_S
        return max(0.0, min(IDLE_POLL_S, min(deadlines) - time.monotonic()))

    def _first_trial_deadline(self) -> float | None:
        timed = self.book.on_the_clock() if self.trial_timeout_s is not None else []
        if not timed:
            return None
        return min(live.heard_at for live in timed) + self.trial_timeout_s

    def silent_too_long(self) -> list[LiveTrial]:
        """The running trials that have said nothing for `trial_timeout_s`."""
        if self.trial_timeout_s is None:
            return []
        now = time.monotonic()
        return [
            live for live in self.book.on_the_clock() if now - live.heard_at >= self.trial_timeout_s
        ]

    def timeout_error(self, *, killed: bool) -> str:
        """The error of a trial that timed out (`killed`, or abandoned in its worker)."""
        return (
            f"TrialTimeout: no report for {self.trial_timeout_s:g} s (trial_timeout_s); "
            f"the trial was {'killed' if killed else 'abandoned in its worker'}"
        )

    def directory_check_due(self) -> bool:
        """Whether it is time to make sure the experiment directory is still there."""
        now = time.monotonic()
        if now - self._directory_checked_at < CHECK_DIRECTORY_EVERY_S:
            return False
        self._directory_checked_at = now
        return True

    @staticmethod
    def grace_over(ending_since: float) -> bool:
        """Whether trials asked to end at `ending_since` have had their time to obey."""
        return time.monotonic() - ending_since > STOP_GRACE_S
