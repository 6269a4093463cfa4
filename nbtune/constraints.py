"""Outcome constraints: `Tuner(..., constraints={"latency_ms": (None, 10), "acc": (0.9, None)})`.

Each constraint bounds a reported key: `(low, high)`, None for an open side. A result is
*feasible* when it reports every constrained key as a finite number within its bounds; a key it
does not report, or reports as NaN, infinite or text, makes it infeasible (Optuna likewise
counts a trial without its constraint values as infeasible).

A trial is judged by its last result: what its configuration reached where it ended, as
`OptunaSearch` tells it and as the Pareto front takes it. A trial is feasible when its last
result is; one that has reported nothing is neither (NA). The best of a run (`best_result`,
`best_trial`, `get_best_trial`, the Pareto front, the dashboard's best) is taken among feasible
results of feasible trials only.

Optuna's convention gives each constraint a violation amount: zero or less is feasible, a
positive value says by how much the bound is missed (`violations`), so its samplers can steer
towards the feasible region.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nbtune.metrics import finite
from nbtune.trial import Trial

_EXAMPLE = "e.g. {'latency_ms': (None, 10), 'acc': (0.9, None)}"


@dataclass(frozen=True)
class Bound:
    """One constrained key and its bounds (None for an open side; both included)."""

    key: str
    low: float | None
    high: float | None

    def violation(self, value: float) -> float:
        """How far `value` lies outside the bounds; zero or less when it is inside."""
        below = -math.inf if self.low is None else self.low - value
        above = -math.inf if self.high is None else value - self.high
        return max(below, above)


@dataclass(frozen=True)
class Constraints:
    """The bounds a run puts on reported keys; empty when it has none (then every result is
    feasible)."""

    bounds: tuple[Bound, ...] = ()

    @classmethod
    def parse(cls, constraints: Any) -> Constraints:
        """The Tuner's `constraints`, checked: a mapping of reported key to `(low, high)`.

        Raises:
            TypeError, ValueError: one line saying what to change.
        """
        if constraints is None:
            return cls()
        if not isinstance(constraints, Mapping):
            raise TypeError(
                f"constraints={constraints!r}: pass a dict of reported key to (low, high), "
                f"{_EXAMPLE}"
            )
        return cls(tuple(_bound(key, pair) for key, pair in constraints.items()))

    def __bool__(self) -> bool:
        return bool(self.bounds)

    @property
    def keys(self) -> tuple[str, ...]:
        """The constrained keys, in the order given."""
        return tuple(bound.key for bound in self.bounds)

    def to_spec(self) -> dict[str, list[float | None]]:
        """As the experiment's spec records them (`parse` reads it back)."""
        return {bound.key: [bound.low, bound.high] for bound in self.bounds}

    def violations(self, result: Mapping[str, Any]) -> dict[str, float]:
        """Each constrained key's violation amount in `result`, by key (Optuna's convention:
        zero or less is feasible); infinite where the result lacks the key as a finite
        number."""
        violations = {}
        for bound in self.bounds:
            value = finite(result.get(bound.key))
            violations[bound.key] = math.inf if value is None else bound.violation(value)
        return violations

    def feasible(self, result: Mapping[str, Any] | None) -> bool:
        """Whether `result` satisfies every bound (any result does, without constraints)."""
        return all(amount <= 0 for amount in self.violations(result or {}).values())

    def trial_feasible(self, last_result: Mapping[str, Any]) -> bool | None:
        """Whether a trial whose last result is `last_result` is feasible; None if it has
        reported nothing yet."""
        return self.feasible(last_result) if last_result else None

    def infeasible(self, trials: Iterable[Trial]) -> frozenset[int]:
        """The ids of the `trials` whose last result misses a constraint (or that reported
        nothing, where there are constraints): those the best never counts."""
        if not self.bounds:
            return frozenset()
        return frozenset(trial.trial_id for trial in trials if not self.feasible(trial.last_result))

    def describe(self, result: Mapping[str, Any]) -> str:
        """What `result` misses, in a few words for a tooltip ("latency_ms 12 > 10")."""
        missed = []
        for bound in self.bounds:
            value = finite(result.get(bound.key))
            if value is None:
                missed.append(f"{bound.key} not reported")
            elif bound.low is not None and value < bound.low:
                missed.append(f"{bound.key} {value:.4g} < {bound.low:.4g}")
            elif bound.high is not None and value > bound.high:
                missed.append(f"{bound.key} {value:.4g} > {bound.high:.4g}")
        return "; ".join(missed)


UNCONSTRAINED = Constraints()
"""A run without constraints: every result is feasible."""


def _bound(key: Any, pair: Any) -> Bound:
    if not isinstance(key, str):
        raise TypeError(f"constraints: the key {key!r} is not text; name a reported key")
    if isinstance(pair, (str, bytes)) or not isinstance(pair, Sequence) or len(pair) != 2:
        raise ValueError(
            f"constraints[{key!r}]={pair!r}: give a pair (low, high), None for an open side, "
            f"{_EXAMPLE}"
        )
    low, high = (_side(key, side) for side in pair)
    if low is None and high is None:
        raise ValueError(
            f"constraints[{key!r}]=(None, None) bounds nothing; give a low or a high bound"
        )
    if low is not None and high is not None and low > high:
        raise ValueError(f"constraints[{key!r}]=({low}, {high}): low is above high; swap them")
    return Bound(key, low, high)


def _side(key: str, side: Any) -> float | None:
    if side is None:
        return None
    value = finite(side)
    if value is None:
        raise ValueError(
            f"constraints[{key!r}]: the bound {side!r} is not a finite number; give a number "
            "or None"
        )
    return value
