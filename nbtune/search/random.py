"""Random and grid search, as Ray Tune's BasicVariantGenerator does them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nbtune.search._base import Searcher
from nbtune.space import SearchSpace
from nbtune.trial import Trial


class RandomSearch(Searcher):
    """Samples random domains and walks every grid point, `num_samples` times over.

    With grid parameters, the experiment has `num_samples * grid size` configurations: the
    first pass visits each grid point once with fresh random draws, and so on. The i-th
    configuration depends only on the seed and i, so the same seed gives the same configs
    whatever order trials finish in, and a restored run carries on with the same sequence.
    """

    def __init__(self) -> None:
        self._next_index = 0
        self._total = 0
        self._seed = 0

    def setup(
        self, space: SearchSpace, metric: str | None, mode: str, num_samples: int, seed: int
    ) -> None:
        super().setup(space, metric, mode, num_samples, seed)
        self._total = num_samples * space.grid_size
        self._seed = seed

    def suggest(self, trial_id: int) -> dict[str, Any] | None:
        if self.is_finished:
            return None
        config = self.space.config(self._next_index, self._seed)
        self._next_index += 1
        return config

    @property
    def is_finished(self) -> bool:
        return self._next_index >= self._total

    @property
    def planned_trials(self) -> int:
        """`num_samples` times the grid's size, plus what `extend` added."""
        return self._total

    def extend(self, num_samples: int) -> None:
        self._total += num_samples

    def restore(self, trials: Sequence[Trial]) -> None:
        suggested = sum(trial.origin == "searcher" for trial in trials)
        self._next_index = max(self._next_index, suggested)
