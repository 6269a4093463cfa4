"""Where a run is in its life, as the Tuner, `nbtune.runs` and the dashboard say it."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from nbtune.protocol import Decision


class RunState(str, Enum):
    """The state of a run; a `str`, so `tuner.state == "finished"` reads as it always has.

    PENDING: not started. RUNNING: its runner loop goes on. PAUSED: live, but nothing runs and
    nothing starts by itself (after `pause_all`, or once each trial is paused by hand).
    FINISHED: every trial ran (or the time budget ran out). STOPPED: the user stopped it.
    FAILED: the runner itself failed, a `fail_fast` trial failed, or the scheduler held trials
    it never resumed.
    """

    PENDING = "pending"
    RUNNING = "running"
    PAUSED = "paused"
    FINISHED = "finished"
    STOPPED = "stopped"
    FAILED = "failed"

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


@dataclass
class RunFlags:
    """What every part of a live run reads of its course. The run's end (`nbtune.ending`)
    alone sets the first four, the commands (`nbtune.control`) alone `paused_all`.

    Attributes:
        ending: the state the run ends in, once it was asked to end; None while it goes on.
        ended_by: who ended it (`Trial.stopped_by`), for the trials it stops.
        holds_trials: its running trials pause instead of ending, for `restore` to carry on.
        ending_since: when it was asked to end (monotonic seconds).
        paused_all: the user holds the whole run: no trial starts.
        held_by: why the run starts no trial by itself (trials that failed alike, one after
            the other: `max_consecutive_failures`), until the user resumes it; None if not.
    """

    ending: RunState | None = None
    ended_by: str = "user"
    holds_trials: bool = False
    ending_since: float = 0.0
    paused_all: bool = False
    held_by: str | None = None

    def ending_decision(self) -> tuple[Decision, str | None]:
        """What a trial does at its report once the run ends, and who stops it: pause if the
        run holds its trials, else stop, for the run's reason (a stop already asked for a
        trial keeps who asked; see `LiveTrial.told_decision`)."""
        if self.holds_trials:
            return Decision.PAUSE, None
        return Decision.STOP, self.ended_by
