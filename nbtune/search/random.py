"""Random and grid search, as Ray Tune's BasicVariantGenerator does them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from nbtune.define_by_run import DefineByRunSpace
from nbtune.search._base import Searcher
from nbtune.space import SearchSpace, flatten_config
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
        self._points: list[dict[str, Any]] = []
        self._skipped = 0
        self._earlier: set[str] = set()

    def __setstate__(self, state: dict[str, Any]) -> None:
        """A RandomSearch saved before points to evaluate and warm starts has neither."""
        state.setdefault("_points", [])
        state.setdefault("_skipped", 0)
        state.setdefault("_earlier", set())
        self.__dict__.update(state)

    def setup(
        self, space: SearchSpace, metric: str | None, mode: str, num_samples: int, seed: int
    ) -> None:
        super().setup(space, metric, mode, num_samples, seed)
        self._total = num_samples * space.grid_size
        self._seed = seed

    def suggest(self, trial_id: int) -> dict[str, Any] | None:
        if self.is_finished:
            return None
        config = self._point() if self._points else self._draw()
        self._next_index += 1
        return config

    def _draw(self) -> dict[str, Any]:
        """The next configuration of the sequence that an earlier run (`learn_from`) has not
        tried; after `_RETRIES` in a row that it has, the space is taken as exhausted there."""
        for _ in range(_RETRIES):
            config = self.space.config(self._next_index + self._skipped, self._seed)
            if _key(config) not in self._earlier:
                return config
            self._skipped += 1
        return config

    def _point(self) -> dict[str, Any]:
        """The next point to evaluate, its missing parameters drawn."""
        point = self._points.pop(0)
        if isinstance(self.space, DefineByRunSpace):
            return point
        drawn = self.space.flatten(self.space.config(self._next_index, self._seed))
        return self.space.complete({**drawn, **self.space.flatten(point)})

    def update_space(self, space: SearchSpace | DefineByRunSpace) -> None:
        """Draw the configurations to come from `space` (at the same places of the seed's
        sequence). A grid cannot change mid-run: its points are counted out over the run."""
        if self.space.grid_size > 1 or space.grid_size > 1:
            raise ValueError(
                "RandomSearch walks a grid point by point over the run, so a space with a grid "
                "cannot change mid-run; sample those values with choice(...), or start a new "
                "Tuner"
            )
        self.space = space

    def evaluate_first(self, points: Sequence[Mapping[str, Any]]) -> None:
        self._points.extend(dict(point) for point in points)

    def learn_from(self, trials: Sequence[Trial]) -> None:
        self._earlier.update(_key(trial.config) for trial in trials)

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
        """Go on after the trials the saved state may not know (points to evaluate come
        first, so they are the first of them)."""
        suggested = sum(trial.origin == "searcher" for trial in trials)
        del self._points[: max(0, suggested - self._next_index)]
        self._next_index = max(self._next_index, suggested)


_RETRIES = 1000


def _key(config: Mapping[str, Any]) -> str:
    """A configuration as text that equal configurations share."""
    return repr(sorted(flatten_config(config).items()))
