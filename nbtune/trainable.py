"""What nbtune can train, and how a worker runs one trial of it.

A trainable is either a function `train(config)` that calls `nbtune.report(...)`, or a
subclass of `Trainable` whose `step()` returns one result at a time.
"""

from __future__ import annotations

import contextlib
import reprlib
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from nbtune import objectives
from nbtune.artifacts import relative_path_hint, working_in
from nbtune.metrics import number
from nbtune.protocol import TrialLaunch, WorkerDone, WorkerFailed
from nbtune.resources import limits
from nbtune.session import Channel, TrialSession, TrialStopped
from nbtune.storage import private_dir


class Trainable:
    """Base class for trainables that keep their state in an object.

    nbtune calls `setup(config)` once, `load_checkpoint(...)` when the trial resumes, then
    `step()` again and again; each returned dict is one result. The trial ends when a stop
    criterion or the scheduler says so, or when a result contains `done=True`.

    `save_checkpoint()` is called every `checkpoint_every` steps (and after the last one); it
    returns any picklable object, which `load_checkpoint` receives when the trial resumes, in
    the same or another process. Return None (the default) if the trial cannot checkpoint.
    """

    checkpoint_every: int = 1

    def __init__(self) -> None:
        self.config: dict[str, Any] = {}

    def setup(self, config: dict[str, Any]) -> None:
        """Build what the trial needs (model, data) from its configuration."""

    def step(self) -> Mapping[str, Any]:
        """Run one iteration and return its metrics."""
        raise NotImplementedError(f"{type(self).__name__} must implement step()")

    def save_checkpoint(self) -> Any:
        """Return an object from which `load_checkpoint` can restore the trial, or None."""
        return None

    def load_checkpoint(self, checkpoint: Any) -> None:
        """Restore the state that `save_checkpoint` returned."""

    def cleanup(self) -> None:
        """Release resources when the trial ends."""


def is_class_trainable(trainable: object) -> bool:
    return isinstance(trainable, type) and issubclass(trainable, Trainable)


def run_trial(trainable: Callable | type[Trainable], launch: TrialLaunch, channel: Channel) -> None:
    """Run one trial to its end, telling the runner about every result and how it ended.

    A trial that paused has already said so and left its line: whatever the trainable does
    after that (return, raise) goes unsaid.
    """
    session = TrialSession(
        launch.trial_id,
        channel,
        iteration=launch.iteration,
        checkpoint_path=launch.checkpoint_path,
        checkpoint_dir=launch.checkpoint_dir,
        capture_output=launch.capture_output,
        artifact_dir=launch.artifact_dir,
    )
    try:
        with _trial_limits(launch), _working_directory(launch), session:
            if is_class_trainable(trainable):
                _run_class(trainable, session, launch.config)
            else:
                _run_function(trainable, session, launch.config, launch.metric)
    except TrialStopped:
        pass
    except BaseException as exc:
        if not session.paused:
            summary = f"{type(exc).__name__}: {exc}".splitlines()[0]
            if _works_in_its_folder(launch):
                summary += relative_path_hint(exc, launch.trial_id)
            output = session.drain_output()
            session.end(WorkerFailed(launch.trial_id, summary, traceback.format_exc(), output))
        return
    if not session.paused:
        session.end(WorkerDone(launch.trial_id, session.drain_output()))


def _trial_limits(launch: TrialLaunch) -> contextlib.AbstractContextManager:
    """The trial's thread pools and GPUs, set before any of its code runs (see
    `nbtune.resources`); nothing for a trial on a thread of the driver."""
    if launch.threads is None:
        return contextlib.nullcontext()
    return limits(launch.threads, launch.gpus)


def _working_directory(launch: TrialLaunch) -> contextlib.AbstractContextManager:
    """The trial's working directory, where the launch names one (its artifact folder, made
    if missing, or the notebook's)."""
    if launch.working_dir is None:
        return contextlib.nullcontext()
    if _works_in_its_folder(launch):
        private_dir(Path(launch.working_dir))
    return working_in(Path(launch.working_dir))


def _works_in_its_folder(launch: TrialLaunch) -> bool:
    return launch.working_dir is not None and launch.working_dir == launch.artifact_dir


def _run_function(
    train: Callable,
    session: TrialSession,
    config: Mapping[str, Any],
    metric: str | Sequence[str] | None,
) -> None:
    returned = train(dict(config))
    if returned is not None:
        session.report(_final_result(returned, metric, session.last_metrics), returned=True)


def _final_result(
    returned: Any, metric: str | Sequence[str] | None, reported: Mapping[str, Any]
) -> dict[str, Any]:
    """What a trainable's return value records as its last result: a mapping as it is, a
    number as the final value of the tuned metric (Optuna's style, `return score`), and with
    several tuned metrics a tuple of their values in order (Optuna's `return loss, latency`).

    A mapping without a tuned metric carries that metric's last `reported` value: a training
    that reported every round (a library's callback) and returns a summary at the end
    (`{"best_iteration": 87}`) ends with its last value, not as an error.
    """
    if isinstance(returned, Mapping):
        tuned = objectives.names(metric)
        carried = {n: reported[n] for n in tuned if n not in returned and n in reported}
        return {**carried, **returned}
    if metric is not None and not isinstance(metric, str):
        return _final_values(returned, list(metric))
    value = number(returned)
    if value is None:
        raise TypeError(
            f"the trainable returned {reprlib.repr(returned)} ({type(returned).__name__}); "
            "return a number (the metric's final value) or a dict of metrics, or call "
            "nbtune.report(...)"
        )
    if metric is None:
        raise TypeError(
            f"the trainable returned {value!r}, but the experiment has no metric "
            "to record it under: pass metric=... to nbtune.Tuner (or return a dict of metrics)"
        )
    return {metric: value}


def _final_values(returned: Any, metrics: list[str]) -> dict[str, Any]:
    """A tuple (or list) of one value per tuned metric, by name."""
    if isinstance(returned, (tuple, list)) and len(returned) == len(metrics):
        return dict(zip(metrics, returned, strict=True))
    raise TypeError(
        f"the trainable returned {reprlib.repr(returned)} ({type(returned).__name__}), but the "
        f"experiment tunes {len(metrics)} metrics: return a dict of them, e.g. "
        f"{{{', '.join(f'{name!r}: ...' for name in metrics)}}}, or a tuple in that order"
    )


def _run_class(cls: type[Trainable], session: TrialSession, config: Mapping[str, Any]) -> None:
    trainable = cls()
    trainable.config = dict(config)
    trainable.setup(trainable.config)
    session.checkpoint_on_demand = trainable.save_checkpoint
    try:
        checkpoint = session.get_checkpoint()
        if checkpoint is not None:
            trainable.load_checkpoint(checkpoint)
        done = False
        while not done:
            result = trainable.step()
            if not isinstance(result, Mapping):
                raise TypeError(
                    f"{cls.__name__}.step() returned {type(result).__name__}; "
                    "return a dict of metrics"
                )
            metrics = dict(result)
            done = bool(metrics.pop("done", False))
            every = trainable.checkpoint_every
            due = done or (every > 0 and (session.iteration + 1) % every == 0)
            session.report(metrics, trainable.save_checkpoint() if due else None)
    finally:
        trainable.cleanup()
