"""Executors: where trials run. Loky worker processes by default, threads for debugging."""

from nbtune.executors._base import Executor
from nbtune.executors.loky import LokyExecutor
from nbtune.executors.thread import ThreadExecutor

__all__ = ["Executor", "LokyExecutor", "ThreadExecutor"]
