"""What a search tries: `param_distributions` as scikit-learn takes them, and as nbtune does.

scikit-learn's `param_distributions` maps names to lists (or tuples, ranges, arrays: a uniform
choice) or to objects with
`rvs` (scipy.stats distributions); nbtune's spaces map them to domains. Both are accepted, and
each is turned into the other where needed:

- with the default searcher, the candidates are drawn by scikit-learn's own `ParameterSampler`,
  so `random_state=0` gives exactly the candidates `RandomizedSearchCV(random_state=0)` draws
  (nbtune domains take part through a small `rvs` adapter), and `Candidates` hands them to the
  Tuner one by one;
- with a searcher of your choice (Optuna's, say), the distributions become an nbtune space, a
  scipy distribution a `Distribution` domain.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.model_selection import ParameterSampler

from nbtune.search._base import Searcher
from nbtune.space import Choice, Domain, Grid, SampleFrom, choice
from nbtune.trial import Trial


@dataclass(frozen=True, repr=False)
class Distribution(Domain):
    """A scipy.stats distribution (anything with `rvs(random_state=...)`) as an nbtune domain."""

    dist: Any

    def sample(self, rng: np.random.Generator) -> Any:
        return plain(self.dist.rvs(random_state=rng))

    def __repr__(self) -> str:
        name = getattr(getattr(self.dist, "dist", None), "name", type(self.dist).__name__)
        return f"{name}{tuple(getattr(self.dist, 'args', ()))!r}"


@dataclass(frozen=True)
class _Rvs:
    """An nbtune domain seen by scikit-learn's `ParameterSampler`, which calls `rvs`."""

    domain: Domain

    def rvs(self, random_state: np.random.RandomState) -> Any:
        return self.domain.sample(np.random.default_rng(random_state.randint(2**31)))


def as_dicts(param_distributions: Mapping | Sequence[Mapping]) -> list[Mapping[str, Any]]:
    """`param_distributions` as a list of dicts (scikit-learn takes a dict or a list of them)."""
    dicts = [param_distributions] if isinstance(param_distributions, Mapping) else None
    if dicts is None and isinstance(param_distributions, Sequence):
        dicts = list(param_distributions)
    if not dicts or not all(isinstance(d, Mapping) and d for d in dicts):
        raise TypeError(
            f"param_distributions={param_distributions!r}: pass a dict of parameter name -> "
            "list, scipy.stats distribution or nbtune domain (or a list of such dicts)"
        )
    return dicts


def search_space(param_distributions: Mapping | Sequence[Mapping]) -> dict[str, Domain]:
    """The nbtune space of `param_distributions`: what a searcher samples and the dashboard
    names. A list of dicts gives the union of their parameters."""
    space: dict[str, Any] = {}
    for dicts in as_dicts(param_distributions):
        space.update({name: _domain(name, value) for name, value in dicts.items()})
    return space


def _domain(name: str, value: Any) -> Domain:
    if isinstance(value, Domain):
        return value
    if hasattr(value, "rvs"):
        return Distribution(value)
    if isinstance(value, (list, tuple, range, np.ndarray)) and len(value):
        return choice(list(value))
    raise TypeError(
        f"param_distributions[{name!r}]={value!r}: pass a non-empty list, a scipy.stats "
        "distribution or an nbtune domain"
    )


def sample_candidates(
    param_distributions: Mapping | Sequence[Mapping], n_trials: int, random_state: Any
) -> list[dict[str, Any]]:
    """The candidates `RandomizedSearchCV(n_iter=n_trials, random_state=...)` would try.

    As there, lists alone are sampled without replacement (fewer than `n_trials` candidates if
    the grid is smaller) and anything with a distribution with replacement.
    """
    dicts = [{k: _sampleable(k, v) for k, v in d.items()} for d in as_dicts(param_distributions)]
    sampler = ParameterSampler(dicts, n_trials, random_state=random_state)
    return [{name: plain(value) for name, value in params.items()} for params in sampler]


def _sampleable(name: str, value: Any) -> Any:
    """A value `ParameterSampler` takes: lists and `rvs` objects as they are, domains adapted."""
    if isinstance(value, Choice):
        return list(value.categories)
    if isinstance(value, Grid):
        return list(value.values)
    if isinstance(value, SampleFrom):
        raise TypeError(
            f"param_distributions[{name!r}]: sample_from needs the whole config; pass a "
            "searcher (e.g. searcher=nbtune.RandomSearch()) to use it"
        )
    if isinstance(value, Domain):
        return _Rvs(value)
    _domain(name, value)  # a list or an `rvs` object, else a one-line TypeError
    return value


def plain(value: Any) -> Any:
    """A NumPy scalar as the Python number it holds (configs are written as JSON); anything
    else as it is, estimators and other objects included."""
    return value.item() if isinstance(value, np.generic) else value


class Candidates(Searcher):
    """Suggests a fixed list of configurations, in order: the candidates drawn in advance."""

    def __init__(self, candidates: Sequence[Mapping[str, Any]]) -> None:
        self.candidates = [dict(candidate) for candidate in candidates]
        self._next_index = 0

    def suggest(self, trial_id: int) -> dict[str, Any] | None:
        if self.is_finished:
            return None
        self._next_index += 1
        return dict(self.candidates[self._next_index - 1])

    @property
    def is_finished(self) -> bool:
        return self._next_index >= len(self.candidates)

    @property
    def planned_trials(self) -> int:
        return len(self.candidates)

    def restore(self, trials: Sequence[Trial]) -> None:
        suggested = sum(trial.origin == "searcher" for trial in trials)
        self._next_index = max(self._next_index, suggested)
