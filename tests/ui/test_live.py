"""A live figure redrawn on one thread while the kernel applies its browser's messages on
another, as the dashboard's charts are."""

from __future__ import annotations

import threading

import plotly.graph_objects as go
from ui.test_figures import growing_space

from nbtune.ui.data import parameter_data
from nbtune.ui.figures import parameter_scatter_figure
from nbtune.ui.live import LiveFigure


def test_a_browser_message_waits_for_a_redraw_in_progress():
    figure = LiveFigure()
    parameter_scatter_figure(parameter_data(growing_space(2), "score"), figure)
    zoom = {"relayout_data": {"xaxis2.range": [0, 5]}, "source_view_id": "view"}
    with figure.drawing_lock:  # as a redraw on the dashboard's thread holds it
        browser = threading.Thread(target=setattr, args=(figure, "_js2py_relayout", zoom))
        browser.start()
        browser.join(timeout=0.5)  # nothing to wait on: the message must not get through
        assert browser.is_alive(), "the kernel's thread waits for the redraw"
        assert figure.layout.xaxis2.range is None
    browser.join()
    assert figure.layout.xaxis2.range == (0, 5), "then the zoom is applied"


def test_redraws_on_one_thread_and_browser_messages_on_another_do_not_collide():
    figure = LiveFigure()
    done, failures = threading.Event(), []

    def redraw():
        step = 0
        while not done.is_set():
            step += 1
            try:
                parameter_scatter_figure(parameter_data(growing_space(2 + step % 2), "s"), figure)
            except Exception as error:
                failures.append(error)

    redrawing = threading.Thread(target=redraw)
    redrawing.start()
    try:
        for message in range(300):
            with figure.drawing_lock:  # what the browser computed from a consistent figure
                edit = figure._last_layout_edit_id
            change = {"xaxis2.range": [0, message]} if message % 2 else {"autosize": True}
            figure._js2py_relayout = {"relayout_data": change, "source_view_id": "v"}
            figure._js2py_layoutDelta = {
                "layout_delta": {"xaxis2": {"autorange": True}},
                "layout_edit_id": edit,
            }
    finally:
        done.set()
        redrawing.join()
    assert not failures


def test_the_browser_s_answer_to_a_drawing_gives_each_curve_its_defaults_as_plotly_does():
    for figure in (LiveFigure(), go.FigureWidget()):
        figure.add_traces([go.Scatter(y=[1.0, 0.5], mode="lines") for _ in range(300)])
        filled_in = [{"uid": trace.uid, "xaxis": "x", "hoverinfo": "all"} for trace in figure.data]
        answer = {"trace_deltas": filled_in, "trace_edit_id": figure._last_trace_edit_id}
        figure._js2py_traceDeltas = answer
        assert [(trace.xaxis, trace.hoverinfo) for trace in figure.data] == [("x", "all")] * 300
        assert not figure._trace_edit_in_process, "the drawing is known drawn"
        assert figure._js2py_traceDeltas is None


def test_a_curve_keeps_what_the_kernel_drew_whatever_the_browser_answers():
    """plotly.js answers a drawing with what differs between the figure it drew and its model's
    copy of the figure, which plotly's browser code keeps badly (it lacks the curves' names and
    points), and with the highlight's style, drawn over the kernel's. plotly's own handler
    takes each property the answer names out of the figure: the kernel's figure, which a page
    reloaded draws, lost them."""
    figure = LiveFigure()
    removed = []
    figure.observe(lambda change: removed.append(change["new"]), "_py2js_removeTraceProps")
    figure.add_trace(go.Scatter(mode="lines"))  # a new curve is added bare, as the dashboard does
    drawn = {"name": "trial 0", "opacity": 0.3, "x": [1, 2], "y": [0.5, 0.4]}
    figure.data[0].update(drawn)  # its next drawing
    highlighted = {"opacity": 0.25, "line": {"width": 3.5}}
    answer(figure, {**drawn, **highlighted, "visible": True})
    kept = figure.to_dict()["data"][0]
    assert {key: kept.get(key) for key in drawn} == drawn, "a page reloaded draws them"
    assert figure.data[0].visible is True, "the defaults are kept"
    assert not any(removed), "the browser's model of the figure keeps them too"


def answer(figure: LiveFigure, deltas: dict) -> None:
    """The browser's answer to the figure's last drawing, the same for each trace."""
    traces = [{"uid": trace.uid, **deltas} for trace in figure.data]
    figure._js2py_traceDeltas = {
        "trace_deltas": traces,
        "trace_edit_id": figure._last_trace_edit_id,
    }
