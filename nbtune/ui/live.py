"""A live figure that a background thread may redraw while the browser talks to it.

Kept apart from `nbtune.ui.figures` because plotly's `FigureWidget` costs over a second to
import (ipywidgets, anywidget), which the after-the-run `plot_*` functions never need.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import plotly.graph_objects as go
from traitlets import observe


def _held(handler: str, trait: str) -> Any:
    """Plotly's handler of a message from the browser, run under the figure's drawing lock."""
    run = getattr(go.FigureWidget, handler).func

    def held(self: LiveFigure, change: Mapping[str, Any]) -> None:
        with self.drawing_lock:
            run(self, change)

    held.__name__ = handler
    return observe(trait)(held)


class LiveFigure(go.FigureWidget):
    """A `FigureWidget` that one thread may redraw while the kernel handles its browser's
    messages on another.

    The dashboard redraws on its refresh thread; the kernel applies what the browser sends
    back (the ranges and defaults it filled in, a zoom, an autosize when a tab is shown) on
    its own. Plotly's figure is not thread-safe: the two interleaved leave its layout
    inconsistent (`Invalid property path 'xaxis2.range[0]'`, `tuple index out of range`).
    The `nbtune.ui.figures` functions draw into a `LiveFigure` holding its `drawing_lock`,
    and the browser's messages wait for it (a redraw takes milliseconds).
    """

    _handler_js2py_traceDeltas = _held("_handler_js2py_traceDeltas", "_js2py_traceDeltas")
    _handler_js2py_layoutDelta = _held("_handler_js2py_layoutDelta", "_js2py_layoutDelta")
    _handler_js2py_restyle = _held("_handler_js2py_restyle", "_js2py_restyle")
    _handler_js2py_update = _held("_handler_js2py_update", "_js2py_update")
    _handler_js2py_relayout = _held("_handler_js2py_relayout", "_js2py_relayout")
    _handler_js2py_pointsCallback = _held("_handler_js2py_pointsCallback", "_js2py_pointsCallback")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._drawing_lock = threading.RLock()
        super().__init__(*args, **kwargs)

    @property
    def drawing_lock(self) -> threading.RLock:
        """Held while a `*_figure` function draws, and while a browser message is applied."""
        return self._drawing_lock
