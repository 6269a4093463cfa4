"""Executors: where trials run. Loky worker processes by default, threads for debugging,
Dask for a cluster (`DaskExecutor`, imported on first use: it needs `nbtune[dask]`)."""

from nbtune.executors._base import Executor
from nbtune.executors.loky import LokyExecutor
from nbtune.executors.thread import ThreadExecutor


def __getattr__(name: str):
    if name == "DaskExecutor":
        from nbtune.executors.dask import DaskExecutor

        return DaskExecutor
    raise AttributeError(f"module 'nbtune.executors' has no attribute {name!r}")


__all__ = ["Executor", "LokyExecutor", "ThreadExecutor"]
