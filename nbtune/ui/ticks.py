"""Where an axis puts its ticks, and how plotly writes a number on a chart.

Shared by the plotly figures (parallel coordinates, whose axes plotly cannot make logarithmic
or integer-only by itself) and the static SVG of the learning curves, which has no plotly to
place its ticks. Tick labels written here come from `nbtune.metrics.format_number`, the one
way every view shows a number.
"""

from __future__ import annotations

import math

from nbtune.metrics import SIGNIFICANT

NUMBER_FORMAT = f".{SIGNIFICANT}~g"
"""`nbtune.metrics.format_number` in d3-format, for plotly's `tickformat` and hover templates."""


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """About `count` round values (1, 2 or 5 times a power of ten apart) covering [low, high]."""
    if not high > low:
        return [low]
    step = _nice_step((high - low) / max(1, count))
    first = math.ceil(low / step - 1e-9)
    last = math.floor(high / step + 1e-9)
    return [_clean(k * step) for k in range(first, last + 1)]


def integer_ticks(low: float, high: float, count: int = 8) -> list[int]:
    """Whole numbers only (never 1.5) covering [low, high], at most about `count` of them."""
    step = max(1, round(_nice_step((high - low) / max(1, count))))
    first = math.ceil(low / step) * step
    return list(range(first, math.floor(high) + 1, step)) or [round(low)]


def log_ticks(low: float, high: float, count: int = 6) -> list[float]:
    """Round values for a logarithmic axis over [low, high] (both > 0): powers of ten, with
    2 and 5 times them when the range spans few decades, thinned to about `count`."""
    bottom, top = math.floor(math.log10(low)), math.ceil(math.log10(high))
    for multiples in ((1, 2, 5), (1, 3), (1,)):
        ticks = [
            _clean(m * 10.0**power)
            for power in range(bottom, top + 1)
            for m in multiples
            if low <= m * 10.0**power <= high
        ]
        if len(ticks) <= count:
            break
    if not ticks:
        return [low]
    return ticks[:: math.ceil(len(ticks) / count)]


def _nice_step(raw: float) -> float:
    """The smallest of 1, 2, 5 times a power of ten that is at least `raw` (1 for nothing)."""
    if not raw > 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(raw))
    for multiple in (1, 2, 5, 10):
        if multiple * power >= raw * (1 - 1e-9):
            return multiple * power
    return 10 * power


def _clean(value: float) -> float:
    """`value` without float noise (0.30000000000000004 -> 0.3)."""
    return float(f"{value:.12g}")
