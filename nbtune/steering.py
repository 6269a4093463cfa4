"""Steering a live run: the commands a user sends it from any thread.

`Tuner` takes these methods from `Steering`: each checks its arguments on the caller's thread,
then runs on the runner thread through `TrialRunner.call` (see `RunControl`), logged in the
experiment's journal, and returns once it has taken effect.
"""

from __future__ import annotations

import concurrent.futures
import copy
import datetime
import functools
import threading
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from nbtune import space_hints
from nbtune.arguments import positive_seconds, seconds_until, whole_number
from nbtune.code_hash import code_hash
from nbtune.control import RunControl
from nbtune.define_by_run import DefineByRunSpace, search_space
from nbtune.errors import RunEndedError
from nbtune.executors._base import Executor
from nbtune.horizon import view_horizon
from nbtune.run_state import RunState
from nbtune.runner import TrialRunner
from nbtune.space import SearchSpace
from nbtune.trainable_check import check_trainable

Command = Callable[[RunControl], Any]
"""What the user asks of a run, as a function of its `RunControl`, run on the runner thread."""

COMMAND_TIMEOUT_S = 10.0
"""How long a command waits for the runner to carry it out."""
MAX_CONCURRENT = 1024
"""The most trials at once a Tuner takes: beyond it, a count is a typo, not a plan."""


class Steering:
    """The commands of a live run, for `Tuner`: pause, resume and stop trials or the whole run,
    fork a trial, change how many run at once, let the searcher suggest more."""

    name: str
    trainable: Any
    space: SearchSpace
    executor: Executor
    max_concurrent: int
    time_budget_s: float | None
    _finish_by: float | datetime.datetime | None
    _runner: TrialRunner | None
    _thread: threading.Thread | None
    mode: Any
    scheduler: Any
    planned_trials: int | None

    def _require_metric(self) -> Any:
        raise NotImplementedError

    def _snapshot(self) -> tuple[Sequence[Any], Sequence[Mapping[str, Any]]]:
        raise NotImplementedError

    def _started_runner(self) -> TrialRunner:
        raise NotImplementedError

    def pause(self, *trial_ids: int | str) -> None:
        """Pause trials: `pause(3)`, `pause(3, 5)`, or `pause("all")` (see `pause_all`).

        A running trial pauses at its next report: by checkpoint if it can (its worker goes to
        the next waiting trial), else suspended inside `report()` (it keeps its worker). A
        waiting trial pauses at once. `dataframe()` shows which in `paused_by`.
        """
        if trial_ids == ("all",):
            self.pause_all()
            return
        self._command(
            "pause", _for_each(trial_ids, "pause", RunControl.pause_trial), trial_ids=trial_ids
        )

    def resume(self, *trial_ids: int | str) -> None:
        """Resume paused trials: `resume(3)`, `resume(3, 5)` or `resume("all")`.

        A checkpointed trial rejoins the queue ahead of new trials and goes on from its
        checkpoint, its iterations continuing without a gap or a repeat; a suspended trial
        simply continues.
        """
        if trial_ids == ("all",):
            self.resume_all()
            return
        command = _for_each(trial_ids, "resume", RunControl.resume_trial)
        self._command("resume", command, trial_ids=trial_ids)

    def stop(self, *trial_ids: int | str, force: bool = False) -> None:
        """End trials (`stop(4)`), or with no ids (or "all") end the whole run gracefully.

        A running trial ends at its next report, keeping its results (TERMINATED).
        `force=True` kills it at once where the executor can; where it cannot, nbtune warns
        and the trial still stops at its next report. Ending the run saves its state and
        releases the workers; trials paused by checkpoint stay resumable. Stopping a run
        that has already ended does nothing.
        """
        if trial_ids in ((), ("all",)):
            try:
                self._command("stop_run", lambda control: control.stop_run())
            except RunEndedError:
                if self._started_runner().state is RunState.RUNNING:
                    raise
            return
        if force and not self.executor.can_kill_trial:
            warnings.warn(
                f"{type(self.executor).__name__} cannot kill a single trial; "
                f"trial(s) {', '.join(map(str, trial_ids))} stop at their next report",
                stacklevel=2,
            )
        stop_trial = functools.partial(RunControl.stop_trial, force=force)
        command = _for_each(trial_ids, "stop", stop_trial)
        self._command("stop", command, trial_ids=trial_ids, force=force)

    def pause_all(self) -> None:
        """Hold the whole experiment: every trial pauses and none starts until `resume_all`."""
        self._command("pause_all", RunControl.pause_all)

    def resume_all(self) -> None:
        """Resume every paused trial and let new trials start again."""
        self._command("resume_all", RunControl.resume_all)

    def fork(self, trial_id: int, changes: Mapping[str, Any] | None = None) -> int:
        """Start a new trial from `trial_id`'s latest checkpoint with some values changed.

        For example `tuner.fork(3, {"lr": 0.005})`: hand-driven population-based training.
        The new trial's iterations continue from the checkpoint's; its `parent` is 3.
        Returns the new trial's id.
        """
        changes = dict(changes or {})
        unknown = set(SearchSpace.flatten(changes)) - set(self.space.parameter_names)
        if unknown:
            raise ValueError(
                f"fork({trial_id}, ...): {', '.join(map(repr, sorted(unknown)))} is not a "
                f"parameter of the search space; use {', '.join(self.space.parameter_names)}"
            )

        def fork(control: RunControl) -> int:
            config = _merged(control.trial(trial_id).config, changes)
            return control.fork(trial_id, config)

        return self._command("fork", fork, trial_id=trial_id, changes=changes)

    def set_max_concurrent(self, max_concurrent: int) -> None:
        """Change how many trials run at once, at once (running trials are not interrupted)."""
        max_concurrent = concurrency(max_concurrent)
        self._command(
            "set_max_concurrent",
            lambda control: control.set_max_concurrent(max_concurrent),
            max_concurrent=max_concurrent,
        )
        self.max_concurrent = max_concurrent

    @property
    def held_by(self) -> str | None:
        """Why the run starts no trial by itself, if it holds (`max_consecutive_failures`)."""
        return None if self._runner is None else self._runner.held_by

    def retry(
        self, trials: str | Sequence[int] = "errored", *, from_scratch: bool = False
    ) -> list[int]:
        """Run failed trials again, under their ids: "errored" (every one that failed) or a
        list of ids, e.g. `retry([3, 5])`; each from its latest checkpoint (`from_scratch=True`:
        from the start), one attempt more, every earlier attempt's error kept in its
        error.txt. Works on a live run, a paused one or one held after failures (it lets it go
        on); `Tuner.restore(path, train, retry_errored=True)` does it for a run carried on.
        Returns the ids retried.
        """
        if isinstance(trials, str) and trials != "errored":
            raise ValueError(f"retry({trials!r}): pass 'errored' or a list of trial ids")
        which = trials if isinstance(trials, str) else list(trials)
        command = lambda control: control.retry(which, from_scratch=from_scratch)  # noqa: E731
        return self._command("retry", command, trials=which, from_scratch=from_scratch)

    def update_space(self, space: Mapping[str, Any] | Callable[[Any], Any]) -> None:
        """Search `space` from now on: a dict of domains, or a define-by-run function, as
        `Tuner(space=...)` takes. Trials suggested from now on sample it; running, paused and
        finished trials keep their configs, and `dataframe()["space_version"]` says which
        space each came from (0 for the first). `OptunaSearch` keeps learning from the earlier
        trials; a change a searcher cannot take (a grid under random search, a parameter
        changing kind under Optuna) is refused in one line, and nothing changes. The change
        is journaled, and `Tuner.restore` carries the run on with the new space.
        """
        new = search_space(space)
        if self._runner is None:
            self.space = new
            return
        described = {name: repr(domain) for name, domain in _domains(new).items()}
        command = lambda control: control.update_space(new)  # noqa: E731
        self._command("update_space", command, space=described)
        self.space = new

    def update_trainable(self, trainable: Callable[[dict[str, Any]], Any] | type) -> None:
        """Run `trainable` for every trial launched from now on: new trials, retries, and
        trials resumed from a checkpoint; the trials running keep their code (a suspended one
        too). `dataframe()["code"]` shows which version each trial last ran. The typical fix
        of a typo that held the run (`max_consecutive_failures`):
        `update_trainable(fixed)`, `retry("errored")`, `resume_all()`. Works on a live,
        paused or held run, and before `start()`; a trainable that is not one, or that cannot
        be sent to the workers, is refused in one line and nothing changes.
        """
        check_trainable(trainable, self.executor)
        if self._runner is not None:
            command = lambda control: control.update_trainable(trainable)  # noqa: E731
            self._command("update_trainable", command, code=code_hash(trainable))
        self.trainable = trainable

    def space_hints(self) -> list[dict[str, Any]]:
        """Where the best trials crowd an edge of the search space: one dict per numeric
        parameter whose 5 best trials mostly (4 of 5) sit in the outer 10 % of its range at
        one end, `{"param", "edge": "low" | "high", "share", "message", "widened"}`; none for
        a parameter whose best values sit inside. `widened` is its domain with that bound
        moved out (x10 on a log scale, by the range's width otherwise):
        `tuner.update_space(tuner.space.with_changes({hint["param"]: hint["widened"]}))`.

        Raises:
            ValueError: the run has no single metric to rank trials by.
        """
        self._require_metric()
        if not isinstance(self.space, SearchSpace):
            return []
        return space_hints.hints(self.space, self._snapshot()[0], self.mode)

    @property
    def eta_s(self) -> float | None:
        """Seconds until the run is expected to end (0 once it has; None before any result):
        from the seconds per iteration measured so far, the concurrency, the trials still to
        run and where the scheduler is expected to stop them (`nbtune.forecast.run_eta_s`)."""
        from nbtune import forecast  # numpy: imported here so that `import nbtune` stays light

        runner = self._runner
        trials, rows = self._snapshot()
        if runner is None or not rows:
            return None
        if runner.ended:
            return 0.0
        horizon = view_horizon(self, trials)
        planned, workers = self.planned_trials, runner.max_concurrent
        return forecast.run_eta_s(
            trials, rows, planned, workers, horizon, self.scheduler, now=time.time()
        )

    def finish_by(self, deadline: float | datetime.datetime) -> None:
        """Finish the run by `deadline`: seconds from now, or a moment (a `datetime`; without
        a time zone, local time). No trial starts that would not finish by then, at the
        seconds per iteration measured so far; the trials still running then stop
        (`stopped_by="deadline"`) and the run ends `finished`, every result kept. Before
        `start()`, seconds count from the start (as `Tuner(finish_by=...)`)."""
        seconds = seconds_until("finish_by", deadline)
        if self._runner is None:
            self._finish_by = deadline
            return
        command = lambda control: control.finish_in(seconds)  # noqa: E731
        self._command("finish_by", command, seconds=round(seconds, 3))

    def set_time_budget(self, seconds: float) -> None:
        """End the run `seconds` after it started (as `time_budget_s`; at once if they have
        passed): no trial starts that would not finish in time, and those running then stop
        (`stopped_by="time budget"`)."""
        budget = positive_seconds("time_budget_s", seconds)
        if budget is None:
            raise ValueError("set_time_budget(None): pass a positive number of seconds")
        if self._runner is None:
            self.time_budget_s = budget
            return
        command = lambda control: control.set_time_budget(budget)  # noqa: E731
        self._command("set_time_budget", command, seconds=budget)
        self.time_budget_s = budget

    def extend(self, num_samples: int) -> None:
        """Let the searcher suggest `num_samples` more configurations."""
        num_samples = whole_number("num_samples", num_samples)
        command = lambda control: control.extend(num_samples)  # noqa: E731
        self._command("extend", command, num_samples=num_samples)

    def _command(self, name: str, command: Command, **arguments: Any) -> Any:
        """Run `command` on the runner thread, logged as `name(**arguments)`; wait for it.

        What the command changed is on disk before it is acknowledged (the searcher's and
        scheduler's state too, which the runner otherwise saves now and then), so a driver
        killed just after `extend(4)` returned still has those samples when restored. A
        command sent from the runner thread itself (by a subscriber) runs at once: queued, it
        would wait for the very thread that waits for it.
        """
        runner = self._started_runner()
        if runner.ended:
            raise RunEndedError(
                f"the run {self.name!r} has ended ({runner.state}); start a new Tuner "
                "(or Tuner.restore) to go on"
            )
        if threading.current_thread() is self._thread:
            return runner.apply_command(name, arguments, command)
        try:
            future = runner.call(lambda: runner.apply_command(name, arguments, command))
            return future.result(timeout=COMMAND_TIMEOUT_S)
        except concurrent.futures.TimeoutError:
            raise RunEndedError(
                f"the runner of {self.name!r} did not answer within {COMMAND_TIMEOUT_S:.0f} s"
            ) from None


def _for_each(
    trial_ids: Sequence[Any], verb: str, act: Callable[[RunControl, Any], None]
) -> Command:
    """A command that acts on each of `trial_ids`, once every one of them is known to exist."""
    if not trial_ids:
        raise ValueError(f"{verb}() needs trial ids, e.g. (3) or (3, 5)")

    def command(control: RunControl) -> None:
        for trial_id in trial_ids:
            control.trial(trial_id)
        for trial_id in trial_ids:
            act(control, trial_id)

    return command


def _merged(config: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    """`config` with `changes` applied, nested dicts merged key by key."""
    merged = copy.deepcopy(dict(config))
    for key, value in changes.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _merged(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def concurrency(value: Any) -> int:
    """`value` as a number of trials at once: a whole number, and not so many that the machine
    (or the executor's pool) would be asked for an absurd number of workers."""
    if isinstance(value, int) and not isinstance(value, bool) and value > MAX_CONCURRENT:
        raise ValueError(
            f"max_concurrent={value!r}: pass a whole number from 1 to {MAX_CONCURRENT}"
        )
    return whole_number("max_concurrent", value)


def _domains(space: SearchSpace | DefineByRunSpace) -> dict[str, Any]:
    """The space's domains by name, for the journal; a define-by-run space's function."""
    if isinstance(space, DefineByRunSpace):
        return {"define_by_run": getattr(space.function, "__name__", space.function)}
    return space.domains()
