"""Where the core meets a front end it never imports: a registry filled from above.

No core module imports `nbtune.ui`, ipywidgets, plotly or IPython, not even inside a function
(ARCHITECTURE.md, invariant 2), so the core runs the same in a script, a test or a notebook.
As tqdm's `autonotebook` picks a front end from above both `std` and `notebook`, the package's
face wires one in here:

    nbtune/__init__.py --register(load)--> front_end <--make_dashboard(self)-- Tuner, analysis
                                               |
                                   load(), on the first dashboard: imports nbtune.ui
                                               |
                                   Dashboard(source) --reads--> DashboardSource (Tuner, ...)

`DashboardSource` declares everything a front end reads from its source and every command its
buttons send, so the UI needs no probing and the core knows the UI only as the small
`Dashboard` and `SummarySlot` protocols below.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from nbtune.constraints import Constraints
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
    def metric(self) -> str | list[str] | None:
        """The reported value being optimised, if any; a list of them if several."""

    @property
    def mode(self) -> str | list[str]:
        """Either "min" or "max"; a list of them, one per metric, if several."""

    @property
    def constraints(self) -> Constraints:
        """The bounds on reported keys (`nbtune.constraints`): the best ignores the trials
        that miss them, and the table and charts mark those."""

    @property
    def state(self) -> str:
        """One of "pending", "running", "paused", "finished", "stopped", "failed"
        ("unfinished": on disk).

        "paused": the run is live but nothing runs and nothing will start by itself: after
        Pause all (a trial added meanwhile waits too), or once every unfinished trial is
        paused by hand and no new one starts in their place (the searcher has nothing to give,
        or suspended trials hold every worker). It is "running" again once a trial is
        resumed. A run that has ended is "finished", "stopped" or "failed".
        """

    @property
    def live(self) -> bool:
        """Whether the run goes on here, so that the view updates and its buttons steer."""

    @property
    def max_concurrent(self) -> int:
        """How many trials run at once."""

    @property
    def planned_trials(self) -> int | None:
        """How many trials the searcher plans in all; None if it cannot say.

        Trials it did not suggest (added by hand, forked, made by a scheduler: their `origin`
        is not "searcher") come on top, so a progress bar's end is this plus those. Once the
        run has ended, it is the number the searcher did suggest: no trial still to come.
        """

    def snapshot(self) -> tuple[Sequence[Trial], Sequence[Mapping[str, Any]]]:
        """The trials and the result rows, consistent with each other, at one moment."""

    def checkpoint_mb(self, trials: Sequence[Trial] | None = None) -> dict[int, float]:
        """Megabytes of checkpoints on disk, by trial id (of `trials`, or of every trial)."""

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


class SummarySlot(Protocol):
    """The place under a displayed dashboard that receives the run's summary once it ends."""

    def fill(self) -> bool:
        """Put the summary in if the run has ended; return whether the slot is filled now."""


class Dashboard(Protocol):
    """What the core does with a dashboard besides handing it to the user: show it."""

    def show(self) -> SummarySlot | None:
        """Display the dashboard under the running cell; return the slot for the summary
        (None outside a Jupyter kernel)."""


DashboardFactory = Callable[[DashboardSource], Dashboard]
"""Makes the dashboard of a source."""

_load: Callable[[], DashboardFactory] | None = None
_preload: Callable[[], None] | None = None
_preloading = False


def register(
    load: Callable[[], DashboardFactory], preload: Callable[[], None] | None = None
) -> None:
    """Set the front end: `load()` returns its dashboard factory, importing it if need be;
    `preload()`, if given, imports what its first dashboard needs besides (see `preload`).

    `load` is called only when a dashboard is made, so `import nbtune` imports no UI library.
    """
    global _load, _preload
    _load, _preload = load, preload


def preload() -> None:
    """Import the front end on a thread of its own, once per process, for a dashboard to come
    (a Tuner built in a notebook shows one when it starts): ipywidgets, plotly and the
    dashboard take a second or more to import, which `start()` and the first chart would
    otherwise wait for. What fails is left for the dashboard to show when it is made."""
    global _preloading
    if _load is None or _preloading:
        return
    _preloading = True
    steps = (_load, _preload or (lambda: None))
    threading.Thread(target=_run_quietly, args=steps, name="nbtune-front-end", daemon=True).start()


def _run_quietly(*steps: Callable[[], Any]) -> None:
    with contextlib.suppress(Exception):
        for step in steps:
            step()


def make_dashboard(source: DashboardSource) -> Dashboard:
    """The dashboard of `source`, from the front end that `register` set.

    Raises:
        RuntimeError: if none was set (`import nbtune` sets the notebook's).
    """
    if _load is None:
        raise RuntimeError("nbtune has no front end registered; import nbtune to get one")
    return _load()(source)
