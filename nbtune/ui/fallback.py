"""How long a dashboard waits for the browser to draw its widgets before it falls back to static
HTML.

From the kernel, two front ends look alike: one that cannot draw the widgets (no anywidget, or
a plotly FigureWidget that stays blank) and one that is slow to (a page drawing several
dashboards at once, on a loaded machine). The first needs the fallback soon. The second must
not get it: its static charts would cost it far more over a long run. Once this kernel's front
end has drawn a dashboard's table (or a live chart), it is known to draw them, and a dashboard
waits far longer (`DRAWN_BEFORE_GRACE_S`) before it falls back.
"""

from __future__ import annotations

RENDER_GRACE_S = 8.0
"""How long a front end that has drawn no table yet has to draw one before the dashboard falls
back to static HTML."""
CHART_GRACE = 4
"""A live chart has this many times `RENDER_GRACE_S` to be drawn before the charts turn static:
each is a plotly FigureWidget whose 5 MB of code a busy browser takes seconds to load."""
DRAWN_BEFORE_GRACE_S = 120.0
"""How long a front end that drew a table (or a chart) before has to draw the next one: only a
page that has gone away, or a widget the browser failed to set up, waits that long."""


class FrontEndRecord:
    """What this kernel's front end has drawn so far, for every dashboard of the process."""

    def __init__(self) -> None:
        self.table = False
        self.chart = False

    def forget(self) -> None:
        """Forget what was drawn (a test starts as a fresh kernel does)."""
        self.table = self.chart = False

    def table_grace_s(self) -> float:
        """How long a dashboard's table may take to be drawn."""
        return DRAWN_BEFORE_GRACE_S if self.table else RENDER_GRACE_S

    def chart_grace_s(self) -> float:
        """How long a live chart may take to be drawn once it is made."""
        return DRAWN_BEFORE_GRACE_S if self.chart else RENDER_GRACE_S * CHART_GRACE


DRAWN = FrontEndRecord()
