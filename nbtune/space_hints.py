"""Hints at the edges of a search space: the best trials crowd a bound of a parameter's range.

When 4 of the 5 best trials have a learning rate in the top tenth of its (log) range, the
optimum likely lies past it: the range should grow that way. `hints` finds such parameters;
`widened` gives the domain with that bound moved out (x10 on a log scale, by the range's
width otherwise), for `Tuner.update_space`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

from nbtune.metrics import finite
from nbtune.space import Domain, IntRange, LogUniform, RandInt, SearchSpace, Uniform, flatten_config
from nbtune.trial import Trial

TOP = 5
"""How many of the best trials are looked at."""
EDGE = 0.1
"""The outer share of a range that counts as its edge."""
CROWD = 0.8
"""The share of the best trials at one edge that makes a hint (4 of 5)."""


def hints(
    space: SearchSpace, trials: Sequence[Trial], mode: str, *, top: int = TOP
) -> list[dict[str, Any]]:
    """One dict per numeric parameter whose `top` best trials (by `best_value`) crowd an edge
    of its range: `param`, `edge` ("low" or "high"), `share` (of those trials at that edge),
    `message` (one line for the user) and `widened` (the domain with that bound moved out).
    None for a parameter whose best values sit inside, and none before `top` trials have a
    value."""
    ranked = [trial for trial in trials if finite(trial.best_value) is not None]
    ranked.sort(key=lambda trial: trial.best_value, reverse=mode == "max")
    best = ranked[:top]
    if len(best) < top:
        return []
    found = []
    for name, domain in space.domains().items():
        bounds = _bounds(domain)
        if bounds is None:
            continue
        positions = [_position(flatten_config(t.config).get(name), domain, bounds) for t in best]
        for edge, at_edge in (("low", lambda p: p <= EDGE), ("high", lambda p: p >= 1 - EDGE)):
            share = sum(p is not None and at_edge(p) for p in positions) / len(best)
            if share >= CROWD:
                found.append(_hint(name, domain, edge, share, len(best)))
    return found


def widened(domain: Domain, edge: str) -> Domain:
    """`domain` with its `edge` bound moved out: x10 (or /10) on a log scale, by the range's
    width otherwise; a bound that cannot move (a log scale's low of 1 for ints) stays."""
    low, high = _bounds(domain)
    if _is_log(domain):
        low, high = (low / 10, high) if edge == "low" else (low, high * 10)
    else:
        width = high - low
        low, high = (low - width, high) if edge == "low" else (low, high + width)
    if isinstance(domain, RandInt | IntRange):
        low, high = math.floor(low), math.ceil(high)
        if isinstance(domain, IntRange) and domain.log:
            low = max(1, low)
        if isinstance(domain, IntRange) and domain.step > 1:
            low, high = _on_steps(low, high, domain)
    if isinstance(domain, Uniform | LogUniform) and domain.q is not None:
        low, high = math.floor(low / domain.q) * domain.q, math.ceil(high / domain.q) * domain.q
    return dataclasses.replace(domain, low=low, high=high)


def _hint(name: str, domain: Domain, edge: str, share: float, count: int) -> dict[str, Any]:
    wider = widened(domain, edge)
    side = "lowest" if edge == "low" else "highest"
    message = (
        f"{round(share * count)} of the {count} best trials have {name} in the {side} "
        f"{EDGE:.0%} of {domain!r}: widen it, e.g. to {wider!r}"
    )
    return {"param": name, "edge": edge, "share": share, "message": message, "widened": wider}


def _bounds(domain: Any) -> tuple[float, float] | None:
    if isinstance(domain, Uniform | LogUniform | RandInt | IntRange):
        return domain.low, domain.high
    return None


def _is_log(domain: Domain) -> bool:
    return isinstance(domain, LogUniform) or (isinstance(domain, IntRange) and domain.log)


def _position(value: Any, domain: Domain, bounds: tuple[float, float]) -> float | None:
    """Where `value` sits in the range, from 0 (low) to 1 (high), on the domain's scale."""
    value = finite(value)
    low, high = bounds
    if value is None or high <= low:
        return None
    if _is_log(domain):
        if value <= 0:
            return None
        return (math.log(value) - math.log(low)) / (math.log(high) - math.log(low))
    return (value - low) / (high - low)


def _on_steps(low: int, high: int, domain: IntRange) -> tuple[int, int]:
    """`low` and `high` moved out onto the domain's steps (counted from its old low)."""
    step, origin = domain.step, domain.low
    low = origin - math.ceil((origin - low) / step) * step
    high = origin + math.ceil((high - origin) / step) * step
    return low, high
