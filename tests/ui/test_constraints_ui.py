"""A constrained run in the dashboard (threads, no browser): the header's best is feasible, the
table marks the trials that miss a constraint, the charts fade or cross them, and the
parameters tab draws the metric's contour over two chosen parameters."""

from __future__ import annotations

import plotly.graph_objects as go
import pytest

import nbtune as nt
from nbtune.ui.contour import contour_data, contour_figure
from nbtune.ui.data import history_data, parameter_data
from nbtune.ui.table import TableView, page_state, static_table_html, table_page

SPACE = {"x": nt.uniform(-3, 3), "y": nt.uniform(-3, 3), "act": nt.choice(["relu", "tanh"])}


def bowl(config):
    """Minimise (x-2)^2 + (y-1)^2 subject to x + y <= 1 (`sum`)."""
    x, y = config["x"], config["y"]
    for step in (2, 1):
        nt.report(loss=(x - 2) ** 2 + (y - 1) ** 2 + step - 1, sum=x + y)


@pytest.fixture
def run(make_tuner):
    tuner = make_tuner(
        bowl,
        SPACE,
        metric="loss",
        constraints={"sum": (None, 1)},
        num_samples=16,
        seed=3,
        executor=nt.ThreadExecutor(),
    )
    tuner.run(display=False)
    trials = tuner.trials
    infeasible = {trial.trial_id for trial in trials if trial.last_result["sum"] > 1}
    assert 0 < len(infeasible) < len(trials), "the seed gives both kinds"
    return tuner, infeasible


def test_the_table_marks_each_trial_that_misses_a_constraint(run):
    tuner, infeasible = run
    page = table_page(
        tuner.trials, "loss", TableView(page_size=50), False, constraints=tuner.constraints
    )
    marked = {row.trial_id for row in page.rows if row.infeasible}
    assert marked == infeasible
    row = next(row for row in page_state(page)["rows"] if row["id"] in infeasible)
    assert row["infeasible"].startswith("sum ") and "> 1" in row["infeasible"]
    html = static_table_html(page_state(page))
    assert html.count('title="infeasible: sum') == len(infeasible)


def test_the_charts_mark_infeasible_trials_and_leave_them_out_of_the_best(run):
    tuner, infeasible = run
    trials, rows = tuner.snapshot()
    curves = history_data(trials, rows, "loss", "min", infeasible=infeasible)
    assert {curve.trial_id for curve in curves.curves if not curve.feasible} == infeasible
    assert not set(curves.best) & infeasible

    data = parameter_data(trials, "loss", None, rows, "min", infeasible=infeasible)
    from nbtune.ui.figures import parallel_coordinates_figure, parameter_scatter_figure

    figure = parameter_scatter_figure(data)
    symbols = dict(zip(data.trial_ids, figure.data[0].marker.symbol, strict=True))
    assert {trial_id for trial_id, symbol in symbols.items() if symbol == "x"} == infeasible

    lines = parallel_coordinates_figure(data).data[0]
    feasible = next(axis for axis in lines.dimensions if axis.label == "feasible")
    marks = dict(zip(data.trial_ids, feasible["values"], strict=True))
    assert {trial_id for trial_id, mark in marks.items() if mark == 0} == infeasible
    assert lines.dimensions[-1].label == data.value_name, "the metric stays the last axis"


def test_the_contour_puts_feasible_trials_on_a_grid_and_crosses_the_others(run):
    tuner, infeasible = run
    trials, rows = tuner.snapshot()
    data = parameter_data(trials, "loss", None, rows, "min", infeasible=infeasible)
    contour = contour_data(data, "x", "y")
    assert (contour.x.name, contour.y.name) == ("x", "y")
    xs, ys, z = contour.grid()
    assert len(xs) == len(ys) == len(trials)
    assert sum(value is not None for line in z for value in line) == len(trials) - len(infeasible)
    figure = contour_figure(contour)
    assert [type(trace) for trace in figure.data] == [go.Contour, go.Scatter]
    assert figure.data[0].connectgaps
    assert list(figure.data[1].marker.symbol).count("x") == len(infeasible)
    # One parameter named twice, or one that does not vary: the first others instead.
    assert contour_data(data, "x", "x").y.name == "y"
    assert contour_data(data, "nope", None).x.name == "x"


def test_the_dashboard_shows_the_best_feasible_trial_and_a_contour_of_two_chosen_parameters(
    run,
):
    tuner, infeasible = run
    best = min(
        (trial for trial in tuner.trials if trial.trial_id not in infeasible),
        key=lambda trial: trial.best_value,
    )
    assert tuner.best_trial.trial_id == best.trial_id
    dashboard = nt.load(tuner.path).dashboard()
    assert dashboard.ready.wait(30)
    try:
        dashboard.redraw()
        assert "best feasible loss = " in dashboard.best.value
        assert f"(trial {best.trial_id}:" in dashboard.best.value
        rows = dashboard.table.table["rows"]
        assert {row["id"] for row in rows if row["infeasible"]} == infeasible

        dashboard.tabs.selected_index = dashboard.tab_names.index("parameters")
        chart = dashboard.charts["parameters"]
        dashboard.redraw()
        assert all(type(trace) is go.Scatter for trace in chart.figure.data)
        chart.options.view.value = "contour"
        dashboard.redraw()
        assert chart.options.x.options == ("x", "y", "act")
        assert [type(trace) for trace in chart.figure.data] == [go.Contour, go.Scatter]
        assert "loss over x and y" in chart.figure.layout.title.text
        chart.options.y.value = "act"
        dashboard.redraw()
        assert "loss over x and act" in chart.figure.layout.title.text
        assert chart.figure.layout.yaxis.ticktext == ("relu", "tanh")
        chart.options.view.value = "scatter"
        dashboard.redraw()
        assert len(chart.figure.data) == 3 and "by parameter" in chart.figure.layout.title.text
    finally:
        dashboard.close()
