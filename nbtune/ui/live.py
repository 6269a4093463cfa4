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

    _handler_js2py_layoutDelta = _held("_handler_js2py_layoutDelta", "_js2py_layoutDelta")
    _handler_js2py_restyle = _held("_handler_js2py_restyle", "_js2py_restyle")
    _handler_js2py_update = _held("_handler_js2py_update", "_js2py_update")
    _handler_js2py_relayout = _held("_handler_js2py_relayout", "_js2py_relayout")
    _handler_js2py_pointsCallback = _held("_handler_js2py_pointsCallback", "_js2py_pointsCallback")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._drawing_lock = threading.RLock()
        super().__init__(*args, **kwargs)

    @observe("_js2py_traceDeltas")
    def _handler_js2py_traceDeltas(self, change: Mapping[str, Any]) -> None:
        """The browser drew the last change of the traces: keep the defaults it filled in.

        plotly's own handler looks each trace up among all the figure's traces, for each
        trace: with 200 curves, a third of a second of the kernel's thread for every drawing,
        and the clicks served on the same thread waited for it.
        """
        with self.drawing_lock:
            answer = change["new"]
            if answer and answer["trace_edit_id"] == self._last_trace_edit_id:
                traces = self.data
                index_of = {trace.uid: index for index, trace in enumerate(traces)}
                for delta in answer["trace_deltas"]:
                    self._take_defaults(index_of[delta["uid"]], traces, delta)
                self._trace_edit_in_process = False
                if not self._layout_edit_in_process:
                    while self._waiting_edit_callbacks:
                        self._waiting_edit_callbacks.pop()()
            self._js2py_traceDeltas = None

    def _take_defaults(self, index: int, traces: tuple, delta: Mapping[str, Any]) -> None:
        """Keep one trace's defaults, as plotly's handler does, but never drop what the kernel
        set. plotly removes from the trace (and from its browser model) each property the
        answer names, and the browser computes its answer against its model's copy of the
        figure, which plotly's browser code keeps stale: curves lost their names, points and
        styles in the kernel (a page reloaded would draw them so)."""
        defaults = go.FigureWidget._transform_data(traces[index]._prop_defaults, delta)
        self._dispatch_trace_change_callbacks(defaults, [index])

    @property
    def drawing_lock(self) -> threading.RLock:
        """Held while a `*_figure` function draws, and while a browser message is applied."""
        return self._drawing_lock
