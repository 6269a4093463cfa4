"""`with_parameters`: hand large objects (data sets, models) to every trial, sent once per run."""

from __future__ import annotations

import io
import pickle
import sys
from collections.abc import Callable
from typing import Any

import cloudpickle

from nbtune.executors._shared import MAP_MIN_BYTES
from nbtune.trainable import Trainable, is_class_trainable


def with_parameters(trainable: Callable | type[Trainable], /, **objects: Any) -> Any:
    """`trainable` with `objects` passed to every trial: `trainable(config, **objects)`, or for
    a class trainable `setup(config, **objects)`.

    The objects travel once per run, not once per trial: with a process executor, NumPy arrays
    (pandas objects too, through their arrays) of 1 MB or more reach the workers as read-only
    memory maps of files in a folder private to the run (under /dev/shm where it is large),
    removed when the run ends; other objects are pickled once and unpickled once per worker.
    On Dask they are scattered to every worker once per run.

    Every trial gets the objects as they were, whichever trials ran before it in the same
    worker (or thread): its own copy of each, made from the worker's untouched one, in which
    every NumPy array is read-only (a large one is shared, not copied). Copy an array
    (`x.copy()`) to change it in a trial. An object that cannot be copied by pickling (a
    lock, with `ThreadExecutor`) is handed as it is.

    The same happens to large arrays the trainable captures (a closure, a global of the
    notebook, a `functools.partial`): `with_parameters` says explicitly what a trial gets.

    Args:
        trainable: a function `train(config, **objects)`, or a subclass of `nbtune.Trainable`
            whose `setup(config, **objects)` takes the objects.
        **objects: what every trial gets, by name.

    Returns:
        A trainable to pass to `nbtune.Tuner`, named as `trainable` is.

    Example:
        >>> def train(config, X, y):
        ...     nbtune.report(loss=fit(X, y, config["lr"]))
        >>> tuner = nbtune.Tuner(nbtune.with_parameters(train, X=X, y=y), space)
    """
    if "config" in objects:
        raise ValueError("with_parameters(trainable, config=...): 'config' is the trial's own")
    if is_class_trainable(trainable):
        return _bound_class(trainable, objects)
    if isinstance(trainable, type) or not callable(trainable):
        raise TypeError(
            f"with_parameters({trainable!r}, ...): pass a function train(config, ...) or a "
            "subclass of nbtune.Trainable"
        )
    return WithParameters(trainable, objects)


class WithParameters:
    """A function trainable and the objects that every call gets (see `with_parameters`)."""

    def __init__(self, trainable: Callable, objects: dict[str, Any]) -> None:
        self.trainable = trainable
        self.objects = objects
        self.__name__ = getattr(trainable, "__name__", type(trainable).__name__)
        self.__qualname__ = getattr(trainable, "__qualname__", self.__name__)
        self.__doc__ = getattr(trainable, "__doc__", None)
        self.__wrapped__ = trainable

    def __call__(self, config: dict[str, Any]) -> Any:
        return self.trainable(config, **fresh_copy(self.objects))

    def __repr__(self) -> str:
        names = ", ".join(self.objects)
        return f"with_parameters({self.__name__}, {names})"


def _bound_class(cls: type[Trainable], objects: dict[str, Any]) -> type[Trainable]:
    """A subclass of `cls`, named as it is, whose `setup(config)` passes `objects` on."""

    def setup(self: Trainable, config: dict[str, Any]) -> None:
        cls.setup(self, config, **fresh_copy(objects))

    namespace = {
        "setup": setup,
        "__module__": cls.__module__,
        "__qualname__": cls.__qualname__,
        "__doc__": cls.__doc__,
        "__wrapped__": cls,
    }
    return type(cls.__name__, (cls,), namespace)


def fresh_copy(objects: dict[str, Any]) -> dict[str, Any]:
    """A trial's own copy of `objects`, by a pickle round trip in which every NumPy array is
    made read-only: one that is already (a map) or large (a view) is shared rather than
    copied. `objects` as they are if they cannot be pickled (only `ThreadExecutor` lets such
    objects through)."""
    arrays: dict[int, Any] = {}
    buffer = io.BytesIO()
    try:
        _Copier(buffer, arrays).dump(objects)
    except Exception:
        return objects
    buffer.seek(0)
    return _Restorer(buffer, arrays).load()


class _Copier(cloudpickle.CloudPickler):
    """cloudpickle, with each NumPy array set aside as its read-only counterpart."""

    def __init__(self, file: io.BytesIO, arrays: dict[int, Any]) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self._arrays = arrays

    def persistent_id(self, obj: Any) -> int | None:
        np = sys.modules.get("numpy")
        if np is None or type(obj) not in (np.ndarray, np.memmap) or obj.dtype.hasobject:
            return None
        key = id(obj)
        if key not in self._arrays:
            self._arrays[key] = _read_only(obj)
        return key


class _Restorer(pickle.Unpickler):
    def __init__(self, file: io.BytesIO, arrays: dict[int, Any]) -> None:
        super().__init__(file)
        self._arrays = arrays

    def persistent_load(self, key: Any) -> Any:
        return self._arrays[key]


def _read_only(array: Any) -> Any:
    """`array` itself if it cannot be written, else a read-only view of it (large) or copy."""
    if not array.flags.writeable:
        return array
    same = array.view() if array.nbytes >= MAP_MIN_BYTES else array.copy()
    same.flags.writeable = False
    return same
