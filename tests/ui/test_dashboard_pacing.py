"""What the live dashboard sends the browser over a run (no browser: the widget messages): the
browser's table is told which live chart shows (it sizes it and highlights in it), and the
live refresh redraws the visible chart about once a second while the table follows ten times
a second, and sends a chart's next drawing only once the browser answered the last (a busy
page is not sent more than it can draw)."""

from __future__ import annotations

import threading
import time

import pytest
from waiting import eventually

import nbtune as nt
from nbtune.ui.views import (
    AHEAD_EVERY_S,
    CHART_EVERY_S,
    UNANSWERED_S,
    ChartTab,
    LiveFigures,
    TabPacer,
)

SENT = ("_py2js_update", "_py2js_restyle", "_py2js_relayout", "_py2js_addTraces")
"""The traits through which plotly's FigureWidget sends a change of the figure."""


@pytest.fixture
def dashboard(make_tuner):
    """The dashboard of a live run of 3 trials on threads, each reporting every 10 ms."""
    finish = threading.Event()

    def train(config):
        step = 0
        while not finish.is_set():
            step += 1
            nt.report(loss=config["x"] / step)
            finish.wait(0.01)

    tuner = make_tuner(
        train, {"x": nt.grid([1.0, 2.0, 3.0])}, metric="loss", executor=nt.ThreadExecutor()
    )
    tuner.start(display=False)
    dashboard = tuner.dashboard()
    assert dashboard.ready.wait(30)
    yield dashboard
    finish.set()
    tuner.stop()
    tuner.wait(30)
    dashboard.close()


def show(dashboard, tab: str) -> None:
    dashboard.tabs.selected_index = dashboard.tab_names.index(tab)
    dashboard.redraw()
    dashboard.redraw()


def test_the_browser_s_table_is_told_the_live_chart_of_the_tab_shown(dashboard):
    show(dashboard, "learning curves")
    curves = dashboard.figures["learning curves"]
    assert dashboard.table.charts == {"learning curves": curves.model_id}
    show(dashboard, "best so far")
    best = dashboard.figures["best so far"]
    assert dashboard.table.charts == {"best so far": best.model_id}
    show(dashboard, "learning curves")
    assert dashboard.figures["learning curves"] is curves, "each tab keeps its chart"
    assert dashboard.table.charts == {"learning curves": curves.model_id}


def answer_as_the_browser(figure) -> None:
    """Answer the last drawing sent to `figure`, and each one from now on, as plotly's browser
    side does once it drew it."""

    def answer(edit: int) -> None:
        figure._js2py_traceDeltas = {"trace_deltas": [], "trace_edit_id": edit}

    figure.observe(lambda change: change["new"] and answer(change["new"]["trace_edit_id"]), SENT)
    answer(figure._last_trace_edit_id)


def test_the_live_refresh_redraws_the_chart_about_once_a_second(dashboard):
    eventually(lambda: dashboard.figures.get("learning curves"), "the first chart", 30)
    figure = dashboard.figures["learning curves"]
    answer_as_the_browser(figure)
    sent = []
    for name in SENT:
        figure.observe(lambda change: change["new"] and sent.append(change["name"]), name)
    began, redraws = time.monotonic(), dashboard.redraws
    eventually(lambda: dashboard.redraws >= redraws + 30, "30 redraws of the table", 30)
    elapsed = time.monotonic() - began
    drawings = elapsed / CHART_EVERY_S + 2
    assert sent, "the chart still follows the run"
    assert len(sent) <= 2 * drawings, f"{len(sent)} chart messages in {elapsed:.1f} s: {sent}"


def test_a_chart_waits_for_its_browser_to_answer_its_last_drawing():
    shared = LiveFigures()
    tab = ChartTab("best so far", lambda: None, shared)
    figure = shared.take(tab)
    assert shared.spacing_s(tab.name) == CHART_EVERY_S, "nothing sent yet"
    figure.add_scatter(y=[1.0, 0.5])
    assert shared.spacing_s(tab.name) == CHART_EVERY_S, "no view has drawn the chart yet"
    figure._js2py_layoutDelta = {"layout_delta": {}, "layout_edit_id": 0}
    assert tab.name in shared.rendered
    figure.add_scatter(y=[0.8, 0.4])
    assert shared.spacing_s(tab.name) == UNANSWERED_S, "a drawing is on its way"
    figure._js2py_traceDeltas = {"trace_deltas": [], "trace_edit_id": -1}
    assert shared.spacing_s(tab.name) == UNANSWERED_S, "the table's highlight is no answer"
    figure._js2py_traceDeltas = {"trace_deltas": [], "trace_edit_id": figure._last_trace_edit_id}
    assert shared.spacing_s(tab.name) < UNANSWERED_S, "the browser drew it"


def test_the_visible_tab_is_drawn_no_sooner_than_its_spacing_unless_asked():
    pacer = TabPacer()
    assert pacer.due("learning curves", ending=False, spacing_s=UNANSWERED_S), "a new tab"
    assert not pacer.due("learning curves", ending=False, spacing_s=UNANSWERED_S)
    assert pacer.wait_s() > CHART_EVERY_S, "the refresh sleeps until it is due"
    assert pacer.due("learning curves", ending=True, spacing_s=UNANSWERED_S), "the run's end"
    pacer.ask()
    assert pacer.due("learning curves", ending=False, spacing_s=UNANSWERED_S), "the user asked"
    assert pacer.due("learning curves", ending=False, spacing_s=0.0)


def test_the_parallel_coordinates_are_sent_to_the_browser_while_their_tab_is_hidden(dashboard):
    show(dashboard, "learning curves")
    chart = dashboard.charts["parallel coordinates"].browser

    def a_line_per_trial() -> bool:
        dashboard.redraw()
        trials, _ = dashboard.source.snapshot()
        reported = sum(bool(trial.last_result) for trial in trials)
        (trace,) = chart.figure.get("data", [{}])
        lines = trace.get("type") == "parcoords" and len(trace["dimensions"][0]["values"])
        return reported >= 2 and lines == reported

    eventually(a_line_per_trial, "a line per trial that reported, its tab hidden", 30)
    sent = []
    chart.observe(lambda change: sent.append(change["new"]), "figure")
    began = time.monotonic()
    eventually(lambda: dashboard.redraw() or len(sent) >= 2, "the figure sent again", 30)
    assert time.monotonic() - began >= AHEAD_EVERY_S, "at its own pace, not the table's"
    parallel = dashboard.figures["parallel coordinates"]
    assert not hasattr(parallel, "model_id"), "no FigureWidget: the browser draws the JSON"
    curves = dashboard.figures["learning curves"]
    assert dashboard.table.charts == {"learning curves": curves.model_id}
