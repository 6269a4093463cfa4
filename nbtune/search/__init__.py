"""Searchers: which configuration to try next."""

from nbtune.search._base import Searcher
from nbtune.search.random import RandomSearch

__all__ = ["RandomSearch", "Searcher"]
