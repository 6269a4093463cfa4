"""Search spaces: what a tuner may try, and the i-th configuration of an experiment.

A space is a plain, possibly nested dict whose leaves are domains (`uniform`, `loguniform`,
`randint`, `choice`, `grid`, `sample_from`, and Ray Tune's `quniform`, `qloguniform`,
`qrandint`, `lograndint`, `qlograndint`, `randn`, `qrandn`) or constants::

    space = {
        "lr": loguniform(1e-4, 1e-1),
        "optimizer": grid(["sgd", "adam"]),
        "momentum": sample_from(lambda c: 0.9 if c["optimizer"] == "sgd" else 0.0),
        "model": {"layers": randint(1, 4), "act": "relu"},
    }

Configurations are addressed by index rather than drawn from one long-lived random stream:
`SearchSpace.config(i, seed)` depends on `(i, seed)` alone, so a restored experiment, or one
whose trials are suggested in a different order, sees exactly the same configurations.

Nested names are joined with "/" (`model/layers`), which is how they appear as `config/...`
columns in result tables; that is why keys may not contain "/" themselves.
"""

from __future__ import annotations

import copy
import functools
import math
import numbers
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np


SEPARATOR = "/"


class Domain(ABC):
    """Base of every search-space leaf that is not a constant."""

    @abstractmethod
    def sample(self, rng: np.random.Generator) -> Any:
        """One value drawn with `rng`, so the caller controls reproducibility."""

    def contains(self, value: Any) -> bool:
        """Whether `value` is one this domain can give, to check a value picked by hand
        (`points_to_evaluate`); a domain that cannot tell (`sample_from`) accepts any."""
        return True


@dataclass(frozen=True, repr=False)
class Uniform(Domain):
    """A float drawn uniformly from [low, high); with `q`, rounded to one of low, low + q, ...
    up to high, which comes down to the last of them (a define-by-run `suggest_float` with a
    step, as Optuna's; `quniform` puts both bounds on multiples of `q`)."""

    low: float
    high: float
    q: float | None = None

    def __post_init__(self) -> None:
        call = _call("uniform", self.low, self.high, self.q)
        _check_real_bounds(call, self.low, self.high)
        _check_order(call, self.low, self.high)
        q = _step(call, self.q)
        _set_fields(self, low=float(self.low), high=float(self.high), q=q)
        if q is not None:
            steps = math.floor((self.high - self.low) / q + 1e-9)
            _set_fields(self, high=_snap(self.low + steps * q, self.low, q))

    def sample(self, rng: np.random.Generator) -> float:
        value = _below_high(float(rng.uniform(self.low, self.high)), self.low, self.high)
        return _quantized(value, self)

    def contains(self, value: Any) -> bool:
        return _in_range(value, self)

    def __repr__(self) -> str:
        return _call("uniform", self.low, self.high, self.q, shown=True)


@dataclass(frozen=True, repr=False)
class LogUniform(Domain):
    """A float in [low, high) whose logarithm is uniform, for scales spanning decades; with
    `q`, rounded to a multiple of `q` in [low, high] (`qloguniform`)."""

    low: float
    high: float
    q: float | None = None

    def __post_init__(self) -> None:
        call = _call("loguniform", self.low, self.high, self.q)
        _check_real_bounds(call, self.low, self.high)
        if self.low <= 0:
            raise ValueError(
                f"{call}: low must be > 0 for a log scale; use uniform() or a positive low"
            )
        _check_order(call, self.low, self.high)
        q = _step(call, self.q)
        for bound in (self.low, self.high):
            if q is not None and not _is_multiple(bound, q):
                raise ValueError(f"{call}: {bound!r} is not a multiple of q; pick bounds that are")
        _set_fields(self, low=float(self.low), high=float(self.high), q=q)

    def sample(self, rng: np.random.Generator) -> float:
        value = math.exp(rng.uniform(math.log(self.low), math.log(self.high)))
        return _quantized(_below_high(value, self.low, self.high), self)

    def contains(self, value: Any) -> bool:
        return _in_range(value, self)

    def __repr__(self) -> str:
        return _call("loguniform", self.low, self.high, self.q, shown=True)


@dataclass(frozen=True, repr=False)
class RandInt(Domain):
    """An int drawn uniformly from [low, high); high is excluded, as in numpy and Ray Tune."""

    low: int
    high: int

    def __post_init__(self) -> None:
        call = f"randint(low={self.low!r}, high={self.high!r})"
        if not (_is_integer(self.low) and _is_integer(self.high)):
            raise TypeError(
                f"{call}: bounds must be integers, got {_type_names(self.low, self.high)}; "
                "use uniform() for floats"
            )
        _check_order(call, self.low, self.high)
        _set_fields(self, low=int(self.low), high=int(self.high))

    def sample(self, rng: np.random.Generator) -> int:
        return int(rng.integers(self.low, self.high))

    def contains(self, value: Any) -> bool:
        return _is_integer(value) and self.low <= value < self.high

    def __repr__(self) -> str:
        return f"randint({self.low!r}, {self.high!r})"


@dataclass(frozen=True, repr=False)
class IntRange(Domain):
    """An int in [low, high], high included, on the steps low, low + step, ...; uniform, or
    uniform on a log scale. What `qrandint`, `lograndint`, `qlograndint` and a define-by-run
    `suggest_int` make (Optuna's `IntDistribution`)."""

    low: int
    high: int
    step: int = 1
    log: bool = False

    def __post_init__(self) -> None:
        call = repr(self)
        if not all(_is_integer(value) for value in (self.low, self.high, self.step)):
            raise TypeError(
                f"{call}: bounds and step must be integers, got "
                f"{_type_names(self.low, self.high, self.step)}; use quniform() for floats"
            )
        if self.step < 1:
            raise ValueError(f"{call}: the step must be >= 1")
        if self.log and self.low < 1:
            raise ValueError(f"{call}: low must be >= 1 for a log scale")
        if self.low > self.high:
            raise ValueError(f"{call}: low must not be above high; swap the bounds")
        steps = (int(self.high) - int(self.low)) // int(self.step)
        _set_fields(self, low=int(self.low), high=int(self.low) + steps * int(self.step))
        _set_fields(self, step=int(self.step), log=bool(self.log))

    def sample(self, rng: np.random.Generator) -> int:
        if not self.log:
            return self.low + self.step * int(rng.integers((self.high - self.low) // self.step + 1))
        drawn = math.exp(rng.uniform(math.log(self.low), math.log(self.high + 1)))
        steps = round((min(math.floor(drawn), self.high) - self.low) / self.step)
        return self.low + self.step * steps

    def contains(self, value: Any) -> bool:
        on_a_step = _is_integer(value) and (value - self.low) % self.step == 0
        return on_a_step and self.low <= value <= self.high

    def __repr__(self) -> str:
        if self.log and self.step == 1:
            return f"lograndint({self.low!r}, {self.high + 1!r})"
        name = "qlograndint" if self.log else "qrandint"
        return f"{name}({self.low!r}, {self.high!r}, {self.step!r})"


@dataclass(frozen=True, repr=False)
class Normal(Domain):
    """A float drawn from a normal distribution; with `q`, rounded to a multiple of `q`."""

    mean: float = 0.0
    sd: float = 1.0
    q: float | None = None

    def __post_init__(self) -> None:
        call = repr(self)
        _check_real_bounds(call, self.mean, self.sd)
        if self.sd <= 0:
            raise ValueError(f"{call}: sd must be > 0")
        if self.q is not None and (not _is_real(self.q) or not self.q > 0):
            raise ValueError(f"{call}: q must be a number > 0")
        _set_fields(self, mean=float(self.mean), sd=float(self.sd))

    def sample(self, rng: np.random.Generator) -> float:
        value = float(rng.normal(self.mean, self.sd))
        return value if self.q is None else _round_to(value, self.q)

    def contains(self, value: Any) -> bool:
        finite = _is_real(value) and math.isfinite(value)
        return finite and (self.q is None or _is_multiple(value, self.q))

    def __repr__(self) -> str:
        if self.q is None:
            return f"randn({self.mean!r}, {self.sd!r})"
        return f"qrandn({self.mean!r}, {self.sd!r}, {self.q!r})"


@dataclass(frozen=True, repr=False)
class Choice(Domain):
    """One of `categories`, each equally likely."""

    categories: tuple[Any, ...]

    def __post_init__(self) -> None:
        _set_fields(self, categories=_nonempty_tuple("choice", self.categories, "category"))

    def sample(self, rng: np.random.Generator) -> Any:
        return self.categories[int(rng.integers(len(self.categories)))]

    def contains(self, value: Any) -> bool:
        return value in self.categories

    def __repr__(self) -> str:
        return f"choice({list(self.categories)!r})"


@dataclass(frozen=True, repr=False)
class Grid(Domain):
    """Every one of `values` is tried: the space enumerates grids instead of sampling them.

    `sample` exists for searchers that cannot enumerate a grid (a model-based one, say); to
    them a grid is a choice among its values.
    """

    values: tuple[Any, ...]

    def __post_init__(self) -> None:
        _set_fields(self, values=_nonempty_tuple("grid", self.values, "value"))

    def sample(self, rng: np.random.Generator) -> Any:
        return self.values[int(rng.integers(len(self.values)))]

    def contains(self, value: Any) -> bool:
        return value in self.values

    def __repr__(self) -> str:
        return f"grid({list(self.values)!r})"


@dataclass(frozen=True, repr=False)
class SampleFrom(Domain):
    """A value computed from the rest of the configuration by `fn(config)`.

    It has no distribution of its own, so only `SearchSpace.config`, which holds the rest of
    the configuration, can resolve it; `sample` says so instead of guessing.
    """

    fn: Callable[[dict[str, Any]], Any]

    def __post_init__(self) -> None:
        if not callable(self.fn):
            raise TypeError(f"sample_from({self.fn!r}): expects a function config -> value")

    def sample(self, rng: np.random.Generator) -> Any:
        raise TypeError(f"{self!r} depends on the config; resolve it with SearchSpace.config")

    def __repr__(self) -> str:
        return f"sample_from({getattr(self.fn, '__name__', repr(self.fn))})"


def uniform(low: float, high: float) -> Uniform:
    """A float drawn uniformly from [low, high)."""
    return Uniform(low, high)


def loguniform(low: float, high: float) -> LogUniform:
    """A float in [low, high), uniform on a log scale (learning rates, weight decay)."""
    return LogUniform(low, high)


def randint(low: int, high: int) -> RandInt:
    """An int drawn uniformly from [low, high); high is excluded."""
    return RandInt(low, high)


def quniform(low: float, high: float, q: float) -> Uniform:
    """A multiple of `q` in [low, high], both included, drawn uniformly then rounded, as Ray
    Tune's `quniform` (`quniform(0.05, 1, 0.1)` draws 0.1, 0.2, ... or 1.0)."""
    return Uniform(*_float_multiples_within("quniform", low, high, q))


def qloguniform(low: float, high: float, q: float) -> LogUniform:
    """A multiple of `q` in [low, high], both included, drawn on a log scale then rounded, as
    Ray Tune's `qloguniform`."""
    return LogUniform(*_float_multiples_within("qloguniform", low, high, q))


def _float_multiples_within(name: str, low: Any, high: Any, q: Any) -> tuple[Any, Any, Any]:
    """Ray Tune's bounds for a quantised float: `low` up and `high` down to multiples of `q`
    (a bound within 1e-9 of a multiple is one). Arguments that are not finite numbers in order
    go to the domain as they are, which says what is wrong with them.

    Raises:
        ValueError: no multiple of `q` lies in [low, high].
    """
    numbers = all(_is_real(value) and math.isfinite(value) for value in (low, high, q))
    if not numbers or not q > 0 or low > high:
        return low, high, q
    first = _round_to(math.ceil(low / q - 1e-9) * q, q)
    last = _round_to(math.floor(high / q + 1e-9) * q, q)
    _check_multiples(f"{name}({low!r}, {high!r}, {q!r})", first, last, q)
    if first == last and low < high:
        raise ValueError(
            f"{name}({low!r}, {high!r}, {q!r}): {first!r} is the only multiple of {q} between "
            "the bounds; use it as a constant, or widen them"
        )
    return first, last, q


def _check_multiples(call: str, first: Any, last: Any, q: Any) -> None:
    """Raise a one-line ValueError if the bounds hold no multiple of `q` (`first > last`)."""
    if first > last:
        raise ValueError(
            f"{call}: no multiple of {q} lies between the bounds; widen them or pick a smaller q"
        )


def qrandint(low: int, high: int, q: int = 1) -> IntRange:
    """A multiple of `q` in [low, high], both included, drawn uniformly (as Ray Tune's
    `qrandint`: `qrandint(1, 10, 3)` draws 3, 6 or 9)."""
    return IntRange(*_multiples_within("qrandint", low, high, q))


def lograndint(low: int, high: int) -> IntRange:
    """An int from [low, high), uniform on a log scale; high is excluded, as in `randint`."""
    return IntRange(low, _int_below(high), 1, log=True)


def qlograndint(low: int, high: int, q: int) -> IntRange:
    """A multiple of `q` in [low, high], both included, drawn on a log scale (as Ray Tune's
    `qlograndint`)."""
    return IntRange(*_multiples_within("qlograndint", low, high, q), log=True)


def _multiples_within(name: str, low: Any, high: Any, q: Any) -> tuple[Any, Any, Any]:
    """The bounds of Ray Tune's quantised ints: `low` up and `high` down to multiples of `q`.
    Arguments that are not integers, or a bad step, go to `IntRange` as they are, which says
    what is wrong with them.

    Raises:
        ValueError: no multiple of `q` lies in [low, high].
    """
    if not all(_is_integer(value) for value in (low, high, q)) or q < 1 or low > high:
        return low, high, q
    first, last = -(-int(low) // int(q)) * int(q), int(high) // int(q) * int(q)
    _check_multiples(f"{name}({low!r}, {high!r}, {q!r})", first, last, q)
    return first, last, q


def randn(mean: float = 0.0, sd: float = 1.0) -> Normal:
    """A float drawn from a normal distribution of `mean` and standard deviation `sd`."""
    return Normal(mean, sd)


def qrandn(mean: float, sd: float, q: float) -> Normal:
    """A normal float rounded to a multiple of `q`."""
    return Normal(mean, sd, q)


def choice(categories: Sequence[Any]) -> Choice:
    """One element of `categories`, each equally likely."""
    return Choice(categories)


def grid(values: Sequence[Any]) -> Grid:
    """Try every one of `values` (grid search), once per sample of the experiment."""
    return Grid(values)


def sample_from(fn: Callable[[dict[str, Any]], Any]) -> SampleFrom:
    """A value computed as `fn(config)`, for parameters that depend on others.

    `fn` receives the nested config with all other values resolved, except `sample_from`
    values defined after this one, which are not in it yet.
    """
    return SampleFrom(fn)


class SearchSpace:
    """A validated search space that yields the configurations of an experiment.

    Args:
        space: A possibly nested dict of parameter name -> domain or constant; nested dicts
            are recursed into, every other non-domain value (lists included) is a constant.
            None means an empty space, whose every configuration is `{}`.

    Raises:
        TypeError: If `space` is not a mapping or a key is not a string.
        ValueError: If a key contains "/", which joins nested names.
    """

    def __init__(self, space: Mapping[str, Any] | None = None) -> None:
        if space is None:
            space = {}
        if not isinstance(space, Mapping):
            raise TypeError(
                "search space must be a dict of parameter name -> domain or constant (or a "
                "define-by-run function of a trial), "
                f"got {type(space).__name__}"
            )
        self._space = _validated_copy(space, prefix="")
        self._leaves = flatten_config(self._space)
        self._grids = [(name, d) for name, d in self._leaves.items() if isinstance(d, Grid)]

    @functools.cached_property
    def _sampled(self) -> list[tuple[str, Domain]]:
        """The leaves drawn at random, in parameter order."""
        return [
            (name, leaf)
            for name, leaf in self._leaves.items()
            if isinstance(leaf, Domain) and not isinstance(leaf, Grid | SampleFrom)
        ]

    @property
    def parameter_names(self) -> tuple[str, ...]:
        """Every leaf's "/"-joined name, constants included, in definition order."""
        return tuple(self._leaves)

    @property
    def grid_size(self) -> int:
        """How many grid combinations there are (1 without grids)."""
        return math.prod(len(domain.values) for _, domain in self._grids)

    @property
    def has_sample_from(self) -> bool:
        """Whether any parameter is computed from the others."""
        return any(isinstance(leaf, SampleFrom) for leaf in self._leaves.values())

    def domains(self) -> dict[str, Domain]:
        """The non-constant leaves, by "/"-joined name, for searchers that model the space."""
        return {name: leaf for name, leaf in self._leaves.items() if isinstance(leaf, Domain)}

    def with_changes(self, changes: Mapping[str, Any]) -> SearchSpace:
        """This space with some parameters set anew or added, by "/"-joined name: e.g.
        `space.with_changes({"lr": loguniform(1e-5, 1e-2)})` for `Tuner.update_space`."""
        leaves = {**self._leaves, **changes}
        nested: dict[str, Any] = {}
        for name, leaf in leaves.items():
            *groups, key = name.split(SEPARATOR)
            group = nested
            for part in groups:
                group = group.setdefault(part, {})
            group[key] = leaf
        return SearchSpace(nested)

    def config(self, index: int, seed: int) -> dict[str, Any]:
        """The `index`-th configuration of the experiment seeded with `seed`.

        As in Ray Tune, configuration `index` takes grid combination `index % grid_size`
        (in `itertools.product` order, the last grid parameter varying fastest), so
        `num_samples` samples make `num_samples * grid_size` configurations. Random domains
        are drawn in parameter order from `numpy.random.default_rng([seed, index])`, then
        `sample_from` values are computed in definition order. Values are deep copies, so a
        trial that mutates its config cannot change another's.

        Raises:
            ValueError: If `index` or `seed` is negative, or a `sample_from` function raises.
        """
        if index < 0 or seed < 0:
            raise ValueError(f"config(index={index}, seed={seed}): both must be >= 0")
        values = self._grid_point(index)
        if self._sampled:
            import numpy as np  # here, so that worker processes never need it

            rng = np.random.default_rng([seed, index])
            for name, domain in self._sampled:
                values[name] = domain.sample(rng)
        return self.complete(values)

    def complete(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """The nested configuration made from values of its domains, by "/"-joined name.

        Constants are added and `sample_from` values computed, as `config` does, so a searcher
        that samples the domains itself (a model-based one) gets the same configurations.
        Values are deep copies, so a trial that mutates its config cannot change another's.

        Raises:
            ValueError: If a `sample_from` function raises.
        """
        flat: dict[str, Any] = {}
        for name, leaf in self._leaves.items():
            if name in values:
                flat[name] = copy.deepcopy(values[name])
            elif not isinstance(leaf, Domain):
                flat[name] = copy.deepcopy(leaf)
        self._resolve_sample_from(flat)
        return _nest(self._space, flat, prefix="")

    def check_config(self, config: Mapping[str, Any]) -> None:
        """Check that a hand-picked config sets exactly this space's parameters.

        Raises:
            TypeError: If `config` is not a mapping.
            ValueError: Listing the unknown and the missing parameter names.
        """
        if not isinstance(config, Mapping):
            raise TypeError(f"config must be a dict, got {type(config).__name__}")
        names = self._leaves.keys()
        given = flatten_config(config).keys()
        problems = [
            f"{label} {', '.join(map(repr, keys))}"
            for label, keys in (
                ("unknown", [k for k in given if k not in names]),
                ("missing", [n for n in names if n not in given]),
            )
            if keys
        ]
        if problems:
            raise ValueError(f"config does not fit the search space: {'; '.join(problems)}")

    def check_values(self, config: Mapping[str, Any], where: str) -> None:
        """Check that each value `config` sets (all or some of the parameters) is one its
        domain can give.

        Raises:
            ValueError: One line, starting with `where`, naming the first value outside.
        """
        domains = self.domains()
        for name, value in flatten_config(config).items():
            domain = domains.get(name)
            if domain is not None and not domain.contains(value):
                raise ValueError(
                    f"{where}: {name!r} = {value!r} is outside {domain!r}; pick a value in it"
                )

    @staticmethod
    def flatten(config: Mapping[str, Any]) -> dict[str, Any]:
        """Same as `flatten_config`, for callers that hold a space."""
        return flatten_config(config)

    def __repr__(self) -> str:
        return f"SearchSpace({self._space!r})"

    def _grid_point(self, index: int) -> dict[str, Any]:
        """Grid values of combination `index % grid_size`, decoded like a mixed-radix number.

        Decoding instead of materialising `itertools.product` keeps large grids cheap.
        """
        point: dict[str, Any] = {}
        rest = index % self.grid_size
        for name, domain in reversed(self._grids):
            rest, position = divmod(rest, len(domain.values))
            point[name] = domain.values[position]
        return point

    def _resolve_sample_from(self, values: dict[str, Any]) -> None:
        """Add each `sample_from` value to `values`, computed from those already there."""
        for name, leaf in self._leaves.items():
            if not isinstance(leaf, SampleFrom):
                continue
            try:
                values[name] = leaf.fn(_nest(self._space, values, prefix=""))
            except Exception as exc:
                raise ValueError(
                    f"sample_from for {name!r} raised {exc!r}; it sees constants, sampled "
                    "values and earlier sample_from values only"
                ) from exc


def flatten_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """A nested config as one flat dict with "/"-joined keys, in order.

    These names are the `config/<name>` columns of result tables.
    """
    flat: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, Mapping):
            flat.update({f"{key}{SEPARATOR}{k}": v for k, v in flatten_config(value).items()})
        else:
            flat[key] = value
    return flat


def _validated_copy(space: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    """A copy of the space's dict structure (leaves shared), with every key checked."""
    copied: dict[str, Any] = {}
    where = f" (in {prefix.removesuffix(SEPARATOR)!r})" if prefix else ""
    for key, value in space.items():
        if not isinstance(key, str):
            raise TypeError(f"search space key {key!r}{where} must be a str")
        if SEPARATOR in key:
            raise ValueError(
                f"search space key {key!r}{where} contains '/', which joins nested names in "
                "column names; rename it or nest a dict instead"
            )
        nested = isinstance(value, Mapping)
        copied[key] = _validated_copy(value, f"{prefix}{key}{SEPARATOR}") if nested else value
    return copied


def _nest(space: dict[str, Any], values: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    """The space's nested shape filled from flat `values`; leaves without a value are left out.

    Nested dicts are always present, even when empty, so the config keeps the space's shape.
    """
    nested: dict[str, Any] = {}
    for key, leaf in space.items():
        name = prefix + key
        if isinstance(leaf, dict):
            nested[key] = _nest(leaf, values, name + SEPARATOR)
        elif name in values:
            nested[key] = values[name]
    return nested


def _call(name: str, low: Any, high: Any, q: Any, shown: bool = False) -> str:
    """How the user wrote the domain: `uniform(0, 1)` or `quniform(0, 1, 0.1)`; keywords in
    error messages."""
    if shown:
        return f"{name}({low!r}, {high!r})" if q is None else f"q{name}({low!r}, {high!r}, {q!r})"
    if q is None:
        return f"{name}(low={low!r}, high={high!r})"
    return f"q{name}(low={low!r}, high={high!r}, q={q!r})"


def _step(call: str, q: Any) -> float | None:
    """`q` checked: None, or a finite number > 0."""
    if q is None:
        return None
    if not _is_real(q) or not q > 0 or not math.isfinite(q):
        raise ValueError(f"{call}: q must be a finite number > 0")
    return float(q)


def _is_multiple(value: float, q: float) -> bool:
    return math.isclose(value / q, round(value / q), abs_tol=1e-9)


def _in_range(value: Any, domain: Uniform | LogUniform) -> bool:
    """Whether `value` is a float the domain gives: in [low, high), or with `q` one of low,
    low + q, ... in [low, high]."""
    if not _is_real(value) or not math.isfinite(value):
        return False
    if domain.q is None:
        return domain.low <= value < domain.high
    return domain.low <= value <= domain.high and _is_multiple(value - domain.low, domain.q)


def _quantized(value: float, domain: Uniform | LogUniform) -> float:
    if domain.q is None:
        return value
    return min(max(_snap(value, domain.low, domain.q), domain.low), domain.high)


def _snap(value: float, low: float, q: float) -> float:
    """The nearest of low, low + q, ... to `value`, without float noise."""
    return round(low + round((value - low) / q) * q, _decimals(q, low))


def _round_to(value: float, q: float) -> float:
    """`value` rounded to a multiple of `q`, without the float noise of `round(v / q) * q`
    (0.30000000000000004)."""
    return round(round(value / q) * q, _decimals(q))


def _decimals(*scales: float) -> int:
    """Decimals enough to keep 6 significant digits below the finest of `scales` (0s left out)."""
    return max(max(0, -math.floor(math.log10(abs(scale)))) + 6 for scale in scales if scale)


def _int_below(high: Any) -> Any:
    """The highest int below `high` (an exclusive bound), or `high` itself if not an int, for
    the domain to refuse."""
    return high - 1 if _is_integer(high) else high


def _below_high(value: float, low: float, high: float) -> float:
    """`value` kept in [low, high), which floating-point rounding of a draw can leave."""
    return min(max(value, low), math.nextafter(high, low))


def _set_fields(domain: Domain, **fields: Any) -> None:
    """Store normalised field values on a frozen dataclass during `__post_init__`."""
    for name, value in fields.items():
        object.__setattr__(domain, name, value)


def _is_real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _is_integer(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _type_names(*values: Any) -> str:
    return " and ".join(type(v).__name__ for v in values)


def _check_real_bounds(call: str, low: Any, high: Any) -> None:
    if not (_is_real(low) and _is_real(high)):
        raise TypeError(f"{call}: bounds must be numbers, got {_type_names(low, high)}")
    if not (math.isfinite(low) and math.isfinite(high)):
        raise ValueError(f"{call}: bounds must be finite numbers, not nan or inf")


def _check_order(call: str, low: Any, high: Any) -> None:
    if low > high:
        raise ValueError(f"{call}: low must be below high; swap the bounds")
    if low == high:
        raise ValueError(f"{call}: low must be below high; use a constant for a fixed value")


def _nonempty_tuple(function: str, items: Any, noun: str) -> tuple[Any, ...]:
    """`items` as a tuple; a string or an unordered collection is refused.

    A string is almost always one option that lost its list. Sets are refused because their
    iteration order, and so the value drawn for a seed, can change between runs.
    """
    if isinstance(items, str | bytes) or not isinstance(items, Sequence):
        raise TypeError(
            f"{function}({items!r}): expects a list or tuple, got {type(items).__name__}"
        )
    if not items:
        raise ValueError(f"{function}({items!r}): needs at least one {noun}")
    return tuple(items)
