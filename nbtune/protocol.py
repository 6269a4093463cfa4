"""The contract between the runner and the workers that run trials, in one place.

    runner thread                                 worker (thread, process or Dask task)
    -------------                                 -------------------------------------
    TrialLaunch ---------------------------------> run_trial(trainable, launch, line)
                <------------------------------- WorkerResult (metrics, checkpoint, waits)
    Reply(decision, free_steps) -----------------> report() returns, pauses or ends the trial
    NUDGE ---------------------------------------> the next report waits for a Reply
                <------------------------------- WorkerSuspended  (paused, holding its worker)
                <------------------------------- WorkerPaused | WorkerDone | WorkerFailed
    (the executor itself)                          WorkerLost: the worker vanished

A process worker first says who it is on its line: `Ready(pid)` for a worker that serves a
whole run (which hears of a changed trainable by a `NewTrainable` before its next launch), or
`Hello(launch_key, pid)` for a task that runs one launch, which the runner answers with an
`Ack` (whether it still wants that launch).

Every message is a frozen dataclass: each side reads fields by name, never by position, and
the worker events are the very objects the runner handles.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, ClassVar


class Decision(Enum):
    """A scheduler's verdict on a trial after one of its results.

    CONTINUE lets it go on, PAUSE frees its worker until it is resumed, STOP ends it.
    """

    CONTINUE = "CONTINUE"
    PAUSE = "PAUSE"
    STOP = "STOP"


@dataclass(frozen=True)
class TrialLaunch:
    """Everything a worker needs to run one trial, apart from the trainable itself.

    Attributes:
        trial_id: the trial's id.
        config: its configuration.
        iteration: results it has already reported; its next result is `iteration + 1`.
        checkpoint_path: absolute path of the checkpoint to resume from, if any.
        checkpoint_dir: where the worker writes the trial's new checkpoints.
        capture_output: whether to capture what the trial prints and ship it to the runner.
        metric: the experiment's tuned metric, under which a trainable that returns a number
            records it (None if the experiment has none; a list of them if several, under
            which a returned tuple records its values in order).
        threads: the size of the trial's BLAS/OpenMP thread pools, set before the trainable
            runs (None: the worker's are left alone, as on threads of the driver).
        gpus: the trial's CUDA_VISIBLE_DEVICES ("0", "0,1", or "" for none); None leaves the
            worker's as it is.
        artifact_dir: the trial's folder for its files (`nbtune.get_trial_dir()`), made when
            first needed; None for a trial run without an experiment folder.
        working_dir: the working directory the trial runs in: its `artifact_dir`, or the
            driver's (`Tuner(chdir_to_trial_dir=False)`), so that a worker process kept warm
            from an earlier run works where the notebook does now; None leaves the worker's
            as it is (a thread of the driver, a Dask worker that runs several trials at once).
    """

    trial_id: int
    config: Mapping[str, Any]
    iteration: int
    checkpoint_path: str | None
    checkpoint_dir: str
    capture_output: bool = True
    metric: str | list[str] | None = None
    threads: int | None = None
    gpus: str | None = None
    artifact_dir: str | None = None
    working_dir: str | None = None


@dataclass(frozen=True)
class Reply:
    """The runner's answer to a result that waits: the decision, and how many of the trial's
    next results may go without waiting for one (see `nbtune.session.TrialSession.report`)."""

    decision: Decision
    free_steps: int = 0


@dataclass(frozen=True)
class Nudge:
    """Sent to a trial that reports without waiting when the runner has something to tell
    it (a pause, a stop): its next report waits for a `Reply`."""


NUDGE = Nudge()


@dataclass(frozen=True)
class Ready:
    """A process worker that serves a whole run is ready for its first launch."""

    pid: int


@dataclass(frozen=True)
class NewTrainable:
    """Sent down the line of a worker that serves a whole run, before a launch, when the
    trainable changed since that worker last heard (`Tuner.update_trainable`): the pickled
    trainable of `version` (the run's first is 0), for this launch and those that follow."""

    version: int
    payload: bytes


@dataclass(frozen=True)
class Hello:
    """A task that runs one launch names it (and its process) before it runs it."""

    launch_key: int
    pid: int


@dataclass(frozen=True)
class Ack:
    """The runner's answer to a `Hello` (whether it still wants that launch), or to a paused
    trial whose checkpoint the driver now holds (Dask)."""

    ok: bool


@dataclass(frozen=True)
class WorkerEvent:
    """Something a trial's worker told the runner."""

    trial_id: int

    holds_worker: ClassVar[bool] = False
    """Whether the trial still holds its worker after this event; after any other it is gone."""


@dataclass(frozen=True)
class WorkerStarted(WorkerEvent):
    """The trial's launch reached a worker, which runs it now (a queued task, or a worker
    still starting, does not): its silence counts from here (`trial_timeout_s`)."""

    holds_worker: ClassVar[bool] = True


@dataclass(frozen=True)
class WorkerResult(WorkerEvent):
    """The trial reported. `checkpoint` is an absolute path or None. If it `waits`, the trial
    takes no further step before a `Reply`; else the runner promised it could go on. A result
    `returned` is what the trainable returned: its final score, as an Optuna objective's."""

    metrics: Mapping[str, Any]
    checkpoint: Any
    output: str
    timestamp: float
    waits: bool = True
    returned: bool = False

    holds_worker: ClassVar[bool] = True


@dataclass(frozen=True)
class WorkerSuspended(WorkerEvent):
    """The trial cannot checkpoint, so it waits inside `report()`, holding its worker."""

    holds_worker: ClassVar[bool] = True


@dataclass(frozen=True)
class WorkerDone(WorkerEvent):
    """The trial ended normally (it returned, or it obeyed a STOP reply)."""

    output: str = ""


@dataclass(frozen=True)
class WorkerPaused(WorkerEvent):
    """The trial saved `checkpoint` (an absolute path) and left its worker, to resume later."""

    checkpoint: Any


@dataclass(frozen=True)
class WorkerFailed(WorkerEvent):
    """The trainable raised; `error` is one line, `traceback` the full text."""

    error: str
    traceback: str
    output: str = ""


@dataclass(frozen=True)
class WorkerLost(WorkerEvent):
    """The worker vanished without a word (killed, crashed, or its executor broke).

    A `bystander` was lost only because another trial's worker died and took it along (a Dask
    worker process running several tasks, or a launch queued behind a trial on a worker that
    died): nothing went wrong with the trial itself, so it is not a failure.
    """

    error: str
    bystander: bool = False
