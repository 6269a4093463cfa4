"""The executor base: runs trials somewhere and brings back what they report.

The runner opens an executor for a run, starts trials on it, and blocks in `poll()` until
workers have something to say. A `result` message that waits gets a `reply()` (the
scheduler's decision) before the trial takes its next step; one that does not wait can be
made to by a `nudge()`. `wakeup()` interrupts a `poll()` from another thread, so user
commands are served at once.

Each executor states what it can do in class attributes; the runner branches on those, never
on the executor's type.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import ClassVar

from nbtune.protocol import Decision, TrialLaunch, WorkerEvent


class Executor:
    """Base of every executor.

    Lifecycle, all on the runner thread except `wakeup` (and `prepare`, on the thread that builds
    the Tuner): `open(trainable, max_workers)` once per run, then any number of `start`, `reply`,
    `poll` and `update_trainable` calls, then `close()`. One executor instance serves one run at
    a time; whatever it keeps warm (worker processes) may outlive the run so that the next one
    starts fast.
    """

    can_kill_trial: ClassVar[bool] = False
    """Whether `kill` can end one trial without disturbing the others."""
    can_kill_worker: ClassVar[bool] = False
    """Whether `kill` can end a hung trial at all, even if the trials that share its pool are
    lost with it (they come back as `WorkerLost` bystanders, to be restarted)."""
    captures_output: ClassVar[bool] = False
    """Whether what a trial prints is shipped to the runner instead of the worker's stdout."""
    pickles_trainable: ClassVar[bool] = True
    """Whether the trainable travels to another process (so it must pickle)."""
    isolates_trials: ClassVar[bool] = False
    """Whether each running trial has a process of its own, so that its thread pools and
    CUDA_VISIBLE_DEVICES can be set for it alone."""
    announces_start: ClassVar[bool] = False
    """Whether `poll` says `WorkerStarted` when a launch reaches its worker; else a trial
    counts as started when it is submitted."""
    schedules_resources: ClassVar[bool] = False
    """Whether the executor places trials by their resources itself (Dask's worker
    resources), rather than the runner handing out GPUs."""

    def gpus(self) -> list[str]:
        """The GPU ids the runner hands out to trials (none by default)."""
        return []

    def cpus(self) -> int:
        """How many CPUs the trials share."""
        return os.cpu_count() or 1

    def use_resources(self, resources: Mapping[str, float]) -> None:
        """Place each trial where `resources` are free (for `schedules_resources`)."""

    def prepare(self, max_workers: int) -> None:
        """Start, in the background, what a run of up to `max_workers` trials at a time needs
        (worker processes), so that its first trials start at once; called when a Tuner is
        built, and returns at once. `open` uses what it started rather than starting it
        twice; if no run comes, it ends as what a run leaves behind does (nothing by default)."""

    def open(self, trainable: Callable | type, max_workers: int) -> None:
        """Get ready to run trials of `trainable`, up to `max_workers` at a time."""
        raise NotImplementedError

    def start(self, launch: TrialLaunch) -> None:
        """Start one trial; it must not block for the trial's duration."""
        raise NotImplementedError

    def update_trainable(self, trainable: Callable | type) -> None:
        """Run `trainable` for every trial started from now on (`Tuner.update_trainable`);
        the trials already running keep the code they started with."""
        raise NotImplementedError(f"{type(self).__name__} cannot change the trainable of a run")

    def reply(self, trial_id: int, decision: Decision, free_steps: int = 0) -> None:
        """Answer the trial's pending result with the runner's decision, and how many of its
        next results may go without waiting for one."""
        raise NotImplementedError

    def nudge(self, trial_id: int) -> None:
        """Make the trial's next result wait for a reply (it was told it need not)."""
        raise NotImplementedError

    def poll(self, timeout: float | None) -> list[WorkerEvent]:
        """Wait up to `timeout` seconds for worker events; return all that are ready."""
        raise NotImplementedError

    def wakeup(self) -> None:
        """Make a `poll` that is blocked in another thread return now. Thread-safe."""
        raise NotImplementedError

    def resize(self, max_workers: int) -> None:
        """Make room for `max_workers` trials at a time (the run's concurrency changed)."""

    def kill(self, trial_id: int) -> None:
        """End one trial at once, if `can_kill_trial` or `can_kill_worker`; the trial then
        shows up as lost in `poll()`."""
        raise NotImplementedError(f"{type(self).__name__} cannot kill a single trial")

    def forget(self, trial_id: int) -> None:
        """Write off a running trial that cannot be killed (it hung): nothing more is reported
        for it, even if it wakes up, and it ends at its next report if it ever makes one."""
        raise NotImplementedError(f"{type(self).__name__} cannot write off a trial")

    def abandon(self) -> None:
        """End every running trial at once, where the executor can (a second Ctrl-C).

        Thread-safe; the trials then show up as lost in `poll()`.
        """

    def close(self) -> None:
        """Release what this run holds; running trials are abandoned."""
        raise NotImplementedError
