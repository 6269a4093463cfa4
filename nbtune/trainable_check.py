"""Whether an object can be a run's trainable, checked on the caller's thread before anything
starts (`Tuner(...)`, `Tuner.update_trainable`), so that a bad one costs one clear line."""

from __future__ import annotations

from typing import Any

from nbtune.executors._base import Executor
from nbtune.executors._shared import check_picklable
from nbtune.trainable import is_class_trainable


def check_trainable(trainable: object, executor: Executor | None = None) -> None:
    """Raise a one-line TypeError unless `trainable` is a function `train(config)` or a
    subclass of `nbtune.Trainable` and, given an `executor` that sends it to other processes,
    pickles."""
    if not is_class_trainable(trainable) and (
        isinstance(trainable, type) or not callable(trainable)
    ):
        raise TypeError(
            f"trainable={trainable!r}: pass a function train(config) or a subclass of "
            "nbtune.Trainable"
        )
    if executor is None or not getattr(executor, "pickles_trainable", True):
        return
    try:
        check_picklable(trainable)
    except Exception as exc:
        raise TypeError(
            f"the trainable {trainable_name(trainable)!r} cannot be sent to worker processes "
            f"({type(exc).__name__}: {str(exc).splitlines()[0]}); create that object inside "
            "the trainable, or pass executor=nbtune.ThreadExecutor()"
        ) from exc


def trainable_name(trainable: Any) -> str:
    """The name a trainable goes by (a function's, a class's, else its type's)."""
    return getattr(trainable, "__name__", type(trainable).__name__)
