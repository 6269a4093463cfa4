"""A dashboard chart that the browser draws with the plotly.js its page already holds.

Each plotly `FigureWidget` brings its own copy of plotly.js (5 MB of code), which the browser
loads when the chart is first shown: seconds before a tab opened for the first time could show
its chart. A `BrowserChart` sends only its figure's JSON; `browser_chart.js` draws it with the
plotly.js that the dashboard's first `FigureWidget` loaded, and keeps it drawn in its hidden tab
so that opening the tab shows it at once.
"""

from __future__ import annotations

import json
import pathlib
from collections.abc import Mapping, Sequence
from typing import Any

import anywidget
import ipywidgets as widgets
import traitlets


class BrowserChart(anywidget.AnyWidget):
    """A plotly figure drawn by the browser (`browser_chart.js`) from `figure`, its JSON.

    The browser sends `{"type": "plotly"}` when its page has no plotly.js to draw with (no
    `FigureWidget` loaded it yet): the answer carries plotly.js, which the page then keeps.
    """

    _esm = pathlib.Path(__file__).with_name("browser_chart.js")
    figure = traitlets.Dict().tag(sync=True)
    """The figure as plotly's JSON (`data`, `layout`), sent whole when it changes."""

    def __init__(self) -> None:
        super().__init__(layout=widgets.Layout(width="100%"))
        self._sent = ""
        self.on_msg(self._on_message)

    def show(self, figure: Any) -> None:
        """Send `figure` (a plotly figure) to the browser, unless it is what was sent last."""
        import plotly.io

        text = plotly.io.to_json(figure, validate=False)
        if text != self._sent:
            self._sent = text
            self.figure = json.loads(text)

    def forget(self) -> None:
        """Send the next figure whatever the last one was."""
        self._sent = ""

    def _on_message(self, _: Any, content: Mapping[str, Any], buffers: Sequence[Any]) -> None:
        if content.get("type") == "plotly":
            from plotly.offline import get_plotlyjs

            self.send({"type": "plotly"}, [get_plotlyjs().encode()])
