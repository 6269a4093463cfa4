"""The learning curves as a static, self-contained SVG: a chart that needs no JavaScript.

A saved notebook, GitHub, nbviewer and `nbconvert --to html` show no widget and run no
plotly, so the run's static HTML summary draws its learning curves with this: polylines in
the trials' own colours (the live chart's, `nbtune.ui.data.TRIAL_COLORS`), the best ten
labelled and the rest faint, the same line styles by state, a tooltip per curve (`<title>`)
and a few ticks. Every text is escaped: a metric or a config named `<script>` stays text.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from nbtune.metrics import format_number
from nbtune.ui.data import Curve, HistoryData, thin_indexes
from nbtune.ui.ticks import integer_ticks, nice_ticks

MAX_SVG_POINTS = 100
"""A coloured curve keeps at most this many points; a faint one a third of it."""
MIN_WIDTH, MIN_HEIGHT = 240, 160
"""The smallest picture that holds the axes, the legend and a plot between them."""
_DASH = {"paused": "6 4", "stopped": "2 3"}
_FAINT = "#8c8c8c"
_MARGIN_LEFT, _MARGIN_RIGHT, _MARGIN_TOP, _MARGIN_BOTTOM = 72, 100, 30, 42


def learning_curves_svg(
    data: HistoryData, dark: bool | None = None, width: int = 640, height: int = 320
) -> str:
    """The learning curves of `data` as one `<svg>` element, `width` x `height` pixels.

    Args:
        dark: light text and grid for a dark page, dark ones for a light page; by default
            (None) the page's own text colour (`currentColor`), which reads on either theme.
            The background is transparent either way.

    Raises:
        ValueError: the picture is too small to hold the axes and the legend.
    """
    if width < MIN_WIDTH or height < MIN_HEIGHT:
        raise ValueError(
            f"learning_curves_svg(width={width}, height={height}): make it at least "
            f"{MIN_WIDTH} x {MIN_HEIGHT} pixels"
        )
    ink = "currentColor" if dark is None else "#e6e6e6" if dark else "#333333"
    box = _Box(width, height)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" font-family="sans-serif" font-size="11" '
        f'fill="{ink}">',
        f"<title>{html.escape(data.metric)} by iteration</title>",
        f'<text x="{_MARGIN_LEFT}" y="18" font-size="13">'
        f"{html.escape(data.metric)} by iteration</text>",
    ]
    curves = [curve for curve in data.curves if curve.x]
    if not curves:
        parts.append(
            f'<text x="{width / 2:.1f}" y="{height / 2:.1f}" text-anchor="middle">'
            f"waiting for a first value of {html.escape(data.metric)}</text></svg>"
        )
        return "".join(parts)
    box.fit(curves)
    parts += box.axes(data.metric, ink)
    faint = [curve for curve in curves if not curve.featured]
    featured = [curve for curve in curves if curve.featured]
    parts += [_polyline(curve, box, data.best) for curve in (*faint, *featured)]
    parts += _legend(featured, width, height, ink)
    parts.append("</svg>")
    return "".join(parts)


class _Box:
    """The plot area: from data coordinates (iteration, value) to pixels."""

    def __init__(self, width: int, height: int) -> None:
        self.left, self.right = _MARGIN_LEFT, width - _MARGIN_RIGHT
        self.top, self.bottom = _MARGIN_TOP, height - _MARGIN_BOTTOM
        self.x_range = self.y_range = (0.0, 1.0)

    def fit(self, curves: Sequence[Curve]) -> None:
        xs = [x for curve in curves for x in (curve.x[0], curve.x[-1])]
        ys = [y for curve in curves for y in curve.y]
        self.x_range = _padded(min(xs), max(xs))
        self.y_range = _padded(min(ys), max(ys))

    def px(self, x: float) -> float:
        low, high = self.x_range
        return self.left + (x - low) / (high - low) * (self.right - self.left)

    def py(self, y: float) -> float:
        low, high = self.y_range
        return self.bottom - (y - low) / (high - low) * (self.bottom - self.top)

    def axes(self, metric: str, ink: str) -> list[str]:
        """The frame, a few ticks with their grid lines, and the axes' titles."""
        parts = [
            f'<g stroke="{ink}" stroke-opacity="0.5" fill="none">'
            f'<polyline points="{self.left},{self.top} {self.left},{self.bottom} '
            f'{self.right},{self.bottom}"/></g>'
        ]
        for tick in integer_ticks(*self.x_range, count=6):
            x = self.px(tick)
            parts.append(
                f'<line x1="{x:.1f}" y1="{self.bottom}" x2="{x:.1f}" y2="{self.bottom + 4}" '
                f'stroke="{ink}"/><text x="{x:.1f}" y="{self.bottom + 16}" '
                f'text-anchor="middle">{tick}</text>'
            )
        for tick in nice_ticks(*self.y_range, count=5):
            y = self.py(tick)
            parts.append(
                f'<line x1="{self.left}" y1="{y:.1f}" x2="{self.right}" y2="{y:.1f}" '
                f'stroke="{ink}" stroke-opacity="0.15"/><text x="{self.left - 6}" '
                f'y="{y + 4:.1f}" text-anchor="end">{format_number(tick)}</text>'
            )
        middle = (self.top + self.bottom) / 2
        parts.append(
            f'<text x="{(self.left + self.right) / 2:.1f}" y="{self.bottom + 34}" '
            f'text-anchor="middle">iteration</text><text x="14" y="{middle:.1f}" '
            f'text-anchor="middle" transform="rotate(-90 14 {middle:.1f})">'
            f"{html.escape(metric)}</text>"
        )
        return parts


def _padded(low: float, high: float) -> tuple[float, float]:
    """[low, high] widened a little (or around a single value) so that no line sits on the
    frame and the scale never divides by zero."""
    if high == low:
        spread = abs(low) * 0.1 or 1.0
        return low - spread, high + spread
    pad = (high - low) * 0.04
    return low - pad, high + pad


def _polyline(curve: Curve, box: _Box, best: Sequence[int]) -> str:
    """One curve: its line (in its colour, or faint), its tooltip, an "x" if it errored."""
    keep = thin_indexes(len(curve.x), MAX_SVG_POINTS if curve.featured else MAX_SVG_POINTS // 3)
    points = " ".join(f"{box.px(curve.x[i]):.1f},{box.py(curve.y[i]):.1f}" for i in keep)
    color = curve.color if curve.featured else _FAINT
    width = 2.4 if curve.trial_id in best else 1.4
    dash = _DASH.get(curve.state)
    style = f' stroke-dasharray="{dash}"' if dash else ""
    opacity = "" if curve.featured else ' stroke-opacity="0.4"'
    tooltip = curve.label.replace("<br>", "\n")
    line = (
        f'<polyline fill="none" stroke="{color}" stroke-width="{width}"{style}{opacity} '
        f'points="{points}"><title>{tooltip}</title></polyline>'
    )
    if curve.state != "error":
        return line
    x, y = box.px(curve.x[-1]), box.py(curve.y[-1])
    return line + (
        f'<path d="M{x - 4:.1f},{y - 4:.1f}L{x + 4:.1f},{y + 4:.1f}M{x - 4:.1f},{y + 4:.1f}'
        f'L{x + 4:.1f},{y - 4:.1f}" stroke="{color}" stroke-width="2"/>'
    )


def _legend(featured: Sequence[Curve], width: int, height: int, ink: str) -> list[str]:
    """A swatch and "trial N" for each coloured curve (as many as fit), right of the plot."""
    left = width - _MARGIN_RIGHT + 12
    fit = (height - _MARGIN_TOP - 10) // 16
    parts = []
    for row, curve in enumerate(featured[:fit]):
        y = _MARGIN_TOP + 6 + row * 16
        parts.append(
            f'<line x1="{left}" y1="{y}" x2="{left + 16}" y2="{y}" stroke="{curve.color}" '
            f'stroke-width="2.4"/><text x="{left + 22}" y="{y + 4}" fill="{ink}">'
            f"trial {curve.trial_id}</text>"
        )
    return parts


def trial_curve_svg(
    metric: str,
    x: Sequence[float],
    y: Sequence[float],
    color: str,
    width: int = 320,
    height: int = 100,
) -> str:
    """One trial's `metric` by iteration as a small `<svg>`, for the dashboard's trial tab.

    The line is in the trial's colour (as in every chart), with a dot at its last value; the
    title says that value, the axes the first and last iteration and the lowest and highest
    value. Text and frame are drawn in `currentColor`, the page's own text colour, so the
    picture reads on a light and a dark theme alike.
    """
    title = html.escape(metric)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" font-family="sans-serif" font-size="10" '
        f'fill="currentColor" class="nbtune-trial-curve">',
        f"<title>{title} by iteration</title>",
    ]
    if not x:
        parts.append(f'<text x="4" y="{height / 2:.1f}">no value of {title} yet</text></svg>')
        return "".join(parts)
    left, right, top, bottom = 52, width - 8, 16, height - 16
    x_low, x_high = _padded(min(x), max(x))
    y_low, y_high = _padded(min(y), max(y))

    def px(value: float) -> float:
        return left + (value - x_low) / (x_high - x_low) * (right - left)

    def py(value: float) -> float:
        return bottom - (value - y_low) / (y_high - y_low) * (bottom - top)

    keep = thin_indexes(len(x), MAX_SVG_POINTS)
    points = " ".join(f"{px(x[i]):.1f},{py(y[i]):.1f}" for i in keep)
    parts += [
        f'<text x="{left}" y="11">{title} · last {format_number(y[-1])} '
        f"(iter {format_number(x[-1])})</text>",
        f'<polyline fill="none" stroke="currentColor" stroke-opacity="0.4" '
        f'points="{left},{top} {left},{bottom} {right},{bottom}"/>',
        *(
            f'<text x="{left - 4}" y="{py(value) + 3.5:.1f}" text-anchor="end">'
            f"{format_number(value)}</text>"
            for value in sorted({min(y), max(y)})
        ),
        f'<text x="{left}" y="{height - 3}">{format_number(x[0])}</text>',
        f'<text x="{right}" y="{height - 3}" text-anchor="end">{format_number(x[-1])}</text>',
        f'<polyline fill="none" stroke="{color}" stroke-width="1.8" points="{points}"/>',
        f'<circle cx="{px(x[-1]):.1f}" cy="{py(y[-1]):.1f}" r="2.5" fill="{color}"/>',
        "</svg>",
    ]
    return "".join(parts)
