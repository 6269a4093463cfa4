"""Each unfinished curve's forecast, drawn as a faint dotted extension of it, and the run's
ETA in the dashboard's header."""

from __future__ import annotations

import threading

import plotly.graph_objects as go
import pytest
from ui.test_data import run_of

import nbtune as nt
from nbtune.events import TrialCompleted, TrialResult
from nbtune.trial import TrialStatus
from nbtune.ui.data import history_data
from nbtune.ui.figures import FORECAST_OPACITY, history_figure
from nbtune.ui.summary import title_html


def shape(k, steps):
    return [k * (0.2 + step**-0.7) for step in range(1, steps + 1)]


def half_run():
    """Three trials run in full (12 results), two still running at 4 and 6."""
    curves = [shape(k, 12) for k in (1.0, 1.5, 2.0)] + [shape(3.0, 4), shape(4.0, 6)]
    running = {3: TrialStatus.RUNNING, 4: TrialStatus.RUNNING}
    return run_of(curves, running)


def test_each_running_curve_is_forecast_to_the_longest_full_trial():
    trials, rows = half_run()
    data = history_data(trials, rows, "loss", "min")
    assert [line.trial_id for line in data.forecasts] == [3, 4]
    for line, k, start in zip(data.forecasts, (3.0, 4.0), (4, 6), strict=True):
        assert line.x[0] == pytest.approx(start) and line.horizon == pytest.approx(12)
        assert line.y[0] == pytest.approx(shape(k, start)[-1]), "it starts at the last point"
        assert line.predicted == pytest.approx(shape(k, 12)[-1], rel=0.05)
        assert line.low <= shape(k, 12)[-1] <= line.high
    assert history_data(trials, rows, "loss", "min", horizon=30).forecasts[0].horizon == 30
    assert history_data(trials, rows, "loss", "min", forecast=False).forecasts == ()


def test_no_forecast_before_a_horizon_is_known_nor_for_finished_curves():
    trials, rows = run_of([shape(1.0, 5), shape(2.0, 3)], {1: TrialStatus.RUNNING})
    trials[0] = trials[0].evolve(stopped_by="scheduler")  # cut short: not a full length
    assert history_data(trials, rows, "loss", "min").forecasts == ()
    assert len(history_data(trials, rows, "loss", "min", horizon=10).forecasts) == 1


def test_a_forecast_is_fitted_once_per_number_of_results():
    trials, rows = half_run()
    first = history_data(trials, rows, "loss", "min").forecasts
    again = history_data(trials, rows, "loss", "min").forecasts
    assert all(a is b for a, b in zip(first, again, strict=True))
    more = [*rows, {**rows[-1], "training_iteration": 7, "loss": shape(4.0, 7)[-1]}]
    grown = history_data(trials, more, "loss", "min").forecasts
    assert grown[0] is first[0] and grown[1] is not first[1]
    assert grown[1].x[0] == 7


@pytest.mark.parametrize("blank", [go.Figure, go.FigureWidget])
def test_the_forecast_is_a_faint_dotted_extension_in_the_curves_colour(blank):
    trials, rows = half_run()
    data = history_data(trials, rows, "loss", "min")
    figure = history_figure(data, blank())
    assert len(figure.data) == 5 + 2
    curve, extension = figure.data[3], figure.data[5]
    assert extension.line.dash == "dot" and extension.opacity == FORECAST_OPACITY
    assert extension.line.color == curve.line.color
    assert extension.showlegend is False
    assert extension.x[-1] == pytest.approx(12) and extension.y[-1] == data.forecasts[0].y[-1]
    assert history_figure(data, blank(), x="time").data[5].x == ()


def test_a_trace_that_showed_a_forecast_shows_a_curve_once_there_are_more_curves():
    trials, rows = half_run()
    figure = go.FigureWidget()
    history_figure(history_data(trials, rows, "loss", "min"), figure)
    more_trials, more_rows = run_of(
        [shape(k, 12) for k in (1.0, 1.5, 2.0)] + [shape(3.0, 4), shape(4.0, 6), shape(5.0, 3)],
        {3: TrialStatus.RUNNING, 4: TrialStatus.RUNNING, 5: TrialStatus.RUNNING},
    )
    history_figure(history_data(more_trials, more_rows, "loss", "min"), figure)
    assert len(figure.data) == 6 + 3
    assert figure.data[5].name == "trial 5" and figure.data[5].line.dash == "solid"
    assert figure.data[5].opacity == 1.0 and len(figure.data[5].x) == 3
    assert [trace.name for trace in figure.data[6:]] == [f"trial {i} forecast" for i in (3, 4, 5)]
    history_figure(history_data(trials, rows, "loss", "min", forecast=False), figure)
    assert len(figure.data) == 5


def test_the_header_says_how_long_the_run_has_left():
    assert title_html("demo", "running", 12, 40).endswith("· 12 s · about 40 s left")
    assert "about 12 min left" in title_html("demo", "running", 1, 725)
    assert "left" not in title_html("demo", "finished")


GO_ON = threading.Event()


def held(config):
    for step in range(1, 13):
        nt.report(loss=config["k"] * (0.2 + step**-0.7))
        if step == 4 and config["k"] >= 3:
            GO_ON.wait(60)


def test_a_live_run_shows_its_eta_and_plot_history_forecasts_to_the_stop_iteration(tmp_path):
    GO_ON.clear()
    ready = threading.Event()
    seen = {"results": 0, "done": 0}

    def count(event):
        seen["results"] += isinstance(event, TrialResult)
        seen["done"] += isinstance(event, TrialCompleted)
        if seen["results"] >= 12 + 4 and seen["done"] >= 1:
            ready.set()

    tuner = nt.Tuner(
        held,
        {"k": nt.grid([1.0, 3.0])},
        metric="loss",
        max_concurrent=2,
        executor=nt.ThreadExecutor(),
        stop={"training_iteration": 20},
        storage_path=tmp_path,
        callbacks=[count],
        progress=False,
    )
    tuner.start(display=False)
    try:
        assert ready.wait(60)
        figure = nt.plot_history(tuner)
        dotted = [trace for trace in figure.data if trace.name.endswith("forecast")]
        assert len(dotted) == 1 and dotted[0].x[-1] == pytest.approx(20)
        dashboard = tuner.dashboard()
        dashboard.redraw()
        assert "left" in dashboard.title.value
        dashboard.tabs.selected_index = dashboard.tab_names.index("learning curves")
        dashboard.redraw()
        chart = dashboard.charts["learning curves"].figure
        live = [trace for trace in chart.data if (trace.name or "").endswith("forecast")]
        assert live and live[0].x[-1] == pytest.approx(20), "the live chart aims at stop= too"
    finally:
        GO_ON.set()
    tuner.wait()
    dashboard.redraw()
    assert "left" not in dashboard.title.value
