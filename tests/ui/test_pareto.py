"""The Pareto chart: its data, its figure (updated in place), `nbtune.plot_pareto_front`, and
the dashboard's "pareto" tab, outside a kernel."""

from __future__ import annotations

import threading

import plotly.graph_objects as go
import pytest

import nbtune as nt
from nbtune.events import TrialResult
from nbtune.trial import Trial, TrialStatus
from nbtune.ui.pareto import DOMINATED_COLOR, FRONT_COLOR, pareto_data, pareto_figure


def trials_at(*points, status=TrialStatus.TERMINATED):
    """Trials whose last results hold `points` as (loss, latency_ms[, memory])."""
    names = ("loss", "latency_ms", "memory", "energy")
    return [
        Trial(i, {"lr": 0.1 * (i + 1), "opt": "adam"}, status=status).evolve(
            last_result=dict(zip(names, point, strict=False))
        )
        for i, point in enumerate(points)
    ]


def test_the_data_splits_the_front_from_the_rest_and_leaves_out_nan():
    trials = trials_at((0.5, 0.5), (0.1, 0.9), (0.6, 0.6), (float("nan"), 0.0), (0.9, 0.1))
    data = pareto_data(trials, ["loss", "latency_ms"], ["min", "min"])
    assert data.front.trial_ids == (1, 0, 4), "sorted along the first metric"
    assert data.front.axis(0) == (0.1, 0.5, 0.9)
    assert data.dominated.trial_ids == (2,)
    assert data.metrics == ("loss", "latency_ms")


def test_two_metrics_draw_the_front_and_hover_names_the_trial_and_its_config():
    trials = trials_at((0.5, 0.3), (0.1, 0.4), (0.6, 0.6))
    figure = pareto_figure(pareto_data(trials, ["loss", "latency_ms"], ["min", "max"]))
    dominated, front = figure.data
    assert (front.name, dominated.name) == ("Pareto front", "dominated")
    assert front.customdata == (1, 2) and front.x == (0.1, 0.6) and front.y == (0.4, 0.6)
    assert dominated.customdata == (0,)
    assert front.marker.color == FRONT_COLOR and dominated.marker.color == DOMINATED_COLOR
    assert front.hovertext[0] == (
        "trial 1 (terminated)<br>loss=0.1, latency_ms=0.4<br>lr=0.2, opt=adam"
    )
    assert figure.layout.xaxis.title.text == "loss (min)"
    assert figure.layout.yaxis.title.text == "latency_ms (max)"
    assert figure.layout.title.text == "Pareto front: 2 of 3 trials"
    assert front.line.shape == "hv", "the line traces the edge of what the front dominates"
    flipped = pareto_figure(pareto_data(trials, ["loss", "latency_ms"], ["max", "max"]))
    assert flipped.data[1].line.shape == "vh"


def test_the_figure_is_updated_in_place():
    figure = go.FigureWidget()
    metrics, modes = ["loss", "latency_ms"], ["min", "min"]
    pareto_figure(pareto_data(trials_at((0.5, 0.5)), metrics, modes), figure)
    front = figure.data[1]
    pareto_figure(pareto_data(trials_at((0.5, 0.5), (0.1, 0.1)), metrics, modes), figure)
    assert figure.data[1] is front, "the traces are updated, not replaced"
    assert front.customdata == (1,) and figure.data[0].customdata == (0,)


def test_the_figure_follows_the_dark_or_light_theme_in_place():
    figure = go.FigureWidget()
    metrics, modes = ["loss", "latency_ms"], ["min", "min"]
    pareto_figure(pareto_data(trials_at((0.5, 0.5)), metrics, modes), figure, dark=True)
    assert figure.layout.template.layout.paper_bgcolor == "rgb(17,17,17)", "plotly_dark"
    assert figure.layout.paper_bgcolor == "rgba(0,0,0,0)", "the notebook's background shows"
    pareto_figure(pareto_data(trials_at((0.5, 0.5)), metrics, modes), figure)
    assert figure.layout.template.layout.paper_bgcolor == "white"


def test_three_metrics_are_a_3d_scatter_and_more_are_parallel_coordinates():
    trials = trials_at((0.5, 0.5, 1.0, 2.0), (0.1, 0.9, 1.0, 2.0), (0.6, 0.6, 2.0, 3.0))
    three = pareto_figure(pareto_data(trials, ["loss", "latency_ms", "memory"], "min"))
    assert [trace.type for trace in three.data] == ["scatter3d", "scatter3d"]
    assert three.data[1].customdata == (1, 0)
    assert three.layout.scene.zaxis.title.text == "memory (min)"
    four = pareto_figure(pareto_data(trials, ["loss", "latency_ms", "memory", "energy"], "min"))
    (parcoords,) = four.data
    assert [dimension.label for dimension in parcoords.dimensions] == [
        "loss (min)",
        "latency_ms (min)",
        "memory (min)",
        "energy (min)",
    ]
    assert parcoords.line.color == (1, 1, 0), "the front first, coloured apart"


def report_points(config):
    nt.report(loss=config["x"], latency_ms=(1 - config["x"]) ** 2 + config["slow"])


def test_plot_pareto_front_of_a_run_by_tuner_analysis_or_path(make_tuner):
    tuner = make_tuner(
        report_points,
        {"x": nt.grid([0.0, 0.5, 1.0]), "slow": nt.grid([0.0, 1.0])},
        metric=["loss", "latency_ms"],
        executor=nt.ThreadExecutor(),
    )
    tuner.run()
    front = [trial.trial_id for trial in tuner.best_trials]
    for source in (tuner, nt.load(tuner.path), tuner.path, str(tuner.path)):
        figure = nt.plot_pareto_front(source)
        assert sorted(figure.data[1].customdata) == front
    single = make_tuner(report_points, {"x": 0.5, "slow": 0.0}, metric="loss")
    with pytest.raises(ValueError, match=r"^plot_pareto_front needs a run of several metrics"):
        nt.plot_pareto_front(single)


def test_the_live_dashboard_has_a_pareto_tab_that_draws_the_front(make_tuner, log):
    gate = threading.Event()

    def train(config):
        report_points(config)
        if config["x"] == 1.0:
            gate.wait(30)

    tuner = make_tuner(
        train,
        {"x": nt.grid([0.0, 0.5, 1.0]), "slow": 0.0},
        metric=["loss", "latency_ms"],
        max_concurrent=3,
        executor=nt.ThreadExecutor(),
    )
    tuner.subscribe(log)
    tuner.start(display=False)
    dashboard = tuner.dashboard()
    try:
        log.wait_for(lambda _: sum(isinstance(e, TrialResult) for e in log.events) == 3)
        assert dashboard.ready.wait(30)
        assert dashboard.tab_names[0] == "pareto"
        dashboard.tabs.selected_index = 0
        dashboard.redraw()
        figure = dashboard.figures["pareto"]
        assert dashboard.charts["pareto"].holder.children[0] is figure
        assert sorted(figure.data[1].customdata) == [0, 1, 2]
        assert "running" in figure.data[1].hovertext[-1], "the trial still runs"
        assert "Pareto front of loss / latency_ms" in dashboard.best.value
        gate.set()
        assert tuner.wait(30)
        dashboard.tabs.selected_index = dashboard.tab_names.index("learning curves")
        dashboard.redraw()
        assert len(dashboard.figures["learning curves"].data) == 3, "curves of the first metric"
    finally:
        gate.set()
        dashboard.close()


def test_a_loaded_run_of_one_metric_has_no_pareto_tab(make_tuner):
    tuner = make_tuner(report_points, {"x": 0.5, "slow": 0.0}, metric="loss")
    tuner.run()
    dashboard = nt.load(tuner.path).dashboard()
    assert "pareto" not in dashboard.tab_names
