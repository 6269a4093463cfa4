"""Searchers: which configuration to try next."""

from nbtune.search._base import Searcher
from nbtune.search.concurrency_limiter import ConcurrencyLimiter
from nbtune.search.optuna import OptunaSearch
from nbtune.search.random import RandomSearch
from nbtune.search.repeater import Repeater

__all__ = ["ConcurrencyLimiter", "OptunaSearch", "RandomSearch", "Repeater", "Searcher"]
