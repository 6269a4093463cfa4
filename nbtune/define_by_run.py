"""Define-by-run search spaces: a function that asks for each value as it needs it, Optuna's way.

    def space(trial):
        classifier = trial.suggest_categorical("classifier", ["SVC", "RandomForest"])
        if classifier == "SVC":
            trial.suggest_float("svc_c", 1e-10, 1e10, log=True)
        else:
            trial.suggest_int("rf_max_depth", 2, 32, log=True)
        return {"n_jobs": 1}                     # optional: constants or derived values

    nbtune.Tuner(train, space, metric="accuracy", mode="max")

The configuration is every value suggested plus what the function returns. Any Python control
flow works, so a parameter can exist only where it means something. `RandomSearch` runs the
function against draws of nbtune's domains (`suggest_int`'s high is included, as in Optuna);
`OptunaSearch` runs it against its study's own trial, so its sampler sees the conditional
structure (TPE models each branch) instead of a flattened space.
"""

from __future__ import annotations

import reprlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from nbtune.space import (
    Choice,
    Domain,
    IntRange,
    LogUniform,
    SearchSpace,
    Uniform,
    flatten_config,
)

SpaceFunction = Callable[[Any], Mapping[str, Any] | None]


class _DrawnTrial:
    """What a space function is given under `RandomSearch`: each suggestion is drawn from the
    matching nbtune domain with `rng`."""

    def __init__(self, rng: Any) -> None:
        self._rng = rng
        self.params: dict[str, Any] = {}
        self._domains: dict[str, Domain] = {}

    def suggest_float(
        self, name: str, low: float, high: float, *, log: bool = False, step: float | None = None
    ) -> float:
        if log and step is not None:
            raise ValueError(
                f"suggest_float({name!r}, ..., log=True, step={step!r}): a log scale takes no "
                "step; drop one of them"
            )
        return self._suggest(name, (LogUniform if log else Uniform)(low, high, step))

    def suggest_int(
        self, name: str, low: int, high: int, *, log: bool = False, step: int = 1
    ) -> int:
        return self._suggest(name, IntRange(low, high, step, log))

    def suggest_categorical(self, name: str, choices: Sequence[Any]) -> Any:
        return self._suggest(name, Choice(choices))

    def _suggest(self, name: str, domain: Domain) -> Any:
        known = self._domains.get(name)
        if known is not None and known != domain:
            raise ValueError(
                f"the space suggests {name!r} twice, as {known!r} and as {domain!r}; give each "
                "range its own name"
            )
        if name not in self.params:
            self._domains[name] = domain
            self.params[name] = domain.sample(self._rng)
        return self.params[name]


class DefineByRunSpace:
    """A search space given as a function of a trial that suggests values (see the module).

    It offers what searchers and the Tuner ask of a `SearchSpace`: `config(index, seed)`
    (depending on those alone), `parameter_names` (those suggested so far), no grids, no
    domains known in advance.
    """

    grid_size = 1
    has_sample_from = False

    def __init__(self, function: SpaceFunction) -> None:
        if not callable(function):
            raise TypeError(f"space={function!r}: pass a dict of domains or a function of a trial")
        self.function = function
        self._names: dict[str, None] = {}

    @property
    def parameter_names(self) -> tuple[str, ...]:
        """Every name suggested or returned so far, in the order first seen."""
        return tuple(self._names)

    def domains(self) -> dict[str, Domain]:
        """None known in advance: the function says what it needs as it runs."""
        return {}

    def config(self, index: int, seed: int) -> dict[str, Any]:
        """The `index`-th configuration of the experiment seeded with `seed`: the function run
        against draws from `numpy.random.default_rng([seed, index])`."""
        if index < 0 or seed < 0:
            raise ValueError(f"config(index={index}, seed={seed}): both must be >= 0")
        import numpy as np

        drawn = _DrawnTrial(np.random.default_rng([seed, index]))
        return self.run(drawn, lambda: drawn.params)

    def run(self, trial: Any, params: Callable[[], Mapping[str, Any]]) -> dict[str, Any]:
        """The configuration the function makes with `trial` (ours, or an Optuna trial):
        `params()` (what it suggested) and what it returned."""
        try:
            returned = self.function(trial)
        except Exception as exc:
            summary = f"{type(exc).__name__}: {exc}".splitlines()[0]
            raise ValueError(f"the space function {_name(self.function)} raised {summary}") from exc
        if returned is not None and not isinstance(returned, Mapping):
            raise TypeError(
                f"the space function {_name(self.function)} returned "
                f"{reprlib.repr(returned)}; return a dict of constants, or None"
            )
        config = {**params(), **(returned or {})}
        self._names.update(dict.fromkeys(flatten_config(config)))
        return config

    def complete(self, values: Mapping[str, Any]) -> dict[str, Any]:
        return dict(values)

    def check_config(self, config: Mapping[str, Any]) -> None:
        """A hand-picked configuration must be a dict; which names it needs depends on its
        own values, so they are not checked."""
        if not isinstance(config, Mapping):
            raise TypeError(f"config must be a dict, got {type(config).__name__}")

    @staticmethod
    def flatten(config: Mapping[str, Any]) -> dict[str, Any]:
        return flatten_config(config)

    def __repr__(self) -> str:
        return f"DefineByRunSpace({_name(self.function)})"


def _name(function: Callable) -> str:
    return getattr(function, "__qualname__", None) or repr(function)


def search_space(space: Any) -> SearchSpace | DefineByRunSpace:
    """The search space a user wrote: a dict of domains, or a define-by-run function of a
    trial (or a space already made of one)."""
    if isinstance(space, SearchSpace | DefineByRunSpace):
        return space
    return DefineByRunSpace(space) if callable(space) else SearchSpace(space)
