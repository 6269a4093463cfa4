"""The record of one trial: its configuration, where it is in its life, and what it reported.

A `Trial` is immutable. Only the runner thread makes new versions of it (with `evolve`), so a
reader on any other thread always holds a consistent record, never one half-way through an
update.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from enum import Enum
from typing import Any

from nbtune.errors import IllegalTransitionError
from nbtune.metrics import finite


class TrialStatus(str, Enum):
    """Where a trial is in its life.

    PENDING trials wait for a free worker, RUNNING ones hold one, PAUSED ones wait for the user
    or the scheduler to resume them. TERMINATED (finished or stopped) is final; ERROR is, but
    for the user's `Tuner.retry`, which queues a failed trial again (PENDING).
    """

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    TERMINATED = "TERMINATED"
    ERROR = "ERROR"

    @property
    def is_finished(self) -> bool:
        return self in (TrialStatus.TERMINATED, TrialStatus.ERROR)

    def __str__(self) -> str:
        return self.value


STOPPED_BY = {
    "user": "the user stopped it: `Tuner.stop(id)`, the dashboard's Stop, `%tune stop`, or the "
    "whole run stopped (`Tuner.stop()`, Stop all) while it ran or was suspended",
    "scheduler": "the scheduler ended it early, a worse trial than its peers (ASHA, HyperBand, "
    "median stopping, PBT replacing it...), before its budget's end",
    "stop criteria": "it met the Tuner's `stop=` criteria",
    "time budget": "the run's `time_budget_s` (or `Tuner.set_time_budget`) ran out while it ran",
    "deadline": "the run's deadline (`Tuner.finish_by`) came while it ran",
    "fail fast": "another trial failed in a run with `fail_fast=True`",
    "failures": "`max_consecutive_failures` trials in a row failed alike, in a run nobody can "
    "steer (a script), which then ended",
}
"""Every value of `Trial.stopped_by`, and what it means."""


ITERATION = "training_iteration"
"""The result key that counts a trial's results, from 1."""
RESULT_KEYS = ("trial_id", ITERATION, "timestamp", "time_total_s")
"""The keys nbtune adds to every reported result; a trainable may not report them itself."""


_TRANSITIONS: dict[TrialStatus, frozenset[TrialStatus]] = {
    TrialStatus.PENDING: frozenset(
        {TrialStatus.RUNNING, TrialStatus.PAUSED, TrialStatus.TERMINATED, TrialStatus.ERROR}
    ),
    TrialStatus.RUNNING: frozenset(
        {TrialStatus.PENDING, TrialStatus.PAUSED, TrialStatus.TERMINATED, TrialStatus.ERROR}
    ),
    TrialStatus.PAUSED: frozenset(
        {TrialStatus.PENDING, TrialStatus.RUNNING, TrialStatus.TERMINATED, TrialStatus.ERROR}
    ),
    TrialStatus.TERMINATED: frozenset(),
    TrialStatus.ERROR: frozenset({TrialStatus.PENDING}),
}


@dataclass(frozen=True)
class Trial:
    """One configuration's record.

    Attributes:
        trial_id: 0, 1, 2, ... in creation order; stable across restore.
        config: the configuration the trainable receives.
        status: see `TrialStatus`.
        iteration: how many results the trial has reported (its `training_iteration`).
        last_result: the latest reported result, with nbtune's own keys added.
        best_value: the best value of the experiment's metric so far (None before any, and
            in a run of several metrics).
        checkpoint: path of the latest checkpoint, relative to the experiment directory.
        checkpoint_iteration: the iteration that checkpoint was taken at.
        runtime_s: seconds spent running, summed over every time it ran.
        started_at: wall-clock time (epoch seconds) it last started running.
        error: one-line summary of the error that ended it, if any.
        paused_by: how a PAUSED trial waits: "checkpoint" (its worker is free; it resumes
            from its checkpoint), "suspend" (it cannot checkpoint, so it waits inside
            `report()` and keeps its worker) or "queue" (it had not started yet).
        parent: the trial it was forked from, if any.
        origin: who made it: "searcher", "user" (`add_trial`), "fork" (`Tuner.fork`) or
            "scheduler" (a fork PBT asked for).
        attempts: how many times it has been started after a failure, plus one.
        gpus: the GPUs it last ran on, as its CUDA_VISIBLE_DEVICES read ("0", "0,1"); None
            if it asked for none.
        stopped_by: who ended a TERMINATED trial before its own end (see `STOPPED_BY`); None
            for one that ran to its end (a scheduler's stop at its budget's end, `max_t`,
            included), that failed, or that is not over.
        code: a short hash of the trainable's code it last ran with (`nbtune.code_hash`): a
            function redefined between runs, or halfway through a campaign, shows as another.
        space_version: which search space it came from: 0 for the run's first, one more for
            each `Tuner.update_space` before it was made.
        returned: its trainable returned its score (as an Optuna objective does): that last
            result, not the best of the ones before it, is its `best_value` and ranks it.
        user_paused: the user paused it (or asked a running one to pause at its next report)
            and has not resumed it: journaled when the pause is acknowledged, so that a run
            carried on after its driver died keeps it PAUSED rather than starting it again.
            A run that ends (stopped, say) lets go of it: a restore carries on every
            unfinished trial of such a run.
    """

    trial_id: int
    config: Mapping[str, Any]
    status: TrialStatus = TrialStatus.PENDING
    iteration: int = 0
    last_result: Mapping[str, Any] = field(default_factory=dict)
    best_value: float | None = None
    checkpoint: str | None = None
    checkpoint_iteration: int | None = None
    runtime_s: float = 0.0
    started_at: float | None = None
    error: str | None = None
    paused_by: str | None = None
    parent: int | None = None
    origin: str = "searcher"
    attempts: int = 1
    gpus: str | None = None
    stopped_by: str | None = None
    returned: bool = False
    space_version: int = 0
    code: str | None = None
    user_paused: bool = False

    def evolve(self, **changes: Any) -> Trial:
        """Return a copy with `changes` applied; a status change must be a legal transition.

        The copy is made without `__init__` (the runner evolves a trial several times per
        result, and `dataclasses.replace` costs five times as much).
        """
        new_status = changes.get("status", self.status)
        if new_status != self.status and new_status not in _TRANSITIONS[self.status]:
            raise IllegalTransitionError(
                f"trial {self.trial_id} cannot go from {self.status} to {new_status}"
            )
        unknown = changes.keys() - _FIELD_NAMES
        if unknown:
            raise TypeError(f"Trial has no field {sorted(unknown)[0]!r}")
        evolved = object.__new__(type(self))
        evolved.__dict__.update(self.__dict__, **changes)
        return evolved

    def next_result(self, timestamp: float, metrics: Mapping[str, Any]) -> dict[str, Any]:
        """The row of the trial's next result, reported at `timestamp` (epoch seconds): the
        `metrics` under nbtune's own keys (`RESULT_KEYS`)."""
        running_for = max(0.0, timestamp - self.started_at) if self.started_at else 0.0
        return {
            "trial_id": self.trial_id,
            "training_iteration": self.iteration + 1,
            "timestamp": timestamp,
            "time_total_s": self.runtime_s + running_for,
            **metrics,
        }

    def with_result(
        self,
        result: Mapping[str, Any],
        metric: str | Sequence[str] | None,
        mode: Any,
        *,
        returned: bool = False,
    ) -> Trial:
        """Return a copy that has taken in one more reported result (with several metrics,
        `best_value` stays None: no one value is best); a `returned` one is the trial's score,
        whatever came before it."""
        best = self.best_value
        if isinstance(metric, str):
            best = (
                finite(result.get(metric))
                if returned
                else better_of(best, result.get(metric), mode)
            )
        changes = {"returned": True} if returned else {}
        return self.evolve(
            iteration=result["training_iteration"], last_result=result, best_value=best, **changes
        )

    @property
    def has_checkpoint(self) -> bool:
        return self.checkpoint is not None

    @property
    def cut_short(self) -> bool:
        """Whether something ended the trial before it ran to its own end or met the stop
        criteria (see `STOPPED_BY`): its last result is an early one."""
        return self.stopped_by is not None and self.stopped_by != "stop criteria"

    @property
    def suspended(self) -> bool:
        """Whether the trial is PAUSED in place: it cannot checkpoint, so it waits inside
        `report()` and keeps its worker (`paused_by == "suspend"`)."""
        return self.status is TrialStatus.PAUSED and self.paused_by == "suspend"

    @property
    def holds_worker(self) -> bool:
        """Whether a worker is busy with the trial: it is RUNNING, or suspended in place."""
        return self.status is TrialStatus.RUNNING or self.paused_by == "suspend"

    @property
    def waits_by(self) -> str:
        """How the trial waits once it has no worker: from its checkpoint ("checkpoint"), or
        to start from scratch ("queue")."""
        return "checkpoint" if self.has_checkpoint else "queue"


_FIELD_NAMES = frozenset(field.name for field in fields(Trial))


def better_of(current: float | None, candidate: Any, mode: str) -> float | None:
    """The better of two metric values under `mode`; NaN, inf and anything that is not a
    number (see `nbtune.metrics.finite`) never win."""
    value = finite(candidate)
    if value is None:
        return current
    if current is None:
        return value
    return min(current, value) if mode == "min" else max(current, value)
