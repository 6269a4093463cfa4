"""Where the core meets a front end it never imports: what the front end may read and send.

`DashboardSource` declares everything a dashboard reads from its source and every command its
buttons send; `Tuner` and `ExperimentAnalysis` implement it, so the UI reads declared members
instead of probing its source.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from nbtune.events import Event
from nbtune.trial import Trial


@runtime_checkable
class DashboardSource(Protocol):
    """What a dashboard and a run's summary read from their source, and the commands they send.

    `Tuner` is one (live while it runs); `ExperimentAnalysis` is one that never is live and
    refuses the commands. The commands are only sent while `live` is true.
    """

    @property
    def name(self) -> str:
        """The experiment's name."""

    @property
    def path(self) -> Path:
        """The experiment's directory (a failed trial's traceback is in it)."""

    @property
    def metric(self) -> str | None:
        """The reported value being optimised, if any."""

    @property
    def mode(self) -> str:
        """Either "min" or "max"."""

    @property
    def state(self) -> str:
        """One of "pending", "running", "finished", "stopped", "failed" ("unfinished": on disk)."""

    @property
    def live(self) -> bool:
        """Whether the run goes on here, so that the view updates and its buttons steer."""

    @property
    def max_concurrent(self) -> int:
        """How many trials run at once."""

    @property
    def planned_trials(self) -> int | None:
        """How many trials the searcher plans in all; None if it cannot say."""

    def snapshot(self) -> tuple[Sequence[Trial], Sequence[Mapping[str, Any]]]:
        """The trials and the result rows, consistent with each other, at one moment."""

    def subscribe(self, callback: Callable[[Event], None]) -> Callable[[], None]:
        """Call `callback` with every event from now on; return the function to unsubscribe."""

    def pause(self, *trial_ids: int | str) -> None:
        """Pause these trials."""

    def resume(self, *trial_ids: int | str) -> None:
        """Resume these paused trials."""

    def stop(self, *trial_ids: int | str, force: bool = False) -> None:
        """End these trials, or with no ids the whole run."""

    def pause_all(self) -> None:
        """Hold the whole experiment."""

    def resume_all(self) -> None:
        """Let every trial go on."""

    def set_max_concurrent(self, max_concurrent: int) -> None:
        """Change how many trials run at once."""
