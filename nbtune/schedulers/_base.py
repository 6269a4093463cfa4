"""The scheduler base: what a running trial does next, and which waiting trial runs next."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import Enum
from typing import Any

from nbtune.trial import Trial


class Decision(Enum):
    """A scheduler's verdict on a trial after one of its results.

    CONTINUE lets it go on, PAUSE frees its worker until it is resumed, STOP ends it.
    """

    CONTINUE = "CONTINUE"
    PAUSE = "PAUSE"
    STOP = "STOP"


class Scheduler:
    """Base of every trial scheduler.

    The runner calls the hooks on its own thread, in this order for each trial:
    `on_trial_add` once, `on_result` after every result (its return value is in force before
    the trial takes another step), and `on_trial_complete` or `on_trial_error` once at the end.
    Whenever a worker is free, `choose_trial_to_run` picks among the trials that wait.

    Subclasses implement `on_result` and may override the others. The experiment's metric and
    mode arrive through `set_objective` before any trial is added.
    """

    metric: str | None = None
    mode: str = "min"

    def set_objective(self, metric: str | None, mode: str) -> None:
        """Learn what to optimise; called once by the Tuner."""
        self.metric = metric
        self.mode = mode

    def on_trial_add(self, trial: Trial) -> None:
        """A trial was created (by the searcher or the user)."""

    def on_result(self, trial: Trial, result: Mapping[str, Any]) -> Decision:
        """Decide what `trial` does after `result`."""
        raise NotImplementedError

    def on_trial_complete(self, trial: Trial) -> None:
        """`trial` ended normally."""

    def on_trial_error(self, trial: Trial) -> None:
        """`trial` ended with an error."""

    def choose_trial_to_run(self, waiting: Sequence[Trial]) -> Trial | None:
        """Pick the next trial to start from `waiting` (in queue order), or None to hold off."""
        return waiting[0] if waiting else None
