"""The scheduler base: what a running trial does next, and which waiting trial runs next."""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nbtune.metrics import finite, problem, require
from nbtune.objectives import MODES, is_several, mode_of, single
from nbtune.protocol import Decision
from nbtune.trial import Trial

NO_LIMIT = sys.maxsize
"""`free_steps` of a trial that nothing will stop or pause early."""


def results_before(at: float, iteration: int) -> int:
    """How many results a trial that has reported `iteration` of them sends before its
    iteration count reaches `at` (that result itself not counted)."""
    return max(0, math.ceil(at) - iteration - 1)


@dataclass(frozen=True)
class Resume:
    """Ask the runner to resume a paused trial (ignored while the user holds it paused)."""

    trial_id: int


@dataclass(frozen=True)
class Stop:
    """Ask the runner to end a trial that is not the one being decided on."""

    trial_id: int


@dataclass(frozen=True)
class Exploit:
    """Ask the runner for a new trial with `config` that starts from `source`'s checkpoint,
    exactly as `Tuner.fork(source, ...)` makes one, once the trial it `replaces` has ended."""

    source: int
    config: Mapping[str, Any]
    replaces: int | None = None


Request = Resume | Stop | Exploit


class Scheduler:
    """Base of every trial scheduler.

    The runner calls the hooks on its own thread, in this order for each trial:
    `on_trial_add` once, `on_result` after every result (its return value is in force before
    the trial takes another step), and `on_trial_complete` or `on_trial_error` once at the end.
    Whenever a worker is free, `choose_trial_to_run` picks among the trials that wait, and when
    none waits, `on_queue_empty` says so.

    A decision about one trial is `on_result`'s return value. A scheduler that also acts on
    other trials (a synchronous bracket promoting the trials paused at a rung) files requests
    with `request`; the runner carries them out right after the hook that filed them returns.
    Schedulers are pickled with the experiment's state, so `Tuner.restore` carries on their
    bookkeeping.

    Subclasses implement `on_result` and may override the others. The experiment's metric,
    mode and seed arrive through `setup` before any trial is added. A scheduler given a
    metric of its own (`ASHA(metric="loss", mode="min")`, see `own_metric`) compares trials by
    that one instead: a run can stop early on one value and select on others.
    """

    metric: str | None = None
    mode: str = "min"
    _own: tuple[str | None, str | None] = (None, None)
    needs_metric = False
    """Whether the scheduler compares trials, so that the Tuner must be given a metric."""
    time_attr = "training_iteration"
    """The result key that measures a trial's progress (see `progress`)."""
    shares_time = False
    """Whether the scheduler shares the workers among more trials than run at once (PBT):
    the runner then queues every trial the searcher plans at once, rather than one whenever a
    worker is free, so that the scheduler sees them all waiting."""

    max_t: float | None = None
    """The progress (in `time_attr`) at which a trial has had its whole budget, if any."""

    def at_budget_end(self, result: Mapping[str, Any]) -> bool:
        """Whether a trial that stops at `result` has had its whole budget (it ran in full)
        rather than being cut short as worse than its peers."""
        return self.max_t is not None and self.progress(result) >= self.max_t

    def own_metric(self, metric: str | None, mode: str | None) -> None:
        """Compare trials by `metric` in `mode`, whatever the Tuner tunes; a subclass calls this
        from `__init__` with its `metric=` and `mode=` arguments (None: the Tuner's).

        Raises:
            ValueError, TypeError: one line saying what to change.
        """
        name = type(self).__name__
        if metric is not None and not isinstance(metric, str):
            raise TypeError(f"{name}(metric={metric!r}): pass the name of one reported value")
        if mode is not None and mode not in MODES:
            raise ValueError(f"{name}(mode={mode!r}): use 'min' or 'max'")
        if mode is not None and metric is None:
            raise ValueError(f"{name}(mode={mode!r}): pass metric=... with it")
        self._own = (metric, mode)

    def setup(self, metric: str | Sequence[str] | None, mode: Any, seed: int = 0) -> None:
        """Learn what to optimise, and the run's seed; called once by the Tuner with its
        metric and mode (lists of them in a run of several metrics).

        Raises:
            ValueError: the scheduler compares trials but the Tuner has no metric, or several
                and the scheduler none of its own.
        """
        name = type(self).__name__
        own, own_mode = self._own
        if own is not None:
            own_mode = own_mode or mode_of(metric, mode, own)
            if own_mode is None:
                raise ValueError(
                    f"{name}(metric={own!r}): pass mode='min' or 'max' too; the Tuner does not "
                    f"tune {own!r}, so its mode is not known"
                )
            self.metric, self.mode = own, own_mode
            return
        if self.needs_metric and metric is None:
            raise ValueError(
                f"{name} compares trials by their metric: pass metric=... (and mode=...) to "
                f"the Tuner, or to {name}"
            )
        if self.needs_metric and is_several(metric):
            raise ValueError(
                f"{name} needs one metric: pass {name}(metric={metric[0]!r}, mode={mode[0]!r})"
            )
        self.metric = single(metric)
        self.mode = mode if isinstance(mode, str) else "min"

    def plan(self, trials: int | None, *, model_based: bool = False) -> None:
        """Learn how many trials the run plans in all (None: not known, or a `time_budget_s`
        may end the run before), and whether a model-based searcher learns from them
        (`Searcher.learns`); the runner calls this as the run starts and after `extend`.
        """

    def check_result(self, result: Mapping[str, Any]) -> str | None:
        """Why `result` cannot be compared by this scheduler (it lacks the scheduler's own
        metric, or holds no number there), in one line; None if it can."""
        own = self._own[0]
        if own is None:
            return None
        return problem(result, own, f"{type(self).__name__}'s metric")

    def on_trial_add(self, trial: Trial) -> None:
        """A trial was created (by the searcher, the user, or a fork)."""

    def on_result(self, trial: Trial, result: Mapping[str, Any]) -> Decision:
        """Decide what `trial` does after `result`."""
        raise NotImplementedError

    def free_steps(self, trial: Trial) -> int:
        """How many of `trial`'s next results this scheduler is sure to answer CONTINUE.

        The worker sends those without waiting for an answer: each wait is a round trip
        between processes. The count follows from `next_decision_at` when progress is counted
        in results (`time_attr="training_iteration"`); with any other `time_attr`, every
        result waits. `on_result` still hears of every result.
        """
        at = self.next_decision_at(trial)
        if at == math.inf:
            return NO_LIMIT
        if self.time_attr != "training_iteration":
            return 0
        return results_before(at, trial.iteration)

    def next_decision_at(self, trial: Trial) -> float:
        """The least progress, in `time_attr`, at which this scheduler may decide anything but
        CONTINUE for `trial` (just after its latest result); inf if it never will.

        The default, 0, is always safe: every result waits for the scheduler's decision.
        """
        return 0.0

    def on_trial_complete(self, trial: Trial) -> None:
        """`trial` ended normally (or was stopped)."""

    def on_trial_error(self, trial: Trial) -> None:
        """`trial` ended with an error."""

    def on_queue_empty(self) -> None:
        """A worker is free, but no trial waits and the searcher has none to give right now."""

    def restore(self, trials: Sequence[Trial]) -> set[int]:
        """Catch up with the trials of a run being resumed (its saved state can be up to a
        second older than the trial journal).

        Returns the paused trials that should stay paused, waiting for this scheduler to resume
        them; every other unfinished trial carries on.
        """
        return set()

    def choose_trial_to_run(self, waiting: Sequence[Trial]) -> Trial | None:
        """Pick the next trial to start from `waiting` (in queue order), or None to hold off."""
        return waiting[0] if waiting else None

    def request(self, request: Request) -> None:
        """File a request for the runner (see the class docstring)."""
        self.__dict__.setdefault("_requests", []).append(request)

    def take_requests(self) -> list[Request]:
        """The requests filed since the last call, oldest first; the runner calls this."""
        return self.__dict__.pop("_requests", [])

    def progress(self, result: Mapping[str, Any]) -> float:
        """How far the trial has come, in the scheduler's `time_attr`; a one-line error names
        what to report when a result lacks it or holds no finite number there."""
        role = f"{type(self).__name__}'s time_attr"
        return require(result, self.time_attr, role, finite_only=True)

    def score(self, result: Mapping[str, Any]) -> float | None:
        """The result's metric, signed so that higher is better; None if missing or not finite."""
        value = finite(result.get(self.metric)) if self.metric is not None else None
        if value is None:
            return None
        return value if self.mode == "max" else -value


def check_positive(owner: str, name: str, value: Any, *, integer: bool = False) -> None:
    """Raise a one-line ValueError unless `value` is a positive number (an integer if asked)."""
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or not value > 0:
        kind = "integer" if integer else "number"
        raise ValueError(f"{owner}({name}={value!r}): pass a positive {kind}")
    if not math.isfinite(value):
        raise ValueError(f"{owner}({name}={value!r}): pass a finite number")
