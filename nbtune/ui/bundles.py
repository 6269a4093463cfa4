"""The faint learning curves of a large run, drawn a few dozen to a trace.

A plotly chart redraws every trace when any changes, and a browser without a GPU draws WebGL
traces on its main thread: two hundred curves, one trace each, kept a page busy most of the
time, and a click on it waited seconds. Past `BUNDLE_AFTER` curves, the curves that are
neither in colour nor live (running, pending, paused) are joined into one trace per
`BUNDLE_SIZE` trial ids (gaps between them), at most `BUNDLE_POINTS` points each: a finished
trial's bundle stays as it was, so a redraw sends only the curves still moving.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from nbtune.ui.data import Curve, thin_indexes
from nbtune.ui.ticks import NUMBER_FORMAT

BUNDLE_AFTER = 50
"""Up to this many curves, each has a trace of its own."""
BUNDLE_SIZE = 25
"""The trial ids a bundle holds: trials `k * BUNDLE_SIZE` to `(k + 1) * BUNDLE_SIZE - 1`."""
BUNDLE_POINTS = 50
"""A faint curve is drawn with at most this many points in its bundle."""
LIVE_STATES = frozenset({"pending", "running", "paused"})
OVERLAY_NAME = "highlight"
"""The empty trace drawn last when curves are bundled: the browser draws a bundled curve the
mouse points at into it (`table.js`), bold, without touching the bundle."""


@dataclass(frozen=True)
class Split:
    """The curves with a trace of their own (in trial order), and the bundles of the others
    (bundle k: trial ids from `k * BUNDLE_SIZE`, possibly none)."""

    own: tuple[Curve, ...]
    bundles: tuple[tuple[Curve, ...], ...]


def split_curves(curves: Sequence[Curve], highlight: int | None = None) -> Split:
    """Which curves keep a trace of their own: all up to `BUNDLE_AFTER`; past it, the ones in
    colour, the live ones and the highlighted one. The number of bundles only grows with the
    run (it follows the largest trial id), so that the traces after them keep their place."""
    if len(curves) <= BUNDLE_AFTER:
        return Split(tuple(curves), ())
    own = [c for c in curves if c.featured or c.state in LIVE_STATES or c.trial_id == highlight]
    kept = {curve.trial_id for curve in own}
    bundles: list[list[Curve]] = [
        [] for _ in range(max(c.trial_id for c in curves) // BUNDLE_SIZE + 1)
    ]
    for curve in curves:
        if curve.trial_id not in kept:
            bundles[curve.trial_id // BUNDLE_SIZE].append(curve)
    return Split(tuple(own), tuple(tuple(bundle) for bundle in bundles))


def bundle_signature(bundle: Sequence[Curve], x: str, faint: bool) -> tuple:
    """What a bundle's trace shows: it is sent again only when this changes."""
    return (x, faint, tuple((c.trial_id, len(c.x), c.y[-1:]) for c in bundle))


def bundle_trace(bundle: Sequence[Curve], x: str, faint: bool, color: str) -> dict[str, Any]:
    """The properties of a bundle's trace: its curves one after the other, a gap (None)
    between two, each point's trial id in `customdata` (the hover names it)."""
    xs: list[Any] = []
    ys: list[Any] = []
    ids: list[Any] = []
    for curve in bundle:
        along = curve.seconds if x == "time" else curve.x
        keep = thin_indexes(len(along), BUNDLE_POINTS)
        xs += [along[i] for i in keep] + [None]
        ys += [curve.y[i] for i in keep] + [None]
        ids += [curve.trial_id] * len(keep) + [None]
    where = f"%{{x:{NUMBER_FORMAT}}} s" if x == "time" else "iteration %{x}"
    first = bundle[0].trial_id // BUNDLE_SIZE * BUNDLE_SIZE if bundle else 0
    return {
        "x": xs,
        "y": ys,
        "customdata": ids,
        "name": f"trials {first} to {first + BUNDLE_SIZE - 1}",
        "legendgroup": None,
        "showlegend": False,
        "line": {"color": color, "width": 1.4, "dash": "solid"},
        "opacity": 0.3 if faint else 1.0,
        "mode": "lines",
        "marker": {"size": 0},
        "connectgaps": False,
        "hovertemplate": f"trial %{{customdata}}<br>{where}: %{{y:{NUMBER_FORMAT}}}<extra></extra>",
    }


def overlay_trace() -> dict[str, Any]:
    """The properties of the empty trace the browser draws a highlighted bundled curve into."""
    return {
        "x": (),
        "y": (),
        "customdata": None,
        "name": OVERLAY_NAME,
        "legendgroup": None,
        "showlegend": False,
        "line": {"color": None, "width": 3.5, "dash": "solid"},
        "opacity": 1.0,
        "mode": "lines",
        "marker": {"size": 0},
        "hoverinfo": "skip",
        "hovertemplate": None,
    }
