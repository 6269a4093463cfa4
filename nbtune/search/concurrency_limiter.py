"""A cap on how many of a searcher's suggestions may be unfinished at once."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from nbtune.arguments import is_whole_number, whole_number
from nbtune.search._base import Searcher, WrappingSearcher
from nbtune.trial import Trial


class ConcurrencyLimiter(WrappingSearcher):
    """Lets `searcher` suggest only while fewer than `max_concurrent` of its trials are unfinished.

    A model-based searcher learns from finished trials: the fewer run at once, the more each
    suggestion knows, at the cost of idle workers. While the cap is reached, `suggest` returns
    None ("nothing right now") and the runner waits for a trial to end. Paused trials count as
    unfinished.

    Args:
        searcher: the searcher to limit.
        max_concurrent: how many of its suggested trials may be unfinished at once (>= 1).
    """

    def __init__(self, searcher: Searcher, max_concurrent: int) -> None:
        if not is_whole_number(max_concurrent):
            raise TypeError(f"max_concurrent={max_concurrent!r}: expects an int >= 1")
        self.max_concurrent = whole_number("max_concurrent", max_concurrent)
        super().__init__(searcher)
        self._unfinished: set[int] = set()

    def suggest(self, trial_id: int) -> dict[str, Any] | None:
        if len(self._unfinished) >= self.max_concurrent:
            return None
        config = self.searcher.suggest(trial_id)
        if config is not None:
            self._unfinished.add(trial_id)
        return config

    def restore(self, trials: Sequence[Trial]) -> None:
        self.searcher.restore(trials)
        self._unfinished = {
            trial.trial_id
            for trial in trials
            if trial.origin == "searcher" and not trial.status.is_finished
        }

    def on_complete(self, trial_id: int, result: Mapping[str, Any] | None, error: bool) -> None:
        self._unfinished.discard(trial_id)
        self.searcher.on_complete(trial_id, result, error)
