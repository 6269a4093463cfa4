"""Charts of any numeric key the trials reported, not only the tuned metric: the data
(`numeric_keys`, `trial_values`), the `plot_*(metric=, mode=)` helpers and the dashboard's
metric pickers, all on real runs."""

from __future__ import annotations

import threading

import plotly.graph_objects as go
import pytest
import trainables
from waiting import eventually

import nbtune as nt
from nbtune.events import TrialResult
from nbtune.ui.data import (
    FEATURED_CURVES,
    ReportedKeys,
    history_data,
    numeric_keys,
    parameter_data,
    ranked,
    trial_values,
)
from nbtune.ui.figures import history_figure

SPACE = {"x": nt.grid([0.2, 0.4, 0.6, 0.8])}


def two_metrics(config):
    """loss falls with x; acc rises with x and peaks at step 3; text and a bool ride along."""
    for step in range(1, 6):
        acc = config["x"] * (1 - abs(step - 3) / 10)
        nt.report(loss=config["x"] / step, acc=acc, note="text", flag=True)


@pytest.fixture
def finished(make_tuner):
    tuner = make_tuner(two_metrics, SPACE, metric="loss", mode="min", executor=nt.ThreadExecutor())
    tuner.run()
    return tuner


def series(tuner, key):
    """Each trial's reported values of `key`, in order."""
    return tuner.history().groupby("trial_id")[key].apply(list).to_dict()


# ----- the data -------------------------------------------------------------------------------


def test_the_numeric_keys_are_the_tuned_metric_first_then_every_number_reported(finished):
    _, rows = finished.snapshot()
    assert numeric_keys(rows, "loss") == ("loss", "acc"), "no text, bool or nbtune's own keys"
    assert numeric_keys(rows, "acc") == ("acc", "loss")
    assert numeric_keys((), "loss") == ("loss",), "the tuned metric before any result"
    assert numeric_keys([{"trial_id": 0, "training_iteration": 1, "a": 1.0, "b": "x"}]) == ("a",)


def test_reported_keys_read_only_the_rows_they_have_not_seen():
    keys = ReportedKeys("loss")
    rows = [{"trial_id": 0, "training_iteration": 1, "loss": 1.0}]
    assert keys.update(rows) == ("loss",)
    rows[0]["early"] = 1.0  # a row already read is not read again
    rows.append({"trial_id": 0, "training_iteration": 2, "loss": 1.0, "acc": 0.5})
    assert keys.update(rows) == ("loss", "acc")
    assert keys.update(rows[:1]) == ("loss", "early"), "rows that shrank are read anew"


def test_a_trial_s_value_is_its_best_under_a_mode_or_its_last(finished):
    trials, rows = finished.snapshot()
    assert trial_values(trials, rows, "loss", "min") == {t.trial_id: t.best_value for t in trials}
    acc = series(finished, "acc")
    assert trial_values(trials, rows, "acc", "max") == {i: max(v) for i, v in acc.items()}
    assert trial_values(trials, rows, "acc", None) == {i: v[-1] for i, v in acc.items()}
    assert trial_values(trials, rows, "nope", "min") == {}


def test_a_returned_score_is_a_trial_s_value_as_it_is_its_best_value(make_tuner):
    tuner = make_tuner(
        trainables.returns_number,
        {"score": nt.grid([0.25, 0.5])},
        metric="loss",
        mode="max",
        executor=nt.ThreadExecutor(),
    )
    tuner.run()
    trials, rows = tuner.snapshot()
    assert trial_values(trials, rows, "loss", "max") == {0: 0.25, 1: 0.5}, "not the 0.9 before"
    assert history_data(trials, rows, "loss", "max").best == tuple(
        trial.trial_id for trial in ranked(trials, "max")
    )


def test_curves_of_another_key_rank_by_it_with_a_mode_and_mark_none_without(finished):
    trials, rows = finished.snapshot()
    tuned = history_data(trials, rows, "loss", "min")
    assert tuned.best == (0, 1, 2), "lowest loss: the smallest x"
    by_acc = history_data(trials, rows, "acc", "max")
    assert by_acc.best == (3, 2, 1), "highest acc: the largest x"
    assert [list(curve.y) for curve in by_acc.curves] == list(series(finished, "acc").values())
    raw = history_data(trials, rows, "acc", None)
    assert raw.best == (), "no best without a mode"
    assert all(curve.featured for curve in raw.curves)


def test_past_ten_curves_without_a_mode_the_latest_to_report_are_in_colour():
    rows = [
        {"trial_id": trial_id, "training_iteration": 1, "timestamp": 1.0, "acc": 0.5}
        for trial_id in range(FEATURED_CURVES + 5)
    ]
    trials = [nt.Trial(row["trial_id"], {}) for row in rows]
    curves = history_data(trials, rows, "acc", None).curves
    assert [curve.trial_id for curve in curves if curve.featured] == list(range(5, 15))


def test_a_live_figure_redraws_every_curve_for_another_key_even_one_ending_alike():
    rows = [
        {"trial_id": 0, "training_iteration": step, "timestamp": step, "a": a, "b": b}
        for step, a, b in [(1, 5.0, 9.0), (2, 1.0, 1.0)]
    ]
    trials = [nt.Trial(0, {})]
    figure = go.FigureWidget()
    for key in ("a", "b"):
        history_figure(history_data(trials, rows, key, None), figure)
    assert figure.data[0].y == (9.0, 1.0)


def test_parameters_against_another_key_its_best_or_its_last(finished):
    trials, rows = finished.snapshot()
    tuned = parameter_data(trials, "loss")
    assert parameter_data(trials, "loss", rows=rows, mode="min") == tuned, "same as best_value"
    last = parameter_data(trials, "acc", rows=rows)
    assert last.last and last.value_name == "acc (last)"
    assert last.metric_values == tuple(v[-1] for v in series(finished, "acc").values())
    best = parameter_data(trials, "acc", rows=rows, mode="max")
    assert not best.last and best.value_name == "acc"
    assert best.metric_values == tuple(max(v) for v in series(finished, "acc").values())


# ----- the plot_* helpers ---------------------------------------------------------------------


def test_the_plots_draw_the_tuned_metric_by_default_as_before(finished):
    for plot in (
        nt.plot_history,
        nt.plot_best_so_far,
        nt.plot_param_scatter,
        nt.plot_parallel_coordinates,
    ):
        assert plot(finished).to_plotly_json() == plot(finished, metric="loss").to_plotly_json()
    assert nt.plot_param_scatter(finished).data[0].y == tuple(
        trial.best_value for trial in finished.snapshot()[0]
    )


def test_the_plots_draw_any_numeric_key_reported(finished):
    acc = series(finished, "acc")
    history = nt.plot_history(finished.path, metric="acc")
    assert [list(trace.y) for trace in history.data] == list(acc.values())
    assert history.layout.title.text == "acc by iteration"
    best = nt.plot_best_so_far(finished, metric="acc", mode="max")
    assert best.data[0].y[-1] == max(max(v) for v in acc.values())
    scatter = nt.plot_param_scatter(finished, metric="acc")
    assert scatter.data[0].y == tuple(v[-1] for v in acc.values())
    assert scatter.layout.title.text == "acc (last) by parameter"
    assert nt.plot_param_scatter(finished, metric="acc", mode="max").data[0].y == tuple(
        max(v) for v in acc.values()
    )
    lines = nt.plot_parallel_coordinates(finished.path, metric="acc", mode="max")
    assert lines.data[0].dimensions[-1].label == "acc"
    assert tuple(lines.data[0].dimensions[-1].values) == tuple(max(v) for v in acc.values())
    flipped = nt.plot_history(finished, mode="max")
    assert [trace.line.width for trace in flipped.data] == [1.4, 2.4, 2.4, 2.4], "best: max"


@pytest.mark.parametrize(
    ("plot", "options", "message"),
    [
        (
            nt.plot_history,
            {"metric": "accuracy"},
            r"^metric='accuracy': no trial reported it as a number; the numeric keys reported "
            r"are \['loss', 'acc'\]$",
        ),
        (nt.plot_param_scatter, {"metric": "note"}, "^metric='note': no trial reported it"),
        (nt.plot_parallel_coordinates, {"metric": "flag"}, "^metric='flag': no trial reported"),
        (
            nt.plot_best_so_far,
            {"metric": "acc"},
            r"^metric='acc' is not tuned by this run: pass mode='min' or mode='max' \(the "
            r"numeric keys reported are \['loss', 'acc'\]\)$",
        ),
        (nt.plot_history, {"metric": "acc", "mode": "up"}, r"^mode='up': use 'min' or 'max'$"),
    ],
)
def test_a_key_not_reported_or_a_missing_mode_is_one_line(finished, plot, options, message):
    with pytest.raises(ValueError, match=message):
        plot(finished, **options)


# ----- the dashboard's pickers ----------------------------------------------------------------


@pytest.fixture
def growing_keys(make_tuner, log):
    """A live run of two trials reporting loss and acc every 20 ms, and `late` too once
    `late` is set; yields (tuner, dashboard, late) once both have reported."""
    late, finish = threading.Event(), threading.Event()

    def train(config):
        step = 0
        while not finish.is_set():
            step += 1
            extra = {"late": step * 10.0} if late.is_set() else {}
            nt.report(loss=config["x"] / step, acc=config["x"] * step, note="text", **extra)
            finish.wait(0.02)

    tuner = make_tuner(
        train,
        {"x": nt.grid([1.0, 2.0])},
        metric="loss",
        executor=nt.ThreadExecutor(),
    )
    tuner.subscribe(log)
    tuner.start(display=False)
    log.wait_for(lambda _: len({e.trial_id for e in log.of(TrialResult)}) == 2)
    dashboard = tuner.dashboard()
    assert dashboard.ready.wait(30)
    yield tuner, dashboard, late
    finish.set()
    tuner.stop()
    tuner.wait(30)
    dashboard.close()


def shown(dashboard, tab):
    dashboard.tabs.selected_index = dashboard.tab_names.index(tab)
    dashboard.redraw()
    return dashboard.charts[tab].figure


def test_the_pickers_list_the_keys_as_they_come_and_redraw_their_chart(growing_keys):
    tuner, dashboard, late = growing_keys
    pickers = dashboard.pickers.widgets
    assert set(pickers) == {"learning curves", "parameters", "parallel coordinates"}
    curves = dashboard.charts["learning curves"]
    assert pickers["learning curves"] in curves.options.widget.children, "in the toolbar"
    shown(dashboard, "learning curves")
    assert pickers["learning curves"].options == ("loss", "acc")
    assert pickers["learning curves"].value == "loss", "the tuned metric first"

    sent = []
    pickers["parameters"].observe(lambda change: sent.append(change["new"]), names="options")
    for _ in range(5):
        dashboard.redraw()
    assert sent == [], "no new key, no new options"
    late.set()
    eventually(
        lambda: shown(dashboard, "learning curves") and "late" in pickers["parameters"].options,
        "the pickers list a key reported mid-run",
    )
    assert pickers["parameters"].options == ("loss", "acc", "late")
    assert len(sent) == 1, "the options are sent once, when a key comes"

    pickers["learning curves"].value = "acc"
    figure = eventually(
        lambda: curves.figure.layout.title.text == "acc by iteration" and curves.figure,
        "the chart redraws itself for the key picked",
    )
    tuner.pause_all()
    eventually(lambda: tuner.status.running == 0, "every trial paused: no result comes")
    figure = shown(dashboard, "learning curves")
    acc = series(tuner, "acc")
    assert {trace.name: list(trace.y) for trace in figure.data} == {
        f"trial {trial_id}": values for trial_id, values in acc.items()
    }
    pickers["learning curves"].value = "loss"
    figure = shown(dashboard, "learning curves")
    loss = series(tuner, "loss")
    assert [list(trace.y) for trace in figure.data] == list(loss.values()), "every curve anew"

    pickers["parameters"].value = "late"
    figure = shown(dashboard, "parameters")
    assert figure.layout.title.text == "late (last) by parameter"
    last = tuner.dataframe().set_index("trial_id")["late"]
    assert list(figure.data[0].y) == last.tolist()
    assert pickers["parallel coordinates"].value == "loss", "each tab picks its own"
    figure = shown(dashboard, "parallel coordinates")
    assert figure.data[0].dimensions[-1].label == "loss"


def test_a_loaded_run_s_dashboard_redraws_when_a_key_is_picked(finished):
    dashboard = nt.load(finished.path).dashboard()
    dashboard.tabs.selected_index = dashboard.tab_names.index("parameters")
    picker = dashboard.pickers.widgets["parameters"]
    assert picker.options == ("loss", "acc")
    picker.value = "acc"
    figure = dashboard.charts["parameters"].figure
    assert figure.layout.title.text == "acc (last) by parameter", "at once, without a timer"
    dashboard.close()
