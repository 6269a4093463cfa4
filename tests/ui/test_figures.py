"""The figures draw what the data says, in place when given a figure to update."""

from __future__ import annotations

import plotly.graph_objects as go
import pytest
import trainables
from ui.test_data import run_of

import nbtune as nt
from nbtune.trial import TrialStatus
from nbtune.ui.data import history_data, parameter_data
from nbtune.ui.figures import (
    STATUS_COLORS,
    WEBGL_AFTER,
    history_figure,
    parallel_coordinates_figure,
    parameter_scatter_figure,
)


def test_history_figure_colours_by_status_and_highlights_the_best():
    trials, rows = run_of([[3.0, 2.0], [1.0], [4.0], [5.0], [6.0]], {2: TrialStatus.RUNNING})
    figure = history_figure(history_data(trials, rows, "loss", "min"))
    assert [trace.name for trace in figure.data] == [f"trial {i}" for i in range(5)]
    assert figure.data[2].line.color == STATUS_COLORS["RUNNING"]
    assert figure.data[0].line.color == STATUS_COLORS["TERMINATED"]
    widths = [trace.line.width for trace in figure.data]
    assert widths[0] == widths[1] == widths[2] > widths[3] == widths[4], "the best three stand out"


def test_history_figure_updates_in_place_and_switches_to_webgl_for_many_trials():
    figure = go.Figure()
    trials, rows = run_of([[1.0]])
    history_figure(history_data(trials, rows, "loss", "min"), figure)
    first = figure.data[0]
    trials, rows = run_of([[1.0, 0.5]] + [[2.0]] * (WEBGL_AFTER + 5))
    history_figure(history_data(trials, rows, "loss", "min"), figure)
    assert figure.data[0] is first, "existing traces are updated, not replaced"
    assert figure.data[0].y == (1.0, 0.5)
    assert len(figure.data) == WEBGL_AFTER + 6
    assert figure.data[-1].type == "scattergl"


def test_parallel_coordinates_has_a_dimension_per_varying_parameter_and_the_metric():
    trials, _ = run_of([[1.0], [2.0]])
    figure = parallel_coordinates_figure(parameter_data(trials, "loss"))
    labels = [dimension.label for dimension in figure.data[0].dimensions]
    assert labels == ["lr", "opt", "loss"]
    assert list(figure.data[0].dimensions[1].ticktext) == ["adam", "sgd"]


def test_the_parameter_panels_draw_on_a_live_figure_made_without_subplots():
    trials, _ = run_of([[1.0], [2.0]])
    figure = go.FigureWidget()
    for _ in range(2):
        parameter_scatter_figure(parameter_data(trials, "loss"), figure)
    assert [trace.xaxis for trace in figure.data] == ["x", "x2"], "one panel per parameter"
    assert figure.layout.xaxis.domain[1] < figure.layout.xaxis2.domain[0], "side by side"
    assert (figure.layout.xaxis.title.text, figure.layout.xaxis2.title.text) == ("lr", "opt")


def test_plots_of_a_finished_run_from_its_directory(make_tuner):
    tuner = make_tuner(
        trainables.quadratic,
        {"lr": nt.uniform(0.001, 0.1), "layers": 1},
        metric="loss",
        num_samples=3,
        seed=0,
    )
    tuner.run()
    assert [trace.name for trace in nt.plot_history(tuner.path).data] == [
        "trial 0",
        "trial 1",
        "trial 2",
    ]
    assert len(nt.plot_history(tuner).data[0].x) == 20
    assert nt.plot_best_so_far(tuner).data[0].y[-1] == tuner.best_result["loss"]
    assert [d.label for d in nt.plot_parallel_coordinates(tuner).data[0].dimensions] == [
        "lr",
        "loss",
    ]
    assert len(nt.plot_param_scatter(tuner).data) == 1
    assert nt.plot_param_importance(tuner.path).data[0].y == ("lr",)
    with pytest.raises(TypeError, match="cannot plot int; pass a Tuner"):
        nt.plot_history(3)
