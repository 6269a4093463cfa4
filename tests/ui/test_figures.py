"""The figures draw what the data says, into a new `go.Figure` or in place into a live
`go.FigureWidget` redrawn again and again with changing data, as the dashboard does."""

from __future__ import annotations

import math
import re

import plotly.graph_objects as go
import pytest
import trainables
from ui.test_data import run_of, scored_trials

import nbtune as nt
from nbtune.trial import Trial, TrialStatus
from nbtune.ui.bundles import BUNDLE_AFTER, BUNDLE_SIZE, OVERLAY_NAME
from nbtune.ui.data import (
    TRIAL_COLORS,
    best_so_far_data,
    history_data,
    importance_data,
    parameter_data,
    trial_color,
)
from nbtune.ui.figures import (
    FAINT_COLOR,
    PANELS_PER_ROW,
    best_so_far_figure,
    history_figure,
    importance_figure,
    parallel_coordinates_figure,
    parameter_scatter_figure,
)


@pytest.fixture(params=["Figure", "FigureWidget"])
def blank(request):
    """Makes an empty figure: a plain one, or a live widget as the dashboard's tabs hold."""
    return getattr(go, request.param)


def sent_updates(figure: go.FigureWidget) -> list[dict]:
    """The update messages the widget sends its browser view from now on."""
    sent = []
    figure.observe(lambda change: change["new"] and sent.append(change["new"]), "_py2js_update")
    return sent


def answer_as_the_browser(figure: go.FigureWidget) -> None:
    """What plotly.js sends back after drawing an update: the values it filled in that Python
    did not set (each axis's range and type, each trace's defaults)."""
    axes = [name for name in figure.layout if name.startswith(("xaxis", "yaxis"))]
    figure._js2py_layoutDelta = {
        "layout_delta": {name: {"range": [0, 1], "autorange": True} for name in axes},
        "layout_edit_id": figure._last_layout_edit_id,
    }
    figure._js2py_traceDeltas = {
        "trace_deltas": [{"uid": trace.uid, "visible": True} for trace in figure.data],
        "trace_edit_id": figure._last_trace_edit_id,
    }


def growing_space(step: int) -> list[Trial]:
    """Finished trials of a define-by-run space that varies more parameters as it goes: step
    0 has one trial, 1 varies `lr`, 2 adds `units` and `opt`, 3 adds five more, 4 fewer."""
    names = {0: [], 1: ["lr"], 2: ["lr", "units", "opt"], 4: ["lr", "opt"]}.get(
        step, ["lr", "units", "opt", "a", "b", "c", "d", "e"]
    )
    configs = [
        {
            "lr": 10.0 ** -(1 + k % 4) if "lr" in names else 0.01,
            "units": 2 ** (3 + k) if "units" in names else 8,
            "opt": ("sgd", "adam")[k % 2] if "opt" in names else "sgd",
            **{name: float(k) for name in "abcde" if name in names},
        }
        for k in range(1 if step == 0 else 6)
    ]
    return scored_trials(configs, lambda config: math.log10(config["lr"]) ** 2)


def visible_x_axes(figure: go.Figure) -> list[str]:
    names = [name for name in figure.layout if re.fullmatch(r"xaxis\d*", name)]
    names.sort(key=lambda name: int(name[5:] or 1))
    return [name for name in names if figure.layout[name].visible is not False]


def note(figure: go.Figure) -> str | None:
    """The note the chart shows in place of data, if any."""
    shown = [note.text for note in figure.layout.annotations if note.visible]
    return shown[0] if shown else None


def test_the_parameter_panels_survive_live_redraws_while_parameters_come_and_go():
    figure = go.FigureWidget()
    for step in [0, 1, 2, 2, 3, 3, 4, 2, 1]:
        data = parameter_data(growing_space(step), "score", log_scale={"lr"})
        for _ in range(3):
            parameter_scatter_figure(data, figure)
            answer_as_the_browser(figure)
        count = len(data.axes)
        assert [trace.xaxis for trace in figure.data] == [
            f"x{index + 1 if index else ''}" for index in range(count)
        ], "each parameter on its own x axis"
        shown = visible_x_axes(figure)
        assert [figure.layout[name].title.text for name in shown] == [a.name for a in data.axes]
        assert all(
            trace.yaxis == f"y{'' if i < PANELS_PER_ROW else 2}"
            for i, trace in enumerate(figure.data)
        ), "a second row of panels past four"
    assert figure.layout.xaxis.type == "log", "lr is on a log scale"
    assert len(visible_x_axes(figure)) == 1, "the panels of parameters gone are hidden"


def test_integer_ticks_follow_a_range_that_grows_between_redraws():
    figure = go.FigureWidget()
    for top in (3, 40):
        configs = [{"units": units, "x": float(units)} for units in range(1, top + 1)]
        parameter_scatter_figure(parameter_data(scored_trials(configs, len), "score"), figure)
    assert max(figure.layout.xaxis.tickvals) > 30, "ticks reach the new values"


def test_each_parameter_gets_its_own_axis_and_scale(blank):
    configs = [{"lr": 10.0**-k, "units": 8 * k, "opt": ("sgd", "adam")[k % 2]} for k in range(1, 6)]
    data = parameter_data(scored_trials(configs, lambda c: c["units"] * 0.5), "score", {"lr"})
    figure = parameter_scatter_figure(data, blank())
    assert [trace.xaxis for trace in figure.data] == ["x", "x2", "x3"]
    lr, units, opt = figure.layout.xaxis, figure.layout.xaxis2, figure.layout.xaxis3
    assert lr.domain[1] < units.domain[0] < units.domain[1] < opt.domain[0], "side by side"
    assert (lr.type, units.type, opt.type) == ("log", "linear", "linear")
    assert all(tick == int(tick) for tick in units.tickvals), "whole numbers only"
    assert list(opt.ticktext) == ["adam", "sgd"]
    assert figure.layout.yaxis.title.text == "score"
    assert "score: %{y:.4~g}" in figure.data[0].hovertemplate
    assert figure.data[0].hovertext[0].startswith("trial 0 · pending<br>lr=0.1")


def curves_of(losses, statuses=None):
    trials, rows = run_of(losses, statuses)
    return history_data(trials, rows, "loss", "min")


def test_each_curve_has_its_trial_colour_and_its_state_as_line_style(blank):
    states = {1: TrialStatus.PAUSED, 2: TrialStatus.RUNNING, 3: TrialStatus.ERROR}
    figure = history_figure(curves_of([[3.0, 2.0], [1.0], [4.0], [5.0, 6.0]], states), blank())
    assert [trace.name for trace in figure.data] == [f"trial {i}" for i in range(4)]
    assert [trace.line.color for trace in figure.data] == list(TRIAL_COLORS[:4])
    assert [trace.line.dash for trace in figure.data] == ["solid", "dash", "solid", "solid"]
    errored = figure.data[3]
    assert errored.marker.symbol == "x" and list(errored.marker.size) == [0, 11], "an x at the end"
    widths = [trace.line.width for trace in figure.data]
    assert widths[0] == widths[1] == widths[2] > widths[3], "the best three stand out"


def test_hover_names_the_trial_its_state_and_config_on_every_point(blank):
    figure = history_figure(curves_of([[0.123456789, 2.0]], {0: TrialStatus.RUNNING}), blank())
    template = figure.data[0].hovertemplate
    assert template.startswith("trial 0 · running<br>lr=0.1, opt=adam<br>"), "not '-'"
    assert template.endswith("iteration %{x}: %{y:.4~g}<extra></extra>"), "4 significant digits"


def test_a_highlighted_trial_is_bold_and_the_others_faint(blank):
    data = curves_of([[1.0], [2.0], [3.0]])
    figure = history_figure(data, blank(), highlight=1)
    assert figure.data[1].line.width > max(figure.data[0].line.width, figure.data[2].line.width)
    assert [trace.opacity for trace in figure.data] == [0.3, 1.0, 0.3]
    history_figure(data, figure)
    assert [trace.opacity for trace in figure.data] == [1.0, 1.0, 1.0], "highlight undone"


def test_past_ten_trials_the_best_ten_are_in_colour_and_the_rest_faint(blank):
    figure = history_figure(curves_of([[float(25 - i)] for i in range(25)]), blank())
    coloured = [i for i, trace in enumerate(figure.data) if trace.line.color != FAINT_COLOR]
    assert coloured == list(range(15, 25))
    assert [trace.showlegend for trace in figure.data].count(True) == 10


def test_curves_by_time_and_on_a_log_scale(blank):
    figure = history_figure(curves_of([[1.0, 0.1, 0.01]]), blank(), x="time", log_y=True)
    assert figure.data[0].x == (0.0, 1.0, 2.0), "seconds since the first result"
    assert figure.layout.xaxis.title.text == "seconds since the start"
    assert figure.layout.yaxis.type == "log"
    assert "%{x:.4~g} s" in figure.data[0].hovertemplate
    with pytest.raises(ValueError, match="x='epoch': draw the learning curves against"):
        history_figure(curves_of([[1.0]]), x="epoch")


def test_a_live_redraw_sends_only_the_curves_that_changed():
    figure = go.FigureWidget()
    losses = [[1.0, 0.5], [2.0], [3.0]]
    history_figure(curves_of(losses, {0: TrialStatus.RUNNING}), figure)
    first = figure.data[0]
    sent = sent_updates(figure)
    for more in range(3):
        losses[0].append(0.4 - 0.1 * more)
        history_figure(curves_of(losses, {0: TrialStatus.RUNNING}), figure)
        answer_as_the_browser(figure)
    assert figure.data[0] is first, "traces are updated in place, not replaced"
    assert figure.data[0].y == (1.0, 0.5, 0.4, 0.30000000000000004, 0.2)
    assert [update["style_traces"] for update in sent] == [[0]] * 3, "only trial 0 is sent"
    history_figure(curves_of(losses[:2]), figure)
    assert len(figure.data) == 2 and figure.data[1].y == (2.0,)


def test_past_fifty_curves_the_faint_finished_ones_share_a_trace_per_bundle_of_trials():
    figure = go.FigureWidget()
    losses = [[float(k), k / 2] for k in range(BUNDLE_AFTER + 20)]
    running = {len(losses) - 1: TrialStatus.RUNNING}
    history_figure(curves_of(losses, running), figure)
    bundles = -(-len(losses) // BUNDLE_SIZE)
    names = [trace.name for trace in figure.data]
    assert names[:bundles] == [f"trials {k * 25} to {k * 25 + 24}" for k in range(bundles)]
    assert names[bundles:-1] == [f"trial {k}" for k in (*range(10), len(losses) - 1)]
    assert names[-1] == OVERLAY_NAME and figure.data[-1].x == (), "the browser's highlight"
    assert all(trace.type == "scatter" for trace in figure.data), "no WebGL"
    faint = figure.data[0]
    assert faint.line.color == FAINT_COLOR and faint.x[2] is None, "a gap between two curves"
    assert faint.customdata[:2] == (10, 10), "each point names its trial"
    sent = sent_updates(figure)
    losses[-1].append(losses[-1][-1] + 1)
    history_figure(curves_of(losses, running), figure)
    answer_as_the_browser(figure)
    assert [update["style_traces"] for update in sent] == [[bundles + 10]], "the running one"
    history_figure(curves_of(losses), figure)
    overlay = len(figure.data) - 1
    assert sent[-1]["style_traces"] == [bundles - 1, overlay], "to its bundle, no curve resent"
    assert figure.data[bundles - 1].customdata[-2] == len(losses) - 1


def test_a_bundled_curve_the_kernel_highlights_gets_a_trace_of_its_own(blank):
    data = curves_of([[float(k)] for k in range(BUNDLE_AFTER + 1)])
    figure = history_figure(data, blank(), highlight=BUNDLE_AFTER)
    names = [trace.name for trace in figure.data]
    assert f"trial {BUNDLE_AFTER}" in names and names[-1] == OVERLAY_NAME
    bold = figure.data[names.index(f"trial {BUNDLE_AFTER}")]
    assert bold.line.width == 3.5 and bold.opacity == 1.0
    assert all(trace.opacity == 0.3 for trace in figure.data if trace.name.startswith("trials "))


def test_parallel_coordinates_on_log_and_integer_axes(blank):
    configs = [
        {"lr": 10.0**-k, "layers": k % 3 + 1, "opt": ("sgd", "adam")[k % 2], "x": k * 0.123456}
        for k in range(1, 7)
    ]
    data = parameter_data(scored_trials(configs, lambda c: c["x"]), "score", {"lr"})
    figure = parallel_coordinates_figure(data, blank())
    lr, layers, opt, x, score = figure.data[0].dimensions
    assert score.label == "score", "the metric last"
    assert lr.label == "lr (log)"
    assert lr.values == pytest.approx([-1, -2, -3, -4, -5, -6]), "log10 of the values"
    assert list(lr.ticktext) == ["1e-06", "1e-05", "0.0001", "0.001", "0.01", "0.1"]
    assert lr.tickvals == pytest.approx([-6, -5, -4, -3, -2, -1])
    assert list(layers.tickvals) == [1, 2, 3], "no 1.5"
    assert list(opt.ticktext) == ["adam", "sgd"] and list(opt.tickvals) == [0, 1]
    assert list(x.ticktext) == ["0.2", "0.4", "0.6"], "round ticks, 4 significant digits"
    assert x.range == pytest.approx([0.123456, 0.740736])
    assert figure.layout.margin.t >= 100, "room for the title above the axis labels"
    assert figure.data[0].labelside == "top"
    colorbar = figure.data[0].line.colorbar
    assert colorbar.x - figure.data[0].domain.x[1] >= 0.08, "the colour bar clear of the ticks"


def test_a_parameter_some_trials_lack_sits_on_a_none_tick(blank):
    configs = [{"model": "svc", "c": 10.0**-k} for k in range(1, 4)]
    configs += [{"model": "forest", "depth": 2 + k} for k in range(3)]
    data = parameter_data(scored_trials(configs, lambda c: len(c)), "score", {"c"})
    lines = parallel_coordinates_figure(data, blank())
    model, c, depth, _ = lines.data[0].dimensions
    assert list(model.ticktext) == ["svc", "forest"]
    assert list(c.ticktext)[-1] == "none" and list(depth.ticktext)[-1] == "none"
    assert c.values[3:] == (c.tickvals[-1],) * 3, "the forests have no c"
    assert c.range[0] == c.tickvals[-1] < min(c.values[:3])
    scatter = parameter_scatter_figure(data, blank())
    assert scatter.data[1].x == (0.1, 0.01, 0.001, None, None, None), "no point where no c"


def test_the_charts_follow_a_dark_or_light_theme_on_a_live_figure():
    figure = go.FigureWidget()
    data = curves_of([[1.0]])
    history_figure(data, figure, dark=True)
    assert figure.layout.template.layout.paper_bgcolor == "rgb(17,17,17)", "plotly_dark"
    assert figure.layout.paper_bgcolor == "rgba(0,0,0,0)", "the notebook's background shows"
    history_figure(data, figure, dark=False)
    assert figure.layout.template.layout.paper_bgcolor == "white", "plotly_white"
    assert figure.layout.paper_bgcolor == "rgba(0,0,0,0)"


@pytest.mark.parametrize(
    "draw",
    [
        lambda data, trials, rows, **kw: history_figure(data, **kw),
        lambda data, trials, rows, **kw: best_so_far_figure(
            best_so_far_data(rows, "loss", "min"), **kw
        ),
        lambda data, trials, rows, **kw: parallel_coordinates_figure(
            parameter_data(trials, "loss"), **kw
        ),
        lambda data, trials, rows, **kw: parameter_scatter_figure(
            parameter_data(trials, "loss"), **kw
        ),
        lambda data, trials, rows, **kw: importance_figure(
            importance_data(trials, "loss", "min"), **kw
        ),
    ],
    ids=["history", "best so far", "parallel coordinates", "parameters", "importance"],
)
def test_every_chart_redraws_live_from_nothing_to_many_trials_in_either_theme(draw):
    figure = go.FigureWidget()
    layouts = []
    for trait, key in [("_py2js_update", "layout_data"), ("_py2js_relayout", "relayout_data")]:
        figure.observe(
            lambda change, key=key: layouts.append((change["new"] or {}).get(key) or {}), trait
        )
    for count in [0, 1, 2, 5, 5, 12, 30]:
        trials, rows = run_of([[1.0 / (i + 1) + k for i in range(k % 4 + 1)] for k in range(count)])
        data = history_data(trials, rows, "loss", "min")
        draw(data, trials, rows, figure=figure, dark=count % 2 == 1)
        answer_as_the_browser(figure)
        dark = figure.layout.template.layout.paper_bgcolor == "rgb(17,17,17)"
        assert dark == (count % 2 == 1), "the theme follows each redraw"
    assert figure.data, "something is drawn"
    assert note(figure) is None, "no 'waiting for' note once there is data"
    for layout in layouts:
        both = {key for key in layout if any(k.startswith(f"{key}.") for k in layout)}
        assert not both, f"plotly.js refuses a property and its parent in one message: {both}"


def test_importance_waits_for_enough_trials_without_raising(blank):
    figure = blank()
    importance_figure(importance_data([], "score", "max"), figure)
    assert note(figure) == "needs more trials: at least 5 with a value of score (0 so far)"
    assert figure.data[0].x == ()
    configs = [{"x": float(i), "y": "ab"[i % 2]} for i in range(8)]
    importance_figure(
        importance_data(scored_trials(configs, lambda c: c["x"]), "score", "max"), figure
    )
    assert figure.data[0].y == ("y", "x"), "highest first, from the top"
    assert note(figure) is None


def test_best_so_far_hover_has_four_significant_digits(blank):
    _, rows = run_of([[3.14159265, 2.0]])
    figure = best_so_far_figure(best_so_far_data(rows, "loss", "min"), blank())
    assert figure.data[0].hovertemplate == ("%{hovertext}<br>%{x:.4~g} s: %{y:.4~g}<extra></extra>")


def test_a_metric_named_like_markup_stays_text(blank):
    trials, rows = run_of([[1.0]])
    rows = [{**row, "<b>%{y}</b>": row["loss"]} for row in rows]
    data = history_data(trials, rows, "<b>%{y}</b>", "min")
    figure = history_figure(data, blank())
    assert figure.layout.title.text == "&lt;b&gt;%\u200b{y}&lt;/b&gt; by iteration"
    assert figure.layout.yaxis.title.text == "&lt;b&gt;%\u200b{y}&lt;/b&gt;"
    configs = [{"<i>p</i>": 1.0, "c": "<b>"}, {"<i>p</i>": 2.0, "c": "<u>"}]
    parameters = parameter_data(scored_trials(configs, lambda c: 1.0), "score")
    scatter = parameter_scatter_figure(parameters, blank())
    assert scatter.layout.xaxis.title.text == "&lt;i&gt;p&lt;/i&gt;"
    assert list(scatter.layout.xaxis2.ticktext) == ["&lt;b&gt;", "&lt;u&gt;"]
    lines = parallel_coordinates_figure(parameters, blank())
    assert lines.data[0].dimensions[0].label == "&lt;i&gt;p&lt;/i&gt;"


def test_plots_of_a_finished_run_from_its_directory(make_tuner):
    tuner = make_tuner(
        trainables.quadratic,
        {"lr": nt.loguniform(0.001, 0.1), "layers": 1},
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
    assert nt.plot_history(tuner, x="time", log_y=True, dark=True).layout.yaxis.type == "log"
    assert nt.plot_best_so_far(tuner).data[0].y[-1] == tuner.best_result["loss"]
    assert [d.label for d in nt.plot_parallel_coordinates(tuner).data[0].dimensions] == [
        "lr (log)",
        "loss",
    ], "the tuner's space says lr is on a log scale"
    assert nt.plot_param_scatter(tuner).layout.xaxis.type == "log"
    assert len(nt.plot_param_scatter(tuner.path).data) == 1
    assert "needs more trials" in note(nt.plot_param_importance(tuner.path, dark=True))
    with pytest.raises(TypeError, match="cannot plot int; pass a Tuner"):
        nt.plot_history(3)


def test_each_trial_has_its_own_colour_in_every_parameter_panel(make_tuner):
    tuner = make_tuner(
        lambda config: nt.report(loss=config["a"] + config["b"]),
        {"a": nt.uniform(0, 1), "b": nt.uniform(0, 1)},
        metric="loss",
        num_samples=4,
        executor=nt.ThreadExecutor(),
    )
    tuner.run()
    figure = nt.plot_param_scatter(tuner)
    colours = [list(trace.marker.color) for trace in figure.data]
    assert colours[0] == colours[1] == [trial_color(trial_id) for trial_id in range(4)]
