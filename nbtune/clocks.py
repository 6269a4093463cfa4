"""The clocks of a run: its time budget, each trial's silence, and the loop's own rounds.

The runner asks them when to wake up (`poll_timeout`) and what has run out; they change
nothing themselves.
"""

from __future__ import annotations

import math
import time

from nbtune.book import LiveTrial, TrialBook

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
        self._directory_checked_at = -math.inf

    def start(self) -> None:
        """The run starts now: its time budget runs from here."""
        if self.time_budget_s is not None:
            self.deadline = time.monotonic() + self.time_budget_s

    def budget_spent(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline

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
